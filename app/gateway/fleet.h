// The gateway's instances: which services exist, their revisions, which instances each has and in what
// state. The proxy asks it for an instance per request (proxy::InstanceSet). Its parts, one file each:
//   router.{h,cpp}           Host / tag / traffic split → revision (an immutable table, no lock)
//   gate.{h,cpp}             a revision's request path: ready instances' slots, the cold-start buffer,
//                            its request stats and counters, under the revision's own lock. It says when
//                            it wants an instance or has an idle one (Supervision) and never starts,
//                            freezes or stops one; unit-tested alone
//   fleet_requests.cpp       the InstanceSet: route, then the gate; the request line
//   instance_lifecycle.cpp   the supervisor: start, async readiness, freeze/thaw, drain, stop, crash and
//                            OOM, each through the gate's methods and the runtime
//   scaling_loop.cpp         the tickers, and each revision's gate stats and supervised instances as the
//                            StatsSource and ScaleTarget of its autoscaler::RevisionScaler
//                            (autoscaler/revision_scaler.h, its KPA between the two, unit-tested alone)
//   fleet_revisions.cpp      config changes and watched files → new revisions, validated, rolled over
//   fleet_status.cpp         /.sluice/status and /metrics
//
// Threads: workers run a gate's acquire and the release of its leases, and take only that gate's lock.
// The control thread (`control`) is the supervisor's and the scaling loop's executor: it owns the list of
// revisions, the routing table and the KPAs, and runs readiness probes as coroutines. Nothing that
// blocks runs there or on a worker: creating and starting an instance is posted to `spawner_`, freezing
// and thawing to `throttler_` (one thread each, so a freeze and the thaw after it keep their order), and
// stopping (which waits for the grace period) to a task thread of its own.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>

#include "app/gateway/config.h"
#include "app/gateway/pods.h"
#include "app/gateway/revision.h"
#include "app/gateway/router.h"
#include "proxy/forward/instance_set.h"
#include "runtime/image_store.h"
#include "runtime/runtime_service.h"

namespace sluice::app::gateway {

// Blocking work that may take long (stopping an instance: SIGTERM, grace, SIGKILL; a build) on threads
// of its own; the destructor waits for all of it.
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

class Fleet final : public proxy::InstanceSet {
 public:
  static constexpr std::size_t kLatenciesKept = Gate::kLatenciesKept;
  // `control` is the io_context of the control thread, where scaling and lifecycle decisions run.
  // `clock` (default: the steady clock) is what every decision reads the time from; tests inject one.
  Fleet(const GatewayConfig& config, runtime::RuntimeService& runtime, asio::io_context& control,
        std::function<Clock::time_point()> clock = {});
  ~Fleet() override;

  asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal>> acquire(
      std::string_view host, std::string_view tag, Clock::time_point deadline, net::WaitAbandon* abandon) override;
  void on_connection() override;
  void drop_waiters() override;
  // The request line (method, target, status, time, revision and instance, a cold start marked), when on.
  void exchange_ended(const http::request_header<>& req, const proxy::ExchangeRecord& record,
                      const proxy::InstanceLease* lease, Clock::time_point end) override;

  // On the control thread: validation instances, then the 1 s stat and 2 s KPA tickers.
  void start();
  // On the control thread: what the tickers run. The stat tick feeds each serving revision's
  // RequestStats period to its KPA; the scale tick applies each KPA's decision. Tests call them with
  // an injected clock instead of start()ing the tickers.
  void stat_tick();
  void scale_tick();
  // Off the control thread, after the proxy has drained: stops every instance (SIGTERM, grace, SIGKILL)
  // and waits for them.
  void stop_all();

  // From the runtime's callbacks (any thread): never blocks, never calls back into the runtime.
  void on_runtime_event(const runtime::Event& e);
  void on_output(const std::string& id, runtime::Stream stream, std::string_view line);

  // On a terminal, instance output as "app-1 │ line" instead of JSON lines.
  void set_plain_output(bool on) { plain_output_ = on; }
  void set_request_lines(bool on) { request_lines_ = on; }
  // Called (on the control thread, coalesced) after an instance starts, becomes ready, drains or is gone:
  // the terminal's table is drawn again at once instead of at its next poll.
  void on_instances_changed(std::function<void()> f) { instances_changed_ = std::move(f); }
  bool sandboxed() const { return pods_.enabled(); }

  // On the control thread.
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
  // The metadata server's port, for instances' GCE_METADATA_HOST; before start().
  void set_metadata_port(std::uint16_t port) { metadata_port_ = port; }
  // The instance a pod's address belongs to (the metadata server's caller); control thread.
  std::optional<std::string> instance_at(const asio::ip::address_v4& address) const;
  // On the control thread. Every running instance: id → pid, and what the metadata server tells it about itself.
  std::vector<std::pair<std::string, int>> instance_pids() const;
  std::optional<std::pair<std::string, std::string>> service_and_revision(const std::string& instance) const;
  // On the control thread: the services' current configs (what watchers watch).
  std::vector<ServiceConfig> service_configs() const;

 private:
  class Asks;  // a revision's Supervision: what its gate asks, posted to the control thread or the throttler

  void instances_changed();

  // Instance lifecycle (the supervisor).
  void attach_gate(Revision& s, GateSettings settings);  // control, at creation
  void want_instance(Revision& s);                    // control: the gate wants one
  void start_instance(Revision& s, bool validation);  // control
  void launch(Revision* s, std::shared_ptr<Instance> inst);  // spawner thread
  asio::awaitable<void> await_ready(Revision* s, std::shared_ptr<Instance> inst);  // control
  void became_ready(Revision& s, const std::shared_ptr<Instance>& inst);  // control
  void start_failed(Revision& s, const std::shared_ptr<Instance>& inst, const std::string& reason);  // control
  void drain_instance(Revision& s, const std::shared_ptr<Instance>& inst);  // control
  void drained(Revision& s, const std::shared_ptr<Instance>& inst, Gate::Drained how);  // control: said, and ended
  // Control: instances starting for requests that all went away, when nothing else wants one (no request
  // waiting or in flight, the autoscaler's last decision zero): stopped before they serve.
  void call_off_starts(Revision& s);
  void stop_instance(Revision& s, const std::shared_ptr<Instance>& inst);  // control
  // Any thread, once the gate has it stopped: pre-stop hook, SIGTERM, grace, SIGKILL, removal, on a task thread.
  void end_instance(Revision& s, const std::shared_ptr<Instance>& inst);
  void post_thaw(const std::string& id);  // under the instance's gate's lock
  void post_freeze(Revision& s, const std::shared_ptr<Instance>& inst);
  void freeze_if_idle(Revision& s, const std::shared_ptr<Instance>& inst);  // control
  void handle_exit(const runtime::InstanceStatus& st);                      // control
  void replace_later(Revision& s, Clock::duration delay);                   // control
  std::pair<Revision*, std::shared_ptr<Instance>> find(const std::string& id) const;

  // Scaling loop (control).
  asio::awaitable<void> every(asio::steady_timer& timer, Clock::duration period, void (Fleet::*tick)());
  void housekeeping();
  class Supervised;  // a revision's ScaleTarget
  // Gives `s` its RevisionScaler (a KPA with `config`), fed by its stats and applied through scale(), at
  // `scale` instances.
  void attach_scaler(Revision& s, const autoscaler::AutoscalerConfig& config, std::int32_t scale, Clock::time_point now);
  void scale(Revision& s, std::int32_t desired);  // control

  // Revisions (control).
  Revision* primary(const std::string& name);  // the serving revision with the largest share
  void reindex();  // after any change of revisions' phases, shares or tags: a new routing table
  // Shares and tags from `traffic` (empty: all to `latest`); serving revisions left with neither retire,
  // their waiters going to `latest`.
  void assign_traffic(const std::string& name, const std::vector<TrafficTarget>& traffic, Revision& latest);
  Revision& add_revision(const ServiceConfig& sc, const GatewayConfig& g, Phase phase, std::string reason);
  Revision* latest(const std::string& name);  // the newest revision not failed
  // Build (unless `built`), then a new revision that must become ready to get traffic.
  void roll(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason, bool built = false);
  void promote(Revision& next);
  void retire(Revision& old, Revision* successor);
  bool image_spec(const Revision* s, runtime::InstanceSpec& spec, std::string& error);  // spawner thread
  void run_build(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason);  // task thread
  template <class Fn>
  void for_each_revision(Fn&& fn) const;  // any thread

  Clock::time_point clock_now() const { return clock_ ? clock_() : Clock::now(); }

  const GatewayConfig& config_;
  runtime::RuntimeService& runtime_;
  std::function<Clock::time_point()> clock_;
  InstancePods pods_;
  runtime::ImageStore images_;  // used on the spawner thread: an image is unpacked before its first start
  // Spawner thread only: a revision's image, resolved once (a rebuilt image is a new revision's).
  struct ResolvedImage {
    std::optional<runtime::Image> image;
    std::string error;
  };
  std::unordered_map<const Revision*, ResolvedImage> revision_images_;
  asio::io_context& control_;
  Router router_;
  asio::steady_timer stat_timer_, scale_timer_, housekeeping_timer_;
  // Every revision ever made; only the control thread adds (under list_mu_) and reads it without the
  // lock. Revisions live as long as the fleet: the routing table and leases point at them.
  std::vector<std::unique_ptr<Revision>> services_;
  mutable std::mutex list_mu_;
  std::map<std::string, std::shared_ptr<std::atomic<int>>> instance_numbers_;  // control: per service name
  std::map<std::string, int> generations_;          // control: per service name, the last revision's number
  std::shared_ptr<GatewayConfig> current_;          // control: the last config applied
  struct Build {
    bool running = false;
    Clock::time_point started, finished;
  };
  std::map<std::string, Build> builds_;             // per service name, under builds_mu_
  std::mutex builds_mu_;
  std::string default_name_;  // control: the service requests with an unknown Host go to
  // Every instance not yet removed, by id, and the last lines each printed (for crash reports).
  struct Registered {
    Revision* revision;
    std::shared_ptr<Instance> instance;
    std::deque<std::string> last_output;
  };
  mutable std::mutex registry_mu_;
  std::unordered_map<std::string, Registered> registry_;
  std::atomic<bool> stopping_{false};
  bool plain_output_ = false;
  bool request_lines_ = true;
  std::function<void()> instances_changed_;
  std::atomic<bool> change_posted_{false};
  std::uint16_t metadata_port_ = 0;
  Tasks tasks_;
  // Instances are forked here: a thread that lives as long as the fleet, so that they die with it
  // (InstanceSpec::die_with_starter) even when the gateway is killed outright.
  asio::thread_pool spawner_{1};
  // Freezes and thaws, in the order they were asked for.
  asio::thread_pool throttler_{1};
};

}  // namespace sluice::app::gateway
