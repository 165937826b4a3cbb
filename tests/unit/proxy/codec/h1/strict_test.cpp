// The RFC 9112 head rules as pure functions: what the integration tests cannot see directly (a head
// fed one byte at a time, the chunk lines Beast would wait on, the status each violation maps to).
#include "proxy/codec/h1/strict.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proxy/codec/h1/message.h"

namespace sluice::proxy::h1 {
namespace {

// Feeds `bytes` `piece` bytes at a time; returns the head's error (or none) once parse_head_step is done.
template <class Parser>
std::optional<error_code> parse_in_pieces(std::string_view bytes, std::size_t piece, Parser& parser,
                                          beast::flat_buffer* left = nullptr) {
  beast::flat_buffer own;
  beast::flat_buffer& buffer = left ? *left : own;
  HeadScan scan;
  const HeadRules rules{.request = Parser::is_request::value, .max_head_bytes = 4096, .max_target_bytes = 64};
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

// RFC 9110 §2.5: a higher minor version is read as the highest one sluice speaks.
TEST(StrictHead, AnHttp12RequestIsReadAsHttp11) {
  const std::string head = "\r\nGET / HTTP/1.2\r\nHost: x\r\n\r\n";
  for (std::size_t piece : {std::size_t{1}, std::size_t{4}, head.size()}) {
    RequestParser parser;
    auto ec = parse_in_pieces(head, piece, parser);
    ASSERT_TRUE(ec) << piece;
    EXPECT_FALSE(*ec) << piece << ": " << ec->message();
    EXPECT_EQ(parser.get().version(), 11u) << piece;
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

// An app's response head is read as Go's net/http (queue-proxy's) reads it, and as RFC 9112 lets a
// recipient: whatever the read sizes, these parse, with the fields as shown, and the body's bytes stay
// in the buffer.
TEST(StrictHead, AResponseHeadIsRepairedWhereTheRfcLetsARecipientReadIt) {
  struct Case {
    std::string head, body;
    std::vector<std::pair<std::string, std::string>> fields;  // as parsed, in order
    bool keep_alive = true;
  };
  const Case cases[] = {
      {"HTTP/1.1 200 OK\nContent-Length: 2\n\n", "hi", {{"Content-Length", "2"}}},
      {"HTTP/1.1 200 OK\r\nX-A: a\r\n  b\r\n\tc\r\nContent-Length: 2\r\n\r\n", "hi",
       {{"X-A", "a b c"}, {"Content-Length", "2"}}},
      {"HTTP/1.1 200 OK\r\nX-A : v\r\nContent-Length: 2\r\n\r\n", "hi", {{"X-A", "v"}, {"Content-Length", "2"}}},
      {"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\n", "hi", {{"Content-Length", "2"}}},
      {"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\n", "hi", {{"Content-Length", "2"}}},
      {"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\n", "hi", {{"Content-Length", "2"}}},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length:  2 \r\n\r\n", "hi", {{"Content-Length", "2"}}},
      {"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n", "2\r\nhi\r\n0\r\n\r\n",
       {{"Transfer-Encoding", "chunked"}, {"Connection", "close"}}, false},
  };
  for (const auto& c : cases) {
    const std::string bytes = c.head + c.body;
    for (std::size_t piece : {std::size_t{1}, std::size_t{3}, bytes.size()}) {
      ResponseParser parser;
      beast::flat_buffer buffer;
      auto ec = parse_in_pieces(bytes, piece, parser, &buffer);
      ASSERT_TRUE(ec) << c.head << " in pieces of " << piece;
      ASSERT_FALSE(*ec) << c.head << " in pieces of " << piece << ": " << ec->message();
      EXPECT_EQ(parser.get().result_int(), 200u);
      std::vector<std::pair<std::string, std::string>> fields;
      for (const auto& f : parser.get()) fields.emplace_back(f.name_string(), f.value());
      EXPECT_EQ(fields, c.fields) << c.head;
      EXPECT_EQ(parser.get().keep_alive(), c.keep_alive) << c.head;
      if (piece == bytes.size()) {
        EXPECT_EQ(buffer.size(), c.body.size()) << c.head << ": the body stays in the buffer";
      }
    }
  }
}

// What stays ambiguous, or what queue-proxy refuses too, is still refused.
TEST(StrictHead, AResponseHeadStillAmbiguousIsRefused) {
  const std::pair<std::string, error_code> cases[] = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", http::error::multiple_content_length},
      {"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\n", Violation::several_content_lengths},
      {"HTTP/1.1 200 OK\r\n X-A: v\r\n\r\n", Violation::obs_fold},
      {"HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", Violation::bare_cr},
      {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", Violation::te_in_http10},
      {"HTTP/1.1 200 OK\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n",
       Violation::bad_trailer_declared},
  };
  for (const auto& [bytes, expected] : cases) {
    for (std::size_t piece : {std::size_t{1}, bytes.size()}) {
      ResponseParser parser;
      auto ec = parse_in_pieces(bytes, piece, parser);
      ASSERT_TRUE(ec) << bytes;
      EXPECT_EQ(*ec, expected) << bytes << " in pieces of " << piece << ": " << ec->message();
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
