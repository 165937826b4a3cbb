// HTTPS for the local gateway, as mkcert does it: a certificate authority made once per user, whose key
// never leaves its directory (0700, the key 0600, refused when others may read or write them), and at
// each start (and config change) a server certificate it signs for the gateway's names. Trusting the CA
// once (docs/gateway.md) makes every later certificate trusted. ECDSA P-256 and SHA-256 throughout.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sluice::app::gateway {

struct LocalCa {
  std::filesystem::path dir;
  std::filesystem::path cert_file() const { return dir / "ca.pem"; }
  std::filesystem::path key_file() const { return dir / "ca-key.pem"; }
  bool created = false;  // made by this call: the time to say how to trust it
};

// $SLUICE_CA_DIR, else $XDG_DATA_HOME/sluice/ca, else ~/.local/share/sluice/ca.
std::filesystem::path default_ca_dir();

// The CA in `dir`, made there when it holds none. Throws ConfigError with the reason (a file others may
// read or write, a half-made CA, OpenSSL's error).
LocalCa load_or_create_ca(const std::filesystem::path& dir);

// A server certificate for `names` (DNS names; IPv4 and IPv6 addresses become IP entries), valid from an
// hour ago for 397 days, written with the CA's certificate after it to `cert_file` and its key to
// `key_file` (0600); each replaced at once (rename), so a reader never sees half of one.
void issue_server_cert(const LocalCa& ca, const std::vector<std::string>& names,
                       const std::filesystem::path& cert_file, const std::filesystem::path& key_file);

}  // namespace sluice::app::gateway
