// What the autoscaler and Prometheus read from a running sidecar: the :9090 Stat (decoded with
// protobuf's own parser) and the :9091 request metrics, for a load the test scripts exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "harness.h"
#include "metrics/stat.pb.h"
#include "tests/support/eventually.h"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;

// The lite runtime has no DebugString.
std::string describe(const sluice::metrics::wire::Stat& s) {
  return "concurrency=" + std::to_string(s.average_concurrent_requests()) +
         " proxied=" + std::to_string(s.average_proxied_concurrent_requests()) +
         " rps=" + std::to_string(s.request_count()) + " uptime=" + std::to_string(s.process_uptime());
}

class Stats : public ::testing::Test {
 protected:
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"SERVING_REQUEST_METRICS_BACKEND", "prometheus"}}}};

  sluice::metrics::wire::Stat stat() {
    auto r = http_get(sidecar.metrics_port, "/metrics", "Accept: application/protobuf\r\n");
    EXPECT_NE(r.find("\r\nContent-Type: application/protobuf\r\n"), std::string::npos) << r;
    sluice::metrics::wire::Stat s;
    EXPECT_TRUE(s.ParseFromString(body_of(r)));
    return s;
  }

  // A request that stays in flight until release(): a chunked upload whose end has not been sent.
  std::unique_ptr<RawClient> held_request(const std::string& extra_headers = "") {
    auto c = std::make_unique<RawClient>(sidecar.port);
    c->send("POST /sink HTTP/1.1\r\nHost: x\r\n" + extra_headers + "Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n");
    return c;
  }
  static void release(RawClient& c) {
    c.send("0\r\n\r\n");
    c.read_until("\r\n\r\n1");
  }
};

TEST_F(Stats, TwoRequestsInFlightForAWholePeriodAverageTwo) {
  auto a = held_request();
  auto b = held_request();
  // The first period fully inside the two requests' lifetime reports 2.
  EXPECT_TRUE(eventually([&] { return std::abs(stat().average_concurrent_requests() - 2.0) <= 0.05; }, 5s))
      << describe(stat());
  auto s = stat();
  EXPECT_EQ(s.pod_name(), "demo-00001-pod");
  EXPECT_EQ(s.average_proxied_concurrent_requests(), 0.0);
  EXPECT_GT(s.process_uptime(), 0.0);
  release(*a);
  release(*b);
  EXPECT_TRUE(eventually([&] { return stat().average_concurrent_requests() == 0.0; }, 5s));
}

TEST_F(Stats, HalfAPeriodInFlightAveragesAboutAHalf) {
  // A time-weighted average, not a sample: a request that lives ~1.5 s spans one full period and
  // parts of others, so some period reports a value strictly between 0 and 1.
  auto a = held_request();
  bool fractional = false;
  auto start = std::chrono::steady_clock::now();
  std::thread releaser([&] {
    std::this_thread::sleep_until(start + 1500ms);  // the length of the request is the test's input
    release(*a);
  });
  eventually([&] {
    double c = stat().average_concurrent_requests();
    fractional = fractional || (c > 0.02 && c < 0.98);
    return fractional;
  }, 5s);
  releaser.join();
  EXPECT_TRUE(fractional);
}

TEST_F(Stats, ActivatorRequestsCountAsProxied) {
  auto a = held_request("K-Proxy-Request: activator\r\n");
  EXPECT_TRUE(eventually([&] {
    auto s = stat();
    return std::abs(s.average_proxied_concurrent_requests() - 1.0) <= 0.05 &&
           std::abs(s.average_concurrent_requests() - 1.0) <= 0.05;
  }, 5s)) << describe(stat());
  release(*a);
}

TEST_F(Stats, RequestRatesOverThePeriodsAddUpToTheArrivals) {
  // As queue-proxy's: each period's arrivals divided by the 1 s reporting period, whatever the period's
  // length (the first after idle closes early), so the rates of the periods add up to the arrivals. Each
  // period's sample is the newest for about 1 s and is told apart by its uptime: a sampler reads them
  // all the time the requests are sent (on a loaded machine fifteen curls can outlast a period).
  double before = stat().process_uptime();
  std::mutex mutex;
  std::map<double, std::pair<double, double>> samples;  // uptime -> (rps, proxied rps)
  auto sums = [&] {
    std::lock_guard lock(mutex);
    std::pair<double, double> sum;
    for (const auto& [uptime, rates] : samples) {
      sum.first += rates.first;
      sum.second += rates.second;
    }
    return sum;
  };
  std::atomic<bool> done = false;
  std::thread sampler([&] {
    while (!done) {
      auto s = stat();
      if (s.process_uptime() > before) {
        std::lock_guard lock(mutex);
        samples[s.process_uptime()] = {s.request_count(), s.proxied_request_count()};
      }
      std::this_thread::sleep_for(1ms);  // a scrape every millisecond or so; each sample lives ~1 s
    }
  });
  for (int i = 0; i < 10; ++i) EXPECT_EQ(curl({sidecar.url("/")}).exit_code, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(curl({"-H", "K-Proxy-Request: activator", sidecar.url("/")}).exit_code, 0);
  EXPECT_EQ(curl({"-H", "K-Proxy-Request: Activator", sidecar.url("/")}).exit_code, 0);  // not the activator's value
  // Until the periods holding the arrivals have all closed and been read.
  eventually([&] {
    auto [total, proxied] = sums();
    return total >= 15.0 && proxied >= 4.0;
  }, 20s);
  done = true;
  sampler.join();
  auto [total, proxied] = sums();
  EXPECT_DOUBLE_EQ(total, 15.0);
  EXPECT_DOUBLE_EQ(proxied, 4.0);
}

TEST_F(Stats, TheStatWhateverTheAcceptHeaderOrMethod) {
  // queue-proxy's stats handler answers the protobuf to every request for /metrics.
  for (const char* extra : {"", "Accept: text/plain\r\n", "Accept: */*\r\n"}) {
    auto r = http_get(sidecar.metrics_port, "/metrics?x=1", extra);
    EXPECT_EQ(r.rfind("HTTP/1.1 200 ", 0), 0u) << r;
    EXPECT_NE(r.find("\r\nContent-Type: application/protobuf\r\n"), std::string::npos) << r;
    sluice::metrics::wire::Stat s;
    EXPECT_TRUE(s.ParseFromString(body_of(r)));
    EXPECT_EQ(s.pod_name(), "demo-00001-pod");
  }
  auto r = curl({"-s", "-X", "POST", "-o", "/dev/null", "-w", "%{http_code} %{content_type}",
                 "http://127.0.0.1:" + std::to_string(sidecar.metrics_port) + "/metrics"});
  EXPECT_EQ(r.out, "200 application/protobuf");
  r = curl({"-s", "-w", " %{http_code}", "http://127.0.0.1:" + std::to_string(sidecar.metrics_port) + "/"});
  EXPECT_EQ(r.out, "404 page not found\n 404");
}

TEST_F(Stats, UserMetricsCountProxyAndAppRequestsByCode) {
  for (int i = 0; i < 3; ++i) ASSERT_EQ(curl({sidecar.url("/status/201")}).exit_code, 0);
  ASSERT_EQ(curl({sidecar.url("/status/404")}).exit_code, 0);
  http_get(sidecar.port, "/", "User-Agent: kube-probe/1.29\r\n");  // not counted
  auto text = body_of(http_get(sidecar.user_metrics_port, "/metrics"));
  EXPECT_EQ(prometheus_value(text, "revision_request_count", "response_code=\"201\""), 3.0) << text;
  EXPECT_EQ(prometheus_value(text, "revision_request_count", "response_code=\"404\""), 1.0) << text;
  EXPECT_EQ(prometheus_value(text, "revision_app_request_count", "response_code=\"201\""), 3.0) << text;
  EXPECT_FALSE(prometheus_value(text, "revision_request_count", "response_code=\"200\""));
  EXPECT_EQ(prometheus_value(text, "revision_request_latencies_count", "response_code=\"201\""), 3.0);
  // Go's ServeMux for "GET /metrics": another method is 405, another path 404.
  auto r = curl({"-s", "-X", "POST", "-D", "-", "http://127.0.0.1:" + std::to_string(sidecar.user_metrics_port) + "/metrics"});
  EXPECT_EQ(r.out.rfind("HTTP/1.1 405 ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("Allow: GET, HEAD\r\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("Method Not Allowed\n")) << r.out;
}

// The app-side series time the app's exchange alone, from the breaker on; the proxy-side series time the
// whole request, its wait in the queue included. A request held in the queue for a second the test
// measures shows the difference in both families of names.
TEST(StatsApp, AppSideLatencyLeavesOutTheWaitInTheQueue) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{.user_port = backend.port,
                                 .env = {{"CONTAINER_CONCURRENCY", "1"},
                                         {"SERVING_REQUEST_METRICS_BACKEND", "prometheus"},
                                         {"SLUICE_METRIC_NAMES", "both"}}}};
  auto metrics = [&] { return body_of(http_get(sidecar.user_metrics_port, "/metrics")); };
  // The one slot: an upload whose end has not been sent.
  RawClient holder(sidecar.port);
  holder.send("POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n");
  ASSERT_TRUE(eventually([&] { return prometheus_value(metrics(), "revision_queue_depth") == 1.0; }, 10s))
      << metrics();
  auto queued = std::async(std::launch::async, [&] { return curl({sidecar.url("/status/201")}); });
  ASSERT_TRUE(eventually([&] { return prometheus_value(metrics(), "revision_queue_depth") == 2.0; }, 10s))
      << metrics();
  // The length of the wait is the test's input: at least a second from when the request was seen queued.
  std::this_thread::sleep_until(std::chrono::steady_clock::now() + 1000ms);
  holder.send("0\r\n\r\n");
  holder.read_until("\r\n\r\n1");
  ASSERT_EQ(queued.get().exit_code, 0);

  auto text = metrics();
  auto value = [&](const std::string& name, const std::string& label) {
    return prometheus_value(text, name, label).value_or(-1);
  };
  const std::string legacy = "response_code=\"201\"", otel = "status_code=\"201\"";
  EXPECT_EQ(value("revision_app_request_latencies_count", legacy), 1.0) << text;
  EXPECT_GE(value("revision_request_latencies_sum", legacy) - value("revision_app_request_latencies_sum", legacy),
            999.0) << text;
  EXPECT_EQ(value("kn_serving_invocation_duration_seconds_count", otel), 1.0) << text;
  EXPECT_GE(value("http_server_request_duration_seconds_sum", otel) -
                value("kn_serving_invocation_duration_seconds_sum", otel),
            0.999) << text;
}

// With Knative >= 1.19's names, what queue-proxy's exporter serves: the app's invocations, otelhttp's server
// and client families by route tag, the queue depth as requests passed the breaker, process_* and target_info;
// Knative probes forwarded to the app are left out.
TEST(StatsOtel, UserMetricsAsQueueProxysExporterServesThem) {
  Backend backend;
  Sidecar sidecar{SidecarOptions{
      .user_port = backend.port,
      .env = {{"CONTAINER_CONCURRENCY", "1"},
              {"OBSERVABILITY_CONFIG", R"({"requestMetrics":{"protocol":"prometheus"}})"}}}};
  ASSERT_EQ(curl({"-H", "Knative-Serving-Tag: canary", sidecar.url("/status/201")}).exit_code, 0);
  ASSERT_EQ(curl({"-d", "hello", sidecar.url("/")}).exit_code, 0);
  ASSERT_EQ(curl({"-H", "K-Network-Probe: queue", sidecar.url("/")}).exit_code, 0);  // forwarded, not measured
  auto text = body_of(http_get(sidecar.user_metrics_port, "/metrics"));
  EXPECT_EQ(prometheus_value(text, "kn_serving_invocation_duration_seconds_count", "status_code=\"201\""), 1.0) << text;
  EXPECT_EQ(prometheus_value(text, "kn_serving_invocation_duration_seconds_count", "status_code=\"200\""), 1.0) << text;
  EXPECT_EQ(prometheus_value(text, "http_server_request_duration_seconds_count", "kn_route_tag=\"canary\""), 1.0) << text;
  EXPECT_EQ(prometheus_value(text, "http_server_request_body_size_bytes_sum", "POST"), 5.0) << text;
  EXPECT_EQ(prometheus_value(text, "http_client_request_duration_seconds_count", "status_code=\"201\""), 1.0) << text;
  EXPECT_EQ(prometheus_value(text, "http_client_request_body_size_bytes_sum", "POST"), 5.0) << text;
  EXPECT_EQ(prometheus_value(text, "kn_serving_queue_depth"), 1.0) << text;
  EXPECT_NE(text.find("\nprocess_resident_memory_bytes "), std::string::npos) << text;
  EXPECT_NE(text.find("target_info{container_name=\"queue-proxy\",k8s_namespace_name=\"default\""), std::string::npos)
      << text;
  EXPECT_EQ(text.find("revision_request_count"), std::string::npos);
}

}  // namespace
}  // namespace sluice::test
