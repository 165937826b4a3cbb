// One revision of a gateway service and its instances: the state the router, the cold-start buffer, the
// instance lifecycle and the scaling loop share.
//
// Ownership (no global lock): each Revision has its own mutex, `mu`, which guards everything marked
// "under mu" below, its instances' fields included. A worker takes it for the few lines that pick an
// instance or join the buffer, never while calling the runtime. Fields marked "control" belong to the
// control thread (the lifecycle's and the scaling loop's executor) and are touched nowhere else. One
// revision's lock is never held while another's is taken.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "app/gateway/config.h"
#include "autoscaler/kpa.h"
#include "autoscaler/revision_scaler.h"
#include "common/wait_queue.h"
#include "metrics/request_stats.h"
#include "proxy/forward/instance_set.h"

namespace sluice::app::gateway {

namespace asio = boost::asio;
using Clock = proxy::Clock;

// Milliseconds from a to b, as the gateway logs and reports durations.
inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
using proxy::error_code;
using proxy::tcp;
namespace http = proxy::http;

enum class InstanceState { starting, ready, draining, stopped };
std::string_view to_string(InstanceState s);

// Fields under its revision's mu, unless said otherwise.
struct Instance {
  std::string id;             // <service>-<n>; immutable
  std::uint16_t port = 0;
  asio::ip::address_v4 address = asio::ip::address_v4::loopback();  // its pod's, when it has one
  InstanceState state = InstanceState::starting;
  bool frozen = false;        // frozen, or a freeze is under way
  bool validation = false;    // started at start-up to prove the service can start; immutable
  std::size_t in_flight = 0;
  std::uint64_t requests = 0;
  int pid = 0;
  Clock::time_point created, ready_at;
  Clock::time_point prewarm_until;  // thawed by a connection, before any request came
};

// Revisions of a service: `serving` takes its requests, `validating` proves a new config can start,
// `retired` drains, `failed` never served.
enum class Phase { validating, serving, retired, failed };
std::string_view to_string(Phase p);

struct Revision;
// A waiter of a revision that has just been replaced: it goes on to wait at the new revision.
struct Moved {
  Revision* to;
};
// What a buffered request is handed: an instance (a slot on it already counted), a refusal, or a move.
using Handed = std::variant<std::shared_ptr<Instance>, proxy::InstanceRefusal, Moved>;

struct Revision {
  static constexpr std::size_t kLatenciesKept = 1024;

  explicit Revision(Clock::time_point now) : stats(now) {}

  // Set at creation on the control thread, before any other thread sees the revision.
  ServiceConfig config;  // `traffic` changes on the control thread only; the rest is immutable
  std::string revision;  // <name>-00001, K_REVISION
  int generation = 1;
  bool scale_to_zero = true;
  bool h2c = false;  // instances speak h2c
  std::shared_ptr<std::atomic<int>> instance_numbers;  // shared by a service's revisions: app-1, app-2, ...
  std::atomic<bool> throttling{false};  // cleared for good when a freeze fails

  mutable std::mutex mu;
  // Under mu.
  Phase phase = Phase::serving;
  std::string reason;          // why this revision was made, or why it failed
  Revision* successor = nullptr;  // retired: where its waiters went
  std::vector<std::shared_ptr<Instance>> instances;
  net::WaitQueue<Handed> waiters;
  std::size_t in_flight = 0;   // at an instance, over all instances
  std::string failed_reason;   // the last start failure; requests get 503 with it until a retry
  Clock::time_point retry_at;
  int failures = 0;            // consecutive start failures, for the retry back-off
  int crash_streak = 0;        // crashes soon after becoming ready, for the restart back-off
  std::optional<Clock::time_point> cold_start_since;  // no instance was ready when this began
  std::size_t cold_start_buffered = 0;
  std::uint64_t requests_total = 0, cold_starts = 0, crashes = 0, refused = 0;
  std::uint64_t client_gone = 0;  // left the buffer because their client went away (499)
  std::map<int, std::uint64_t> ended_by_status;  // every exchange it took or refused, by the status it ended with
  double last_cold_start_ms = -1;
  std::deque<std::pair<std::int64_t, double>> cold_start_log;  // (unix ms, duration ms), the last 50
  std::vector<double> latencies_ms;  // the last kLatenciesKept requests, arrival to end (a ring)
  std::size_t latency_next = 0;
  bool validated = false;  // an instance has become ready at least once
  // Concurrency (in flight plus waiting) and arrivals, written under mu, read by the scaling loop.
  metrics::RequestStats stats;

  // Control.
  int percent = 0;                // share of the service's requests (serving)
  std::vector<std::string> tags;  // Knative-Serving-Tag values and <tag>-<service>.localhost hosts
  // The revision's autoscaling loop (autoscaler/revision_scaler.h): fed by this revision's stats, applied
  // through the fleet's supervision of its instances. The scaler refers to the other two: it goes first.
  std::unique_ptr<autoscaler::StatsSource> stats_source;
  std::unique_ptr<autoscaler::ScaleTarget> scale_target;
  std::unique_ptr<autoscaler::RevisionScaler> scaler;

  // Under mu.
  std::size_t active() const;  // starting or ready
  bool none_ready() const;
  std::shared_ptr<Instance> pick() const;  // a ready instance with a free slot, least loaded first
  std::shared_ptr<Instance> find(const std::string& id) const;
};

}  // namespace sluice::app::gateway
