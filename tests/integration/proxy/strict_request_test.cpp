// RFC 9112's MUSTs for requests, over a real socket: each malformed request gets the status the RFC
// names, the connection is closed, and the app (a raw TCP app recording every byte) sees nothing of it.
// Each case is followed by a good request: the app's next bytes must be that request's.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "harness.h"
#include "raw_app.h"
#include "raw_reply.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

struct Case {
  const char* name;
  std::string bytes;
  int status;
};

std::string request(const std::string& line, const std::string& fields) { return line + "\r\n" + fields + "\r\n"; }

class StrictRequests : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    app_ = new RawApp("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    // nginx's limits (an 8 KiB target, a 64 KiB head) rather than queue-proxy's roomier defaults, so the
    // refusals are cheap to provoke.
    sidecar_ = new Sidecar(SidecarOptions{.user_port = app_->port(),
                                          .flags = {"--max-target-bytes=8192", "--max-header-bytes=65536"}});
  }
  static void TearDownTestSuite() {
    delete sidecar_;
    delete app_;
  }

  // The case is answered with its status and a closed connection, and the app never hears of it.
  void expect_rejected(const Case& c) {
    SCOPED_TRACE(c.name);
    const auto before = app_->received().size();
    auto reply = raw_reply(sidecar_->port, c.bytes);
    EXPECT_EQ(reply.text.substr(0, 13), "HTTP/1.1 " + std::to_string(c.status) + " ") << reply.text;
    EXPECT_TRUE(reply.closed) << "the connection stayed open";
    expect_next_bytes_are_a_good_request(before);
  }

  // The app got this one (the control cases: what the RFC allows must still pass).
  void expect_forwarded(const Case& c) {
    SCOPED_TRACE(c.name);
    const auto before = app_->received().size();
    auto reply = raw_reply(sidecar_->port, c.bytes, 3s);
    EXPECT_EQ(reply.text.substr(0, 13), "HTTP/1.1 200 ") << reply.text;
    EXPECT_GT(app_->received().size(), before);
  }

  void expect_next_bytes_are_a_good_request(std::size_t before) {
    const std::string path = "/after-" + std::to_string(++counter_);
    auto ok = http_get(sidecar_->port, path);
    EXPECT_EQ(ok.substr(0, 13), "HTTP/1.1 200 ") << ok;
    auto got = app_->received().substr(before);
    EXPECT_EQ(got.substr(0, 5 + path.size()), "GET " + path + " ") << "the app saw: " << got.substr(0, 400);
  }

  static inline RawApp* app_ = nullptr;
  static inline Sidecar* sidecar_ = nullptr;
  static inline int counter_ = 0;
};

const std::string kSmuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";

TEST_F(StrictRequests, MessageFramingThatCannotBeTrustedIsRejectedPerRfc9112Section6) {
  const std::string post = "POST / HTTP/1.1";
  std::vector<Case> cases = {
      {"final coding not chunked", request(post, "Host: a\r\nTransfer-Encoding: gzip\r\n") + kSmuggled, 400},
      {"chunked not last", request(post, "Host: a\r\nTransfer-Encoding: chunked, gzip\r\n") + "0\r\n\r\n", 400},
      {"chunked twice", request(post, "Host: a\r\nTransfer-Encoding: chunked, chunked\r\n") + "0\r\n\r\n", 400},
      {"chunked in two fields", request(post, "Host: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") +
                                    "0\r\n\r\n", 400},
      {"identity", request(post, "Host: a\r\nTransfer-Encoding: identity\r\n") + kSmuggled, 400},
      {"unknown coding before chunked", request(post, "Host: a\r\nTransfer-Encoding: foo, chunked\r\n") + "0\r\n\r\n",
       501},
      {"gzip before chunked", request(post, "Host: a\r\nTransfer-Encoding: gzip, chunked\r\n") + "0\r\n\r\n", 501},
      {"Content-Length then Transfer-Encoding",
       request(post, "Host: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n") + "0\r\n\r\n", 400},
      {"Transfer-Encoding then Content-Length",
       request(post, "Host: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n") + "0\r\n\r\n", 400},
      {"Content-Length with a non-chunked Transfer-Encoding",
       request(post, "Host: a\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n") + "hello", 400},
      {"Transfer-Encoding in HTTP/1.0", request("POST / HTTP/1.0", "Transfer-Encoding: chunked\r\n") + "0\r\n\r\n", 400},
      {"two Content-Length fields, equal", request(post, "Host: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n") + "hello",
       400},
      {"two Content-Length fields, different",
       request(post, "Host: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n") + "hello!", 400},
      {"Content-Length list", request(post, "Host: a\r\nContent-Length: 5, 5\r\n") + "hello", 400},
      {"Content-Length with a sign", request(post, "Host: a\r\nContent-Length: +5\r\n") + "hello", 400},
      {"Content-Length in hex", request(post, "Host: a\r\nContent-Length: 0x5\r\n") + "hello", 400},
      {"Content-Length negative", request(post, "Host: a\r\nContent-Length: -1\r\n"), 400},
      {"Content-Length empty", request(post, "Host: a\r\nContent-Length: \r\n"), 400},
      {"Content-Length overflow", request(post, "Host: a\r\nContent-Length: 99999999999999999999999\r\n"), 400},
  };
  for (const auto& c : cases) expect_rejected(c);
}

TEST_F(StrictRequests, ChunkedBodiesThatBreakTheGrammarAre400AndTheAppNeverGetsAWholeRequest) {
  const std::string head = request("POST / HTTP/1.1", "Host: a\r\nTransfer-Encoding: chunked\r\n");
  std::vector<Case> cases = {
      {"chunk size overflow", head + "10000000000000000\r\n" + kSmuggled, 400},
      {"chunk size not hex", head + "zz\r\nhello\r\n0\r\n\r\n", 400},
      {"chunk size with 0x", head + "0x5\r\nhello\r\n0\r\n\r\n", 400},
      {"bad chunk extension", head + "5;a=\"unterminated\r\nhello\r\n0\r\n\r\n", 400},
      {"bad extension on the last chunk", head + "5\r\nhello\r\n0;a=\"x\r\n\r\n", 400},
      {"chunk extension with a bare LF", head + "5;a\nhello\r\n0\r\n\r\n", 400},
      {"chunk data longer than its size", head + "5\r\nhello world\r\n0\r\n\r\n" + kSmuggled, 400},
      {"bad trailer name", head + "5\r\nhello\r\n0\r\nBad Trailer: x\r\n\r\n", 400},
      {"trailer with a NUL", head + "5\r\nhello\r\n0\r\nX-T: a" + std::string(1, '\0') + "b\r\n\r\n", 400},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto before = app_->received().size();
    const auto closed = app_->closed_by_peer();
    auto reply = raw_reply(sidecar_->port, c.bytes);
    EXPECT_EQ(reply.text.substr(0, 13), "HTTP/1.1 " + std::to_string(c.status) + " ") << reply.text;
    EXPECT_TRUE(reply.closed);
    // The head may have gone ahead of the body: the app's connection is then closed mid-body, so the
    // app never has a whole request, and nothing after the bad chunk reaches it.
    if (app_->received().size() > before) {
      EXPECT_TRUE(eventually([&] { return app_->closed_by_peer() > closed; }));
    }
    auto got = app_->received().substr(before);
    EXPECT_EQ(got.find("smuggled"), std::string::npos) << got;
    EXPECT_EQ(got.find("\r\n0\r\n\r\n"), std::string::npos) << "a complete chunked body reached the app: " << got;
  }
}

TEST_F(StrictRequests, OneValidHostIsRequiredPerRfc9112Section3_2) {
  std::vector<Case> cases = {
      {"no Host", request("GET / HTTP/1.1", ""), 400},
      {"two Host fields", request("GET / HTTP/1.1", "Host: a\r\nHost: b\r\n"), 400},
      {"two equal Host fields", request("GET / HTTP/1.1", "Host: a\r\nHost: a\r\n"), 400},
      {"space in Host", request("GET / HTTP/1.1", "Host: a b\r\n"), 400},
      {"userinfo in Host", request("GET / HTTP/1.1", "Host: user@a\r\n"), 400},
      {"port not a number", request("GET / HTTP/1.1", "Host: a:80x\r\n"), 400},
      {"slash in Host", request("GET / HTTP/1.1", "Host: a/b\r\n"), 400},
      {"unclosed IPv6 literal", request("GET / HTTP/1.1", "Host: [::1\r\n"), 400},
      {"invalid K-Original-Host (it becomes the app's Host)", request("GET / HTTP/1.1", "Host: a\r\nK-Original-Host: a b\r\n"),
       400},
  };
  for (const auto& c : cases) expect_rejected(c);
}

TEST_F(StrictRequests, FieldSyntaxErrorsAre400PerRfc9112Section5) {
  const std::string get = "GET / HTTP/1.1";
  std::vector<Case> cases = {
      {"space before the colon", request(get, "Host: a\r\nX-A : b\r\n"), 400},
      {"tab before the colon", request(get, "Host: a\r\nX-A\t: b\r\n"), 400},
      {"bad byte in a name", request(get, "Host: a\r\nX(A): b\r\n"), 400},
      {"8-bit byte in a name", request(get, "Host: a\r\nX-\xc3\xa9: b\r\n"), 400},
      {"empty name", request(get, "Host: a\r\n: b\r\n"), 400},
      {"NUL in a value", request(get, "Host: a\r\nX-A: b" + std::string(1, '\0') + "c\r\n"), 400},
      {"DEL in a value", request(get, "Host: a\r\nX-A: b\x7f" "c\r\n"), 400},
      {"control byte in a value", request(get, "Host: a\r\nX-A: b\x01" "c\r\n"), 400},
      {"bare CR in a value", request(get, "Host: a\r\nX-A: b\rX-B: c\r\n"), 400},
      {"bare LF line ending", "GET / HTTP/1.1\nHost: a\n\n", 400},
      {"bare LF in the fields", request(get, "Host: a\nX-A: b\r\n"), 400},
      {"obs-fold", request(get, "Host: a\r\nX-A: b\r\n c\r\n"), 400},
      {"obs-fold with a tab", request(get, "Host: a\r\nX-A: b\r\n\tc\r\n"), 400},
      {"whitespace before the first field", request(get, " Host: a\r\n"), 400},
      {"a field without a colon", request(get, "Host: a\r\nX-A b\r\n"), 400},
  };
  for (const auto& c : cases) expect_rejected(c);
}

TEST_F(StrictRequests, MalformedRequestLinesAreRejectedWithTheStatusTheRfcNames) {
  const std::string host = "Host: a\r\n";
  std::vector<Case> cases = {
      {"two spaces", request("GET  / HTTP/1.1", host), 400},
      {"trailing space", request("GET / HTTP/1.1 ", host), 400},
      {"space in the target", request("GET /a b HTTP/1.1", host), 400},
      {"tab separator", request("GET\t/ HTTP/1.1", host), 400},
      {"no version", request("GET /", host), 400},
      {"bad byte in the method", request("G(T / HTTP/1.1", host), 400},
      {"8-bit byte in the target", request("GET /caf\xc3\xa9 HTTP/1.1", host), 400},
      {"fragment in the target", request("GET /a#b HTTP/1.1", host), 400},
      {"absolute-form with an invalid authority", request("GET http://a::1/ HTTP/1.1", host), 400},
      {"asterisk for GET", request("GET * HTTP/1.1", host), 400},
      {"authority-form for GET", request("GET a.example:80 HTTP/1.1", host), 400},
      {"origin-form for CONNECT", request("CONNECT /a HTTP/1.1", host), 400},
      {"lower-case protocol name", request("GET / http/1.1", host), 400},
      {"two-digit minor version", request("GET / HTTP/1.10", host), 400},
      {"HTTP/2.0 in HTTP/1 syntax", request("GET / HTTP/2.0", host), 505},
      {"HTTP/0.9", request("GET / HTTP/0.9", host), 505},
      {"HTTP/3.0", request("GET / HTTP/3.0", host), 505},
      {"target over the limit", request("GET /" + std::string(8192, 'a') + " HTTP/1.1", host), 414},
      {"target over the limit, line still arriving", "GET /" + std::string(9000, 'a'), 414},
      {"head over the limit", request("GET / HTTP/1.1", host + "X-Big: " + std::string(70000, 'b') + "\r\n"), 431},
  };
  for (const auto& c : cases) expect_rejected(c);
}

// A client that took this hop for a forward proxy (http_proxy) sends absolute-form; the app gets origin-form
// (RFC 9112 §3.2.1, as nginx and Go's ReverseProxy send it), and the authority as Host.
TEST_F(StrictRequests, AnAbsoluteFormTargetReachesTheAppInOriginForm) {
  struct Form {
    std::string sent, line_seen, host_seen;
  };
  for (const auto& f : {Form{request("GET http://a.example/x?y=1 HTTP/1.1", "Host: a.example\r\n"), "GET /x?y=1 ", "a.example"},
                        Form{request("GET http://a.example:8080?y=1 HTTP/1.1", "Host: a.example:8080\r\n"), "GET /?y=1 ",
                             "a.example:8080"},
                        Form{request("GET http://user@b.example HTTP/1.0", ""), "GET / ", "b.example"},
                        // The target's host wins over Host (RFC 9112 §3.2.2), as queue-proxy's net/http takes it.
                        Form{request("GET http://b.example/x HTTP/1.1", "Host: a.example\r\n"), "GET /x ", "b.example"}}) {
    SCOPED_TRACE(f.sent);
    const auto before = app_->received().size();
    auto reply = raw_reply(sidecar_->port, f.sent, 3s);
    EXPECT_EQ(reply.text.substr(0, 13), "HTTP/1.1 200 ") << reply.text;
    const auto seen = app_->received().substr(before);
    EXPECT_EQ(seen.substr(0, f.line_seen.size()), f.line_seen) << seen.substr(0, 400);
    EXPECT_NE(seen.find("\r\nHost: " + f.host_seen + "\r\n"), std::string::npos) << seen.substr(0, 400);
  }
}

TEST_F(StrictRequests, WhatTheRfcAllowsStillReachesTheApp) {
  std::vector<Case> cases = {
      {"8-bit bytes in a value (obs-text)", request("GET / HTTP/1.1", "Host: a\r\nX-A: caf\xc3\xa9\r\n"), 200},
      // A higher minor version is read as the highest one sluice speaks (RFC 9110 §2.5), as queue-proxy does.
      {"HTTP/1.2", request("GET / HTTP/1.2", "Host: a\r\n"), 200},
      {"absolute-form target with its own Host", request("GET http://a.example/x HTTP/1.1", "Host: a.example\r\n"), 200},
      {"absolute-form target, Host differing in case", request("GET http://A.example/x HTTP/1.1", "Host: a.EXAMPLE\r\n"),
       200},
      {"HTTP/1.0 without Host", request("GET / HTTP/1.0", ""), 200},
      {"IPv6 literal Host with port", request("GET / HTTP/1.1", "Host: [::1]:8080\r\n"), 200},
      {"empty Host", request("GET / HTTP/1.1", "Host: \r\n"), 200},
      {"an empty line before the request line", "\r\n" + request("GET / HTTP/1.1", "Host: a\r\n"), 200},
      {"Chunked in any case", request("POST / HTTP/1.1", "Host: a\r\nTransfer-Encoding: Chunked\r\n") + "0\r\n\r\n", 200},
      {"Content-Length with spaces around", request("POST / HTTP/1.1", "Host: a\r\nContent-Length:  2 \r\n") + "hi", 200},
      {"query with RFC 3986 delimiters", request("GET /a/b;c?d=e&f=%20g:h@i!$'()*+,=~ HTTP/1.1", "Host: a\r\n"), 200},
      {"printable ASCII RFC 3986 calls unsafe, as nginx and Go accept it",
       request("GET /q?a={x|y}&b=\"<z>\"&c=^`\\ HTTP/1.1", "Host: a\r\n"), 200},
  };
  for (auto& c : cases) {
    c.bytes.insert(c.bytes.find("\r\n\r\n") + 2, "Connection: close\r\n");  // the reply ends with the connection
    expect_forwarded(c);
  }
}

// OPTIONS * asks about the server, not a resource (RFC 9110 §9.3.7): sluice answers it, as queue-proxy's
// net/http does (200, no body), and the connection goes on.
TEST_F(StrictRequests, OptionsAsteriskIsAnsweredBySluiceAndTheConnectionGoesOn) {
  const auto before = app_->received().size();
  auto reply = raw_reply(sidecar_->port, request("OPTIONS * HTTP/1.1", "Host: a\r\n") +
                                             request("GET /after-options HTTP/1.1", "Host: a\r\nConnection: close\r\n"), 3s);
  EXPECT_EQ(reply.text.substr(0, 17), "HTTP/1.1 200 OK\r\n") << reply.text;
  EXPECT_NE(reply.text.find("\r\nContent-Length: 0\r\n"), std::string::npos) << reply.text;
  const auto got = app_->received().substr(before);
  EXPECT_EQ(got.find("OPTIONS"), std::string::npos) << got.substr(0, 300);
  EXPECT_EQ(got.substr(0, 21), "GET /after-options HT") << got.substr(0, 300);
}

}  // namespace
}  // namespace sluice::test
