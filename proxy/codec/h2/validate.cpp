// HTTP/2 request checks; see validate.h.
#include "proxy/codec/h2/validate.h"

#include "common/ascii.h"

namespace sluice::proxy::h2 {

std::optional<LocalAnswer> request_refusal(const http::request_header<>& req, std::string_view authority,
                                           bool too_large) {
  if (too_large) return LocalAnswer{.status = 431, .body = "request header fields too large"};
  auto hosts = req.equal_range(http::field::host);
  if (hosts.first == hosts.second) return std::nullopt;
  if (std::next(hosts.first) != hosts.second) return LocalAnswer{.status = 400, .body = "several host fields"};
  if (!authority.empty() && !iequals(hosts.first->value(), authority))
    return LocalAnswer{.status = 400, .body = "host and :authority differ"};
  return std::nullopt;
}

}  // namespace sluice::proxy::h2
