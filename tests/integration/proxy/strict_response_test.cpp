// The app's responses are held to RFC 9112 too: a buggy (or compromised) app whose framing sluice would
// read differently from the client must not split or desynchronise the client's connection. A raw TCP
// app sends each response. What stays ambiguous gives the client 502, and the app's connection is closed,
// never reused: the next request arrives on a new connection. What the RFC lets a recipient repair, and
// queue-proxy's net/http serves, is served repaired.
#include <gtest/gtest.h>

#include <vector>

#include "harness.h"
#include "raw_app.h"
#include "raw_reply.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

struct BadResponse {
  const char* name;
  std::string bytes;
};

const std::string kGet = "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

TEST(StrictResponses, AmbiguousFramingOrFieldsFromTheAppGive502AndTheConnectionIsNeverReused) {
  RawApp app("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  Sidecar sidecar(SidecarOptions{.user_port = app.port()});
  const std::string ok = "HTTP/1.1 200 OK\r\n";
  std::vector<BadResponse> cases = {
      {"gzip Transfer-Encoding and Content-Length", ok + "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"},
      {"two Content-Length fields", ok + "Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc"},
      {"Content-Length list", ok + "Content-Length: 2, 2\r\n\r\nok"},
      {"Content-Length not a number", ok + "Content-Length: 2x\r\n\r\nok"},
      {"Content-Length with a sign", ok + "Content-Length: +2\r\n\r\nok"},
      {"final coding not chunked", ok + "Transfer-Encoding: chunked, gzip\r\n\r\nok"},
      {"a coding other than chunked", ok + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"chunked twice", ok + "Transfer-Encoding: chunked, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"Transfer-Encoding in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"NUL in a value", ok + "Content-Length: 2\r\nX-A: a" + std::string(1, '\0') + "b\r\n\r\nok"},
      {"CR inside a value (response splitting)", ok + "Content-Length: 2\r\nX-A: a\rSet-Cookie: x=y\r\n\r\nok"},
      {"malformed status line", "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"},
      {"head over the limit", ok + "X-Big: " + std::string(70000, 'b') + "\r\nContent-Length: 2\r\n\r\nok"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    app.set_response(c.bytes);
    const auto connections = app.connections();
    const auto closed = app.closed_by_peer();
    for (int i = 0; i < 2; ++i) {
      auto reply = raw_reply(sidecar.port, kGet);
      EXPECT_EQ(reply.text.substr(0, 13), "HTTP/1.1 502 ") << reply.text.substr(0, 300);
      EXPECT_TRUE(reply.closed);
    }
    EXPECT_EQ(app.connections(), connections + 2) << "a connection that carried a bad response was reused";
    EXPECT_TRUE(eventually([&] { return app.closed_by_peer() >= closed + 2; }))
        << "sluice kept the app's connection open";
  }
  // The same sidecar and app, with a good response again: served, over a kept-alive connection.
  app.set_response("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(body_of(http_get(sidecar.port, "/")), "ok");
}

// What RFC 9112 lets a recipient read (§2.2 bare LF, §5.1 whitespace before a colon removed, §5.2 obs-fold
// as SP, §6.3 chunked over Content-Length, RFC 9110 §8.6 equal lengths as one) is served, as queue-proxy
// serves it. The app's connection is kept, except after chunked beside Content-Length: that app's framing
// is in doubt, so the connection it came on is not reused.
TEST(StrictResponses, WhatTheRfcLetsARecipientRepairIsServed) {
  struct Repairable {
    const char* name;
    std::string bytes;
    std::string body;
    const char* field;  // a line the client must see, when not null
    bool reused;
  };
  RawApp app("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  Sidecar sidecar(SidecarOptions{.user_port = app.port()});
  const std::string ok = "HTTP/1.1 200 OK\r\n";
  const std::vector<Repairable> cases = {
      {"Content-Length and Transfer-Encoding", ok + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
       "ok", nullptr, false},
      {"Transfer-Encoding and Content-Length", ok + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n2\r\nok\r\n0\r\n\r\n",
       "ok", nullptr, false},
      {"two equal Content-Length fields", ok + "Content-Length: 2\r\ncontent-length: 2\r\n\r\nok", "ok", "Content-Length: 2", true},
      {"obs-fold", ok + "Content-Length: 2\r\nX-A: a\r\n b\r\n\r\nok", "ok", "X-A: a b", true},
      {"space before the colon", ok + "Content-Length: 2\r\nX-A : b\r\n\r\nok", "ok", "X-A: b", true},
      {"bare LF line endings", "HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok", "ok", "X-A: b", true},
      {"no reason phrase", "HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok", "ok", nullptr, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    app.set_response(c.bytes);
    const auto closed = app.closed_by_peer();
    for (int i = 0; i < 2; ++i) {
      auto reply = raw_reply(sidecar.port, kGet);
      EXPECT_EQ(reply.text.substr(0, 17), "HTTP/1.1 200 OK\r\n") << reply.text.substr(0, 300);
      EXPECT_TRUE(reply.text.ends_with(c.body) || reply.text.ends_with(c.body + "\r\n0\r\n\r\n"))
          << reply.text.substr(0, 300);
      if (c.field) {
        EXPECT_NE(reply.text.find(std::string("\r\n") + c.field + "\r\n"), std::string::npos) << reply.text;
      }
    }
    if (c.reused) {  // (each worker has its own pool: which connection serves the next request varies)
      EXPECT_EQ(app.closed_by_peer(), closed) << "sluice closed the app's connection";
    } else {
      EXPECT_TRUE(eventually([&] { return app.closed_by_peer() >= closed + 2; }))
          << "a connection that carried chunked beside Content-Length was kept";
    }
  }
}

// Framing that breaks after the head went out: the client's response is cut short and its connection
// closed (no complete chunked message, nothing after it), and the app's connection is closed.
TEST(StrictResponses, ABodyThatBreaksItsChunkedFramingEndsBothConnections) {
  RawApp app("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nHTTP/1.1 200 OK\r\n\r\n");
  Sidecar sidecar(SidecarOptions{.user_port = app.port()});
  auto reply = raw_reply(sidecar.port, "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_TRUE(reply.closed);
  EXPECT_EQ(reply.text.find("\r\n0\r\n\r\n"), std::string::npos) << reply.text;
  EXPECT_EQ(count_of(reply.text, "HTTP/1.1 "), 1u) << reply.text;
  EXPECT_TRUE(eventually([&] { return app.closed_by_peer() >= 1; }));
}

}  // namespace
}  // namespace sluice::test
