// gRPC export calls; see grpc_transport.h. The framing is GrpcClientSession's; this drives it over a
// TimedSocket and keeps the session between exports.
#include "proxy/telemetry/grpc_transport.h"

#include <optional>

#include "proxy/codec/h2/grpc_client_session.h"

namespace sluice::proxy::telemetry {
namespace {

class GrpcTransport final : public ExportTransport {
 public:
  GrpcTransport(Endpoint endpoint, std::string path) : endpoint_(std::move(endpoint)), path_(std::move(path)) {}
  ~GrpcTransport() override { drop(); }

  bool send(std::string_view body, ExportClock::time_point deadline, std::string& error) override {
    if (session_ && !still_usable()) drop();  // the collector went away, or said GOAWAY, while idle
    if (!session_ && !open(deadline, error)) return false;
    GrpcRequest request{.path = path_,
                        .authority = endpoint_.host + ":" + std::to_string(endpoint_.port),
                        .tls = endpoint_.tls,
                        .user_agent = "sluice",
                        .message = std::string(body)};
    if (!session_->start(request, error) || !pump(deadline, error)) {
      drop();  // the stream (and what the session knows of it) goes with the connection
      return false;
    }
    const auto& r = session_->response();
    if (r.http_status != 200) {
      error = r.http_status ? "collector answered HTTP " + std::to_string(r.http_status)
                            : "the stream was refused or reset";
      drop();
      return false;
    }
    if (r.grpc_status != "0") {
      error = "grpc-status " + (r.grpc_status.empty() ? std::string("missing") : r.grpc_status) + " " +
              r.grpc_message;
      return false;
    }
    return true;
  }

 private:
  bool open(ExportClock::time_point deadline, std::string& error) {
    if (!socket_.connect(endpoint_, "h2", deadline, error)) return false;
    session_.emplace();
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
      if (!session_->feed(std::string_view(buf, static_cast<std::size_t>(n)), error)) return false;
    }
    return session_->accepts_calls();
  }

  void drop() {
    session_.reset();
    socket_.close();
  }

  // Writes what the session has to send and feeds it what arrives, until the call ended or a failure.
  bool pump(ExportClock::time_point deadline, std::string& error) {
    char buf[16384];
    while (true) {
      while (true) {
        auto out = session_->output(error);
        if (!out) return false;
        if (out->empty()) break;
        if (!socket_.write_all(*out, deadline, error)) return false;
      }
      if (session_->call_ended()) return true;
      if (!session_->wants_read()) {
        error = "the collector ended the connection";
        return false;
      }
      long got = socket_.read_some(buf, sizeof buf, deadline, error);
      if (got <= 0) {
        if (got == 0) error = "connection closed";
        return false;
      }
      if (!session_->feed(std::string_view(buf, static_cast<std::size_t>(got)), error)) return false;
    }
  }

  Endpoint endpoint_;
  std::string path_;
  TimedSocket socket_;
  std::optional<GrpcClientSession> session_;
};

}  // namespace

std::unique_ptr<ExportTransport> make_grpc_transport(const Endpoint& endpoint, std::string path) {
  return std::make_unique<GrpcTransport>(endpoint, std::move(path));
}

}  // namespace sluice::proxy::telemetry
