// OTLP/HTTP and Zipkin: an HTTP/1.1 POST on a kept-alive connection (TLS for an https:// endpoint); the
// answer's status decides.
#include <charconv>

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
    std::string head = "POST " + endpoint_.path + " HTTP/1.1\r\nHost: " + endpoint_.host + ":" +
                       std::to_string(endpoint_.port) + "\r\nContent-Type: " + content_type_ +
                       "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nUser-Agent: sluice\r\n\r\n";
    if (!socket_.write_all(head, deadline, error) || !socket_.write_all(body, deadline, error)) return false;
    return read_response(deadline, error);
  }

  // A kept connection is usable when nothing arrived on it since the last response (not even its close).
  bool idle_and_open() {
    char c;
    std::string error;
    return socket_.read_some(&c, 1, ExportClock::now(), error) < 0 && error == "timed out";
  }

  // The status, then the body by Content-Length (or chunked, or to the close) so the connection can go on.
  bool read_response(ExportClock::time_point deadline, std::string& error) {
    std::string in;
    char buf[4096];
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      long n = socket_.read_some(buf, sizeof buf, deadline, error);
      if (n <= 0) {
        if (n == 0) error = "connection closed before a response";
        return false;
      }
      in.append(buf, static_cast<std::size_t>(n));
      if (in.size() > 65536) {
        error = "response head too large";
        return false;
      }
    }
    int status = 0;
    if (in.size() < 12 || in.compare(0, 5, "HTTP/") != 0) {
      error = "not an HTTP response";
      return false;
    }
    std::from_chars(in.data() + 9, in.data() + 12, status);
    std::string head = in.substr(0, head_end);
    for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string rest = in.substr(head_end + 4);
    bool keep = head.find("\r\nconnection: close") == std::string::npos;
    if (auto p = head.find("\r\ncontent-length:"); p != std::string::npos) {
      std::size_t length = 0;
      auto v = head.data() + p + 17;
      while (*v == ' ') ++v;
      std::from_chars(v, head.data() + head.size(), length);
      while (rest.size() < length) {
        long n = socket_.read_some(buf, sizeof buf, deadline, error);
        if (n <= 0) return false;
        rest.append(buf, static_cast<std::size_t>(n));
      }
    } else if (head.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
      while (rest.find("0\r\n\r\n") == std::string::npos) {
        long n = socket_.read_some(buf, sizeof buf, deadline, error);
        if (n <= 0) return false;
        rest.append(buf, static_cast<std::size_t>(n));
      }
    } else if (status != 204 && status != 304) {
      keep = false;  // delimited by the close
    }
    if (!keep) socket_.close();
    if (status < 200 || status > 299) {
      error = "collector answered " + std::to_string(status);
      return false;
    }
    return true;
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
