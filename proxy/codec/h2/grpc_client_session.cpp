// gRPC unary calls on an nghttp2 client session; see grpc_client_session.h.
#include "proxy/codec/h2/grpc_client_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>

#include "proxy/codec/h2/wire.h"

namespace sluice::proxy {
namespace {

// A response bigger than gRPC's default receive limit is not one this client wants.
constexpr std::size_t kMaxResponseBytes = 4 * 1024 * 1024;

}  // namespace

struct GrpcClientSession::Callbacks {
  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void*) {
    auto* s = static_cast<GrpcClientSession*>(source->ptr);
    const auto n = std::min(length, s->body_.size() - s->sent_);
    std::memcpy(buf, s->body_.data() + s->sent_, n);
    s->sent_ += n;
    if (s->sent_ == s->body_.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* self) {
    auto* s = static_cast<GrpcClientSession*>(self);
    if (frame->hd.stream_id != s->stream_) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen);
    std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") std::from_chars(v.data(), v.data() + v.size(), s->response_.http_status);
    else if (n == "grpc-status") s->response_.grpc_status = std::string(v);
    else if (n == "grpc-message") s->response_.grpc_message = std::string(v);
    return 0;
  }

  static int on_data(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len, void* self) {
    auto* s = static_cast<GrpcClientSession*>(self);
    if (stream != s->stream_) return 0;
    if (s->received_.size() + len > kMaxResponseBytes) s->response_.malformed = true;
    else s->received_.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }

  static int on_close(nghttp2_session*, int32_t stream, uint32_t, void* self) {
    auto* s = static_cast<GrpcClientSession*>(self);
    if (stream != s->stream_) return 0;
    s->unframe();
    s->ended_ = true;
    return 0;
  }
};

GrpcClientSession::GrpcClientSession() {
  // A response is taken whole (4 MiB at most), so nghttp2 may open the windows as it receives.
  session_ = h2::new_session({.role = h2::SessionRole::client,
                              .callbacks = {.on_header = Callbacks::on_header,
                                            .on_data_chunk = Callbacks::on_data,
                                            .on_stream_close = Callbacks::on_close},
                              .settings = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}},
                              .auto_window_updates = true,
                              .reset_on_invalid_header = false},
                             this);
  if (!session_) throw std::bad_alloc();
}

GrpcClientSession::~GrpcClientSession() { nghttp2_session_del(session_); }

bool GrpcClientSession::start(const GrpcRequest& request, std::string& error) {
  if (!accepts_calls()) {
    error = "the connection takes no new call";
    return false;
  }
  // The message frame: not compressed, 4-byte big-endian length, the message.
  body_.clear();
  body_.reserve(request.message.size() + 5);
  body_.push_back('\0');
  for (int shift = 24; shift >= 0; shift -= 8)
    body_.push_back(static_cast<char>((request.message.size() >> shift) & 0xff));
  body_.append(request.message);
  sent_ = 0;
  received_.clear();
  response_ = {};
  ended_ = false;

  const std::string timeout = std::to_string(request.timeout.count()) + "m";
  nghttp2_nv headers[] = {h2::nv(":method", "POST"),
                          h2::nv(":scheme", request.tls ? "https" : "http"),
                          h2::nv(":path", request.path),
                          h2::nv(":authority", request.authority),
                          h2::nv("content-type", "application/grpc"),
                          h2::nv("user-agent", request.user_agent),
                          h2::nv("te", "trailers"),
                          h2::nv("grpc-timeout", timeout)};
  const std::size_t count = request.timeout.count() > 0 ? std::size(headers) : std::size(headers) - 1;
  nghttp2_data_provider provider{};
  provider.source.ptr = this;
  provider.read_callback = Callbacks::read_body;
  stream_ = nghttp2_submit_request(session_, nullptr, headers, count, &provider, nullptr);
  if (stream_ < 0) {
    error = nghttp2_strerror(stream_);
    return false;
  }
  return true;
}

std::optional<std::string_view> GrpcClientSession::output(std::string& error) {
  const uint8_t* out = nullptr;
  const ssize_t n = nghttp2_session_mem_send(session_, &out);
  if (n < 0) {
    error = nghttp2_strerror(static_cast<int>(n));
    return std::nullopt;
  }
  return std::string_view(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
}

bool GrpcClientSession::feed(std::string_view bytes, std::string& error) {
  const auto used =
      nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (used < 0) {
    error = nghttp2_strerror(static_cast<int>(used));
    return false;
  }
  return true;
}

bool GrpcClientSession::wants_read() const { return nghttp2_session_want_read(session_) != 0; }

bool GrpcClientSession::accepts_calls() const { return nghttp2_session_check_request_allowed(session_) != 0; }

void GrpcClientSession::unframe() {
  if (received_.empty() || response_.malformed) return;  // no message (an error status), or too big
  if (received_.size() < 5 || received_[0] != '\0') {     // truncated, or compressed (never asked for)
    response_.malformed = true;
    return;
  }
  std::size_t length = 0;
  for (int i = 1; i <= 4; ++i) length = (length << 8) | static_cast<unsigned char>(received_[i]);
  if (received_.size() - 5 < length) {
    response_.malformed = true;
    return;
  }
  response_.message = received_.substr(5, length);
}

}  // namespace sluice::proxy
