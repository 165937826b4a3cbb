// OTLP/HTTP and Zipkin: an HTTP/1.1 POST on a kept-alive connection (TLS for an https:// endpoint) through
// the one HTTP/1.1 client (common/http_client.h); the answer's status decides.
#include "proxy/telemetry/grpc_transport.h"
#include "proxy/telemetry/transport.h"

namespace sluice::proxy::telemetry {
namespace {

class HttpTransport final : public ExportTransport {
 public:
  HttpTransport(Endpoint endpoint, std::string content_type)
      : endpoint_(std::move(endpoint)), content_type_(std::move(content_type)) {}

  bool send(std::string_view body, ExportClock::time_point deadline, std::string& error) override {
    bool ok = attempt(body, deadline, error);
    if (!ok) socket_.close();  // a broken or half-read connection is not reused
    return ok;
  }

 private:
  bool attempt(std::string_view body, ExportClock::time_point deadline, std::string& error) {
    if (socket_.is_open() && !idle_and_open()) socket_.close();  // the collector closed it while idle
    if (!socket_.is_open() && !socket_.connect(endpoint_, "http/1.1", deadline, error)) return false;
    std::string head = "POST " + endpoint_.path + " HTTP/1.1\r\nHost: " +
                       net::host_field(endpoint_.host, endpoint_.port) + "\r\nContent-Type: " + content_type_ +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nUser-Agent: sluice\r\n\r\n";
    // The body is read to its end (by Content-Length, chunks or the close) so the connection can go on.
    auto reply = socket_.http_exchange(head, body, {.head_bytes = 65536, .body_bytes = std::nullopt}, deadline);
    if (!reply.ok()) {
      error = describe(reply);
      return false;
    }
    if (!reply.reusable) socket_.close();
    if (const unsigned status = reply.response.result_int(); status < 200 || status > 299) {
      error = "collector answered " + std::to_string(status);
      return false;
    }
    return true;
  }

  // A kept connection is usable when nothing arrived on it since the last response (not even its close).
  bool idle_and_open() {
    char c;
    std::string error;
    return socket_.read_some(&c, 1, ExportClock::now(), error) < 0 && error == "timed out";
  }

  // A failed exchange for the export's log line.
  static std::string describe(const net::HttpReply& reply) {
    if (reply.timed_out()) return "timed out";
    if (reply.closed_early()) return "connection closed before a response";
    if (reply.error == net::http::error::header_limit) return "response head too large";
    if (reply.malformed()) return "not an HTTP response";
    return reply.error.message();
  }

  Endpoint endpoint_;
  std::string content_type_;
  TimedSocket socket_;
};

}  // namespace

std::unique_ptr<ExportTransport> make_transport(ExportProtocol protocol, const Endpoint& endpoint,
                                                std::string grpc_path, std::string content_type) {
  if (protocol == ExportProtocol::otlp_grpc) return make_grpc_transport(endpoint, std::move(grpc_path));
  return std::make_unique<HttpTransport>(endpoint, std::move(content_type));
}

}  // namespace sluice::proxy::telemetry
