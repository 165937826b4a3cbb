#include "proxy/codec/h1/message.h"
#include "proxy/forward/request_fields.h"

#include <gtest/gtest.h>

namespace sluice::proxy::h1 {
namespace {

// Parses a request head the way the connection does, so the tests see Beast's real field list.
struct Parsed {
  explicit Parsed(std::string_view head) {
    error_code ec;
    parser.eager(false);
    parser.put(asio::buffer(head.data(), head.size()), ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(parser.is_header_done());
  }
  RequestParser parser;
};

std::string upstream(std::string_view head, std::string peer = "10.9.8.7", std::string scheme = "http",
                     std::string* request_id_out = nullptr) {
  Parsed p(head);
  std::string out;
  ExchangeRecord record;
  RequestIdGenerator ids(1);
  RequestRewrite rw{.peer_address = peer, .scheme = scheme, .request_ids = &ids};
  auto cl = p.parser.content_length();
  BodyInfo body{.kind = p.parser.chunked() ? BodyKind::unknown : (cl && *cl > 0 ? BodyKind::length : BodyKind::none),
                .content_length = cl ? std::optional<std::uint64_t>(*cl) : std::nullopt};
  ForwardedRequest request(p.parser.get(), rw, body, record, false);
  format_upstream_request(out, request);
  if (request_id_out) *request_id_out = record.request_id;
  return out;
}

std::size_t count_of_id_lines(const std::string& head) {
  std::size_t n = 0;
  for (auto p = head.find("X-Request-Id"); p != std::string::npos; p = head.find("X-Request-Id", p + 1)) ++n;
  return n;
}

bool has_line(const std::string& head, const std::string& line) {
  return head.find("\r\n" + line + "\r\n") != std::string::npos;
}

TEST(UpstreamRequest, KeepsHostAndTheRequestLine) {
  auto h = upstream("GET /a?b=c HTTP/1.1\r\nHost: app.example.com\r\n\r\n");
  EXPECT_EQ(h.rfind("GET /a?b=c HTTP/1.1\r\n", 0), 0u);
  EXPECT_TRUE(has_line(h, "Host: app.example.com"));
  EXPECT_EQ(h.substr(h.size() - 4), "\r\n\r\n");
}

// HTTP/1.1 requires Host; an HTTP/1.0 client may have sent none (found by tests/fuzz/h1_request_fuzz).
TEST(UpstreamRequest, AnHttp10RequestWithoutHostGetsTheAppsAddressAsHost) {
  Parsed p("GET / HTTP/1.0\r\n\r\n");
  std::string out;
  ExchangeRecord record;
  RequestIdGenerator ids(1);
  RequestRewrite rw{.peer_address = "10.9.8.7", .scheme = "http", .request_ids = &ids};
  ForwardedRequest request(p.parser.get(), rw, BodyInfo{.kind = BodyKind::none}, record, false);
  request.method = "GET";
  request.target = "/";
  format_upstream_request(out, request, "127.0.0.1:8080");
  EXPECT_TRUE(has_line(out, "Host: 127.0.0.1:8080")) << out;
  EXPECT_EQ(upstream("GET / HTTP/1.0\r\nHost: a\r\n\r\n").find("127.0.0.1"), std::string::npos);
}

TEST(UpstreamRequest, KOriginalHostReplacesHostAndIsRemoved) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: activator-service\r\nK-Original-Host: app.example.com\r\n\r\n");
  EXPECT_TRUE(has_line(h, "Host: app.example.com")) << h;
  EXPECT_EQ(h.find("activator-service"), std::string::npos) << h;
  EXPECT_EQ(h.find("K-Original-Host"), std::string::npos) << h;
}

TEST(UpstreamRequest, ActivatorRevisionHeadersAreStrippedAndOthersKept) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\nKnative-Serving-Revision: r1\r\n"
                    "knative-serving-namespace: ns\r\nK-Proxy-Request: activator\r\nKnative-Other: y\r\n"
                    "Knative-Serving-Tag: canary\r\nKnative-Serving-Default-Route: true\r\n\r\n");
  EXPECT_EQ(h.find("r1"), std::string::npos) << h;
  EXPECT_EQ(h.find("namespace"), std::string::npos) << h;
  EXPECT_TRUE(has_line(h, "Knative-Other: y")) << h;
  // queue-proxy lets the route's fields through to the app.
  EXPECT_TRUE(has_line(h, "Knative-Serving-Tag: canary")) << h;
  EXPECT_TRUE(has_line(h, "Knative-Serving-Default-Route: true")) << h;
  EXPECT_TRUE(has_line(h, "K-Proxy-Request: activator")) << h;
}

TEST(UpstreamRequest, AddsThisHopToForwardingHeaders) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(has_line(h, "X-Forwarded-For: 10.9.8.7"));
  EXPECT_TRUE(has_line(h, "Forwarded: for=10.9.8.7;proto=http"));
  EXPECT_TRUE(has_line(h, "X-Forwarded-Proto: http"));
}

TEST(UpstreamRequest, SynthesizesForwardedFromClientXForwardedThenChains) {
  auto h = upstream(
      "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.1.1.1, 2001:db8::1\r\n"
      "X-Forwarded-Proto: https\r\nX-Forwarded-Host: shop.example\r\n\r\n",
      "::1");
  EXPECT_TRUE(has_line(h, "X-Forwarded-For: 1.1.1.1, 2001:db8::1, ::1"));
  EXPECT_TRUE(has_line(h,
                       "Forwarded: for=1.1.1.1;host=shop.example;proto=https, "
                       "for=\"[2001:db8::1]\", for=\"[::1]\";proto=http"));
  EXPECT_TRUE(has_line(h, "X-Forwarded-Proto: https"));  // the client's, kept
  EXPECT_EQ(h.find("X-Forwarded-Proto: http\r\n"), std::string::npos);
}

TEST(UpstreamRequest, KeepsAnExistingForwardedAndAppendsToIt) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\nForwarded: for=5.5.5.5\r\nX-Forwarded-For: 9.9.9.9\r\n\r\n",
                    "127.0.0.1", "https");
  EXPECT_TRUE(has_line(h, "Forwarded: for=5.5.5.5, for=127.0.0.1;proto=https"));
  EXPECT_TRUE(has_line(h, "X-Forwarded-Proto: https"));
}

TEST(UpstreamRequest, JoinsRepeatedXForwardedForLines) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2\r\n\r\n");
  EXPECT_TRUE(has_line(h, "X-Forwarded-For: 1.1.1.1, 2.2.2.2, 10.9.8.7"));
}

TEST(UpstreamRequest, AddsRequestIdOnlyWhenAbsent) {
  std::string id;
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\n\r\n", "1.1.1.1", "http", &id);
  EXPECT_EQ(id, RequestIdGenerator(1).next());
  EXPECT_TRUE(has_line(h, "X-Request-Id: " + id));
  h = upstream("GET / HTTP/1.1\r\nHost: x\r\nX-Request-Id: mine\r\n\r\n", "1.1.1.1", "http", &id);
  EXPECT_TRUE(has_line(h, "X-Request-Id: mine"));
  EXPECT_EQ(count_of_id_lines(h), 1u);
  EXPECT_EQ(id, "mine");
}

TEST(UpstreamRequest, PassesTraceContextThrough) {
  auto h = upstream(
      "GET / HTTP/1.1\r\nHost: x\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n"
      "tracestate: a=b\r\nX-B3-TraceId: 80f198ee56343ba864fe8b2a57d3eff7\r\nX-B3-SpanId: e457b5a2e4d86bd1\r\n"
      "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1\r\n\r\n");
  EXPECT_TRUE(has_line(h, "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  EXPECT_TRUE(has_line(h, "tracestate: a=b"));
  EXPECT_TRUE(has_line(h, "X-B3-TraceId: 80f198ee56343ba864fe8b2a57d3eff7"));
  EXPECT_TRUE(has_line(h, "X-B3-SpanId: e457b5a2e4d86bd1"));
  EXPECT_TRUE(has_line(h, "b3: 80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1"));
}

TEST(UpstreamRequest, RemovesHopByHopAndConnectionListedFields) {
  auto h = upstream(
      "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n"
      "X-Hop: secret\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic Zm9v\r\n"
      "X-End: kept\r\n\r\n");
  EXPECT_EQ(h.find("Connection"), std::string::npos);
  EXPECT_EQ(h.find("Keep-Alive"), std::string::npos);
  EXPECT_EQ(h.find("X-Hop"), std::string::npos);
  EXPECT_EQ(h.find("Proxy-Authorization"), std::string::npos);
  EXPECT_TRUE(has_line(h, "X-End: kept"));
}

TEST(UpstreamRequest, ReframesBodies) {
  auto h = upstream("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_TRUE(has_line(h, "Transfer-Encoding: chunked"));
  h = upstream("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n");
  EXPECT_TRUE(has_line(h, "Content-Length: 12"));
  EXPECT_EQ(h.find("Transfer-Encoding"), std::string::npos);
}

TEST(UpstreamRequest, DropsExpectSinceSluiceAnswersContinueItself) {
  auto h = upstream("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(h.find("Expect"), std::string::npos);
}

TEST(UpstreamRequest, KeepsTeTrailersOnly) {
  auto h = upstream("GET / HTTP/1.1\r\nHost: x\r\nTE: trailers, deflate\r\n\r\n");
  EXPECT_TRUE(has_line(h, "TE: trailers"));
  EXPECT_EQ(h.find("deflate"), std::string::npos);
}

TEST(DownstreamResponse, RemovesHopByHopAndSetsFraming) {
  http::response_header<> res;
  res.result(200);
  res.set(http::field::connection, "keep-alive, X-Up-Hop");
  res.set("X-Up-Hop", "1");
  res.set(http::field::keep_alive, "timeout=4");
  res.set(http::field::transfer_encoding, "chunked");
  res.set("X-App", "yes");
  remove_hop_fields(res, false);  // the forwarder's policy, as on every response; the framing is the codec's
  std::string out;
  format_downstream_response(out, res, Framing::chunked, std::nullopt, true, false, 11);
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_TRUE(has_line(out, "X-App: yes"));
  EXPECT_TRUE(has_line(out, "Transfer-Encoding: chunked"));
  EXPECT_EQ(out.find("X-Up-Hop"), std::string::npos);
  EXPECT_EQ(out.find("Keep-Alive"), std::string::npos);
  EXPECT_EQ(out.find("Connection"), std::string::npos);
}

std::vector<std::string> names_of(const http::response_header<>& res) {
  std::vector<std::string> names;
  for (const auto& f : res) names.emplace_back(f.name_string());
  return names;
}

TEST(ResponseHopPolicy, EveryConnectionFieldAndEveryNameTheyListLeaves) {
  http::response_header<> res;
  res.result(200);
  res.insert(http::field::connection, "X-One");
  res.insert("X-One", "1");
  res.insert("X-Two", "2");
  res.insert(http::field::connection, "x-two, close");  // a second Connection field lists names too
  res.insert(http::field::proxy_authenticate, "Basic");
  res.insert(http::field::content_length, "2");
  res.insert("X-Three", "3");
  remove_hop_fields(res, false);
  EXPECT_EQ(names_of(res), (std::vector<std::string>{"Content-Length", "X-Three"}));
}

TEST(ResponseHopPolicy, UpgradeStaysOnlyOnA101ThatAnswersAnUpgrade) {
  for (bool upgrading : {true, false}) {
    http::response_header<> res;
    res.result(101);
    res.set(http::field::connection, "Upgrade");
    res.set(http::field::upgrade, "websocket");
    res.set("Sec-WebSocket-Accept", "x");
    remove_hop_fields(res, upgrading);
    EXPECT_EQ(res.count(http::field::upgrade), upgrading ? 1u : 0u);
    EXPECT_EQ(res.count(http::field::connection), 0u);
    EXPECT_EQ(res.count("Sec-WebSocket-Accept"), 1u);
  }
}

TEST(DownstreamResponse, SaysCloseWhenTheConnectionEnds) {
  http::response_header<> res;
  res.result(404);
  std::string out;
  format_downstream_response(out, res, Framing::length, 7, false, false, 11);
  EXPECT_TRUE(has_line(out, "Content-Length: 7"));
  EXPECT_TRUE(has_line(out, "Connection: close"));
}

// The reason phrase is sluice's, not the app's: the registered one, or "status code N" (as net/http
// writes it); a 1xx carries no Date.
TEST(DownstreamResponse, WritesTheRegisteredReasonWhateverTheAppSent) {
  const std::pair<unsigned, std::string> cases[] = {
      {200, "HTTP/1.1 200 OK\r\n"}, {413, "HTTP/1.1 413 Request Entity Too Large\r\n"},
      {418, "HTTP/1.1 418 I'm a teapot\r\n"}, {299, "HTTP/1.1 299 status code 299\r\n"},
      {599, "HTTP/1.1 599 status code 599\r\n"}, {103, "HTTP/1.1 103 Early Hints\r\n"}};
  for (const auto& [status, line] : cases) {
    http::response_header<> res;
    res.result(status);
    res.reason("Whatever The App Said");
    std::string out;
    format_downstream_response(out, res, Framing::none, std::nullopt, true, false, 11);
    EXPECT_TRUE(out.starts_with(line)) << out;
    EXPECT_EQ(out.find("Date:") == std::string::npos, status < 200) << out;
  }
}

TEST(DownstreamFraming, ChunksCloseDelimitedBodiesForHttp11AndNeverChunksForHttp10) {
  EXPECT_EQ(downstream_framing(Framing::until_close, 11), Framing::chunked);
  EXPECT_EQ(downstream_framing(Framing::chunked, 10), Framing::until_close);
  EXPECT_EQ(downstream_framing(Framing::length, 10), Framing::length);
}

TEST(LocalResponse, IsCompleteTextWithLength) {
  std::string out;
  format_local_response(out, 504, "request timeout", false);
  // As Go's server answers: a Date on every response ("Sun, 06 Nov 1994 08:49:37 GMT").
  const std::string head = "HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n"
                           "Content-Length: 16\r\nDate: ";
  const std::string tail = " GMT\r\nConnection: close\r\n\r\nrequest timeout\n";
  ASSERT_EQ(out.size(), head.size() + 25 + tail.size()) << out;
  EXPECT_TRUE(out.starts_with(head)) << out;
  EXPECT_TRUE(out.ends_with(tail)) << out;
}

// Go's http.Error adds X-Content-Type-Options; an answer without a body has no type (Content-Length 0).
TEST(LocalResponse, SaysNosniffWhenAskedAndIsUntypedWithoutABody) {
  std::string out;
  format_local_response(out, 502, "bad gateway: upstream: end of stream", true, {}, {.nosniff = true});
  EXPECT_TRUE(has_line(out, "X-Content-Type-Options: nosniff")) << out;
  EXPECT_TRUE(has_line(out, "Content-Type: text/plain; charset=utf-8")) << out;
  out.clear();
  format_local_response(out, 417, "", false, {}, {.exact_body = true});
  EXPECT_TRUE(out.starts_with("HTTP/1.1 417 Expectation Failed\r\n")) << out;
  EXPECT_TRUE(has_line(out, "Content-Length: 0")) << out;
  EXPECT_EQ(out.find("Content-Type"), std::string::npos) << out;
  EXPECT_EQ(out.find("nosniff"), std::string::npos) << out;
}

TEST(LocalResponse, ProbeAnswersCanHaveAnExactBodyAndAnExtraField) {
  std::string out;
  format_local_response(out, 200, "queue", true, {}, {.exact_body = true});
  EXPECT_EQ(out.substr(out.size() - 9), "\r\n\r\nqueue") << out;
  EXPECT_NE(out.find("Content-Length: 5\r\n"), std::string::npos);
  out.clear();
  format_local_response(out, 200, "", true, {}, {.exact_body = true, .extra_name = "K-Network-Hash", .extra_value = "h1"});
  EXPECT_NE(out.find("\r\nK-Network-Hash: h1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 0\r\n"), std::string::npos);
}

}  // namespace
}  // namespace sluice::proxy::h1
