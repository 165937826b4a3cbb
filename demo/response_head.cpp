// Response head serialisation for the demo app (status line, fields, Connection, blank line).
#include "demo/response_head.h"

#include <boost/beast/http/status.hpp>
#include <charconv>
#include <ostream>  // boost/core/string_view.hpp needs it complete

namespace sluice::demo {
namespace http = boost::beast::http;

namespace {
void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, value);
  (void)ec;
  out.append(digits, end);
}
}  // namespace

ResponseHead::ResponseHead(std::string& out, unsigned status) : out_(out) {
  out_.clear();
  out_.append("HTTP/1.1 ");
  append_number(out_, status);
  out_.push_back(' ');
  auto known = http::int_to_status(status);
  out_.append(known == http::status::unknown ? std::string_view("Unknown")
                                             : std::string_view(http::obsolete_reason(known)));
  out_.append("\r\n");
}

ResponseHead& ResponseHead::field(std::string_view name, std::string_view value) {
  out_.append(name).append(": ").append(value).append("\r\n");
  return *this;
}

ResponseHead& ResponseHead::field(std::string_view name, std::uint64_t value) {
  out_.append(name).append(": ");
  append_number(out_, value);
  out_.append("\r\n");
  return *this;
}

void ResponseHead::finish(bool keep_alive, unsigned request_version) {
  if (!keep_alive) {
    out_.append("Connection: close\r\n");
  } else if (request_version < 11) {
    out_.append("Connection: keep-alive\r\n");
  }
  out_.append("\r\n");
}

}  // namespace sluice::demo
