// Certificates made with the openssl tool at test time: a CA of the test's own and server certificates
// it signs for the names a test asks for, in a directory that goes with the object.
#pragma once

#include <filesystem>
#include <string>

namespace sluice::test {

class TestCa {
 public:
  struct Issued {
    std::string cert, key;  // PEM files
  };

  // A CA named `name` (key and self-signed certificate); throws when the openssl tool fails.
  explicit TestCa(const std::string& name = "sluice test CA");
  ~TestCa();
  TestCa(const TestCa&) = delete;
  TestCa& operator=(const TestCa&) = delete;

  // The CA's certificate: what SSL_CERT_FILE points a client at to trust it.
  std::string cert() const { return (dir_ / "ca.crt").string(); }
  // A server certificate signed by this CA for `alt_names` in openssl's subjectAltName syntax, e.g.
  // "IP:127.0.0.1,DNS:localhost".
  Issued issue(const std::string& alt_names);

 private:
  std::filesystem::path dir_;
  int issued_ = 0;
};

}  // namespace sluice::test
