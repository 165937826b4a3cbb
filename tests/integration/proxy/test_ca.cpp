// TestCa; see test_ca.h. P-256 keys: quick to make, and every TLS stack in the tests takes them.
#include "tests/integration/proxy/test_ca.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "tests/support/process.h"

namespace sluice::test {
namespace {

namespace fs = std::filesystem;

void openssl(std::vector<std::string> args) {
  args.insert(args.begin(), "openssl");
  auto r = run_command(args, std::chrono::seconds(30));
  if (r.exit_code != 0) throw std::runtime_error("openssl " + args[1] + " failed: " + r.err);
}

void write(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
}

}  // namespace

TestCa::TestCa(const std::string& name) {
  static std::atomic<int> made{0};
  dir_ = fs::temp_directory_path() / ("sluice-ca-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
  fs::create_directories(dir_);
  // A configuration of our own, so the distribution's openssl.cnf adds nothing.
  write(dir_ / "req.cnf",
        "[req]\ndistinguished_name = dn\n[dn]\n"
        "[ca]\nbasicConstraints = critical,CA:true\nkeyUsage = critical,keyCertSign,cRLSign\n"
        "subjectKeyIdentifier = hash\n");
  openssl({"req", "-x509", "-config", (dir_ / "req.cnf").string(), "-extensions", "ca", "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", (dir_ / "ca.key").string(), "-out", cert(), "-days",
           "2", "-subj", "/CN=" + name});
}

TestCa::~TestCa() {
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

TestCa::Issued TestCa::issue(const std::string& alt_names) {
  const auto stem = dir_ / ("server-" + std::to_string(++issued_));
  const auto ext = stem.string() + ".ext", csr = stem.string() + ".csr";
  Issued out{stem.string() + ".crt", stem.string() + ".key"};
  write(ext,
        "basicConstraints = critical,CA:false\nkeyUsage = critical,digitalSignature\n"
        "extendedKeyUsage = serverAuth\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n"
        "subjectAltName = " + alt_names + "\n");
  openssl({"req", "-new", "-config", (dir_ / "req.cnf").string(), "-newkey", "ec", "-pkeyopt",
           "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", out.key, "-out", csr, "-subj", "/CN=test server"});
  openssl({"x509", "-req", "-in", csr, "-CA", cert(), "-CAkey", (dir_ / "ca.key").string(), "-set_serial",
           std::to_string(issued_ + 1), "-days", "2", "-extfile", ext, "-out", out.cert});
  return out;
}

}  // namespace sluice::test
