// gRPC over nghttp2; see grpc_transport.h. nghttp2 is driven with mem_send/mem_recv over a TimedSocket.
#include "proxy/telemetry/grpc_transport.h"

#include <nghttp2/nghttp2.h>

#include <cstring>

namespace sluice::proxy::telemetry {
namespace {

class GrpcTransport final : public ExportTransport {
 public:
  GrpcTransport(Endpoint endpoint, std::string path) : endpoint_(std::move(endpoint)), path_(std::move(path)) {}
  ~GrpcTransport() override { drop(); }

  bool send(std::string_view body, ExportClock::time_point deadline, std::string& error) override {
    if (session_ && !still_usable()) drop();  // the collector went away, or said GOAWAY, while idle
    if (!session_ && !open(deadline, error)) return false;
    Call call;
    // The gRPC message frame: not compressed, 4-byte big-endian length, the message.
    call.body.reserve(body.size() + 5);
    call.body.push_back('\0');
    for (int shift = 24; shift >= 0; shift -= 8) call.body.push_back(static_cast<char>((body.size() >> shift) & 0xff));
    call.body.append(body);
    auto authority = endpoint_.host + ":" + std::to_string(endpoint_.port);
    auto nv = [](const char* n, const std::string& v) {
      return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n)),
                        reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), std::strlen(n), v.size(),
                        NGHTTP2_NV_FLAG_NONE};
    };
    const std::string post = "POST", scheme = endpoint_.tls ? "https" : "http", grpc = "application/grpc",
                      te = "trailers", ua = "sluice";
    nghttp2_nv headers[] = {nv(":method", post),         nv(":scheme", scheme), nv(":path", path_),
                            nv(":authority", authority), nv("content-type", grpc), nv("te", te),
                            nv("user-agent", ua)};
    nghttp2_data_provider provider{};
    provider.source.ptr = &call;
    provider.read_callback = read_body;
    call.stream = nghttp2_submit_request(session_, nullptr, headers, sizeof headers / sizeof headers[0], &provider, &call);
    if (call.stream < 0) {
      error = nghttp2_strerror(call.stream);
      drop();
      return false;
    }
    current_ = &call;
    bool ok = pump(deadline, error, [&] { return call.closed; });
    current_ = nullptr;
    if (!ok) {
      drop();  // the stream (and what the session knows of it) goes with the connection
      return false;
    }
    if (call.http_status != 200) {
      error = call.http_status ? "collector answered HTTP " + std::to_string(call.http_status)
                               : "the stream was refused or reset";
      drop();
      return false;
    }
    if (call.grpc_status != "0") {
      error = "grpc-status " + (call.grpc_status.empty() ? std::string("missing") : call.grpc_status) + " " +
              call.grpc_message;
      return false;
    }
    return true;
  }

 private:
  struct Call {
    std::string body;
    std::size_t sent = 0;
    int32_t stream = -1;
    int http_status = 0;
    std::string grpc_status, grpc_message;
    bool closed = false;
  };

  static ssize_t read_body(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                           nghttp2_data_source* source, void*) {
    auto* call = static_cast<Call*>(source->ptr);
    auto n = std::min(length, call->body.size() - call->sent);
    std::memcpy(buf, call->body.data() + call->sent, n);
    call->sent += n;
    if (call->sent == call->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* self) {
    auto* t = static_cast<GrpcTransport*>(self);
    if (!t->current_ || frame->hd.stream_id != t->current_->stream) return 0;
    std::string_view n(reinterpret_cast<const char*>(name), namelen), v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") t->current_->http_status = std::atoi(std::string(v).c_str());
    else if (n == "grpc-status") t->current_->grpc_status = std::string(v);
    else if (n == "grpc-message") t->current_->grpc_message = std::string(v);
    return 0;
  }

  static int on_close(nghttp2_session*, int32_t stream, uint32_t, void* self) {
    auto* t = static_cast<GrpcTransport*>(self);
    if (t->current_ && stream == t->current_->stream) t->current_->closed = true;
    return 0;
  }

  bool open(ExportClock::time_point deadline, std::string& error) {
    if (!socket_.connect(endpoint_, "h2", deadline, error)) return false;
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    nghttp2_session_client_new(&session_, cb, this);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 1);
    return true;
  }

  // What the collector sent since the last export (SETTINGS, PING, GOAWAY, a close), read without waiting.
  bool still_usable() {
    char buf[16384];
    while (true) {
      std::string error;
      long n = socket_.read_some(buf, sizeof buf, ExportClock::now(), error);
      if (n == 0) return false;
      if (n < 0) {
        if (error != "timed out") return false;
        break;  // nothing more is waiting
      }
      if (nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buf), static_cast<std::size_t>(n)) < 0)
        return false;
    }
    return nghttp2_session_check_request_allowed(session_) != 0;
  }

  void drop() {
    if (session_) nghttp2_session_del(session_);
    session_ = nullptr;
    socket_.close();
  }

  // Writes what nghttp2 has to send and feeds it what arrives, until `done` or a failure.
  template <class Done>
  bool pump(ExportClock::time_point deadline, std::string& error, Done done) {
    char buf[16384];
    while (true) {
      const uint8_t* out = nullptr;
      ssize_t n;
      while ((n = nghttp2_session_mem_send(session_, &out)) > 0) {
        if (!socket_.write_all(std::string_view(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n)),
                               deadline, error))
          return false;
      }
      if (n < 0) {
        error = nghttp2_strerror(static_cast<int>(n));
        return false;
      }
      if (done()) return true;
      if (!nghttp2_session_want_read(session_)) {
        error = "the collector ended the connection";
        return false;
      }
      long got = socket_.read_some(buf, sizeof buf, deadline, error);
      if (got <= 0) {
        if (got == 0) error = "connection closed";
        return false;
      }
      auto used = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(buf), static_cast<std::size_t>(got));
      if (used < 0) {
        error = nghttp2_strerror(static_cast<int>(used));
        return false;
      }
    }
  }

  Endpoint endpoint_;
  std::string path_;
  TimedSocket socket_;
  nghttp2_session* session_ = nullptr;
  Call* current_ = nullptr;
};

}  // namespace

std::unique_ptr<ExportTransport> make_grpc_transport(const Endpoint& endpoint, std::string path) {
  return std::make_unique<GrpcTransport>(endpoint, std::move(path));
}

}  // namespace sluice::proxy::telemetry
