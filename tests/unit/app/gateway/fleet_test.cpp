// The gateway fleet's parts together (router, gate, supervisor, autoscaler) against a fake runtime and an
// injected clock: what the autoscaler decides from a request's wait, and what the runtime is asked for.
// Each part alone: gateway_gate_test.cpp, gateway_supervisor_test.cpp, autoscaler's revision_scaler_test.cpp.
// The fleet's control thread and its one worker are this test's thread, driving one io_context; the
// spawner and throttler threads are the supervisor's own.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/json.hpp>

#include "app/gateway/fleet.h"
#include "tests/unit/app/gateway/fake_runtime.h"
#include "tests/unit/app/gateway/test_support.h"

namespace sluice::app::gateway {
namespace {

using namespace std::chrono_literals;
using Result = std::variant<proxy::InstanceLease, proxy::InstanceRefusal>;

using support::FakeClock;

ServiceConfig app_service() {
  ServiceConfig sc;
  sc.name = "app";
  sc.command = {"fake-app"};
  sc.is_default = true;
  sc.validate = false;
  sc.start_deadline = 5s;
  sc.scaling.initial_scale = 0;
  sc.scaling.allow_zero_initial_scale = true;
  return sc;
}

struct Harness {
  explicit Harness(ServiceConfig sc, bool throttling = false) {
    config.features.throttling = throttling ? FeatureState::enabled : FeatureState::disabled;
    config.services = {std::move(sc)};
    fleet = std::make_unique<Fleet>(config, runtime, io, [this] { return clock.now(); });
  }
  ~Harness() { fleet.reset(); }

  // A request for the default service; its outcome lands in the returned slot.
  std::shared_ptr<std::optional<Result>> request(net::WaitAbandon* abandon = nullptr) {
    auto slot = std::make_shared<std::optional<Result>>();
    asio::co_spawn(io, fleet->acquire("app", "", false, clock.now() + 60s, abandon),
                   [slot](std::exception_ptr e, Result r) {
                     if (!e) *slot = std::move(r);
                   });
    return slot;
  }

  // Runs the fleet's control thread (this one) until `done`, for 10 s at most.
  bool run_until(const std::function<bool()>& done) { return support::run_until(io, done); }

  boost::json::object service() const {
    return fleet->status().at("services").as_array().at(0).as_object();
  }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  test::FakeRuntime runtime;
  FakeClock clock;
  GatewayConfig config;
  std::unique_ptr<Fleet> fleet;
};

using support::lease_in;
using support::refusal_in;

// A buffered request whose client goes leaves at once with 499. Unseen by any stat yet, it is taken
// back from the autoscaler's view, and the start it alone caused is called off: the instance never
// serves, and no later decision starts another.
TEST(FleetLifecycle, AClientGoneWhileBufferedLeavesWith499AndTheStartItAloneCausedIsCalledOff) {
  Harness h(app_service());
  h.runtime.listen_on_start(false);  // starting until called off
  net::WaitAbandon abandon;
  auto r = h.request(&abandon);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-1") == 1; }));
  EXPECT_EQ(h.service().at("queued").to_number<int>(), 1);
  h.clock.advance(300ms);
  asio::post(h.io, [&] { abandon.abandon(); });  // on the waiter's executor, as the exchange does
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  auto* no = refusal_in(r);
  ASSERT_NE(no, nullptr);
  EXPECT_EQ(no->status, 499u);
  EXPECT_EQ(h.service().at("queued").to_number<int>(), 0);
  EXPECT_EQ(h.service().at("client_gone_total").to_number<int>(), 1);
  EXPECT_EQ(h.service().at("refused_total").to_number<int>(), 0);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
  // The autoscaler sees no demand: ticks well past any window start nothing.
  for (int i = 0; i < 10; ++i) {
    h.clock.advance(1s);
    h.fleet->stat_tick();
    h.fleet->scale_tick();
    h.io.run_for(2ms);
  }
  EXPECT_EQ(h.runtime.count("create app-2"), 0u);
  EXPECT_EQ(h.service().at("desired").to_number<int>(), 0);
  EXPECT_EQ(h.service().at("cold_starts").to_number<int>(), 0);
}

// Once a stat has counted the wait, the autoscaler wants an instance for it, as Knative's would after
// the activator's report: the client leaving does not call that start off.
TEST(FleetLifecycle, AClientGoneAfterTheAutoscalerCountedItsWaitLeavesTheStartToTheAutoscaler) {
  Harness h(app_service());
  h.runtime.listen_on_start(false);
  net::WaitAbandon abandon;
  auto r = h.request(&abandon);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-1") == 1; }));
  h.clock.advance(1s);
  h.fleet->stat_tick();  // the KPA sees a request waiting a whole second
  h.fleet->scale_tick();
  EXPECT_EQ(h.service().at("desired").to_number<int>(), 1);
  asio::post(h.io, [&] { abandon.abandon(); });
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(refusal_in(r), nullptr);
  EXPECT_EQ(refusal_in(r)->status, 499u);
  // The call-off check was posted to the control thread (this io_context) as the request left; a marker
  // posted now runs after it.
  bool marker = false;
  asio::post(h.io, [&] { marker = true; });
  ASSERT_TRUE(h.run_until([&] { return marker; }));
  auto instances = h.service().at("instances").as_array();
  ASSERT_EQ(instances.size(), 1u);
  EXPECT_EQ(instances.at(0).at("state").as_string(), "starting");
  EXPECT_EQ(h.service().at("client_gone_total").to_number<int>(), 1);
}

// The revision set: a changed config is a new revision, validated (an instance must become ready)
// before it takes traffic from the serving one, which then drains.
std::string revision_of(const boost::json::object& service, const std::string& name, const char* field) {
  for (const auto& r : service.at("revisions").as_array())
    if (r.at("name").as_string() == name) return boost::json::serialize(r.at(field));
  return "absent";
}

TEST(FleetRevisions, AChangedConfigIsARevisionThatTakesTheTrafficOnceAnInstanceIsReady) {
  auto sc = app_service();
  sc.scaling.min_scale = 1;
  sc.fingerprint = "v1";
  Harness h(sc);
  h.fleet->start();
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-1") == 1; }));
  h.runtime.listen_on_start(false);  // the new revision's instance does not listen yet
  auto next = h.config;
  next.services[0].fingerprint = "v2";
  h.fleet->apply(next);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-2") == 1; }));
  EXPECT_EQ(revision_of(h.service(), "app-00002", "phase"), "\"validating\"");
  EXPECT_EQ(revision_of(h.service(), "app-00001", "traffic_percent"), "100");
  // Requests still go to the serving revision meanwhile.
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(lease_in(r), nullptr);
  EXPECT_EQ(lease_in(r)->endpoint.port(), h.runtime.port_of("app-1"));
  r->reset();
  // The new instance listens: the revision serves, the old one drains and stops.
  h.runtime.listen_on_start(true);
  h.runtime.listen_now("app-2");
  ASSERT_TRUE(h.run_until([&] { return revision_of(h.service(), "app-00002", "phase") == "\"serving\""; }));
  EXPECT_EQ(revision_of(h.service(), "app-00002", "traffic_percent"), "100");
  EXPECT_EQ(h.service().at("revision").as_string(), "app-00002");
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
}

TEST(FleetRevisions, ARevisionThatCannotStartFailsAndTheServingOneKeepsServing) {
  auto sc = app_service();
  sc.scaling.min_scale = 1;
  sc.fingerprint = "v1";
  Harness h(sc);
  h.fleet->start();
  ASSERT_TRUE(h.run_until([&] {
    auto list = h.service().at("instances").as_array();
    return list.size() == 1 && list.at(0).at("state").as_string() == "ready";
  }));
  h.runtime.fail_create("exec fake-app: no such file");
  auto next = h.config;
  next.services[0].fingerprint = "v2";
  h.fleet->apply(next);
  ASSERT_TRUE(h.run_until([&] { return revision_of(h.service(), "app-00002", "phase") == "\"failed\""; }));
  EXPECT_EQ(revision_of(h.service(), "app-00002", "reason"), "\"exec fake-app: no such file\"");
  EXPECT_EQ(h.service().at("revision").as_string(), "app-00001");
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(lease_in(r), nullptr);
  EXPECT_EQ(lease_in(r)->endpoint.port(), h.runtime.port_of("app-1"));
  EXPECT_EQ(h.runtime.count("stop app-1"), 0u);
}

TEST(FleetRevisions, ARemovedServiceRefusesWhatWaitsAndDrains) {
  auto sc = app_service();
  sc.scaling.min_scale = 1;
  Harness h(sc);
  h.fleet->start();
  h.runtime.listen_on_start(false);
  auto waiting = h.request();  // the instance never listens: the request waits
  ASSERT_TRUE(h.run_until([&] { return h.service().at("queued").to_number<int>() == 1; }));
  auto next = h.config;
  next.services.clear();
  h.fleet->apply(next);
  ASSERT_TRUE(h.run_until([&] { return waiting->has_value(); }));
  ASSERT_NE(refusal_in(waiting), nullptr);
  EXPECT_EQ(refusal_in(waiting)->status, 503u);
  EXPECT_EQ(refusal_in(waiting)->reason, "service app was removed from the config");
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
}

TEST(FleetScaling, ConcurrencyScalesUpAndIdlenessScalesToZeroOnTheInjectedClock) {
  auto sc = app_service();
  sc.scaling.target = 1;  // one request in flight per instance
  sc.scaling.target_utilization_percentage = 100;
  Harness h(sc);
  std::vector<std::shared_ptr<std::optional<Result>>> held;
  for (int i = 0; i < 3; ++i) held.push_back(h.request());
  ASSERT_TRUE(h.run_until([&] {
    return std::all_of(held.begin(), held.end(), [](const auto& r) { return r->has_value(); });
  }));
  for (const auto& r : held) ASSERT_NE(lease_in(r), nullptr);
  // A second with three requests in flight: the KPA wants three instances.
  h.clock.advance(1s);
  h.fleet->stat_tick();
  h.fleet->scale_tick();
  EXPECT_EQ(h.service().at("desired").to_number<int>(), 3);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-3") == 1; }));
  EXPECT_EQ(h.service().at("concurrency").to_number<double>(), 3.0);
  for (auto& r : held) r->reset();
  // Idle: after the stable window and the scale-to-zero grace period (90 s of injected time at most,
  // bounded here at 200), every instance is stopped.
  int seconds = 0;
  for (; seconds < 200 && h.runtime.count("stop app-1") + h.runtime.count("stop app-2") +
                                  h.runtime.count("stop app-3") < 3; ++seconds) {
    h.clock.advance(1s);
    h.fleet->stat_tick();
    if (seconds % 2 == 0) h.fleet->scale_tick();
    h.io.run_for(2ms);
  }
  ASSERT_TRUE(h.run_until([&] {
    return h.runtime.count("stop app-1") + h.runtime.count("stop app-2") + h.runtime.count("stop app-3") == 3;
  }));
  EXPECT_GE(seconds, 60);  // not before the stable window
  EXPECT_EQ(h.service().at("desired").to_number<int>(), 0);
}

// The fleet's second: the stats, then (every other second) the decisions. Requests that cold-started an
// instance and ended within the second before a decision are in the KPA's window when it decides, so the
// instance stays; when a separate scale timer fired just before the stat one, the decision found the
// window idle and drained it (CI, GatewayDevLoop.ATerminalShows…: app-2 drained, app-3 started).
TEST(FleetScaling, EveryDecisionFollowsItsSecondsStatsSoAColdStartsInstanceStays) {
  Harness h(app_service());
  h.clock.advance(1s);
  h.fleet->tick();
  h.clock.advance(1s);
  h.fleet->tick();  // idle: zero decided
  ASSERT_EQ(h.service().at("desired").to_number<int>(), 0);
  h.clock.advance(1s);
  h.fleet->tick();  // a stat only
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(lease_in(r), nullptr);
  h.clock.advance(300ms);
  r->reset();  // the request is done
  h.clock.advance(700ms);
  h.fleet->tick();  // a stat, then a decision
  EXPECT_EQ(h.service().at("desired").to_number<int>(), 1);
  const auto instances = h.service().at("instances").as_array();
  ASSERT_EQ(instances.size(), 1u) << boost::json::serialize(instances);
  EXPECT_EQ(instances.at(0).at("id").as_string(), "app-1");
  EXPECT_EQ(instances.at(0).at("state").as_string(), "ready") << boost::json::serialize(instances);
}

}  // namespace
}  // namespace sluice::app::gateway
