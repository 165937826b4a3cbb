// How Go's http.ServeMux answers for the endpoints queue-proxy serves with one (:9090 "/metrics" for any
// method, :9091 "GET /metrics", :8022 "/wait-for-drain"): a request target that is not clean is redirected
// (301) to its cleaned path, another path is 404 "404 page not found", another method 405 with Allow. The
// query never matters.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/control_listener.h"

namespace sluice::net {

struct GoMuxPattern {
  std::string_view path;   // matched exactly
  bool get_only = false;   // "GET /path": GET and HEAD; else any method
};

// nullopt: the pattern's handler serves `req`; else Go's answer in its place.
std::optional<ControlResponse> go_mux_refusal(const ControlRequest& req, GoMuxPattern pattern);

// The path of a request target (origin or absolute form), without the query; percent-escapes kept.
std::string_view target_path(std::string_view target);
// Go's cleanPath: path.Clean, a leading slash added, a trailing one kept.
std::string go_clean_path(std::string_view path);

}  // namespace sluice::net
