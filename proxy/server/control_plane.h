// sluice's control side in sidecar mode, on one thread of its own: the 1 s stat tick for the
// autoscaler (parked while idle), the :9090 stat endpoint, the :9091 user metrics, the :8022 admin endpoints, and the
// drain that SIGTERM or `/wait-for-drain` starts. Each port answers as queue-proxy's Go ServeMux for it does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/control_listener.h"
#include "metrics/autoscaler_stat.h"
#include "proxy/forward/shared_state.h"

namespace sluice::proxy {

using net::ControlListener;
using net::ControlRequest;
using net::ControlResponse;

struct ControlConfig {
  std::string listen_address = "0.0.0.0";
  net::Netns netns;  // where the ports listen: the pod's namespace when sluice runs outside it
  std::uint16_t admin_port = 8022;
  std::uint16_t metrics_port = 9090;
  std::uint16_t user_metrics_port = 9091;
  std::string user_metrics_address;  // empty: listen_address (requestMetrics.endpoint may name one)
  bool user_metrics = false;  // serve SharedState::request_metrics on user_metrics_port
  metrics::PodIdentity pod;
  Millis report_period{1000};  // queue-proxy's reportingPeriod, which its request rates are per
  // What undoes a /wait-for-drain that no SIGTERM follows. In Knative (sluice in the pod's containers)
  // SIGTERM comes at once when the pod goes away, so none within `drain_reset_after` means the app's
  // liveness restart. A native sidecar gets SIGTERM only after the app has exited, so there the drain is
  // undone only when the app goes away and comes back (a container restart).
  enum class DrainReset { after_timeout, app_restart };
  DrainReset drain_reset = DrainReset::after_timeout;
  Millis drain_reset_after{1000};
};

class ControlPlane {
 public:
  // Binds every listener (throws std::system_error naming the one that failed).
  ControlPlane(asio::io_context& io, SharedState& shared, ControlConfig config);
  ~ControlPlane();
  void start();

  struct Bound {
    std::string name;
    std::uint16_t port;
  };
  std::vector<Bound> listeners() const;

  // On the control thread. The first call starts draining for good; a later one skips the quiet period.
  void terminate();
  // Completes once terminate() was called and the drain's quiet period has passed.
  asio::awaitable<void> drained();
  // On the control thread: stop accepting on every port (a successor holds the same sockets and answers
  // there from now on; per-node mode's restart).
  void close_listeners();

 private:
  asio::awaitable<void> report_loop();
  void publish(Clock::time_point now);  // closes the period at `now`: what :9090 serves from now on
  asio::awaitable<ControlResponse> serve_stats(const ControlRequest& req);
  asio::awaitable<ControlResponse> serve_user_metrics(const ControlRequest& req);
  asio::awaitable<ControlResponse> serve_admin(const ControlRequest& req);
  asio::awaitable<void> reset_unless_terminated();
  asio::awaitable<void> reset_when_app_restarts();

  asio::io_context& io_;
  SharedState& shared_;
  ControlConfig config_;
  Clock::time_point started_;
  metrics::StatSample sample_;  // the last one published
  std::string stat_protobuf_;
  // While the last period saw no traffic, the reporter sleeps with no timer until the first request
  // wakes it (RequestStats' ArrivalWake), and that period closes early: scale from zero waits for the
  // first busy sample, so it should not wait for the rest of a period (Knative's activator pokes its
  // autoscaler for the same reason). An idle sidecar so never wakes and never polls; a scrape of a
  // parked reporter closes the period itself.
  asio::steady_timer report_tick_;
  bool woken_ = false;   // the arrival wake fired since the reporter last looked
  bool parked_ = false;  // idle, waiting for a request with no timer
  bool terminating_ = false;
  bool watching_app_ = false;  // reset_when_app_restarts() runs
  std::vector<std::unique_ptr<ControlListener>> listeners_;
};

}  // namespace sluice::proxy
