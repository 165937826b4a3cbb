// Protocol sniffing on the plain port; see sniff.h.
#include "proxy/downstream/plain.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>

#include <boost/asio/experimental/awaitable_operators.hpp>

#include "proxy/downstream/h1_connection.h"
#include "proxy/downstream/h2_server.h"
#include "proxy/exchange/peer.h"

namespace sluice::proxy {
namespace {

// An HTTP/1.1 client on a port declared h2c: one clear answer, then close.
asio::awaitable<void> refuse_http1(tcp::socket& socket) {
  static constexpr std::string_view k505 =
      "HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: 44\r\nConnection: close\r\n\r\nthis port speaks HTTP/2 (h2c) only, not 1.x\n";
  co_await asio::async_write(socket, asio::buffer(k505), use_nothrow);
  error_code ignore;
  socket.shutdown(tcp::socket::shutdown_both, ignore);
}

// A failed HTTP/2 preface: the server preface, GOAWAY PROTOCOL_ERROR, then close.
asio::awaitable<void> refuse_bad_preface(tcp::socket& socket) {
  co_await asio::async_write(socket, asio::buffer(h2::bad_preface_answer()), use_nothrow);
  error_code ignore;
  socket.shutdown(tcp::socket::shutdown_both, ignore);
}

// What a plain-port connection's first bytes decided.
struct Sniffed {
  enum class Next { close, http1, h2, bad_preface, refuse_http1 };
  Next next = Next::close;
  std::string bytes;  // read from the socket already: the client preface, or the start of an HTTP/1.x request
};

// Waits for the first bytes and decides what serves the connection. A coroutine of its own, so that its
// frame (the header timer, the peek buffer, the waits) is gone before the connection is served: every idle
// connection would keep it.
asio::awaitable<void> sniff(ServerContext& worker, tcp::socket& socket, Sniffed& out) {
  using namespace asio::experimental::awaitable_operators;
  using Next = Sniffed::Next;
  const auto protocols = worker.config.plain_protocols;
  const auto preface = h2::kClientPreface;
  const auto pri_line = preface.substr(0, preface.find('\n') + 1);  // "PRI * HTTP/2.0\r\n"
  // Peek, not read: an HTTP/1.1 client's bytes stay in the socket for the h1 codec.
  asio::steady_timer limit(socket.get_executor(), worker.config.timeouts.client_header);
  char head[64];
  ssize_t n = 0;
  while (n <= 0) {
    auto ready = co_await (socket.async_wait(tcp::socket::wait_read, use_nothrow) || limit.async_wait(use_nothrow));
    if (ready.index() == 1) co_return;  // nothing sent before the header timeout: close
    if (auto [wait_error] = std::get<0>(ready); wait_error) co_return;
    n = ::recv(socket.native_handle(), head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) co_return;  // the client left without a byte
    // A wait for readability can end with nothing to read (a wait completes on any readiness event, and
    // one may be stale): that is no reason to close a connection whose client has yet to speak, so wait
    // again, until the header timeout.
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) co_return;
  }
  std::string_view seen(head, static_cast<std::size_t>(n));
  if (!preface.starts_with(seen.substr(0, std::min(seen.size(), preface.size())))) {
    // The preface's first line and then something else, or a first line that is not HTTP/1.x either, is a
    // failed HTTP/2 preface, the only other protocol this port speaks: GOAWAY PROTOCOL_ERROR (RFC 9113 §3.4;
    // h2spec 3.5/2).
    if (seen.starts_with(pri_line) || h2::is_bad_preface(seen)) out.next = Next::bad_preface;
    else out.next = protocols == ProxyConfig::PlainProtocols::h2c ? Next::refuse_http1 : Next::http1;
    co_return;
  }
  // The preface so far, possibly split across segments: read it for real until it is whole or not.
  std::string& got = out.bytes;
  while (got.size() < preface.size() && preface.starts_with(got)) {
    char buf[24];
    auto want = preface.size() - got.size();
    auto r = co_await (socket.async_read_some(asio::buffer(buf, want), use_nothrow) || limit.async_wait(use_nothrow));
    if (r.index() == 1) co_return;
    auto [ec, m] = std::get<0>(r);
    if (ec) co_return;
    got.append(buf, m);
  }
  if (got == preface) out.next = Next::h2;
  else if (got.starts_with(pri_line)) out.next = Next::bad_preface;  // "PRI * HTTP/2.0" and then not the rest
  else out.next = protocols == ProxyConfig::PlainProtocols::h2c ? Next::refuse_http1 : Next::http1;
}

}  // namespace

// This frame ends once a codec has the connection (each runs in a coroutine of its own: h1::Link::wake,
// h2::start). Returns true when the connection lives on there (see ServerContext::served), false when it
// ended here.
asio::awaitable<bool> serve_plain(ServerContext& worker, tcp::socket socket) {
  using Next = Sniffed::Next;
  Sniffed sniffed;
  if (worker.config.plain_protocols == ProxyConfig::PlainProtocols::http1) sniffed.next = Next::http1;
  else co_await sniff(worker, socket, sniffed);
  switch (sniffed.next) {
    case Next::http1: {
      Downstream down(std::move(socket));
      co_return co_await h1::serve(worker, down, sniffed.bytes);
    }
    case Next::h2: {
      PeerName peer = peer_name(socket);
      h2::start(worker, {.socket = Downstream(std::move(socket)), .initial_bytes = std::move(sniffed.bytes)}, std::move(peer));
      co_return true;
    }
    case Next::bad_preface: co_await refuse_bad_preface(socket); break;
    case Next::refuse_http1: co_await refuse_http1(socket); break;
    case Next::close: break;
  }
  co_return false;
}

}  // namespace sluice::proxy
