// The instance supervisor: every instance's life through runtime/. Start (on the spawner thread: the
// image resolved, the pod made, the container created and started), readiness (an async probe on the
// control thread: Asio sockets and timers, no thread and no tight polling), freeze and thaw (on the
// throttler thread), drain, stop (on a task thread: preStop, SIGTERM, grace, SIGKILL), crash and OOM with
// their back-off, and the autoscaler's decision applied. It answers its revisions' gates (Supervision:
// a start wanted, a thaw, an idle instance to freeze) and changes an instance's state only through the
// gate's methods; it tells the revision set (RevisionEvents) when a validating revision proved itself or
// failed. Decisions run on the control thread; nothing here blocks it or a worker.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "app/gateway/config.h"
#include "app/gateway/pods.h"
#include "app/gateway/recent.h"
#include "app/gateway/revision.h"
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

// What the supervisor tells the revision set, on the control thread.
class RevisionEvents {
 public:
  virtual ~RevisionEvents() = default;
  // An instance of a validating revision became ready: the revision may take traffic.
  virtual void validated(Revision& revision) = 0;
  // An instance of a validating revision failed to start: the revision never serves (nothing is retried).
  virtual void failed(Revision& revision, const std::string& reason) = 0;
};

class InstanceSupervisor {
 public:
  InstanceSupervisor(const GatewayConfig& config, runtime::RuntimeService& runtime, asio::io_context& control,
                     RevisionEvents& events, std::function<Clock::time_point()> clock);
  // Shutdown: what is posted finds stopping() set; the spawner and throttler threads and every task end.
  ~InstanceSupervisor();
  InstanceSupervisor(const InstanceSupervisor&) = delete;
  InstanceSupervisor& operator=(const InstanceSupervisor&) = delete;

  // Control thread unless said otherwise.
  // A new revision's gate, whose asks come here.
  void attach_gate(Revision& s, GateSettings settings);
  // A new instance of `s` (`validation`: it proves the service can start and may be drained once ready).
  void start(Revision& s, bool validation);
  // The autoscaler's decision: instances started, or the idlest drained. Waiting requests count as one.
  void scale(Revision& s, std::int32_t desired);
  void drain(Revision& s, const std::shared_ptr<Instance>& inst);
  void stop(Revision& s, const std::shared_ptr<Instance>& inst);
  // Idle instances past their warm_until (thawed ahead by a connection no request came on, or idle for
  // the revision's freeze delay): frozen.
  void refreeze(Revision& s, Clock::time_point now);

  // Any thread. From now on nothing starts; stop() every instance, then wait_stopped().
  void stopping() { stopping_ = true; }
  bool is_stopping() const { return stopping_; }
  // Off the control thread: every start posted has run (and stopped what it made), every stop has ended.
  void wait_stopped();

  // From the runtime's callbacks (any thread): never blocks, never calls back into the runtime.
  void on_runtime_event(const runtime::Event& e);
  void on_output(const std::string& id, runtime::Stream stream, std::string_view line);

  // Before start(): on a terminal, instance output as "app-1 │ line" instead of JSON lines; the
  // metadata server's port, for instances' GCE_METADATA_HOST; a call (on the control thread, coalesced)
  // after an instance starts, becomes ready, drains or is gone.
  void set_plain_output(bool on) { plain_output_ = on; }
  const InstanceLogs& logs() const { return logs_; }
  void set_metadata_port(std::uint16_t port) { metadata_port_ = port; }
  // Before start(): where the gateway listens, for instances' http_proxy (services called by name).
  void set_gateway_listener(std::string address, std::uint16_t port) {
    gateway_address_ = std::move(address);
    gateway_port_ = port;
  }
  void on_instances_changed(std::function<void()> f) { instances_changed_ = std::move(f); }
  bool sandboxed() const { return pods_.enabled(); }
  runtime::ThrottleKind throttle_kind() const { return runtime_.throttle().kind; }
  // Any thread: the instance with `id` and its revision, while it is not removed.
  std::pair<Revision*, std::shared_ptr<Instance>> find(const std::string& id) const;

 private:
  class Asks;  // a revision's Supervision: what its gate asks, posted here or to the throttler

  Clock::time_point now() const { return clock_ ? clock_() : Clock::now(); }
  void instances_changed();
  void want(Revision& s);
  void launch(Revision* s, std::shared_ptr<Instance> inst);  // spawner thread
  bool image_spec(const Revision* s, runtime::InstanceSpec& spec, std::string& error);  // spawner thread
  // http_proxy and no_proxy for an instance that sees the host at `host_seen_from_instance`.
  void proxy_env(const std::string& host_seen_from_instance, std::map<std::string, std::string>& env) const;
  asio::awaitable<void> await_ready(Revision* s, std::shared_ptr<Instance> inst);
  void became_ready(Revision& s, const std::shared_ptr<Instance>& inst);
  void start_failed(Revision& s, const std::shared_ptr<Instance>& inst, const std::string& reason);
  void drained(Revision& s, const std::shared_ptr<Instance>& inst, Gate::Drained how);
  // Instances starting for requests that all went away, when nothing else wants one (no request waiting
  // or in flight, the autoscaler's last decision zero): stopped before they serve.
  void call_off_starts(Revision& s);
  // Any thread, once the gate has it stopped: preStop, SIGTERM, grace, SIGKILL, removal, on a task thread.
  void end(Revision& s, const std::shared_ptr<Instance>& inst);
  void post_thaw(const std::string& id);  // under the instance's gate's lock
  void post_freeze(Revision& s, const std::shared_ptr<Instance>& inst);
  void freeze_if_idle(Revision& s, const std::shared_ptr<Instance>& inst);
  void handle_exit(const runtime::InstanceStatus& st);
  void replace_later(Revision& s, Clock::duration delay);

  const GatewayConfig& config_;
  runtime::RuntimeService& runtime_;
  asio::io_context& control_;
  RevisionEvents& events_;
  const std::function<Clock::time_point()> clock_;
  InstancePods pods_;
  runtime::ImageStore images_;  // used on the spawner thread: an image is unpacked before its first start
  // Spawner thread only: a revision's image, resolved once (a rebuilt image is a new revision's).
  struct ResolvedImage {
    std::optional<runtime::Image> image;
    std::string error;
  };
  std::unordered_map<const Revision*, ResolvedImage> revision_images_;
  // Every instance not yet removed, by id, and the last lines each printed (for crash reports).
  struct Registered {
    Revision* revision;
    std::shared_ptr<Instance> instance;
  };
  InstanceLogs logs_;  // every instance's last output lines, the dashboard's and a crash report's
  mutable std::mutex registry_mu_;
  std::unordered_map<std::string, Registered> registry_;
  std::atomic<bool> stopping_{false};
  bool plain_output_ = false;
  std::uint16_t metadata_port_ = 0;
  std::string gateway_address_;
  std::uint16_t gateway_port_ = 0;
  std::function<void()> instances_changed_;
  std::atomic<bool> change_posted_{false};
  Tasks tasks_;
  // Instances are forked here: a thread that lives as long as the supervisor, so that they die with it
  // (InstanceSpec::die_with_starter) even when the gateway is killed outright.
  asio::thread_pool spawner_{1};
  // Freezes and thaws, in the order they were asked for.
  asio::thread_pool throttler_{1};
};

}  // namespace sluice::app::gateway
