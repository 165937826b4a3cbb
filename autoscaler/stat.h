// One stat as the KPA consumes it (the fields of Knative's Stat it uses), and how per-pod stats are merged.
#pragma once

#include <cstddef>
#include <span>

namespace sluice::autoscaler {

// Averages over the last scrape period (1 s). "Proxied" means it came through the activator (the
// cold-start buffer), which reports that load itself, so the KPA subtracts it to count it once.
struct Stat {
  double average_concurrent_requests = 0;
  double average_proxied_concurrent_requests = 0;
  double request_count = 0;  // per second
  double proxied_request_count = 0;
};

// Knative's merge of a scrape: the sampled pods' stats are summed, then scaled from `sampled.size()` pods
// to `ready_pods`, assuming the unsampled pods carry similar load. An empty sample gives an empty stat.
Stat merge_pod_stats(std::span<const Stat> sampled, std::size_t ready_pods);

// How many of `ready_pods` to scrape each second: all of them up to 3, then a sample size for the
// population mean at 95 % confidence within ±5 (Knative's populationMeanSampleSize), e.g. 14 of 100.
std::size_t scrape_sample_size(std::size_t ready_pods);

}  // namespace sluice::autoscaler
