// HTTP/2 abuse against the real sidecar: each attack runs from h2_attack.py (hand-built frames) on fresh
// connections for a few seconds while h2load, on a connection of its own, keeps asking at a steady
// rate. Each attack must end its connections with GOAWAY (or close them, when the client reads nothing),
// before it got far, the bystander must get every answer (its p99 is printed), and memory stays bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // sanitizer allocators keep freed memory: RSS says little there
#else
constexpr bool kSanitized = false;
#endif

constexpr int kBystanderRequests = 150;
constexpr int kBystanderRate = 50;  // per second: three seconds of requests
constexpr double kAttackSeconds = 4;

// Samples a process's RSS on a thread until stopped; keeps the peak.
class PeakRss {
 public:
  explicit PeakRss(pid_t pid) : pid_(pid), thread_([this] {
    while (!stop_) {
      peak_ = std::max(peak_.load(), rss_kib(pid_));
      std::this_thread::sleep_for(10ms);
    }
  }) {}
  ~PeakRss() { stop(); }
  long stop() {
    if (thread_.joinable()) {
      stop_ = true;
      thread_.join();
    }
    return peak_;
  }

 private:
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_{0};
  std::thread thread_;
};

struct BystanderResult {
  int answered = 0;  // 200s in h2load's log
  double p99_ms = 0;
  std::string output;
};

// h2load, one connection, one stream at a time, at a steady rate; per-request times from its log file.
BystanderResult run_bystander(int port, const std::string& tag) {
  const std::string log = std::string(::testing::TempDir()) + "/h2-bystander-" + tag + ".tsv";
  std::remove(log.c_str());  // h2load appends
  auto r = run_command({"h2load", "-c1", "-m1", "-n" + std::to_string(kBystanderRequests),
                        "--rps=" + std::to_string(kBystanderRate), "--log-file=" + log,
                        "http://127.0.0.1:" + std::to_string(port) + "/"},
                       60s);
  BystanderResult out;
  out.output = r.out + r.err;
  std::ifstream in(log);
  std::vector<double> ms;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    long long start = 0, micros = 0;
    int status = 0;
    if (fields >> start >> status >> micros) {
      if (status == 200) ++out.answered;
      ms.push_back(static_cast<double>(micros) / 1000.0);
    }
  }
  if (!ms.empty()) {
    std::sort(ms.begin(), ms.end());
    out.p99_ms = ms[std::min(ms.size() - 1, static_cast<std::size_t>(static_cast<double>(ms.size()) * 0.99))];
  }
  return out;
}

struct AttackSummary {
  long connections = 0, goaway_calm = 0, goaway_other = 0, closed = 0, max_frames_before_end = 0, responses = 0,
       rst_refused = 0, rst_other = 0, max_goaway_last_stream = 0;
  std::string line;
};

class H2Abuse : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port, .env = {{"SLUICE_H2_STALL_TIMEOUT_MS", "1500"}}}};

  // Runs `attack` for kAttackSeconds (on at most `connections` connections) with the bystander beside it.
  AttackSummary attack(const std::string& name, int connections) {
    long rss_before = rss_kib(sidecar.process->pid());
    PeakRss peak(sidecar.process->pid());
    Process attacker(ProcessOptions{.argv = {"/usr/bin/python3", H2_ATTACK_PY, name, std::to_string(sidecar.port),
                                            "--connections", std::to_string(connections), "--seconds",
                                            std::to_string(kAttackSeconds)}});
    auto bystander = run_bystander(sidecar.port, name);
    auto line = attacker.wait_for_line("\"attack\"", 120s);
    long rss_peak = peak.stop();
    AttackSummary s;
    EXPECT_TRUE(line) << "the attack did not finish: " << attacker.stderr_text();
    if (line) {
      s.line = *line;
      s.connections = json_int_field(*line, "connections");
      s.goaway_calm = json_int_field(*line, "goaway_calm");
      s.goaway_other = json_int_field(*line, "goaway_other");
      s.closed = json_int_field(*line, "closed");
      s.max_frames_before_end = json_int_field(*line, "max_frames_before_end");
      s.responses = json_int_field(*line, "responses");
      s.rst_refused = json_int_field(*line, "rst_refused");
      s.rst_other = json_int_field(*line, "rst_other");
      s.max_goaway_last_stream = json_int_field(*line, "max_goaway_last_stream");
    }
    std::printf("[ abuse    ] %s: bystander p99 %.2f ms, %d/%d answered; sidecar RSS %ld -> peak %ld KiB; %s\n",
                name.c_str(), bystander.p99_ms, bystander.answered, kBystanderRequests, rss_before, rss_peak,
                s.line.c_str());
    EXPECT_EQ(bystander.answered, kBystanderRequests) << bystander.output;
    if (!kSanitized) {
      EXPECT_LT(rss_peak - rss_before, 96 * 1024) << "KiB grown during " << name;
    }
    EXPECT_GT(s.connections, 0);
    // The sidecar still serves after the attack.
    auto after = curl({"--http2-prior-knowledge", sidecar.url("/")});
    EXPECT_EQ(after.out, "Hello from sluice-demo-app\n") << after.err;
    return s;
  }
};

TEST_F(H2Abuse, RapidResetGetsGoawayAfterTheResetBudget) {
  auto s = attack("rapid_reset", 1000);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  // 1000 resets at once and 33 a second: the GOAWAY names the last stream sluice took (two ids a stream).
  EXPECT_LT(s.max_goaway_last_stream, 2 * 1500) << s.line;
}

TEST_F(H2Abuse, ContinuationFloodGetsGoawayAtOnce) {
  auto s = attack("continuation_flood", 1000);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LT(s.max_frames_before_end, 1000) << s.line;  // the client stops only when it is shut out
}

TEST_F(H2Abuse, SettingsFloodGetsGoaway) {
  auto s = attack("settings_flood", 1000);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LT(s.max_frames_before_end, 20000) << s.line;
}

TEST_F(H2Abuse, PingFloodGetsGoaway) {
  auto s = attack("ping_flood", 1000);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LT(s.max_frames_before_end, 20000) << s.line;
}

TEST_F(H2Abuse, EmptyDataFramesGetGoaway) {
  auto s = attack("empty_frames", 1000);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LT(s.max_frames_before_end, 20000) << s.line;
}

TEST_F(H2Abuse, HpackBombIsResetThenGoaway) {
  auto s = attack("hpack_bomb", 1000);
  EXPECT_GT(s.rst_other, 0) << s.line;  // each amplified header list: RST_STREAM
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LT(s.max_frames_before_end, 5000) << s.line;
}

TEST_F(H2Abuse, TooManyStreamsEndTheConnection) {
  // nghttp2 treats a stream beyond the acknowledged SETTINGS_MAX_CONCURRENT_STREAMS as a connection
  // error (PROTOCOL_ERROR), so none past the 100th reaches the app.
  auto s = attack("too_many_streams", 1000);
  EXPECT_EQ(s.goaway_calm + s.goaway_other, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
  EXPECT_LE(s.max_goaway_last_stream, 2 * 100 - 1) << s.line;
}

TEST_F(H2Abuse, WindowNeverOpenedGetsGoawayAfterTheStallTimeout) {
  auto s = attack("window_never_opened", 2);
  EXPECT_EQ(s.goaway_calm, s.connections) << s.line;
  EXPECT_EQ(s.closed, s.connections) << s.line;
}

TEST_F(H2Abuse, SocketNeverReadIsClosedAfterTheStallTimeout) {
  auto s = attack("socket_never_read", 2);
  EXPECT_EQ(s.closed, s.connections) << s.line;
}

}  // namespace
}  // namespace sluice::test
