// One scrape of one sidecar's Stat: `GET /metrics` with `Accept: application/protobuf` on its :9090, as
// Knative's autoscaler does it. A fresh connection each time, bounded by a timeout; failures are values.
#pragma once

#include <chrono>
#include <string>

#include "autoscaler/stat.h"
#include "common/net.h"

namespace sluice::scaler {

namespace asio = net::asio;
using net::tcp;

struct ScrapeResult {
  bool ok = false;
  // On failure: a short reason for the metric label (connect, timeout, read, status, content-type,
  // decode) and a human detail for the log.
  std::string reason;
  std::string detail;
  autoscaler::Stat stat;
  std::string pod_name;
  double process_uptime = 0;
};

// The response body is Knative's `Stat`; at most `kMaxStatBytes` of it are read (queue-proxy's is ~100).
inline constexpr std::size_t kMaxStatBytes = 4096;

asio::awaitable<ScrapeResult> scrape_stat(tcp::endpoint endpoint, std::chrono::milliseconds timeout);

}  // namespace sluice::scaler
