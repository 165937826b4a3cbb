// The gateway's instances: which services exist, which instances each has and in what state, and the
// cold-start buffer in front of them. The proxy asks it for an instance per request (proxy::Backends);
// the control thread scales each service with its KPA and drives the runtime. One mutex guards the
// state; nothing that can block (starting, freezing, stopping an instance) runs while holding it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <variant>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include "app/gateway/config.h"
#include "app/gateway/pods.h"
#include "autoscaler/kpa.h"
#include "proxy/backends.h"
#include "proxy/wait_queue.h"
#include "runtime/runtime.h"

namespace sluice::app::gateway {

namespace asio = boost::asio;
using Clock = proxy::Clock;
using proxy::error_code;
using proxy::tcp;

enum class InstanceState { starting, ready, draining, stopped };
std::string_view to_string(InstanceState s);

struct Instance {
  std::string id;             // <service>-<n>
  std::uint16_t port = 0;
  asio::ip::address_v4 address = asio::ip::address_v4::loopback();  // its pod's, when it has one
  InstanceState state = InstanceState::starting;
  bool frozen = false;        // frozen, or a freeze is under way
  bool validation = false;    // started at start-up to prove the service can start
  std::size_t in_flight = 0;
  std::uint64_t requests = 0;
  int pid = 0;
  Clock::time_point created, ready_at;
  Clock::time_point prewarm_until;  // thawed by a connection, before any request came
  std::deque<std::string> last_output;  // the last lines it printed, for crash reports
};

// Blocking work (fork/exec and readiness polling, SIGTERM-grace-SIGKILL) on threads of its own; the
// destructor waits for all of it.
class Tasks {
 public:
  ~Tasks() { wait_all(); }
  void spawn(std::function<void()> fn);
  void wait_all();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t running_ = 0;
};

class Fleet final : public proxy::Backends {
 public:
  static constexpr std::size_t kLatenciesKept = 1024;
  // `control` is the io_context of the control thread, where scaling and lifecycle decisions run.
  Fleet(const GatewayConfig& config, runtime::Runtime& runtime, asio::io_context& control);
  ~Fleet() override;

  asio::awaitable<std::variant<proxy::BackendLease, proxy::BackendRefusal>> acquire(
      std::string_view host, std::string_view tag, Clock::time_point deadline) override;
  void on_connection() override;
  void drop_waiters() override;

  // On the control thread: validation instances, then the 1 s stat and 2 s KPA tickers.
  void start();
  // After the proxy has drained: stops every instance (SIGTERM, grace, SIGKILL) and waits for them.
  void stop_all();

  // From the runtime's callbacks (any thread): never blocks, never calls back into the runtime.
  void on_runtime_event(const runtime::Event& e);
  void on_output(const std::string& id, runtime::Stream stream, std::string_view line);

  // On a terminal, instance output as "app-1 │ line" instead of JSON lines.
  void set_plain_output(bool on) { plain_output_ = on; }
  bool sandboxed() const { return pods_.enabled(); }

  boost::json::object status() const;
  std::string prometheus() const;

  // On the control thread: a re-read config. Each service whose settings changed rolls over to a new
  // revision (validated first: an instance must become ready; only then does traffic move and the old
  // revision drain); new services start, removed ones drain. Settings of the gateway itself (listen,
  // admin, workers, sandbox) need a restart and are reported as such.
  void apply(GatewayConfig next);
  // On the control thread: files a service watches changed; it rolls over (build first, when it has one).
  // Changes seen (`last`) while the service's build ran are the build's own output and are ignored.
  void files_changed(const std::string& service, const std::string& what, Clock::time_point last);
  // GCE_METADATA_HOST / GCE_METADATA_IP for instances started from now on ("ADDRESS:PORT"); before start().
  void set_metadata_host(std::string host) { metadata_host_ = std::move(host); }
  // Every running instance: id → pid, and what the metadata server tells it about itself.
  std::vector<std::pair<std::string, int>> instance_pids() const;
  std::optional<std::pair<std::string, std::string>> service_and_revision(const std::string& instance) const;
  // The services' current configs (what watchers watch).
  std::vector<ServiceConfig> service_configs() const;

 private:
  // What a buffered request is handed: an instance (a slot on it already counted), or a refusal.
  struct Service;
  // A waiter of a revision that has just been replaced: it goes on to wait at the new revision.
  struct Moved {
    Service* to;
  };
  using Handed = std::variant<std::shared_ptr<Instance>, proxy::BackendRefusal, Moved>;
  // One Service per revision of a service: `serving` takes its requests, `validating` proves a new
  // config can start, `retired` drains, `failed` never served.
  enum class Phase { validating, serving, retired, failed };
  static std::string_view to_string(Phase p);
  struct Service {
    ServiceConfig config;
    std::string revision;  // <name>-00001, K_REVISION
    int generation = 1;
    Phase phase = Phase::serving;
    std::string reason;    // why this revision was made, or why it failed
    Service* successor = nullptr;  // retired: where its waiters went
    int percent = 0;                // share of the service's requests (serving)
    std::vector<std::string> tags;  // Knative-Serving-Tag values and <tag>-<service>.localhost hosts
    bool throttling = false, scale_to_zero = true;
    bool h2c = false;  // instances speak h2c
    std::vector<std::shared_ptr<Instance>> instances;
    proxy::WaitQueue<Handed> waiters;
    std::unique_ptr<autoscaler::Kpa> kpa;  // control thread only
    std::size_t in_flight = 0;             // over all instances
    // Concurrency (in flight + waiting) integrated over time, and arrivals, since the last stat.
    double concurrency_integral = 0;
    Clock::time_point integral_since, stat_since;
    std::uint64_t arrivals = 0;
    double last_rps = 0, last_concurrency = 0;
    std::int32_t desired = 0;
    autoscaler::Activity activity = autoscaler::Activity::activating;  // the KPA's, as last logged
    std::string failed_reason;  // the last start failure; requests get 503 with it until a retry
    Clock::time_point retry_at;
    int failures = 0;           // consecutive start failures, for the retry back-off
    int crash_streak = 0;       // crashes soon after becoming ready, for the restart back-off
    std::optional<Clock::time_point> cold_start_since;  // no instance was ready when this began
    std::size_t cold_start_buffered = 0;
    std::uint64_t requests_total = 0, cold_starts = 0, crashes = 0, refused = 0;
    double last_cold_start_ms = -1;
    std::deque<std::pair<std::int64_t, double>> cold_start_log;  // (unix ms, duration ms), the last 50
    std::vector<double> latencies_ms;  // the last kLatenciesKept requests, arrival to end (a ring)
    std::size_t latency_next = 0;
    bool validated = false;  // an instance has become ready at least once
  };
  class Hold;  // the lease's hold: releases the instance when the exchange ends

  Service* route(std::string_view host, std::string_view tag);  // under mu_
  Service* primary(const std::string& name);  // the serving revision with the largest share, under mu_
  void reindex();  // under mu_, after any change of revisions' phases, shares or tags
  // Under mu_: shares and tags from `traffic` (empty: all to `latest`); serving revisions left with
  // neither retire, their waiters going to `latest`.
  void assign_traffic(const std::string& name, const std::vector<TrafficTarget>& traffic, Service& latest);
  asio::awaitable<std::variant<proxy::BackendLease, proxy::BackendRefusal, Moved>> acquire_at(
      Service& s, const asio::any_io_executor& ex, Clock::time_point now, Clock::time_point deadline, bool arrival);
  std::shared_ptr<Instance> pick(Service& s) const;
  void grant(Service& s, Instance& inst, std::vector<std::string>& thaw);
  void account(Service& s, Clock::time_point now);
  void release(Service& s, const std::shared_ptr<Instance>& inst, Clock::time_point arrived);
  void dispatch(Service& s, std::vector<std::string>& thaw);
  void thaw_all(const std::vector<std::string>& ids);
  void start_instance(Service& s, bool validation);  // under mu_
  void launch(Service* s, std::shared_ptr<Instance> inst);
  void became_ready(Service& s, const std::shared_ptr<Instance>& inst);
  void start_failed(Service& s, const std::shared_ptr<Instance>& inst, const std::string& reason);
  void drain_instance(Service& s, const std::shared_ptr<Instance>& inst);  // under mu_
  void stop_instance(Service& s, const std::shared_ptr<Instance>& inst);   // under mu_
  void freeze_if_idle(Service& s, const std::shared_ptr<Instance>& inst);  // control thread
  void handle_exit(const runtime::InstanceStatus& st);                     // control thread
  void replace_later(Service& s, Clock::duration delay);                  // control thread
  asio::awaitable<void> every(asio::steady_timer& timer, Clock::duration period, void (Fleet::*tick)());
  void stat_tick();
  void scale_tick();
  void housekeeping();
  void decide(Service& s, Clock::time_point now);
  void scale(Service& s, std::int32_t desired);  // under mu_
  std::size_t active(const Service& s) const;    // starting or ready
  std::pair<Service*, std::shared_ptr<Instance>> find(const std::string& id);
  Service& add_revision(const ServiceConfig& sc, const GatewayConfig& g, Phase phase, std::string reason);  // under mu_
  Service* latest(const std::string& name);  // the newest revision not failed, under mu_
  // Control thread: build (unless `built`), then a new revision that must become ready to get traffic.
  void roll(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason, bool built = false);
  void promote(Service& next);                     // under mu_
  void retire(Service& old, Service* successor);   // under mu_
  void run_build(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason);  // task thread

  const GatewayConfig& config_;
  runtime::Runtime& runtime_;
  InstancePods pods_;
  asio::io_context& control_;
  asio::steady_timer stat_timer_, scale_timer_, housekeeping_timer_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Service>> services_;  // every revision; only the control thread adds
  std::map<std::string, int> instance_numbers_;     // per service name: app-1, app-2, ...
  std::map<std::string, int> generations_;          // per service name: the last revision's number
  std::shared_ptr<GatewayConfig> current_;          // the last config applied (control thread)
  struct Build {
    bool running = false;
    Clock::time_point started, finished;
  };
  std::map<std::string, Build> builds_;             // per service name
  std::string default_name_;  // the service requests with an unknown Host go to
  // What route() reads (under mu_), rebuilt by reindex() when revisions change, never per request.
  std::unordered_map<std::string, std::string> host_index_;               // host → service
  std::unordered_map<std::string, Service*> tag_host_index_;              // <tag>-<service>.localhost
  std::unordered_map<std::string, std::vector<Service*>> serving_index_;  // service → serving revisions
  std::atomic<bool> stopping_{false};
  bool plain_output_ = false;
  std::string metadata_host_;
  Tasks tasks_;
  // Instances are forked here: a thread that lives as long as the fleet, so that they die with it
  // (InstanceSpec::die_with_starter) even when the gateway is killed outright.
  asio::thread_pool spawner_{1};
};

}  // namespace sluice::app::gateway
