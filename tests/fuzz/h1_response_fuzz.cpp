// libFuzzer: an app's HTTP/1.1 response as the client codec reads it: the strict head reader in
// fuzzer-chosen pieces, then the body by its framing (chunked through Beast's parser, trailers included).
// A head that passes must have clean fields and one framing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "proxy/codec/h1/message.h"
#include "proxy/codec/h1/strict.h"

namespace {

using namespace sluice::proxy;
using namespace sluice::proxy::h1;

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const bool head_request = data[0] & 0x80;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  beast::flat_buffer buffer;
  ResponseParser parser;
  parser.header_limit(4096);
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (head_request) parser.skip(true);
  HeadScan scan;
  const HeadRules rules{.request = false, .max_head_bytes = 4096};
  error_code ec;
  bool done = false;
  std::size_t fed = 0;
  while (!done) {
    if (fed == input.size()) return 0;
    auto n = std::min(piece, input.size() - fed);
    buffer.commit(asio::buffer_copy(buffer.prepare(n), asio::buffer(input.substr(fed, n))));
    fed += n;
    done = parse_head_step(buffer, scan, parser, rules, ec);
  }
  if (ec) return 0;
  auto& res = parser.get();
  for (const auto& f : res) {
    for (char c : f.value()) check(c != '\r' && c != '\n' && c != '\0');
  }
  check(!(parser.chunked() && parser.content_length()));
  const Framing framing = response_framing(parser, head_request);
  // The rest of the input, in the same pieces, through the body parser.
  buffer.commit(asio::buffer_copy(buffer.prepare(input.size() - fed), asio::buffer(input.substr(fed))));
  if (framing == Framing::chunked || framing == Framing::until_close) {
    char out[512];
    while (!parser.is_done() && buffer.size() > 0) {
      res.body().data = out;
      res.body().size = sizeof out;
      auto used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec == http::error::need_buffer) ec = {};
      if (ec || used == 0) break;
    }
  }
  std::string head;
  format_downstream_response(head, res.base(), framing == Framing::chunked ? Framing::chunked : framing,
                             to_std(parser.content_length()), true, false, 11);
  check(head.find("\r\n\r\n") == head.size() - 4);  // one head, nothing injected after it
  return 0;
}
