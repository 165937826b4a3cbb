// otelhttp's families; see http_metrics.h.
#include "metrics/http_metrics.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "metrics/exposition.h"
#include "metrics/histogram.h"

namespace sluice::metrics {
namespace {

// otelhttp's bucket bounds for durations, and OpenTelemetry's default ones, which its body sizes keep.
constexpr std::array<double, 14> kSeconds = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                             0.5,   0.75, 1,     2.5,  5,     7.5, 10};
constexpr std::array<double, 15> kBytes = {0, 5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000};

constexpr std::string_view kHttpScopeName = "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp";
constexpr std::string_view kScopeVersion = "0.69.0";  // what queue-proxy v1.23 vendors

// otelhttp's standardizeHTTPMethod: the nine methods (in any case) by name, the rest _OTHER.
constexpr std::array<std::string_view, 10> kMethods = {"CONNECT", "DELETE", "GET",   "HEAD",  "OPTIONS",
                                                       "PATCH",   "POST",   "PUT",   "TRACE", "_OTHER"};
std::uint8_t method_index(std::string_view m) {
  for (std::size_t i = 0; i + 1 < kMethods.size(); ++i) {
    const auto& k = kMethods[i];
    if (k.size() == m.size() &&
        std::equal(k.begin(), k.end(), m.begin(), [](char a, char b) { return a == (b >= 'a' && b <= 'z' ? b - 32 : b); }))
      return static_cast<std::uint8_t>(i);
  }
  return static_cast<std::uint8_t>(kMethods.size() - 1);
}

constexpr std::array<std::string_view, 3> kVersions = {"1.0", "1.1", "2"};
constexpr std::array<std::string_view, 5> kErrors = {"", "net.OpError", "context.deadlineExceededError",
                                                     "errors.errorString", "_OTHER"};

// otelhttp's SplitHostPort: "[v6]:port", "host:port", "host"; a port that is not a number is none, and an
// authority net.SplitHostPort refuses ("a:b:c") has no host either.
void split_host_port(std::string_view hostport, std::string_view& host, int& port) {
  host = {};
  port = -1;
  if (hostport.starts_with('[')) {
    auto close = hostport.rfind(']');
    if (close == std::string_view::npos) return;
    if (hostport.find(':', close) == std::string_view::npos) {
      host = hostport.substr(1, close - 1);
      return;
    }
    if (close + 1 >= hostport.size() || hostport[close + 1] != ':') return;  // junk after ]
    host = hostport.substr(1, close - 1);
    hostport.remove_prefix(close + 2);
  } else {
    auto colon = hostport.rfind(':');
    if (colon == std::string_view::npos) {
      host = hostport;
      return;
    }
    if (hostport.find(':') != colon) return;  // too many colons
    host = hostport.substr(0, colon);
    hostport.remove_prefix(colon + 1);
  }
  if (hostport.empty() || hostport.size() > 5) return;
  int p = 0;
  for (char c : hostport) {
    if (c < '0' || c > '9') return;
    p = p * 10 + (c - '0');
  }
  if (p <= 65535) port = p;
}

struct SeriesKey {
  std::uint8_t method = 0;
  HttpVersion version = HttpVersion::v1_1;
  AppError error = AppError::none;
  bool tls = false;
  int status = 0;
  int port = -1;  // server_port, -1: none
  std::string_view route_tag;
  std::string_view host;
};

bool same(const SeriesKey& a, const SeriesKey& b) {
  return a.method == b.method && a.version == b.version && a.error == b.error && a.tls == b.tls &&
         a.status == b.status && a.port == b.port && a.route_tag == b.route_tag && a.host == b.host;
}

std::uint64_t hash(const SeriesKey& k) {
  const std::hash<std::string_view> h;
  std::uint64_t v = static_cast<std::uint64_t>(k.method) | static_cast<std::uint64_t>(k.version) << 8 |
                    static_cast<std::uint64_t>(k.error) << 16 | static_cast<std::uint64_t>(k.tls) << 24 |
                    static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.status)) << 32;
  v ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(k.port)) * 0x9e3779b97f4a7c15ULL;
  v ^= h(k.route_tag) + 0x9e3779b97f4a7c15ULL + (v << 6) + (v >> 2);
  v ^= h(k.host) + 0x9e3779b97f4a7c15ULL + (v << 6) + (v >> 2);
  return v ^ (v >> 29);
}

// One attribute set: its histograms (the client's use the first two).
struct Series {
  Series(const SeriesKey& k, bool overflow_set)
      : route_tag(k.route_tag), host(k.host), key(k), overflow(overflow_set) {
    key.route_tag = route_tag;
    key.host = host;
  }
  const std::string route_tag, host;  // what `key`'s views point at
  SeriesKey key;
  const bool overflow;
  AtomicHistogram duration{kSeconds, 1e-9};
  AtomicHistogram request_bytes{kBytes, 1};
  AtomicHistogram response_bytes{kBytes, 1};
};

}  // namespace

// Open addressing over slots that are only ever filled, so a lookup takes no lock: the OpenTelemetry SDK's
// 2000 sets per instrument fit in 4096 slots with short probes.
class HttpMetrics::SeriesTable {
 public:
  SeriesTable() : slots_(std::make_unique<std::atomic<Series*>[]>(kSlots)) {}

  Series& find(const SeriesKey& k) {
    const auto h = hash(k);
    for (std::size_t i = 0; i < kSlots; ++i) {
      auto* s = slots_[(h + i) & (kSlots - 1)].load(std::memory_order_acquire);
      if (!s) break;
      if (same(s->key, k)) return *s;
    }
    if (full_.load(std::memory_order_acquire)) return *overflow_;
    return create(k, h);
  }

  std::vector<const Series*> all() const {
    std::vector<const Series*> out;
    std::lock_guard lock(mutex_);
    for (const auto& s : owned_) out.push_back(s.get());
    return out;
  }

 private:
  static constexpr std::size_t kSlots = 4096;
  static constexpr std::size_t kLimit = 2000;  // the SDK's default cardinality limit, overflow set included

  Series& create(const SeriesKey& k, std::uint64_t h) {
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < kSlots; ++i) {
      auto& slot = slots_[(h + i) & (kSlots - 1)];
      auto* s = slot.load(std::memory_order_relaxed);
      if (s && same(s->key, k)) return *s;
      if (s) continue;
      if (owned_.size() + 1 >= kLimit) break;  // room is left for the overflow set only
      owned_.push_back(std::make_unique<Series>(k, false));
      slot.store(owned_.back().get(), std::memory_order_release);
      return *owned_.back();
    }
    if (!overflow_) {
      owned_.push_back(std::make_unique<Series>(SeriesKey{}, true));
      overflow_ = owned_.back().get();
    }
    full_.store(true, std::memory_order_release);
    return *overflow_;
  }

  std::unique_ptr<std::atomic<Series*>[]> slots_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Series>> owned_;
  Series* overflow_ = nullptr;  // set before full_ is
  std::atomic<bool> full_{false};
};

std::string_view knative_route_tag(std::string_view tag, std::string_view default_route) {
  if (tag.empty()) return default_route.empty() ? "kn:disabled" : "kn:default";
  if (default_route == "true") return "kn:undefined";
  return tag;
}

HttpMetrics::HttpMetrics(std::uint16_t app_port)
    : server_(std::make_unique<SeriesTable>()),
      client_(std::make_unique<SeriesTable>()),
      app_port_(std::to_string(app_port)) {}

HttpMetrics::~HttpMetrics() = default;

void HttpMetrics::record_server(const HttpServerSample& s) {
  SeriesKey k{.method = method_index(s.method), .version = s.version, .tls = s.tls, .status = s.status,
              .route_tag = s.route_tag};
  split_host_port(s.host, k.host, k.port);
  if (k.port == (s.tls ? 443 : 80) || k.port == 0) k.port = -1;  // otelhttp's requiredHTTPPort
  auto& series = server_->find(k);
  series.duration.observe(s.seconds);
  series.request_bytes.observe(static_cast<double>(s.request_body_bytes));
  series.response_bytes.observe(static_cast<double>(s.response_body_bytes));
}

void HttpMetrics::record_client(const HttpClientSample& s) {
  SeriesKey k{.method = method_index(s.method), .version = s.version, .error = s.status ? AppError::none : s.error,
              .status = s.status, .route_tag = s.route_tag};
  if (!s.status && k.error == AppError::none) k.error = AppError::other;
  auto& series = client_->find(k);
  series.duration.observe(s.seconds);
  series.request_bytes.observe(static_cast<double>(s.request_body_bytes));
}

namespace {

// A series' labels, sorted by name as Go's exposition writes them.
struct SeriesLabels {
  std::vector<Label> labels;
  std::string status, port;
  std::string sort_key;
};

void label_series(const Series& s, bool client, std::string_view app_port, SeriesLabels& out) {
  auto& l = out.labels;
  if (s.overflow) {
    l = {{"otel_metric_overflow", "true"}, {"otel_scope_name", kHttpScopeName}, {"otel_scope_schema_url", ""},
         {"otel_scope_version", kScopeVersion}};
  } else {
    const auto& k = s.key;
    if (k.error != AppError::none) l.emplace_back("error_type", kErrors[static_cast<std::size_t>(k.error)]);
    l.emplace_back("http_request_method", kMethods[k.method]);
    if (k.status > 0) {
      out.status = std::to_string(k.status);
      l.emplace_back("http_response_status_code", out.status);
    }
    l.emplace_back("kn_route_tag", k.route_tag);
    l.emplace_back("network_protocol_name", "http");
    l.emplace_back("network_protocol_version", kVersions[static_cast<std::size_t>(k.version)]);
    l.emplace_back("otel_scope_name", kHttpScopeName);
    l.emplace_back("otel_scope_schema_url", "");
    l.emplace_back("otel_scope_version", kScopeVersion);
    if (client) {
      l.emplace_back("server_address", "127.0.0.1");
      l.emplace_back("server_port", app_port);
      l.emplace_back("url_scheme", "http");
    } else {
      l.emplace_back("server_address", k.host);
      if (k.port > 0) {
        out.port = std::to_string(k.port);
        l.emplace_back("server_port", out.port);
      }
      l.emplace_back("url_scheme", k.tls ? "https" : "http");
    }
  }
  for (const auto& [name, value] : l) {
    out.sort_key.append(name);
    out.sort_key += '\x01';
    out.sort_key.append(value);
    out.sort_key += '\x02';
  }
}

using Histogram = AtomicHistogram Series::*;

void write_families(std::string& out, const std::vector<const Series*>& all, bool client, std::string_view app_port,
                    std::initializer_list<std::pair<Histogram, std::array<std::string_view, 2>>> families) {
  if (all.empty()) return;
  std::vector<SeriesLabels> labels(all.size());
  std::vector<std::size_t> order(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    label_series(*all[i], client, app_port, labels[i]);
    order[i] = i;
  }
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return labels[a].sort_key < labels[b].sort_key; });
  for (const auto& [member, text] : families) {
    write_family(out, text[0], text[1], "histogram");
    for (auto i : order) {
      const auto& h = all[i]->*member;
      auto snap = h.snapshot();
      write_histogram(out, text[0], labels[i].labels, h.bounds(), snap.counts, snap.sum);
    }
  }
}

}  // namespace

void HttpMetrics::write(std::string& out) const {
  write_families(out, client_->all(), true, app_port_,
                 {{&Series::request_bytes, {"http_client_request_body_size_bytes", "Size of HTTP client request bodies."}},
                  {&Series::duration, {"http_client_request_duration_seconds", "Duration of HTTP client requests."}}});
  write_families(out, server_->all(), false, app_port_,
                 {{&Series::request_bytes, {"http_server_request_body_size_bytes", "Size of HTTP server request bodies."}},
                  {&Series::duration, {"http_server_request_duration_seconds", "Duration of HTTP server requests."}},
                  {&Series::response_bytes,
                   {"http_server_response_body_size_bytes", "Size of HTTP server response bodies."}}});
}

}  // namespace sluice::metrics
