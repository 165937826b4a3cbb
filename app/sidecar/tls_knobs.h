// Knative's queue-proxy TLS variables (QUEUE_PROXY_TLS_MIN_VERSION, _MAX_VERSION, _CIPHER_SUITES,
// _CURVE_PREFERENCES; knative.dev/pkg/network/tls): Go's names turned into OpenSSL's settings.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "proxy/exchange/config.h"

namespace sluice::app {

// A TLS version as Knative writes it: "1.2" or "1.3". Throws ConfigError naming `variable`.
proxy::TlsVersion parse_tls_version(std::string_view variable, std::string_view value);

// Go's cipher-suite names (crypto/tls.CipherSuites(), comma separated) as an OpenSSL TLS 1.2 cipher
// list. TLS 1.3 suite names are accepted and, as in Go, do not configure anything. Throws ConfigError
// naming `variable` and the unknown name.
std::string openssl_cipher_list(std::string_view variable, std::string_view go_names);

// Go's curve names (CurveP256 or P-256, ..., X25519, X25519MLKEM768) as an OpenSSL groups list. Curves this
// OpenSSL cannot offer are dropped and named in `dropped`; none left, or an unknown name, throws.
std::string openssl_groups(std::string_view variable, std::string_view go_names,
                           std::vector<std::string>& dropped);

}  // namespace sluice::app
