// The KPA of one ScaledObject and the loop that feeds it: each round resolves the sidecars' addresses,
// scrapes every sidecar at once (a coroutine each, with its own timeout, so a slow or dead one delays no
// other), merges the answers as Knative's scraper does, records them once a second, and decides every
// 2 s (at once when traffic reaches a revision at zero). The loop runs on the io_context's thread; the
// gRPC threads read the published decision and wait on it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "autoscaler/kpa.h"
#include "scaler/scaler_metrics.h"
#include "scaler/settings.h"
#include "scaler/stat_scrape.h"

namespace sluice::scaler {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct ScalerTiming {
  milliseconds scrape_timeout{800};
  // Rounds: every second like Knative's scraper; 4 per second while the KPA wants no pod, so the first
  // stat showing traffic (the sidecars publish one per second) is seen within 250 ms.
  milliseconds active_interval{1000};
  milliseconds inactive_interval{250};
  milliseconds resolve_budget{300};  // how long a round waits for DNS before using the last answer
  milliseconds decide_interval{2000};
  // A ScaledObject no RPC asked about for this long (and with no open stream) is forgotten.
  std::chrono::seconds forget_after{600};
};

// What the RPCs answer.
struct Published {
  bool decided = false;     // false until a first decision (no sidecar answered yet)
  std::int32_t desired = 0;
  bool active = false;      // desired > 0
  std::string why_undecided;
};

class RevisionScaler : public std::enable_shared_from_this<RevisionScaler> {
 public:
  RevisionScaler(asio::io_context& io, ScalerMetrics& metrics, RevisionLabels labels, ScaledObjectSettings settings,
                 ScalerTiming timing);
  ~RevisionScaler();

  // Any thread.
  void start();
  void stop();
  bool forgotten() const { return forgotten_; }
  bool stopped() const { return stopped_; }
  // New metadata: new addresses apply from the next round; changed autoscaling keys update the KPA in
  // place (resized windows keep their history).
  void update(ScaledObjectSettings settings);
  // The latest decision, waiting up to `wait` for the first one.
  Published wait_decision(milliseconds wait);
  // Waits up to `wait` for the activity to differ from `seen` (or for a first decision), returns the latest.
  Published wait_activity_change(std::optional<bool> seen, milliseconds wait);
  // Streams keep a ScaledObject remembered while open.
  void stream_opened();
  void stream_closed();

 private:
  struct Pod;
  struct Round;

  asio::awaitable<void> run();
  asio::awaitable<void> resolve(const std::shared_ptr<Round>& round);
  asio::awaitable<void> scrape(const std::shared_ptr<Round>& round);
  asio::awaitable<void> wait_round(const std::shared_ptr<Round>& round, Clock::time_point deadline);
  void finished(const std::shared_ptr<Round>& round);
  void feed(Clock::time_point now);
  void decide(Clock::time_point now, std::int32_t ready);
  void publish(const Published& p);
  bool at_zero() const;  // the last decision was zero pods

  asio::io_context& io_;
  ScalerMetrics& metrics_;
  const RevisionLabels labels_;
  const ScalerTiming timing_;
  asio::steady_timer timer_;   // between rounds
  asio::steady_timer wakeup_;  // within a round: fires when its operations are all done
  std::shared_ptr<Round> current_round_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> forgotten_{false};

  // Shared with the RPC threads.
  mutable std::mutex mu_;
  std::condition_variable changed_;
  ScaledObjectSettings settings_;
  std::uint64_t settings_generation_ = 0;
  Published published_;
  Clock::time_point last_used_;
  int streams_ = 0;

  // The loop's own (io thread).
  std::map<std::string, std::vector<tcp::endpoint>> resolved_;  // DNS name -> last answer
  std::map<std::string, bool> resolving_;                       // DNS name -> a lookup is under way
  std::map<std::string, std::shared_ptr<Pod>> pods_;            // "address:port" -> pod
  std::optional<autoscaler::Kpa> kpa_;
  std::uint64_t kpa_generation_ = 0;
  autoscaler::ScalingMetric metric_ = autoscaler::ScalingMetric::concurrency;
  std::int64_t recorded_bucket_ = -1;
  bool recorded_bucket_idle_ = true;  // what was recorded in that bucket shows no traffic
  Clock::time_point last_decision_{};
};

}  // namespace sluice::scaler
