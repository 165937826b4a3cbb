// The RFC 9112 head rules as pure functions: what the integration tests cannot see directly (a head
// fed one byte at a time, the chunk lines Beast would wait on, the status each violation maps to).
#include "proxy/h1/strict.h"

#include <gtest/gtest.h>

#include "proxy/h1/message.h"

namespace sluice::proxy::h1 {
namespace {

// Feeds `bytes` `piece` bytes at a time; returns the head's error (or none) once parse_head_step is done.
std::optional<error_code> parse_in_pieces(std::string_view bytes, std::size_t piece, RequestParser& parser) {
  beast::flat_buffer buffer;
  HeadScan scan;
  const HeadRules rules{.request = true, .max_head_bytes = 4096, .max_target_bytes = 64};
  for (std::size_t fed = 0; fed < bytes.size();) {
    auto n = std::min(piece, bytes.size() - fed);
    buffer.commit(asio::buffer_copy(buffer.prepare(n), asio::buffer(bytes.substr(fed, n))));
    fed += n;
    error_code ec;
    if (parse_head_step(buffer, scan, parser, rules, ec)) return ec;
  }
  return std::nullopt;
}

TEST(StrictHead, AHeadArrivingOneByteAtATimeParsesAsItDoesWhole) {
  const std::string head = "GET /a?b HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\r\n";
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, head.size()}) {
    RequestParser parser;
    auto ec = parse_in_pieces(head, piece, parser);
    ASSERT_TRUE(ec) << piece;
    EXPECT_FALSE(*ec) << piece << ": " << ec->message();
    EXPECT_EQ(parser.get()["X-A"], "1");
  }
}

TEST(StrictHead, ViolationsAreFoundWhateverTheReadSizes) {
  const std::pair<std::string, Violation> cases[] = {
      {"GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", Violation::obs_fold},
      {"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", Violation::bare_lf},
      {"GET / HTTP/1.1\r\nHost: x\rX: y\r\n\r\n", Violation::bare_cr},
      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", Violation::unsupported_version},
      {"GET /" + std::string(100, 'a'), Violation::target_too_long},  // before the line ends
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", Violation::te_not_chunked},
  };
  for (const auto& [bytes, violation] : cases) {
    for (std::size_t piece : {std::size_t{1}, std::size_t{3}, bytes.size()}) {
      RequestParser parser;
      auto ec = parse_in_pieces(bytes, piece, parser);
      ASSERT_TRUE(ec) << bytes;
      EXPECT_EQ(*ec, make_error_code(violation)) << bytes << " in pieces of " << piece << ": " << ec->message();
    }
  }
}

TEST(StrictHead, EachViolationMapsToTheStatusTheRfcNames) {
  EXPECT_EQ(violation_status(Violation::obs_fold), 400u);
  EXPECT_EQ(violation_status(Violation::target_too_long), 414u);
  EXPECT_EQ(violation_status(Violation::unsupported_version), 505u);
  EXPECT_EQ(violation_status(Violation::te_unsupported), 501u);
  EXPECT_EQ(violation_status(Violation::header_too_large), 431u);
  EXPECT_EQ(violation_status(http::error::bad_field), 400u);
}

TEST(StrictHead, AChunkLineBeastWouldWaitOnIsRecognised) {
  EXPECT_TRUE(stuck_on_chunk_line("5;a=\"x\r\nhello\r\n"));  // whole, yet unparsed
  EXPECT_TRUE(stuck_on_chunk_line("\r\n5;a=\"x\r\n"));       // after the previous chunk's CRLF
  EXPECT_FALSE(stuck_on_chunk_line("5;a=\"x"));              // still arriving
  EXPECT_FALSE(stuck_on_chunk_line("0\r\nX-Trailer: 1\r\n"));  // the last chunk waits for its trailers
  EXPECT_TRUE(stuck_on_chunk_line("0;a=\"x\r\n\r\n"));       // ... until they have ended
}

TEST(StrictHead, AnAbsoluteFormTargetNamesItsAuthority) {
  EXPECT_EQ(absolute_form_authority("http://user@a.example:8080/x?y"), "a.example:8080");
  EXPECT_EQ(absolute_form_authority("https://a.example"), "a.example");
  EXPECT_FALSE(absolute_form_authority("/x"));
  EXPECT_FALSE(absolute_form_authority("a.example:443"));
}

}  // namespace
}  // namespace sluice::proxy::h1
