// The C++ side of tests/support/capability.sh; see capability.h.
#include "tests/support/capability.h"

#include <map>
#include <mutex>

#include "tests/support/process.h"

namespace sluice::test {

CapabilityVerdict probe_capability(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, CapabilityVerdict> known;
  std::lock_guard lock(mu);
  if (auto it = known.find(name); it != known.end()) return it->second;
  auto r = run_command({"bash", SLUICE_CAPABILITY_SH, name}, std::chrono::seconds(180));
  CapabilityVerdict v;
  v.why = r.out.substr(0, r.out.find('\n'));
  if (r.exit_code == 0) {
    v.why.clear();
  } else if (r.exit_code == 77) {
    v.kind = CapabilityVerdict::Kind::missing;
  } else {
    // 1: missing although required; anything else (an unknown name, a broken probe) fails the test too.
    v.kind = CapabilityVerdict::Kind::required_but_missing;
    if (v.why.empty()) v.why = "capability.sh " + name + " exited " + std::to_string(r.exit_code) + ": " + r.err;
  }
  known.emplace(name, v);
  return v;
}

}  // namespace sluice::test
