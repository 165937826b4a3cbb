// The app's responses are held to RFC 9112 too: a buggy (or compromised) app whose framing sluice would
// read differently from the client must not split or desynchronise the client's connection. A raw TCP
// app sends each malformed response; the client gets 502, and the app's connection is closed, never
// reused: the next request arrives on a new connection.
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

TEST(StrictResponses, MalformedFramingOrFieldsFromTheAppGive502AndTheConnectionIsNeverReused) {
  RawApp app("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  Sidecar sidecar(SidecarOptions{.user_port = app.port()});
  const std::string ok = "HTTP/1.1 200 OK\r\n";
  std::vector<BadResponse> cases = {
      {"Content-Length and Transfer-Encoding", ok + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"Transfer-Encoding and Content-Length", ok + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"},
      {"gzip Transfer-Encoding and Content-Length", ok + "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"},
      {"two Content-Length fields", ok + "Content-Length: 2\r\nContent-Length: 3\r\n\r\nabc"},
      {"two equal Content-Length fields", ok + "Content-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
      {"Content-Length list", ok + "Content-Length: 2, 2\r\n\r\nok"},
      {"Content-Length not a number", ok + "Content-Length: 2x\r\n\r\nok"},
      {"Content-Length with a sign", ok + "Content-Length: +2\r\n\r\nok"},
      {"final coding not chunked", ok + "Transfer-Encoding: chunked, gzip\r\n\r\nok"},
      {"a coding other than chunked", ok + "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"chunked twice", ok + "Transfer-Encoding: chunked, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"Transfer-Encoding in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
      {"obs-fold", ok + "Content-Length: 2\r\nX-A: a\r\n b\r\n\r\nok"},
      {"space before the colon", ok + "Content-Length: 2\r\nX-A : b\r\n\r\nok"},
      {"NUL in a value", ok + "Content-Length: 2\r\nX-A: a" + std::string(1, '\0') + "b\r\n\r\nok"},
      {"CR inside a value (response splitting)", ok + "Content-Length: 2\r\nX-A: a\rSet-Cookie: x=y\r\n\r\nok"},
      {"bare LF line endings", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok"},
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
