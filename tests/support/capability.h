// What a test needs of this machine, found by probing the machine (tests/support/capability.sh), never by
// asking the code under test:
//
//   SLUICE_NEED("runc");   // in a test body or SetUp()
//
// goes on when the machine has it; skips the test, saying why, when it does not; and fails the test when
// it does not although SLUICE_REQUIRED_CAPABILITIES lists it (CI declares what its machine has: .ci/run).
// `tests/support/capability.sh --names` lists the names.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace sluice::test {

struct CapabilityVerdict {
  enum class Kind { present, missing, required_but_missing } kind = Kind::present;
  std::string why;  // empty when present
};

// Runs capability.sh once per name and process; later calls answer from memory.
CapabilityVerdict probe_capability(const std::string& name);

}  // namespace sluice::test

#define SLUICE_NEED(name)                                                                                  \
  do {                                                                                                     \
    auto sluice_need_verdict_ = ::sluice::test::probe_capability(name);                                    \
    if (sluice_need_verdict_.kind == ::sluice::test::CapabilityVerdict::Kind::required_but_missing)        \
      GTEST_FAIL() << sluice_need_verdict_.why;                                                            \
    if (sluice_need_verdict_.kind == ::sluice::test::CapabilityVerdict::Kind::missing)                     \
      GTEST_SKIP() << sluice_need_verdict_.why;                                                            \
  } while (0)
