// libFuzzer: the HTTP/1.1 request path up to the app. Bytes arrive in fuzzer-chosen pieces, the strict
// head reader parses and checks them, a chunked body goes through Beast's chunk parser, and a head that
// was accepted is rewritten as the forwarder sends it on. Header injection is the property checked: the
// upstream head sluice writes must parse back, strictly, as exactly one request with the same method
// and target, so nothing a client sends can split it or smuggle a second request to the app.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "proxy/codec/h1/message.h"
#include "proxy/codec/h1/strict.h"
#include "proxy/forward/request_fields.h"

namespace {

using namespace sluice::proxy;
using namespace sluice::proxy::h1;

void check(bool ok) {
  if (!ok) std::abort();
}

bool clean(std::string_view s) {
  for (char c : s)
    if (c == '\r' || c == '\n' || c == '\0') return false;
  return true;
}

// Parses `head` again as the app would (strictly) and checks it is one whole request, as sent.
void check_upstream(const std::string& head, std::string_view method, std::string_view target) {
  beast::flat_buffer buffer;
  buffer.commit(asio::buffer_copy(buffer.prepare(head.size()), asio::buffer(head)));
  RequestParser parser;
  // No size limit here: the property is one whole request, not its size. The forwarded head may be
  // several times the client's (a Forwarded element per X-Forwarded-For entry), beyond Beast's 8 KiB.
  parser.header_limit(static_cast<std::uint32_t>(head.size() + 1));
  HeadScan scan;
  HeadRules rules{.request = true, .max_head_bytes = head.size() + 1, .max_target_bytes = head.size()};
  error_code ec;
  check(parse_head_step(buffer, scan, parser, rules, ec));
  check(!ec);
  check(buffer.size() == 0);  // nothing after the head: no second request smuggled in
  check(parser.get().method_string() == method);
  check(parser.get().target() == target);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = 1 + data[0] % 64;  // the size of each read
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  beast::flat_buffer buffer;
  RequestParser parser;
  parser.header_limit(4096);
  HeadScan scan;
  const HeadRules rules{.request = true, .max_head_bytes = 4096, .max_target_bytes = 1024};
  error_code ec;
  bool done = false;
  std::size_t fed = 0;
  while (!done) {
    if (fed == input.size()) return 0;  // the head never completed
    auto n = std::min(piece, input.size() - fed);
    buffer.commit(asio::buffer_copy(buffer.prepare(n), asio::buffer(input.substr(fed, n))));
    fed += n;
    done = parse_head_step(buffer, scan, parser, rules, ec);
  }
  if (ec) {
    check(violation_status(ec) >= 400);
    return 0;
  }
  auto& req = parser.get();
  check(clean(req.target()) && req.target().find(' ') == std::string_view::npos);
  for (const auto& f : req) check(clean(f.name_string()) && clean(f.value()));

  // The head as the forwarder sends it on.
  RequestIdGenerator ids;
  RequestRewrite rw{.peer_address = "192.0.2.1", .scheme = "http", .request_ids = &ids};
  ExchangeRecord record;
  BodyInfo body{.kind = parser.chunked() ? BodyKind::unknown : parser.content_length() ? BodyKind::length : BodyKind::none,
                .content_length = to_std(parser.content_length())};
  ForwardedRequest fwd(req.base(), rw, body, record, false);
  fwd.method = req.method_string();
  fwd.target = req.target();
  std::string head;
  format_upstream_request(head, fwd, "127.0.0.1:8080");
  check_upstream(head, req.method_string(), req.target());

  // A chunked body through Beast's chunk parser, as the server codec reads it.
  if (parser.chunked()) {
    char out[512];
    while (!parser.is_done() && buffer.size() > 0) {
      req.body().data = out;
      req.body().size = sizeof out;
      auto used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_buffer) ec = {};
      if (ec || used == 0) break;
    }
  }
  return 0;
}
