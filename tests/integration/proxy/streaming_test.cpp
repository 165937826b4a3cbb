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

// Bodies that pass through unchanged (Content-Length, no TLS) move socket to socket by splice(2)
// (proxy/io/splice.h): requests by default, responses with SLUICE_SPLICE_RESPONSES; with
// SLUICE_SPLICE_MIN_BYTES=0 the same bodies are copied. Either way the bytes, the framing around them and
// the failure rules are the same.
class SpliceOrCopy : public ::testing::TestWithParam<const char*> {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SLUICE_SPLICE_MIN_BYTES", GetParam()},
                                         {"SLUICE_SPLICE_RESPONSES", "true"},
                                         {"SERVING_ENABLE_REQUEST_LOG", "true"}}}};
};

INSTANTIATE_TEST_SUITE_P(Bodies, SpliceOrCopy, ::testing::Values("16384", "0"),
                         [](const auto& p) { return std::string(p.param) == "0" ? "copied" : "spliced"; });

TEST_P(SpliceOrCopy, AnEchoedContentLengthBodyComesBackByteForByte) {
  // Both directions at once: the app echoes each piece as it reads it, with the request's length.
  auto r = run_command({"sh", "-c",
                        "head -c 30000000 /dev/urandom > /tmp/sluice-splice.$$ && curl -sS --max-time 60 "
                        "--data-binary @/tmp/sluice-splice.$$ -D /tmp/sluice-splice-head.$$ " +
                            sidecar.url("/echo") +
                            " | cmp - /tmp/sluice-splice.$$ && grep -i '^content-length: 30000000' "
                            "/tmp/sluice-splice-head.$$ >/dev/null && echo same; "
                            "rm -f /tmp/sluice-splice.$$ /tmp/sluice-splice-head.$$"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "same\n");
}

TEST_P(SpliceOrCopy, ARequestPipelinedBehindALargeBodyIsAnsweredToo) {
  // The body's last bytes and the next request arrive together: only the body goes to the app.
  const std::string body(300000, 'p');
  RawClient client(sidecar.port);
  client.send("POST /sink HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
              body + "GET /bytes/7 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  auto got = client.read_until("\r\n\r\nabcdefg", std::chrono::seconds(20));
  EXPECT_EQ(count_of(got, "HTTP/1.1 200 OK"), 2u) << got;
  EXPECT_NE(got.find("X-Received-Bytes: 300000"), std::string::npos) << got;
  EXPECT_NE(got.find("Content-Length: 7\r\n"), std::string::npos) << got;
}

TEST_P(SpliceOrCopy, AClientLeavingMidUploadIs499AndTheSidecarKeepsServing) {
  {
    RawClient client(sidecar.port);
    client.send("POST /sink HTTP/1.1\r\nHost: a\r\nX-Request-Id: gone-mid-upload\r\nContent-Length: 50000000\r\n\r\n" +
                std::string(2 << 20, 'u'));
  }  // closed with 48 MB owed
  auto line = sidecar.process->wait_for_line("\"requestId\":\"gone-mid-upload\"", std::chrono::seconds(10));
  ASSERT_TRUE(line) << "no request log line";
  EXPECT_NE(line->find("\"status\":499"), std::string::npos) << *line;
  EXPECT_EQ(curl({sidecar.url("/")}).out, "Hello from sluice-demo-app\n");
}

TEST_P(SpliceOrCopy, ADownloadTheAppCutsShortIsCutForTheClient) {
  // 1,000,000 bytes declared, 1000 sent, then the app closes: the client must not see a whole response.
  auto r = curl({"-o", "/dev/null", "-w", "%{size_download}", sidecar.url("/close-mid")});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "1000");
}

}  // namespace
}  // namespace sluice::test
