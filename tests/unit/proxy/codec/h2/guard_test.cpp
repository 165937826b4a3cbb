// The HTTP/2 abuse accounting (proxy/codec/h2/guard.h) and the request checks nghttp2 leaves to sluice
// (proxy/codec/h2/validate.h), with a clock the test moves.
#include <gtest/gtest.h>

#include "proxy/codec/h2/guard.h"
#include "proxy/codec/h2/validate.h"
#include "proxy/downstream/h2_handover.h"

namespace sluice::proxy::h2 {
namespace {

using namespace std::chrono_literals;

nghttp2_frame_hd hd(std::uint8_t type, std::size_t length = 0, std::uint8_t flags = 0) {
  nghttp2_frame_hd h{};
  h.type = type;
  h.length = length;
  h.flags = flags;
  h.stream_id = type == NGHTTP2_PING || type == NGHTTP2_SETTINGS ? 0 : 1;
  return h;
}

TEST(TokenBucket, GivesTheBurstThenRefillsAtTheRate) {
  const auto t0 = Clock::now();
  TokenBucket b(3, 2, t0);
  EXPECT_TRUE(b.take(t0));
  EXPECT_TRUE(b.take(t0));
  EXPECT_TRUE(b.take(t0));
  EXPECT_FALSE(b.take(t0));
  EXPECT_FALSE(b.take(t0 + 400ms));  // 0.8 tokens
  EXPECT_TRUE(b.take(t0 + 600ms));   // 1.2
  EXPECT_TRUE(b.take(t0 + 10s));     // refilled, but only up to the burst
  EXPECT_TRUE(b.take(t0 + 10s));
  EXPECT_TRUE(b.take(t0 + 10s));
  EXPECT_FALSE(b.take(t0 + 10s));
}

TEST(ConnectionGuard, RapidResetEndsTheConnectionOnceTheBurstIsSpent) {
  AbuseLimits limits{.reset_burst = 10, .reset_rate = 5};
  const auto t0 = Clock::now();
  ConnectionGuard g(limits, t0);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(g.frame(hd(NGHTTP2_RST_STREAM, 4), t0)) << i;
  EXPECT_FALSE(g.frame(hd(NGHTTP2_RST_STREAM, 4), t0));
  EXPECT_EQ(g.violation(), "stream resets (rapid reset)");
  EXPECT_EQ(g.goaway_code(NGHTTP2_ERR_CALLBACK_FAILURE), NGHTTP2_ENHANCE_YOUR_CALM);
}

TEST(ConnectionGuard, ResetsAtTheRefillRateAreFine) {
  AbuseLimits limits{.reset_burst = 10, .reset_rate = 5};
  const auto t0 = Clock::now();
  ConnectionGuard g(limits, t0);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(g.frame(hd(NGHTTP2_RST_STREAM, 4), t0 + i * 200ms)) << i;
  EXPECT_EQ(g.violation(), "");
}

TEST(ConnectionGuard, RejectedStreamsShareTheResetBudget) {
  AbuseLimits limits{.reset_burst = 4, .reset_rate = 1};
  const auto t0 = Clock::now();
  ConnectionGuard g(limits, t0);
  ASSERT_TRUE(g.frame(hd(NGHTTP2_RST_STREAM, 4), t0));
  ASSERT_TRUE(g.stream_rejected(t0));
  ASSERT_TRUE(g.stream_rejected(t0));
  ASSERT_TRUE(g.stream_rejected(t0));
  EXPECT_FALSE(g.stream_rejected(t0));
  EXPECT_EQ(g.violation(), "streams rejected");
}

TEST(ConnectionGuard, CountsControlAndEmptyFramesButNotRequestProgress) {
  AbuseLimits limits{.control_burst = 5, .control_rate = 0};
  const auto t0 = Clock::now();
  ConnectionGuard g(limits, t0);
  // Progress: DATA with payload, END_STREAM on an empty DATA, HEADERS with a block, WINDOW_UPDATE.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(g.frame(hd(NGHTTP2_DATA, 100), t0));
    ASSERT_TRUE(g.frame(hd(NGHTTP2_DATA, 0, NGHTTP2_FLAG_END_STREAM), t0));
    ASSERT_TRUE(g.frame(hd(NGHTTP2_HEADERS, 30, NGHTTP2_FLAG_END_HEADERS), t0));
    ASSERT_TRUE(g.frame(hd(NGHTTP2_WINDOW_UPDATE, 4), t0));
  }
  ASSERT_TRUE(g.frame(hd(NGHTTP2_SETTINGS, 6), t0));
  ASSERT_TRUE(g.frame(hd(NGHTTP2_PING, 8), t0));
  ASSERT_TRUE(g.frame(hd(NGHTTP2_PRIORITY, 5), t0));
  ASSERT_TRUE(g.frame(hd(NGHTTP2_DATA, 0), t0));
  ASSERT_TRUE(g.frame(hd(0xfa, 3), t0));  // an extension frame
  EXPECT_FALSE(g.frame(hd(NGHTTP2_CONTINUATION, 0), t0));
  EXPECT_EQ(g.violation(), "control or empty frames");
}

TEST(ConnectionGuard, NghttpLimitsMapToEnhanceYourCalm) {
  AbuseLimits limits;
  ConnectionGuard flooded(limits), continued(limits), other(limits);
  EXPECT_EQ(flooded.goaway_code(NGHTTP2_ERR_FLOODED), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(flooded.violation(), "queued acknowledgements (SETTINGS/PING flood)");
  EXPECT_EQ(continued.goaway_code(NGHTTP2_ERR_TOO_MANY_CONTINUATIONS), NGHTTP2_ENHANCE_YOUR_CALM);
  EXPECT_EQ(continued.violation(), "CONTINUATION frames");
  EXPECT_EQ(other.goaway_code(NGHTTP2_ERR_BAD_CLIENT_MAGIC), NGHTTP2_PROTOCOL_ERROR);
  EXPECT_EQ(other.violation(), "");
}

TEST(ConnectionGuard, StalledOnlyWhileSomethingWaitsWithoutProgress) {
  AbuseLimits limits{.stall_timeout = 2s};
  const auto t0 = Clock::now();
  ConnectionGuard g(limits, t0);
  EXPECT_FALSE(g.stalled(false, t0 + 10s));  // nothing waits
  EXPECT_FALSE(g.stalled(true, t0 + 1s));
  EXPECT_TRUE(g.stalled(true, t0 + 2s));
  g.progress(t0 + 2s);
  EXPECT_FALSE(g.stalled(true, t0 + 3s));
  EXPECT_TRUE(g.stalled(true, t0 + 4s));
  AbuseLimits never{.stall_timeout = 0s};
  ConnectionGuard n(never, t0);
  EXPECT_FALSE(n.stalled(true, t0 + 1000s));
}

TEST(SkippedStreamIds, HeadersOnASkippedIdentifierIsRefused) {
  SkippedStreamIds ids;
  EXPECT_TRUE(ids.accept(5));   // 1 and 3 skipped
  EXPECT_FALSE(ids.accept(3));
  EXPECT_FALSE(ids.accept(1));
  EXPECT_TRUE(ids.accept(5));   // trailers on an open stream
  EXPECT_TRUE(ids.accept(7));
  EXPECT_TRUE(ids.accept(7));
  EXPECT_TRUE(ids.accept(11));  // 9 skipped
  EXPECT_FALSE(ids.accept(9));
  EXPECT_TRUE(ids.accept(2));   // even: nghttp2's business
}

TEST(ConnectionGuard, ASkippedIdentifierIsAProtocolError) {
  AbuseLimits limits;
  ConnectionGuard g(limits);
  EXPECT_TRUE(g.frame(hd(NGHTTP2_HEADERS, 20, NGHTTP2_FLAG_END_HEADERS)));  // stream 1
  auto h5 = hd(NGHTTP2_HEADERS, 20, NGHTTP2_FLAG_END_HEADERS);
  h5.stream_id = 5;
  EXPECT_TRUE(g.frame(h5));
  auto h3 = h5;
  h3.stream_id = 3;
  EXPECT_FALSE(g.frame(h3));
  EXPECT_EQ(g.goaway_code(NGHTTP2_ERR_CALLBACK_FAILURE), NGHTTP2_PROTOCOL_ERROR);
}

http::request_header<> with_hosts(std::initializer_list<const char*> hosts) {
  http::request_header<> req;
  for (const char* h : hosts) req.insert(http::field::host, h);
  return req;
}

TEST(RequestRefusal, TooLargeIs431) {
  auto a = request_refusal(with_hosts({}), "example.com", true);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->status, 431);
  EXPECT_EQ(a->body, "request header fields too large");
}

TEST(RequestRefusal, HostMustAgreeWithAuthority) {
  EXPECT_FALSE(request_refusal(with_hosts({}), "example.com", false));
  EXPECT_FALSE(request_refusal(with_hosts({"Example.COM"}), "example.com", false));
  EXPECT_FALSE(request_refusal(with_hosts({"example.com"}), "", false));
  auto other = request_refusal(with_hosts({"evil.example"}), "example.com", false);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 400);
  EXPECT_EQ(other->body, "host and :authority differ");
  auto two = request_refusal(with_hosts({"example.com", "evil.example"}), "example.com", false);
  ASSERT_TRUE(two);
  EXPECT_EQ(two->status, 400);
  EXPECT_EQ(two->body, "several host fields");
}

TEST(BadPreface, ALineWithoutHttpVersionIsNeitherHttp1NorHttp2) {  // used on h2c-only ports
  EXPECT_TRUE(is_bad_preface("INVALID CONNECTION PREFACE\r\n\r\n"));
  EXPECT_FALSE(is_bad_preface("GET / HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_FALSE(is_bad_preface("GET / HTTP/1.1x\r\n"));     // malformed HTTP/1.1: the h1 codec answers 400
  EXPECT_FALSE(is_bad_preface("GET /a-long-path-without"));  // no whole line yet
  EXPECT_TRUE(is_bad_preface("THIS IS NOT HTTP\r\n"));
  EXPECT_TRUE(is_bad_preface("\r\nGARBAGE\r\n"));
  // Malformed HTTP/1.x request lines: the h1 codec answers them 400 or 505.
  EXPECT_FALSE(is_bad_preface("GET / http/1.1\r\n"));                // the version in lower case
  EXPECT_FALSE(is_bad_preface("GET /\r\n"));                         // no version
  EXPECT_FALSE(is_bad_preface("OPTIONS *\r\n"));
  EXPECT_FALSE(is_bad_preface("GET http://a.example/\r\n"));
  EXPECT_FALSE(is_bad_preface("\r\nGET / HTTP/1.1\r\nHost: a\r\n"));  // an empty line first
  EXPECT_EQ(bad_preface_answer().size(), 9u + 17u);
}

}  // namespace
}  // namespace sluice::proxy::h2
