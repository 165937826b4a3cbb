// The gateway tests' harness: the real sluice binary in gateway mode, its admin status, temporary files.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "tests/integration/proxy/harness.h"
#include "tests/support/eventually.h"

namespace sluice::test {

namespace json = boost::json;
using namespace std::chrono_literals;

inline std::string slow_app(double seconds) {
  return std::string("sleep ") + std::to_string(seconds) + "; exec " + DEMO_APP_BIN;
}

class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text) {
    path_ = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(counter_++));
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

struct Gateway {
  // `args` after "gateway"; the listen and admin ports are always picked by the kernel.
  explicit Gateway(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv = {SLUICE_BIN, "gateway", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0",
                                     "--status", "none", "--workers", "2"};
    // Options go before "--", the command after it.
    auto dashdash = std::find(args.begin(), args.end(), "--");
    argv.insert(argv.end(), args.begin(), dashdash);
    argv.insert(argv.end(), dashdash, args.end());
    process = std::make_unique<Process>(ProcessOptions{.argv = argv, .env = std::move(env), .merge_stderr = true});
    auto line = process->wait_for_line("\"listener\":\"gateway\"");
    if (!line) throw std::runtime_error("gateway did not start: " + process->stdout_text());
    port = static_cast<int>(json_int_field(*line, "port"));
    for (const auto& l : process->lines())
      if (l.find("\"listener\":\"admin\"") != std::string::npos) admin_port = static_cast<int>(json_int_field(l, "port"));
  }

  // Drained, so that no instance outlives the test (a killed gateway takes its instances along too).
  ~Gateway() {
    if (process->running()) {
      process->signal(SIGTERM);
      process->wait_exit(20s);
    }
    // Under the sanitizer presets, a report from the gateway fails the test that provoked it.
    auto out = process->stdout_text();
    EXPECT_EQ(out.find("Sanitizer"), std::string::npos) << out.substr(out.find("Sanitizer") == std::string::npos ? 0 : out.find("Sanitizer") - std::min<std::size_t>(out.find("Sanitizer"), 200), 6000);
  }
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  json::object status() {
    auto body = body_of(http_get(admin_port, "/.sluice/status"));
    return json::parse(body).as_object();
  }
  json::object service(const std::string& name = "") {
    auto all = status();  // named: a range-for over a temporary's member would dangle
    for (auto& s : all["services"].as_array())
      if (name.empty() || s.as_object()["name"].as_string() == name) return s.as_object();
    throw std::runtime_error("no service " + name);
  }
  std::size_t instances(const std::string& state, const std::string& name = "") {
    std::size_t n = 0;
    auto s = service(name);
    for (auto& i : s["instances"].as_array())
      n += state.empty() || i.as_object()["state"].as_string() == state;
    return n;
  }
  std::int64_t number(const std::string& key, const std::string& name = "") {
    return service(name)[key].to_number<std::int64_t>();
  }
  // Waits until the validation instance has come and gone: the service is at zero, untouched.
  bool validated() {
    return process->wait_for_line("\"event\":\"service.validated\"", 20s).has_value() &&
           eventually([&] { return instances("") == 0; }, 10s);
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }

  std::unique_ptr<Process> process;
  int port = 0;
  int admin_port = 0;
};

inline long h2load_count(const std::string& out, const std::string& what) {
  // "requests: 100 total, 100 started, 100 done, 100 succeeded, 0 failed, ..." / "status codes: 5 2xx, ..."
  auto at = out.find(" " + what);
  if (at == std::string::npos) return -1;
  auto start = out.rfind(' ', at - 1);
  return std::stol(out.substr(start + 1, at - start - 1));
}

}  // namespace sluice::test
