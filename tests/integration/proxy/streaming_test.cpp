// Bodies stream through sluice in both directions with bounded memory.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "harness.h"

namespace sluice::test {
namespace {

constexpr long long kOneGiB = 1LL << 30;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;  // sanitizer allocators keep freed memory: RSS says nothing there
#else
constexpr bool kSanitized = false;
#endif

// Samples a process's RSS on a thread until stopped; keeps the peak.
class RssSampler {
 public:
  explicit RssSampler(pid_t pid) : pid_(pid), thread_([this] {
    while (!stop_) {
      peak_ = std::max(peak_.load(), rss_kib(pid_));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }) {}
  long stop() {
    stop_ = true;
    thread_.join();
    return peak_;
  }

 private:
  pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<long> peak_{0};
  std::thread thread_;
};

class Streaming : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port}};
};

TEST_F(Streaming, OneGibibyteDownloadPassesWithBoundedMemory) {
  ASSERT_EQ(curl({sidecar.url("/")}).exit_code, 0);  // warm up: buffers and pools allocated
  long before = rss_kib(sidecar.process->pid());
  RssSampler sampler(sidecar.process->pid());
  auto r = curl({"-o", "/dev/null", "-w", "%{size_download} %{http_code}",
                 sidecar.url("/bytes/" + std::to_string(kOneGiB))}, 240);
  long peak = sampler.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(kOneGiB) + " 200");
  if (!kSanitized) {
    EXPECT_LT(peak - before, 16 * 1024) << "RSS grew from " << before << " to " << peak << " KiB";
  }
}

TEST_F(Streaming, OneGibibyteChunkedUploadPassesWithBoundedMemory) {
  ASSERT_EQ(curl({sidecar.url("/")}).exit_code, 0);
  long before = rss_kib(sidecar.process->pid());
  RssSampler sampler(sidecar.process->pid());
  auto r = run_command({"sh", "-c",
                        "head -c " + std::to_string(kOneGiB) +
                            " /dev/zero | curl -sS --max-time 240 -T - -X POST " + sidecar.url("/sink")},
                       std::chrono::seconds(250));
  long peak = sampler.stop();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(kOneGiB));
  if (!kSanitized) {
    EXPECT_LT(peak - before, 16 * 1024) << "RSS grew from " << before << " to " << peak << " KiB";
  }
}

TEST_F(Streaming, LargeContentLengthUploadArrivesWhole) {
  auto r = run_command({"sh", "-c",
                        "head -c 50000000 /dev/urandom > /tmp/sluice-upload.$$ && curl -sS --max-time 60 "
                        "--data-binary @/tmp/sluice-upload.$$ -H 'Content-Type: application/octet-stream' " +
                            sidecar.url("/sink") + "; rm -f /tmp/sluice-upload.$$"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "50000000");
}

TEST_F(Streaming, ChunkedEchoComesBackByteForByte) {
  // The app echoes while it reads: this only completes if sluice streams both ways at once.
  auto r = run_command({"sh", "-c",
                        "head -c 20000000 /dev/urandom > /tmp/sluice-echo.$$ && curl -sS --max-time 60 "
                        "-T /tmp/sluice-echo.$$ -H 'Transfer-Encoding: chunked' -X POST " +
                            sidecar.url("/echo") +
                            " | cmp - /tmp/sluice-echo.$$ && echo same; rm -f /tmp/sluice-echo.$$"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "same\n");
}

TEST_F(Streaming, ExpectContinueGetsContinueThenTheResponse) {
  auto r = run_command({"sh", "-c",
                        "head -c 300000 /dev/zero | curl -sS -v --max-time 30 -H 'Expect: 100-continue' "
                        "--data-binary @- " + sidecar.url("/sink") + " 2>&1"});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("< HTTP/1.1 100 Continue"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("< HTTP/1.1 200 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("300000"), std::string::npos) << r.out;
}

TEST_F(Streaming, StreamedResponsePiecesArriveBeforeTheResponseEnds) {
  // 3 chunks 400 ms apart: the first must reach the client long before the last is written.
  auto r = curl({"-N", "-w", "\\n%{time_starttransfer} %{time_total}", sidecar.url("/slow-body/3/400")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("chunk 0\nchunk 1\nchunk 2\n"), std::string::npos) << r.out;
  double first = 0, total = 0;
  std::sscanf(r.out.substr(r.out.rfind('\n') + 1).c_str(), "%lf %lf", &first, &total);
  EXPECT_LT(first, total - 0.5) << r.out;
}

}  // namespace
}  // namespace sluice::test
