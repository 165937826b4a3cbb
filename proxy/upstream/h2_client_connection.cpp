// One h2c connection to the app; see client_connection.h.
#include "proxy/upstream/h2_client_connection.h"

#include <algorithm>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <charconv>

#include "common/log.h"
#include "proxy/io/field_value.h"

namespace sluice::proxy::h2 {
namespace {

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kMinFrameSize = 16 * 1024;  // SETTINGS_MAX_FRAME_SIZE's floor (RFC 9113 §6.5.2)

std::vector<nghttp2_nv> to_nva(const FieldList& fields) {
  std::vector<nghttp2_nv> out;
  out.reserve(fields.size());
  for (const auto& [n, v] : fields) out.push_back(nv(n, v));
  return out;
}

ClientConnection& conn_of(void* p) { return *static_cast<ClientConnection*>(p); }

}  // namespace

int ClientConnection::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto* st = conn_of(p).find(f->hd.stream_id);
  if (st && f->hd.type == NGHTTP2_HEADERS) {
    st->building = {};
    st->header_bytes = 0;
  }
  return 0;
}

int ClientConnection::on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                                const uint8_t* value, size_t valuelen, uint8_t, void* p) {
  auto& self = conn_of(p);
  auto* st = self.find(f->hd.stream_id);
  if (!st || f->hd.type != NGHTTP2_HEADERS) return 0;
  auto n = as_view(name, namelen);
  auto v = as_view(value, valuelen);
  if (st->final_head) {  // trailers
    st->trailer_bytes += namelen + valuelen + 32;
    if (st->trailer_bytes > self.max_header_bytes_) {
      st->failure = http::error::header_limit;
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
    }
    st->trailers.emplace_back(n, v);
    return 0;
  }
  st->header_bytes += namelen + valuelen + 32;
  if (st->header_bytes > self.max_header_bytes_ || namelen > kMaxFieldBytes || valuelen > kMaxFieldBytes) {
    st->failure = http::error::header_limit;
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets this stream only
  }
  if (n == ":status") {
    unsigned status = 0;
    std::from_chars(v.data(), v.data() + v.size(), status);  // nghttp2 checked it is three digits
    st->building.result(status);
  } else {
    st->building.insert(n, v);
  }
  return 0;
}

int ClientConnection::on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = conn_of(p);
  if (f->hd.type == NGHTTP2_GOAWAY) {
    // Streams above the last one the app will process are closed as refused by nghttp2.
    self.going_away_ = true;
    return 0;
  }
  auto* st = self.find(f->hd.stream_id);
  if (!st) return 0;
  const bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS && !st->final_head) {
    st->building.version(11);
    const auto status = st->building.result_int();
    if (status >= 200) {
      st->final_head = true;
      st->head_has_end = end;
    }
    st->heads.push_back(std::move(st->building));
    st->building = {};
  }
  if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && end) st->body_done = true;
  st->received.notify();
  return 0;
}

int ClientConnection::on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len,
                                    void* p) {
  auto* st = conn_of(p).find(id);
  if (!st || st->cancelled) {
    nghttp2_session_consume(ng, id, len);  // nobody will read it: keep the connection window open
    return 0;
  }
  st->body.commit(asio::buffer_copy(st->body.prepare(len), asio::buffer(data, len)));
  st->received.notify();
  return 0;
}

int ClientConnection::on_stream_close(nghttp2_session*, int32_t id, uint32_t error, void* p) {
  auto& self = conn_of(p);
  auto it = self.streams_.find(id);
  if (it == self.streams_.end()) return 0;
  auto st = std::move(it->second);
  self.streams_.erase(it);
  if (self.streams_.empty() && self.opening_ == 0) self.idle_since_ = Clock::now();
  st->closed = true;
  if (!st->body_done && !st->failure) {
    st->refused = error == NGHTTP2_REFUSED_STREAM && st->heads.empty();
    st->failure = error == NGHTTP2_NO_ERROR ? error_code(http::error::partial_message)
                                            : error_code(asio::error::connection_reset);
  }
  st->out->space.notify();
  st->received.notify();
  if (self.going_away_ && self.streams_.empty() && self.opening_ == 0) self.wire_.want_write();
  return 0;
}

int ClientConnection::on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* p) {
  auto* st = conn_of(p).find(f->hd.stream_id);
  if (st && !st->failure) {
    st->failure = http::error::bad_field;
    log::warn("h2c upstream: malformed response from the app")
        .kv("stream", f->hd.stream_id)
        .kv("error", nghttp2_strerror(error));
  }
  return 0;
}

bool ClientConnection::start() {
  const std::vector<nghttp2_settings_entry> settings = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(kClientWindows.stream)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(max_header_bytes_)},
  };
  const WireCallbacks callbacks{.on_begin_headers = &on_begin_headers,
                                .on_header = &on_header,
                                .on_frame_recv = &on_frame_recv,
                                .on_data_chunk = &on_data_chunk,
                                .on_stream_close = &on_stream_close,
                                .on_invalid_frame = &on_invalid_frame};
  // The app's header blocks may fill the whole response head limit (queue-proxy's Go client reads 10 MiB):
  // as many CONTINUATION frames of the smallest size as that takes, where a client connection is held to a
  // few (AbuseLimits::max_continuations, CVE-2024-27316). The limit in bytes still applies (on_header).
  // Never fewer than nghttp2's default: a head over the byte limit fails its stream (on_header), not the
  // connection with every stream on it.
  const std::size_t continuations = std::max<std::size_t>(8, max_header_bytes_ / kMinFrameSize + 1);
  return wire_.start(Wire::Role::client, callbacks, this, settings, kClientWindows.connection,
                     [continuations](nghttp2_option* opt) { nghttp2_option_set_max_continuations(opt, continuations); });
}

asio::awaitable<void> ClientConnection::connect(std::shared_ptr<ClientConnection> self, tcp::endpoint endpoint,
                                                Clock::duration timeout, net::Netns netns) {
  auto& socket = self->socket_;
  asio::steady_timer timer(socket.get_executor(), timeout);
  using namespace asio::experimental::awaitable_operators;
  error_code ec;
  if (!netns.own()) netns.open(socket, endpoint.protocol(), ec);
  if (!ec) {
    auto result = co_await (socket.async_connect(endpoint, use_nothrow) || timer.async_wait(use_nothrow));
    ec = result.index() == 1 ? error_code(asio::error::timed_out) : std::get<0>(std::get<0>(result));
  }
  if (!ec) socket.set_option(tcp::no_delay(true), ec);
  if (!ec && !self->start()) ec = asio::error::no_memory;
  if (ec) {
    self->connect_error_ = ec;
    self->broken_ = true;
    self->ready_.cancel();
    co_return;
  }
  self->connected_ = true;
  self->ready_.cancel();
  asio::co_spawn(socket.get_executor(), [self]() { return self->writer(); }, asio::detached);
  asio::co_spawn(socket.get_executor(), [self]() { return self->reader(); }, asio::detached);
}

error_code ClientConnection::submit(const FieldList& fields, bool end_stream,
                                    const std::shared_ptr<ClientStreamState>& st) {
  if (broken_) return asio::error::connection_reset;
  auto nva = to_nva(fields);
  auto prd = wire_.provider(*st->out);
  std::int32_t id =
      nghttp2_submit_request(wire_.session(), nullptr, nva.data(), nva.size(), end_stream ? nullptr : &prd, nullptr);
  if (id < 0) {
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) retire();  // the next stream goes to a new connection
    return asio::error::connection_refused;
  }
  st->id = id;
  st->wire = &wire_;
  if (end_stream) st->out->done = true;
  streams_.emplace(id, st);
  wire_.want_write();
  return {};
}

void ClientConnection::fail_all(error_code ec) {
  broken_ = true;
  for (auto& [id, st] : streams_) {
    st->closed = true;
    if (!st->body_done && !st->failure) st->failure = ec;
    st->out->space.notify();
    st->received.notify();
  }
  streams_.clear();
}

asio::awaitable<void> ClientConnection::reader() {
  std::vector<char> buf(kReadChunk);
  while (!broken_) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buf), use_nothrow);
    if (ec) break;
    if (wire_.feed(buf.data(), n) != 0) {
      log::warn("h2c upstream: protocol error from the app");
      break;
    }
  }
  fail_all(asio::error::connection_reset);
  close();
}

asio::awaitable<void> ClientConnection::writer() {
  co_await wire_.write_loop(socket_, false,
                            [this] { return broken_ || (going_away_ && streams_.empty() && opening_ == 0); });
  broken_ = true;
  error_code ignore;
  socket_.close(ignore);  // ends the reader
}

}  // namespace sluice::proxy::h2
