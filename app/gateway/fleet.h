// The gateway's instances: which services exist, their revisions, which instances each has and in what
// state. The proxy asks it for an instance per request (proxy::InstanceSet). The Fleet is the revision
// set and holds the parts, one file each:
//   router.{h,cpp}           Host / tag / traffic split → revision (an immutable table, no lock)
//   gate.{h,cpp}             a revision's request path: ready instances' slots, the cold-start buffer,
//                            its request stats and counters, under the revision's own lock. It says when
//                            it wants an instance or has an idle one (Supervision) and never starts,
//                            freezes or stops one; unit-tested alone
//   supervisor.{h,cpp}       instances' lives through runtime/: start, readiness, freeze/thaw, drain,
//                            stop, crash and OOM; the autoscaler's decision applied; unit-tested alone
//   scaling_loop.cpp         the tickers, and each revision's gate stats and supervised instances as the
//                            StatsSource and ScaleTarget of its autoscaler::RevisionScaler
//                            (autoscaler/revision_scaler.h, its KPA between the two, unit-tested alone)
//   fleet_requests.cpp       the InstanceSet: route, then the gate; the request line
//   fleet_revisions.cpp      the revision set: config changes and watched files → new revisions,
//                            validated, rolled over, traffic assigned, the routing table
//   fleet_status.cpp         /.sluice/status and /metrics
// The parts exchange data (a gate's view, a revision's settings) and calls through the interfaces above;
// none reaches into another's fields. Where the first design of the gateway said otherwise (docs/architecture.md, "The gateway"): the proxy's
// InstanceSet is the Fleet, which routes and then asks the revision's gate (a gate knows one revision);
// the supervisor's blocking work runs on its own spawner, throttler and task threads, not on the
// runtime's reactor; image resolution is runtime/'s (ImageStore, apply_image) but which image a revision
// runs, resolved once, and the fallback to its command are the supervisor's.
//
// Threads: workers run a gate's acquire and the release of its leases, and take only that gate's lock.
// The control thread (`control`) runs the revision set, the scaling loop and the supervisor's
// decisions: it owns the list of revisions, the routing table and the KPAs. Nothing that blocks runs
// there or on a worker (the supervisor's own threads do that).
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
#include "app/gateway/revision.h"
#include "app/gateway/router.h"
#include "app/gateway/supervisor.h"
#include "proxy/forward/instance_set.h"
#include "runtime/runtime_service.h"

namespace sluice::app::gateway {

class Fleet final : public proxy::InstanceSet, private RevisionEvents {
 public:
  static constexpr std::size_t kLatenciesKept = Gate::kLatenciesKept;
  // `control` is the io_context of the control thread, where scaling and lifecycle decisions run.
  // `clock` (default: the steady clock) is what every decision reads the time from; tests inject one.
  Fleet(const GatewayConfig& config, runtime::RuntimeService& runtime, asio::io_context& control,
        std::function<Clock::time_point()> clock = {});
  ~Fleet() override;

  asio::awaitable<std::variant<proxy::InstanceLease, proxy::InstanceRefusal>> acquire(
      std::string_view host, std::string_view tag, bool proxied, Clock::time_point deadline,
      net::WaitAbandon* abandon) override;
  void on_connection() override;
  void drop_waiters() override;
  // The request line (method, target, status, time, revision and instance, a cold start marked), when on.
  void exchange_ended(const http::request_header<>& req, const proxy::ExchangeRecord& record,
                      const proxy::InstanceLease* lease, Clock::time_point end) override;

  // On the control thread: validation instances, then the autoscaling ticker (each second).
  void start();
  // On the control thread: what the ticker runs. The stat tick feeds each serving revision's
  // RequestStats period to its KPA; the scale tick applies each KPA's decision. `tick` is one second:
  // the stats, then every other second the decisions, in that order (a decision sees every request up to
  // its moment). Tests call them with an injected clock instead of start()ing the ticker.
  void tick();
  void stat_tick();
  void scale_tick();
  // Off the control thread, after the proxy has drained: stops every instance (SIGTERM, grace, SIGKILL)
  // and waits for them.
  void stop_all();

  // From the runtime's callbacks (any thread): never blocks, never calls back into the runtime.
  void on_runtime_event(const runtime::Event& e) { supervisor_.on_runtime_event(e); }
  void on_output(const std::string& id, runtime::Stream stream, std::string_view line) {
    supervisor_.on_output(id, stream, line);
  }

  // On a terminal, instance output as "app-1 │ line" and request lines short, instead of JSON lines.
  void set_plain_output(bool on) {
    plain_output_ = on;
    supervisor_.set_plain_output(on);
  }
  void set_request_lines(bool on) { request_lines_ = on; }
  // Called (on the control thread, coalesced) after an instance starts, becomes ready, drains or is gone:
  // the terminal's table is drawn again at once instead of at its next poll.
  void on_instances_changed(std::function<void()> f) { supervisor_.on_instances_changed(std::move(f)); }
  bool sandboxed() const { return supervisor_.sandboxed(); }

  // On the control thread.
  boost::json::object status() const;
  std::string prometheus() const;
  // Any thread: the last requests, newest first (GET /.sluice/requests), and every instance's last output
  // lines, those of instances that ended lately too (GET /.sluice/logs).
  boost::json::array recent_requests() const { return recent_.json(); }
  boost::json::object instance_logs() const { return supervisor_.logs().json(); }

  // On the control thread: a re-read config. Each service whose settings changed rolls over to a new
  // revision (validated first: an instance must become ready; only then does traffic move and the old
  // revision drain); new services start, removed ones drain. Settings of the gateway itself (listen,
  // admin, workers, sandbox) need a restart and are reported as such.
  void apply(GatewayConfig next);
  // On the control thread: files a service watches changed; it rolls over (build first, when it has one).
  // Changes seen (`last`) while the service's build ran are the build's own output and are ignored.
  void files_changed(const std::string& service, const std::string& what, Clock::time_point last);
  // The metadata server's port, for instances' GCE_METADATA_HOST / GCE_METADATA_IP; before start().
  void set_metadata_port(std::uint16_t port) { supervisor_.set_metadata_port(port); }
  void set_gateway_listener(std::string address, std::uint16_t port) {
    supervisor_.set_gateway_listener(std::move(address), port);
  }
  // The instance a pod's address belongs to (the metadata server's caller); control thread.
  std::optional<std::string> instance_at(const asio::ip::address_v4& address) const;
  // On the control thread. Every running instance: id → pid, and what the metadata server tells it about itself.
  std::vector<std::pair<std::string, int>> instance_pids() const;
  std::optional<std::pair<std::string, std::string>> service_and_revision(const std::string& instance) const;
  // On the control thread: the services' current configs (what watchers watch).
  std::vector<ServiceConfig> service_configs() const;

 private:
  // RevisionEvents, from the supervisor (control).
  void validated(Revision& s) override { promote(s); }
  void failed(Revision& s, const std::string& reason) override;

  // Scaling loop (control).
  asio::awaitable<void> every(asio::steady_timer& timer, Clock::duration period, void (Fleet::*run)());
  void housekeeping();
  // Its period: how late past a freeze delay or a pre-warm an idle instance is frozen, at most.
  static constexpr auto kHousekeeping = std::chrono::milliseconds(100);
  class Supervised;  // a revision's ScaleTarget
  // Gives `s` its RevisionScaler (a KPA with `config`), fed by its gate's stats and applied by the supervisor, at
  // `scale` instances.
  void attach_scaler(Revision& s, const autoscaler::AutoscalerConfig& config, std::int32_t scale, Clock::time_point now);

  // Revisions (control).
  Revision* primary(const std::string& name);  // the serving revision with the largest share
  void reindex();  // after any change of revisions' phases, shares or tags: a new routing table
  // Shares and tags from `traffic` (empty: all to `latest`); serving revisions left with neither retire,
  // their waiters going to `latest`.
  void assign_traffic(const std::string& name, const std::vector<TrafficTarget>& traffic, Revision& latest);
  Revision& add_revision(const ServiceConfig& sc, const GatewayConfig& g, Phase phase, std::string reason);
  Revision* latest(const std::string& name);  // the newest revision not failed, of the file's latest document
  Revision* named(const std::string& name, const std::string& revision);  // by its revision name, not failed
  void revive(Revision& s);  // a retired revision that traffic names again serves
  // Build (unless `built`), then a new revision that must become ready to get traffic.
  void roll(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason, bool built = false);
  void promote(Revision& next);
  void retire(Revision& old, Revision* successor);
  void run_build(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason);  // task thread
  template <class Fn>
  void for_each_revision(Fn&& fn) const;  // any thread

  Clock::time_point clock_now() const { return clock_ ? clock_() : Clock::now(); }

  const GatewayConfig& config_;
  std::function<Clock::time_point()> clock_;
  asio::io_context& control_;
  Router router_;
  asio::steady_timer scaling_timer_, housekeeping_timer_;
  std::uint64_t ticks_ = 0;  // control
  // Every revision ever made; only the control thread adds (under list_mu_) and reads it without the
  // lock. Revisions live as long as the fleet: the routing table, leases and the supervisor point at them.
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
  bool plain_output_ = false;
  bool request_lines_ = true;
  RecentRequests recent_;  // the dashboard's list of the last requests
  // Declared after the revisions it points at, so that it (and its threads) ends first.
  InstanceSupervisor supervisor_;
  Tasks builds_running_;
};

}  // namespace sluice::app::gateway
