// A revision's gate: the gateway's part on the request path (Knative's activator throttler, in one
// process). It owns the revision's lock and, under it, its instances' serving view (state, slots in use,
// frozen), the cold-start buffer (a WaitQueue), the request stats the autoscaler reads and the revision's
// request counters. A request takes a ready instance with a free slot at once, or waits in the buffer
// until one is handed to it, the revision moves on, or its deadline passes.
//
// The gate never starts, freezes, thaws or stops anything: it says what it needs through `Supervision`
// (each call only posts work elsewhere), and the supervisor changes an instance's state only through the
// gate's methods below. Workers run acquire and the release of a lease; the control thread runs the rest.
// Only this gate's lock is taken, for a few lines, and never while another gate's is held.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/wait_queue.h"
#include "metrics/request_stats.h"
#include "proxy/forward/instance_set.h"

namespace sluice::app::gateway {

namespace asio = boost::asio;
using Clock = proxy::Clock;
using proxy::error_code;
using proxy::tcp;
namespace http = proxy::http;

// Milliseconds from a to b, as the gateway logs and reports durations.
inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

enum class InstanceState { starting, ready, draining, stopped };
std::string_view to_string(InstanceState s);

// An instance as the gate serves it. `id`, `validation` and `created` are immutable; the rest is under
// its gate's lock (read a copy from Gate::view()).
struct Instance {
  std::string id;             // <service>-<n>
  std::uint16_t port = 0;
  asio::ip::address_v4 address = asio::ip::address_v4::loopback();  // its pod's, when it has one
  InstanceState state = InstanceState::starting;
  bool frozen = false;        // frozen, or a freeze is under way
  bool validation = false;    // started to prove the service can start
  std::size_t in_flight = 0;
  std::uint64_t requests = 0;
  int pid = 0;
  Clock::time_point created, ready_at;
  // Not frozen before this: thawed ahead by a connection before any request came, or idle since its last
  // exchange ended (GateSettings::freeze_delay later).
  Clock::time_point warm_until;
};

// What the gate asks of the part that supervises its instances. Called under the gate's lock, on a worker
// or the control thread: each only posts work and never calls into the gate before it returns.
class Supervision {
 public:
  virtual ~Supervision() = default;
  // A request waits and no instance is starting or ready.
  virtual void wanted() = 0;
  // Granted to a request while frozen (no longer marked frozen): thaw it, after any freeze asked before.
  virtual void thaw(const std::shared_ptr<Instance>& instance) = 0;
  // A ready instance's last exchange ended and idle instances are frozen here: freeze it if it stays idle.
  virtual void idle(const std::shared_ptr<Instance>& instance) = 0;
  // A draining instance's last exchange ended: it is stopped now (its process is still to be stopped).
  virtual void stopped(const std::shared_ptr<Instance>& instance) = 0;
  // The last buffered request left because its client went away, and nothing is in flight: starts that
  // only it asked for may be called off.
  virtual void unwanted() = 0;
};

struct GateSettings {
  std::string service, revision;
  std::size_t container_concurrency = 0;  // requests at once per instance; 0: no limit
  std::size_t buffer_size = 0;            // requests that may wait
  Clock::duration buffer_timeout{};       // how long one may wait
  std::optional<std::chrono::milliseconds> request_timeout;  // bounds the wait too, and goes with the lease
  bool h2c = false;                        // instances speak h2c
  bool throttling = false;                 // idle instances are frozen
  // How long an idle instance keeps its CPU before it is frozen (0: at once): what the app writes just
  // after its response still comes out, and back-to-back requests pay no freeze and thaw each.
  Clock::duration freeze_delay{};
};

// The gate's numbers and instances, copied under its lock (status, metrics, decisions on the control thread).
struct GateView {
  std::size_t active = 0;   // starting or ready
  std::size_t ready = 0;
  std::size_t in_flight = 0, queued = 0;
  bool throttling = false;
  std::string failed_reason;   // the last start failure, refused with until `retry_at`
  Clock::time_point retry_at;
  std::uint64_t requests_total = 0, refused = 0, client_gone = 0, cold_starts = 0;
  std::map<int, std::uint64_t> ended_by_status;  // every exchange taken or refused, by how it ended
  double last_cold_start_ms = -1;
  std::deque<std::pair<std::int64_t, double>> cold_start_log;  // (unix ms, duration ms); with history
  std::vector<double> latencies_ms;                            // with history
  std::vector<Instance> instances;  // every instance not yet removed
};

class Gate {
 public:
  static constexpr std::size_t kLatenciesKept = 1024;  // the last requests' arrival-to-end times
  static constexpr std::size_t kColdStartsKept = 50;

  // A waiter of a gate that has been replaced goes on to wait at the new one.
  struct Moved {
    Gate* to;
  };
  using Outcome = std::variant<proxy::InstanceLease, proxy::InstanceRefusal, Moved>;

  // What a lease holds: the instance's slot, released (under the gate's lock) when the exchange ends.
  class Hold {
   public:
    Hold(Gate& gate, std::shared_ptr<Instance> instance, Clock::time_point arrived, bool cold)
        : gate_(gate), instance_(std::move(instance)), arrived_(arrived), cold_(cold) {}
    ~Hold() { gate_.release(instance_, arrived_, status_); }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

    void ended(int status) { status_ = status; }  // counted when the hold is let go
    const GateSettings& settings() const { return gate_.settings(); }
    const std::string& instance_id() const { return instance_->id; }
    bool cold() const { return cold_; }  // it waited for an instance to start

   private:
    Gate& gate_;
    std::shared_ptr<Instance> instance_;
    Clock::time_point arrived_;
    bool cold_;
    int status_ = 0;
  };

  Gate(GateSettings settings, Supervision& supervision, std::function<Clock::time_point()> clock);
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  const GateSettings& settings() const { return settings_; }
  // Concurrency (in flight plus waiting) and arrivals: the autoscaler's input (thread-safe on its own).
  metrics::RequestStats& stats() { return stats_; }

  // ---- The request path (workers).
  // The request counts in the stats from here until its lease is released, it is refused, or it moves on
  // (`arrival`: first at this revision's service, counted in requests_total).
  asio::awaitable<Outcome> acquire(asio::any_io_executor ex, Clock::time_point arrived, Clock::time_point deadline,
                                   bool arrival, net::WaitAbandon* abandon);
  // A new connection, before its request: a frozen idle instance is thawed ahead, kept so until `until`.
  void prewarm(Clock::time_point until);
  // Shutdown: waiters are let go (their exchanges end with the proxy).
  void clear_waiters();

  // ---- The supervisor's side (control thread).
  void add(std::shared_ptr<Instance> instance);  // starting
  void remove(const std::shared_ptr<Instance>& instance);
  InstanceState state(const Instance& instance) const;
  void set_address(Instance& instance, const asio::ip::address_v4& address);
  // Its process runs now; false when it was stopped meanwhile (its process is then still to be stopped).
  bool started(Instance& instance, std::uint16_t port, int pid);
  // Starting → ready: waiters get it, a cold start is recorded, the last start failure forgotten. With
  // `stop_if_idle` (a validation instance of a revision that scales to zero) it is stopped at once when
  // no request took it, before any other can (its process then to be stopped).
  enum class Readied { no, busy, idle, stopped };  // no: it was not starting
  Readied became_ready(const std::shared_ptr<Instance>& instance, Clock::time_point now, bool stop_if_idle = false);
  // Starting → stopped, because it failed: until `retry_at` requests are refused with `reason` while no
  // other instance is starting or ready, and the waiting ones are refused now. False: it was stopped already.
  bool start_failed(Instance& instance, const std::string& reason, Clock::time_point retry_at);
  enum class Drained { no, draining, stopped };
  // Ready or starting → draining, or → stopped when nothing is in flight (its process then to be stopped).
  Drained drain(Instance& instance);
  // The idlest ready instances (least in flight, newest first), `n` of them, drained as drain() does.
  std::vector<std::pair<std::shared_ptr<Instance>, Drained>> drain_idlest(std::size_t n);
  // → stopped; false when it was stopped already.
  bool stop(Instance& instance);
  // Starting instances nothing waits for any more (no request waiting or in flight), validation ones
  // excepted: stopped and returned (their processes to be stopped).
  std::vector<std::shared_ptr<Instance>> call_off_starts();
  // Frozen when ready, idle, not frozen and not pre-warmed: `freeze` is called under the lock, so that a
  // thaw asked for later comes after it. False when it was not.
  bool freeze_if_idle(Instance& instance, Clock::time_point now, const std::function<void()>& freeze);
  // The freeze failed: the instance runs on, and no instance of this gate is frozen from now on.
  void freeze_failed(Instance& instance);
  // Idle instances whose warm_until has passed (pre-warmed ones no request came to, idle ones past the
  // freeze delay): to freeze.
  std::vector<std::shared_ptr<Instance>> warm_expired(Clock::time_point now);
  // The revision was replaced: waiters and new requests go to `successor`.
  void move_to(Gate& successor);
  // The revision was removed: waiters and new requests are refused with `reason`.
  void close(std::string reason);
  // A retired revision that traffic names again: it takes requests once more.
  void reopen();
  // What a start is waiting on ("app-1 runs, but nothing listens on PORT 41234"), told to requests that
  // time out waiting for it; cleared once an instance is ready.
  void note_start_waits(std::string what);

  // `history`: with the latencies and cold starts kept (for status and the dashboard).
  GateView view(bool history = false) const;
  std::vector<std::shared_ptr<Instance>> instances() const;

 private:
  using Handed = std::variant<std::shared_ptr<Instance>, proxy::InstanceRefusal, Moved>;

  void release(const std::shared_ptr<Instance>& instance, Clock::time_point arrived, int status);
  // Under mu_.
  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  std::size_t active() const;
  bool none_ready() const;
  std::shared_ptr<Instance> pick() const;
  void grant(const std::shared_ptr<Instance>& instance);
  void dispatch();
  proxy::InstanceRefusal refuse(proxy::InstanceRefusal r);
  proxy::InstanceRefusal abandoned(Clock::time_point arrived);
  Drained drain_locked(Instance& instance);
  void note_ready(Instance& instance, Clock::time_point now);

  const GateSettings settings_;
  Supervision& supervision_;
  const std::function<Clock::time_point()> clock_;
  metrics::RequestStats stats_;

  mutable std::mutex mu_;
  // Under mu_.
  enum class Admits { requests, moved, closed } admits_ = Admits::requests;
  Gate* successor_ = nullptr;
  std::string closed_reason_;
  std::string start_waits_;  // note_start_waits
  std::atomic<bool> throttling_;  // read without the lock by prewarm()
  std::vector<std::shared_ptr<Instance>> instances_;
  net::WaitQueue<Handed> waiters_;
  std::size_t in_flight_ = 0;  // at an instance, over all instances
  std::string failed_reason_;
  Clock::time_point retry_at_;
  std::optional<Clock::time_point> cold_start_since_;  // no instance was ready when this began
  std::size_t cold_start_buffered_ = 0;
  std::uint64_t requests_total_ = 0, refused_ = 0, client_gone_ = 0, cold_starts_ = 0;
  std::map<int, std::uint64_t> ended_by_status_;
  double last_cold_start_ms_ = -1;
  std::deque<std::pair<std::int64_t, double>> cold_start_log_;
  std::vector<double> latencies_ms_;  // a ring
  std::size_t latency_next_ = 0;
};

}  // namespace sluice::app::gateway
