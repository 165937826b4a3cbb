// Knative's TLS variables; see tls_knobs.h. The name tables carry Go's and OpenSSL's spellings of the same
// IANA suites and groups.
#include "app/sidecar/tls_knobs.h"

#include <openssl/ssl.h>

#include <memory>
#include <utility>

#include "common/ascii.h"
#include "common/config_error.h"

namespace sluice::app {
namespace {

struct SuiteName {
  std::string_view go, openssl;  // openssl empty: a TLS 1.3 suite (Go does not let it be configured)
};

// crypto/tls.CipherSuites(): the suites knative.dev/pkg/network/tls accepts by name.
constexpr SuiteName kSuites[] = {
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_AES_128_GCM_SHA256", ""},
    {"TLS_AES_256_GCM_SHA384", ""},
    {"TLS_CHACHA20_POLY1305_SHA256", ""},
};

struct GroupName {
  std::string_view go, openssl;
};

constexpr GroupName kGroups[] = {
    {"CurveP256", "P-256"}, {"P-256", "P-256"}, {"CurveP384", "P-384"}, {"P-384", "P-384"},
    {"CurveP521", "P-521"}, {"P-521", "P-521"}, {"X25519", "X25519"},
    {"X25519MLKEM768", "X25519MLKEM768"},  // OpenSSL 3.5 and later
};

template <class F>
void for_each_name(std::string_view list, F&& f) {
  while (true) {
    auto comma = list.find(',');
    auto name = trim(list.substr(0, comma));
    if (!name.empty()) f(name);
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

bool openssl_knows_group(std::string_view name) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  return ctx && SSL_CTX_set1_groups_list(ctx.get(), std::string(name).c_str()) == 1;
}

}  // namespace

proxy::TlsVersion parse_tls_version(std::string_view variable, std::string_view value) {
  if (value == "1.2") return proxy::TlsVersion::v1_2;
  if (value == "1.3") return proxy::TlsVersion::v1_3;
  throw ConfigError(std::string(variable) + "=\"" + std::string(value) + "\": expected 1.2 or 1.3");
}

std::string openssl_cipher_list(std::string_view variable, std::string_view go_names) {
  std::string out;
  for_each_name(go_names, [&](std::string_view name) {
    for (const auto& s : kSuites) {
      if (s.go != name) continue;
      if (!s.openssl.empty()) {
        if (!out.empty()) out += ':';
        out += s.openssl;
      }
      return;
    }
    throw ConfigError(std::string(variable) + ": unknown cipher suite \"" + std::string(name) +
                      "\" (expected Go's names, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)");
  });
  return out;
}

std::string openssl_groups(std::string_view variable, std::string_view go_names,
                           std::vector<std::string>& dropped) {
  std::string out;
  bool any = false;
  for_each_name(go_names, [&](std::string_view name) {
    any = true;
    for (const auto& g : kGroups) {
      if (g.go != name) continue;
      if (!openssl_knows_group(g.openssl)) {
        dropped.emplace_back(name);
        return;
      }
      if (!out.empty()) out += ':';
      out += g.openssl;
      return;
    }
    throw ConfigError(std::string(variable) + ": unknown curve \"" + std::string(name) +
                      "\" (expected CurveP256, CurveP384, CurveP521, X25519, X25519MLKEM768, P-256, P-384 or P-521)");
  });
  if (any && out.empty())
    throw ConfigError(std::string(variable) + "=\"" + std::string(go_names) +
                      "\": none of these curves is available in this OpenSSL");
  return out;
}

}  // namespace sluice::app
