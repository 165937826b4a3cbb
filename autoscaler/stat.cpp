// Per-pod stat merging and scrape sample sizes, as Knative's stats scraper does them.
#include "autoscaler/stat.h"

#include <cmath>

namespace sluice::autoscaler {

Stat merge_pod_stats(std::span<const Stat> sampled, std::size_t ready_pods) {
  Stat sum;
  if (sampled.empty()) return sum;
  for (const Stat& s : sampled) {
    sum.average_concurrent_requests += s.average_concurrent_requests;
    sum.average_proxied_concurrent_requests += s.average_proxied_concurrent_requests;
    sum.request_count += s.request_count;
    sum.proxied_request_count += s.proxied_request_count;
  }
  const double n = static_cast<double>(sampled.size());
  const double total = static_cast<double>(ready_pods);
  sum.average_concurrent_requests = sum.average_concurrent_requests / n * total;
  sum.average_proxied_concurrent_requests = sum.average_proxied_concurrent_requests / n * total;
  sum.request_count = sum.request_count / n * total;
  sum.proxied_request_count = sum.proxied_request_count / n * total;
  return sum;
}

std::size_t scrape_sample_size(std::size_t ready_pods) {
  if (ready_pods <= 3) return ready_pods;
  // X = z² σ² / MOE² with z = 1.96, σ² = 100, MOE = 5; n = N·X / (N + X − 1).
  constexpr double x = 1.96 * 1.96 * 100.0 / (5.0 * 5.0);
  const double n = static_cast<double>(ready_pods);
  return static_cast<std::size_t>(std::ceil(n * x / (n + x - 1)));
}

}  // namespace sluice::autoscaler
