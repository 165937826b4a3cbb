// The instance supervisor alone, with a fake runtime, a fake revision set (RevisionEvents) and an
// injected clock: what it asks the runtime for, on which thread, and what a request at its revision's
// gate is told. The supervisor's control thread and the gate's one worker are this test's thread,
// driving one io_context; the spawner and throttler threads are the supervisor's own. No fleet, router
// or autoscaler: decisions are handed to scale() directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include "app/gateway/supervisor.h"
#include "tests/unit/app/gateway/fake_runtime.h"
#include "tests/unit/app/gateway/test_support.h"

namespace sluice::app::gateway {
namespace {

using namespace std::chrono_literals;

ServiceConfig supervised_service() {
  ServiceConfig sc;
  sc.name = "app";
  sc.command = {"fake-app"};
  sc.validate = false;
  sc.start_deadline = 5s;
  return sc;
}

struct SupervisorHarness final : RevisionEvents {
  explicit SupervisorHarness(ServiceConfig sc, bool throttling = false, Phase phase = Phase::serving) {
    config.services = {sc};
    revision.config = sc;
    revision.revision = "app-00001";
    revision.phase = phase;
    revision.instance_numbers = std::make_shared<std::atomic<int>>(0);
    supervisor = std::make_unique<InstanceSupervisor>(config, runtime, io, *this, [this] { return clock.now(); });
    GateSettings gs;
    gs.service = sc.name;
    gs.revision = revision.revision;
    gs.buffer_size = sc.buffer_size;
    gs.buffer_timeout = sc.buffer_timeout;
    gs.throttling = throttling;
    supervisor->attach_gate(revision, gs);
  }
  ~SupervisorHarness() override { supervisor.reset(); }

  void validated(Revision& r) override { events.push_back("validated " + r.revision); }
  void failed(Revision& r, const std::string& why) override { events.push_back("failed " + r.revision + ": " + why); }

  using Slot = std::shared_ptr<std::optional<Gate::Outcome>>;
  Slot request(net::WaitAbandon* abandon = nullptr) {
    auto slot = std::make_shared<std::optional<Gate::Outcome>>();
    asio::co_spawn(io, revision.gate->acquire(io.get_executor(), clock.now(), clock.now() + 60s, true, abandon),
                   [slot](std::exception_ptr e, Gate::Outcome o) {
                     if (!e) *slot = std::move(o);
                   });
    return slot;
  }

  // Runs the supervisor's control thread (this one) until `done`, for 10 s at most.
  bool run_until(const std::function<bool()>& done) { return support::run_until(io, done); }
  std::size_t ready() const { return revision.gate->view().ready; }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  test::FakeRuntime runtime;
  support::FakeClock clock;
  GatewayConfig config;
  Revision revision;
  std::vector<std::string> events;
  std::unique_ptr<InstanceSupervisor> supervisor;
};



TEST(InstanceSupervisor, AColdRequestStartsAnInstanceOffTheWorkerAndGetsItOnceItListens) {
  SupervisorHarness h(supervised_service());
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  auto* l = support::lease_in(r);
  ASSERT_NE(l, nullptr) << support::refusal_in(r)->reason;
  EXPECT_EQ(l->endpoint.port(), h.runtime.port_of("app-1"));
  auto calls = h.runtime.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[0].what, "create app-1");
  EXPECT_EQ(calls[1].what, "start app-1");
  // The worker (this thread) only posted the start.
  EXPECT_NE(calls[0].thread, std::this_thread::get_id());
  EXPECT_NE(calls[1].thread, std::this_thread::get_id());
  EXPECT_EQ(h.revision.gate->view().requests_total, 1u);
  EXPECT_EQ(h.revision.gate->view().cold_starts, 1u);
  EXPECT_TRUE(h.revision.supervised.validated);
  EXPECT_TRUE(h.events.empty());  // a serving revision: nothing to tell the revision set
}

TEST(InstanceSupervisor, AnInstanceThatNeverListensFailsAtItsStartDeadlineOnTheInjectedClock) {
  auto sc = supervised_service();
  sc.start_deadline = 60s;  // longer than run_until waits: only the injected clock can get there
  SupervisorHarness h(sc);
  h.runtime.listen_on_start(false);
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-1") == 1; }));
  const auto port = h.runtime.port_of("app-1");
  // Probes fail for a while of real time; the deadline is the injected clock's business.
  h.io.run_for(100ms);
  EXPECT_FALSE(r->has_value());
  h.clock.advance(61s);
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  auto* no = support::refusal_in(r);
  ASSERT_NE(no, nullptr);
  EXPECT_EQ(no->status, 503u);
  EXPECT_NE(no->reason.find("failed to start: not listening on PORT " + std::to_string(port) + " after 60 s"),
            std::string::npos)
      << no->reason;
  EXPECT_EQ(no->retry_after_seconds, 2u);
  EXPECT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
}

TEST(InstanceSupervisor, AFailedStartIsRefusedWithRetryAfterUntilTheBackOffPassesThenRetried) {
  SupervisorHarness h(supervised_service());
  h.runtime.fail_create("exec fake-app: no such file");
  auto first = h.request();
  ASSERT_TRUE(h.run_until([&] { return first->has_value(); }));
  ASSERT_NE(support::refusal_in(first), nullptr);
  EXPECT_EQ(support::refusal_in(first)->reason, "service app failed to start: exec fake-app: no such file");
  EXPECT_EQ(support::refusal_in(first)->retry_after_seconds, 2u);
  // Within the back-off: refused at once, nothing started.
  auto second = h.request();
  ASSERT_TRUE(h.run_until([&] { return second->has_value(); }));
  ASSERT_NE(support::refusal_in(second), nullptr);
  EXPECT_EQ(support::refusal_in(second)->status, 503u);
  EXPECT_EQ(h.runtime.count("create app-2"), 0u);
  // After it: a new attempt, whose failure doubles the back-off.
  h.clock.advance(3s);
  auto third = h.request();
  ASSERT_TRUE(h.run_until([&] { return third->has_value(); }));
  EXPECT_EQ(h.runtime.count("create app-2"), 1u);
  ASSERT_NE(support::refusal_in(third), nullptr);
  EXPECT_EQ(support::refusal_in(third)->retry_after_seconds, 4u);
  EXPECT_EQ(h.revision.supervised.failures, 2);
}

TEST(InstanceSupervisor, AnIdleInstanceIsFrozenAndTheNextRequestThawsItInThatOrderOffTheWorker) {
  SupervisorHarness h(supervised_service(), /*throttling=*/true);
  auto first = h.request();
  ASSERT_TRUE(h.run_until([&] { return first->has_value(); }));
  ASSERT_NE(support::lease_in(first), nullptr);
  EXPECT_EQ(h.runtime.count("freeze app-1"), 0u);  // busy: not frozen
  first->reset();  // the exchange ends
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("freeze app-1") == 1; }));
  auto second = h.request();
  ASSERT_TRUE(h.run_until([&] { return second->has_value() && h.runtime.count("thaw app-1") == 1; }));
  ASSERT_NE(support::lease_in(second), nullptr);
  auto names = h.runtime.names();
  auto freeze = std::find(names.begin(), names.end(), "freeze app-1");
  auto thaw = std::find(names.begin(), names.end(), "thaw app-1");
  EXPECT_LT(freeze, thaw);
  for (const auto& c : h.runtime.calls()) EXPECT_NE(c.thread, std::this_thread::get_id()) << c.what;
}

TEST(InstanceSupervisor, ACrashAfterALongLifeIsReportedAndReplacedAtOnce) {
  auto sc = supervised_service();
  sc.scaling.min_scale = 1;
  SupervisorHarness h(sc);
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(support::lease_in(r), nullptr);
  r->reset();
  h.clock.advance(11s);  // ready for longer than 10 s: no crash back-off
  runtime::InstanceStatus st;
  st.id = "app-1";
  st.state = runtime::InstanceState::exited;
  st.exit_code = 3;
  h.supervisor->on_runtime_event(runtime::Event{runtime::EventKind::exited, st});
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-2") == 1; }));
  EXPECT_EQ(h.revision.supervised.crashes, 1u);
  // At once: no crash streak, so no back-off (an early crash starts one: 2 s, then 4, 8, …).
  EXPECT_EQ(h.revision.supervised.crash_streak, 0);
  EXPECT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
}

TEST(InstanceSupervisor, AnEarlyCrashIsReplacedOnlyAfterItsBackOff) {
  auto sc = supervised_service();
  sc.scaling.min_scale = 1;
  SupervisorHarness h(sc);
  auto r = h.request();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  r->reset();
  runtime::InstanceStatus st;
  st.id = "app-1";
  st.state = runtime::InstanceState::exited;
  st.signal = 9;
  h.supervisor->on_runtime_event(runtime::Event{runtime::EventKind::exited, st});
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));
  EXPECT_EQ(h.revision.supervised.crash_streak, 1);
  // The back-off (2 s) runs on a real timer of the control thread: no replacement before it.
  h.io.run_for(500ms);
  EXPECT_EQ(h.runtime.count("create app-2"), 0u);
  EXPECT_TRUE(h.run_until([&] { return h.runtime.count("start app-2") == 1; }));
}

TEST(InstanceSupervisor, AValidatingRevisionIsReportedValidatedOrFailedAndAFailureIsNotRetried) {
  SupervisorHarness ok(supervised_service(), false, Phase::validating);
  ok.supervisor->start(ok.revision, false);
  ASSERT_TRUE(ok.run_until([&] { return !ok.events.empty(); }));
  EXPECT_EQ(ok.events, std::vector<std::string>{"validated app-00001"});
  EXPECT_EQ(ok.ready(), 1u);

  SupervisorHarness bad(supervised_service(), false, Phase::validating);
  bad.runtime.fail_create("exec fake-app: no such file");
  bad.supervisor->start(bad.revision, false);
  ASSERT_TRUE(bad.run_until([&] { return !bad.events.empty(); }));
  EXPECT_EQ(bad.events, std::vector<std::string>{"failed app-00001: exec fake-app: no such file"});
  EXPECT_EQ(bad.revision.supervised.failures, 0);  // no back-off: nothing is retried
  bad.io.run_for(100ms);
  EXPECT_EQ(bad.runtime.count("create app-2"), 0u);
}

TEST(InstanceSupervisor, ADecisionStartsInstancesUpToItAndDrainsTheIdlestDownToIt) {
  SupervisorHarness h(supervised_service());
  h.supervisor->scale(h.revision, 3);
  ASSERT_TRUE(h.run_until([&] { return h.ready() == 3; }));
  EXPECT_EQ(h.runtime.count("create app-3"), 1u);
  auto busy = h.request();  // the oldest instance is as idle as the others: the least loaded goes first
  ASSERT_TRUE(h.run_until([&] { return busy->has_value(); }));
  ASSERT_NE(support::lease_in(busy), nullptr);
  const auto busy_port = support::lease_in(busy)->endpoint.port();
  h.supervisor->scale(h.revision, 1);
  ASSERT_TRUE(h.run_until([&] { return h.revision.gate->view().instances.size() == 1; }));
  EXPECT_EQ(h.runtime.count("stop app-1") + h.runtime.count("stop app-2") + h.runtime.count("stop app-3"), 2u);
  auto left = h.revision.gate->view().instances;
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].port, busy_port);  // the one serving a request stays
  EXPECT_EQ(h.revision.supervised.desired, 1);
}

TEST(InstanceSupervisor, AStartOnlyAGoneClientWantedIsCalledOffUnlessTheDecisionWantsIt) {
  SupervisorHarness h(supervised_service());
  h.runtime.listen_on_start(false);  // starting until called off
  net::WaitAbandon abandon;
  auto r = h.request(&abandon);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("start app-1") == 1; }));
  asio::post(h.io, [&] { abandon.abandon(); });  // on the waiter's executor, as the exchange does
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(support::refusal_in(r), nullptr);
  EXPECT_EQ(support::refusal_in(r)->status, 499u);
  ASSERT_TRUE(h.run_until([&] { return h.runtime.count("stop app-1") == 1; }));

  SupervisorHarness wanted(supervised_service());
  wanted.runtime.listen_on_start(false);
  wanted.supervisor->scale(wanted.revision, 1);  // the autoscaler wants one
  net::WaitAbandon gone;
  auto w = wanted.request(&gone);
  ASSERT_TRUE(wanted.run_until([&] { return wanted.runtime.count("start app-1") == 1; }));
  asio::post(wanted.io, [&] { gone.abandon(); });
  ASSERT_TRUE(wanted.run_until([&] { return w->has_value(); }));
  bool marker = false;  // the call-off check was posted as the request left; this runs after it
  asio::post(wanted.io, [&] { marker = true; });
  ASSERT_TRUE(wanted.run_until([&] { return marker; }));
  EXPECT_EQ(wanted.runtime.count("stop app-1"), 0u);
  EXPECT_EQ(wanted.revision.gate->view().active, 1u);
}

}  // namespace
}  // namespace sluice::app::gateway
