// The test collector process; see otlp_receiver.h.
#include "tests/integration/proxy/otlp_receiver.h"

#include <stdexcept>

namespace sluice::test {

OtlpReceiver::OtlpReceiver(std::vector<std::string> extra) {
  std::vector<std::string> argv = {"/usr/bin/python3", OTLP_RECEIVER, "--proto-dir", OTLP_PROTO_DIR};
  argv.insert(argv.end(), extra.begin(), extra.end());
  process = std::make_unique<Process>(ProcessOptions{.argv = argv});
  auto line = process->wait_for_line("\"listening\"", std::chrono::seconds(20));
  if (!line) throw std::runtime_error("otlp receiver did not start: " + process->stderr_text());
  auto v = boost::json::parse(*line).as_object();
  http_port = static_cast<int>(v.at("http_port").as_int64());
  grpc_port = static_cast<int>(v.at("grpc_port").as_int64());
}

std::vector<boost::json::object> OtlpReceiver::received(const std::string& signal) const {
  std::vector<boost::json::object> out;
  for (const auto& l : process->lines()) {
    if (l.find("\"signal\"") == std::string::npos) continue;
    auto v = boost::json::parse(l).as_object();
    if (v.at("signal").as_string() == signal) out.push_back(std::move(v));
  }
  return out;
}

std::vector<boost::json::object> OtlpReceiver::spans() const {
  std::vector<boost::json::object> out;
  for (const auto& r : received("traces")) {
    for (const auto& b : r.at("batches").as_array()) {
      for (const auto& s : b.at("spans").as_array()) {
        auto span = s.as_object();
        span["resource"] = b.at("resource");
        span["transport"] = r.at("transport");
        out.push_back(std::move(span));
      }
    }
  }
  return out;
}

}  // namespace sluice::test
