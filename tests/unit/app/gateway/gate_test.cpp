// A revision's gate alone: requests taken by ready instances or buffered, refused, moved; what it asks of
// its supervision (a fake that records the asks) and what the supervisor's calls do to its requests.
// Requests are coroutines on this test's io_context; no fleet, runtime or thread of its own.
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include "app/gateway/gate.h"
#include "tests/unit/app/gateway/test_support.h"

namespace sluice::app::gateway {
namespace {

using namespace std::chrono_literals;

// Records every ask; asks are made under the gate's lock, so it only writes them down.
struct FakeSupervision final : Supervision {
  void wanted() override { asks.push_back("wanted"); }
  void thaw(const std::shared_ptr<Instance>& i) override { asks.push_back("thaw " + i->id); }
  void idle(const std::shared_ptr<Instance>& i) override { asks.push_back("idle " + i->id); }
  void stopped(const std::shared_ptr<Instance>& i) override { asks.push_back("stopped " + i->id); }
  void unwanted() override { asks.push_back("unwanted"); }
  std::size_t count(const std::string& what) const { return static_cast<std::size_t>(std::count(asks.begin(), asks.end(), what)); }
  std::vector<std::string> asks;
};

GateSettings gate_settings(std::size_t cc = 0) {
  GateSettings s;
  s.service = "app";
  s.revision = "app-00001";
  s.container_concurrency = cc;
  s.buffer_size = 10;
  s.buffer_timeout = 10s;
  return s;
}

struct GateHarness {
  explicit GateHarness(GateSettings s) : gate(std::move(s), supervision, [] { return Clock::now(); }) {}

  using Slot = std::shared_ptr<std::optional<Gate::Outcome>>;
  Slot request(net::WaitAbandon* abandon = nullptr, Clock::duration deadline = 10s) {
    auto slot = std::make_shared<std::optional<Gate::Outcome>>();
    asio::co_spawn(io, gate.acquire(io.get_executor(), Clock::now(), Clock::now() + deadline, true, abandon),
                   [slot](std::exception_ptr e, Gate::Outcome o) {
                     if (!e) *slot = std::move(o);
                   });
    io.poll();
    return slot;
  }
  std::shared_ptr<Instance> instance(const std::string& id, std::uint16_t port) {
    auto i = std::make_shared<Instance>();
    i->id = id;
    i->port = port;
    gate.add(i);
    return i;
  }
  std::shared_ptr<Instance> ready(const std::string& id, std::uint16_t port, Clock::time_point at = Clock::now()) {
    auto i = instance(id, port);
    gate.became_ready(i, at);
    io.poll();
    return i;
  }
  bool run_until(const std::function<bool()>& done) { return support::run_until(io, done); }

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  FakeSupervision supervision;
  Gate gate;
};

using support::lease_in;
using support::refusal_in;
// The exchange ends with `status`: the lease (and its hold) is let go.
void end(const GateHarness::Slot& s, int status) {
  static_cast<Gate::Hold*>(lease_in(s)->hold.get())->ended(status);
  s->reset();
}

TEST(Gate, AReadyInstanceTakesARequestAtOnceAndItsEndIsCountedByStatus) {
  GateHarness h(gate_settings());
  h.ready("app-1", 4001);
  auto r = h.request();
  ASSERT_NE(lease_in(r), nullptr);
  EXPECT_EQ(lease_in(r)->endpoint.port(), 4001);
  EXPECT_EQ(h.gate.view().in_flight, 1u);
  end(r, 204);
  auto v = h.gate.view();
  EXPECT_EQ(v.in_flight, 0u);
  EXPECT_EQ(v.requests_total, 1u);
  EXPECT_EQ(v.ended_by_status.at(204), 1u);
  EXPECT_TRUE(h.supervision.asks.empty());  // nothing to ask: not throttled, not cold
}

TEST(Gate, AColdRequestAsksForAnInstanceAndIsHandedTheFirstThatBecomesReady) {
  GateHarness h(gate_settings());
  auto first = h.request();
  EXPECT_FALSE(first->has_value());
  EXPECT_EQ(h.supervision.count("wanted"), 1u);
  auto inst = h.instance("app-1", 4001);
  auto second = h.request();  // one is starting: nothing more to ask
  EXPECT_EQ(h.supervision.count("wanted"), 1u);
  EXPECT_EQ(h.gate.view().queued, 2u);
  ASSERT_EQ(h.gate.became_ready(inst, Clock::now()), Gate::Readied::busy);  // taken at once
  ASSERT_TRUE(h.run_until([&] { return first->has_value() && second->has_value(); }));
  ASSERT_NE(lease_in(first), nullptr);
  ASSERT_NE(lease_in(second), nullptr);
  EXPECT_TRUE(static_cast<Gate::Hold*>(lease_in(first)->hold.get())->cold());
  auto v = h.gate.view(/*history=*/true);
  EXPECT_EQ(v.cold_starts, 1u);
  EXPECT_EQ(v.cold_start_log.size(), 1u);
  EXPECT_EQ(v.in_flight, 2u);
}

// A validation instance of a revision that scales to zero: stopped as it becomes ready, unless a request
// waiting for it takes it then; no request can get it in between.
TEST(Gate, AValidationInstanceNoRequestTookIsStoppedAsItBecomesReady) {
  GateHarness h(gate_settings());
  auto alone = h.instance("app-1", 4001);
  EXPECT_EQ(h.gate.became_ready(alone, Clock::now(), /*stop_if_idle=*/true), Gate::Readied::stopped);
  EXPECT_EQ(h.gate.state(*alone), InstanceState::stopped);
  EXPECT_EQ(h.gate.became_ready(alone, Clock::now(), true), Gate::Readied::no);

  auto waiting = h.request();
  auto wanted = h.instance("app-2", 4002);
  EXPECT_EQ(h.gate.became_ready(wanted, Clock::now(), true), Gate::Readied::busy);
  ASSERT_TRUE(h.run_until([&] { return waiting->has_value(); }));
  EXPECT_NE(lease_in(waiting), nullptr);
  EXPECT_EQ(h.gate.state(*wanted), InstanceState::ready);
}

TEST(Gate, AFullInstanceQueuesTheNextRequestUntilItsSlotIsReleased) {
  GateHarness h(gate_settings(/*cc=*/1));
  h.ready("app-1", 4001);
  auto first = h.request();
  auto second = h.request();
  ASSERT_NE(lease_in(first), nullptr);
  EXPECT_FALSE(second->has_value());
  EXPECT_EQ(h.supervision.count("wanted"), 0u);  // an instance is ready: the autoscaler's business
  end(first, 200);
  ASSERT_TRUE(h.run_until([&] { return second->has_value(); }));
  ASSERT_NE(lease_in(second), nullptr);
  EXPECT_FALSE(static_cast<Gate::Hold*>(lease_in(second)->hold.get())->cold());
}

TEST(Gate, ABufferFullIsRefusedAt503AndAWaitPastItsTimeoutAt504) {
  auto s = gate_settings();
  s.buffer_size = 1;
  s.buffer_timeout = 50ms;
  GateHarness h(s);
  auto waiting = h.request();
  auto over = h.request();
  ASSERT_NE(refusal_in(over), nullptr);
  EXPECT_EQ(refusal_in(over)->status, 503u);
  EXPECT_NE(refusal_in(over)->reason.find("cold-start buffer full (1 requests waiting)"), std::string::npos);
  ASSERT_TRUE(h.run_until([&] { return waiting->has_value(); }));
  ASSERT_NE(refusal_in(waiting), nullptr);
  EXPECT_EQ(refusal_in(waiting)->status, 504u);
  EXPECT_NE(refusal_in(waiting)->reason.find("no instance became ready within"), std::string::npos);
  EXPECT_EQ(h.gate.view().refused, 2u);
}

TEST(Gate, AFailedStartRefusesTheWaitingAndNewRequestsWithRetryAfterUntilTheRetryIsDue) {
  GateHarness h(gate_settings());
  auto waiting = h.request();
  auto inst = h.instance("app-1", 4001);
  ASSERT_TRUE(h.gate.start_failed(*inst, "exec: no such file", Clock::now() + 4s));
  EXPECT_FALSE(h.gate.start_failed(*inst, "again", Clock::now() + 4s));  // stopped already
  ASSERT_TRUE(h.run_until([&] { return waiting->has_value(); }));
  ASSERT_NE(refusal_in(waiting), nullptr);
  EXPECT_EQ(refusal_in(waiting)->reason, "service app failed to start: exec: no such file");
  EXPECT_EQ(refusal_in(waiting)->retry_after_seconds, 4u);
  auto later = h.request();  // refused at once, without asking for a start
  ASSERT_NE(refusal_in(later), nullptr);
  EXPECT_EQ(refusal_in(later)->status, 503u);
  EXPECT_EQ(h.supervision.count("wanted"), 1u);
  // Another instance serving ends the refusals.
  h.ready("app-2", 4002);
  EXPECT_NE(lease_in(h.request()), nullptr);
  EXPECT_TRUE(h.gate.view().failed_reason.empty());
}

TEST(Gate, AFrozenInstanceIsThawedWhenGrantedAndOfferedForFreezingWhenIdleAgain) {
  auto s = gate_settings();
  s.throttling = true;
  GateHarness h(s);
  auto inst = h.ready("app-1", 4001);
  int froze = 0;
  ASSERT_TRUE(h.gate.freeze_if_idle(*inst, Clock::now(), [&] { ++froze; }));
  EXPECT_EQ(froze, 1);
  EXPECT_FALSE(h.gate.freeze_if_idle(*inst, Clock::now(), [&] { ++froze; }));  // frozen already
  auto r = h.request();
  ASSERT_NE(lease_in(r), nullptr);
  EXPECT_EQ(h.supervision.asks, std::vector<std::string>{"thaw app-1"});
  EXPECT_FALSE(h.gate.freeze_if_idle(*inst, Clock::now(), [&] { ++froze; }));  // busy
  end(r, 200);
  EXPECT_EQ(h.supervision.asks, (std::vector<std::string>{"thaw app-1", "idle app-1"}));
  // A failed freeze turns freezing off for the revision.
  ASSERT_TRUE(h.gate.freeze_if_idle(*inst, Clock::now(), [&] { ++froze; }));
  h.gate.freeze_failed(*inst);
  EXPECT_FALSE(h.gate.view().throttling);
  EXPECT_FALSE(h.gate.freeze_if_idle(*inst, Clock::now(), [&] { ++froze; }));
  EXPECT_EQ(froze, 2);
}

TEST(Gate, WithAFreezeDelayAnIdleInstanceStaysWarmUntilItPassesAndIsNotOfferedAtOnce) {
  auto s = gate_settings();
  s.throttling = true;
  s.freeze_delay = 200ms;
  GateHarness h(s);
  auto inst = h.ready("app-1", 4001);
  auto r = h.request();
  ASSERT_NE(lease_in(r), nullptr);
  const auto ended = Clock::now();
  end(r, 200);
  EXPECT_EQ(h.supervision.count("idle app-1"), 0u);  // no freeze asked at once
  EXPECT_FALSE(h.gate.freeze_if_idle(*inst, ended, [] {}));
  EXPECT_TRUE(h.gate.warm_expired(ended + 100ms).empty());
  auto expired = h.gate.warm_expired(ended + 1s);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_TRUE(h.gate.freeze_if_idle(*inst, ended + 1s, [] {}));
}

TEST(Gate, ANewConnectionThawsAFrozenInstanceAheadUntilItsPrewarmPasses) {
  auto s = gate_settings();
  s.throttling = true;
  GateHarness h(s);
  auto inst = h.ready("app-1", 4001);
  ASSERT_TRUE(h.gate.freeze_if_idle(*inst, Clock::now(), [] {}));
  const auto until = Clock::now() + 1s;
  h.gate.prewarm(until);
  EXPECT_EQ(h.supervision.asks, std::vector<std::string>{"thaw app-1"});
  EXPECT_FALSE(h.gate.freeze_if_idle(*inst, Clock::now(), [] {}));  // pre-warmed: not yet
  EXPECT_TRUE(h.gate.warm_expired(until - 1ms).empty());
  auto expired = h.gate.warm_expired(until);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0], inst);
  EXPECT_TRUE(h.gate.freeze_if_idle(*inst, until, [] {}));
}

TEST(Gate, ADrainingInstanceTakesNoRequestAndIsStoppedWhenItsLastExchangeEnds) {
  GateHarness h(gate_settings());
  auto inst = h.ready("app-1", 4001);
  auto r = h.request();
  ASSERT_NE(lease_in(r), nullptr);
  EXPECT_EQ(h.gate.drain(*inst), Gate::Drained::draining);
  EXPECT_EQ(h.gate.drain(*inst), Gate::Drained::no);
  auto next = h.request();  // waits: nothing ready, so the supervisor is asked
  EXPECT_FALSE(next->has_value());
  EXPECT_EQ(h.supervision.count("wanted"), 1u);
  end(r, 200);
  EXPECT_EQ(h.gate.state(*inst), InstanceState::stopped);
  EXPECT_EQ(h.supervision.count("stopped app-1"), 1u);
  // An idle one stops at once: the caller ends its process.
  auto idle = h.ready("app-2", 4002);
  ASSERT_TRUE(h.run_until([&] { return next->has_value(); }));
  end(next, 200);
  EXPECT_EQ(h.gate.drain(*idle), Gate::Drained::stopped);
}

TEST(Gate, ScalingDownDrainsTheIdlestReadyInstancesNewestFirst) {
  GateHarness h(gate_settings());
  auto busy = h.ready("app-1", 4001);
  auto r = h.request();
  ASSERT_NE(lease_in(r), nullptr);
  const auto t = Clock::now();
  auto old_idle = h.ready("app-2", 4002, t);
  auto new_idle = h.ready("app-3", 4003, t + 1ms);
  h.instance("app-4", 4004);  // starting: never scaled down
  auto drained = h.gate.drain_idlest(2);
  ASSERT_EQ(drained.size(), 2u);
  EXPECT_EQ(drained[0].first, new_idle);
  EXPECT_EQ(drained[0].second, Gate::Drained::stopped);
  EXPECT_EQ(drained[1].first, old_idle);
  EXPECT_EQ(h.gate.state(*busy), InstanceState::ready);
  EXPECT_EQ(h.gate.view().active, 2u);  // the busy one and the starting one
}

TEST(Gate, AWaiterOfAReplacedRevisionMovesToItsSuccessorAndOneOfARemovedOneIsRefused) {
  GateHarness h(gate_settings());
  FakeSupervision other;
  Gate next(gate_settings(), other, [] { return Clock::now(); });
  auto waiting = h.request();
  h.gate.move_to(next);
  ASSERT_TRUE(h.run_until([&] { return waiting->has_value(); }));
  auto* moved = std::get_if<Gate::Moved>(&**waiting);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ(moved->to, &next);
  auto later = h.request();  // moves on at once
  ASSERT_TRUE(later->has_value());
  EXPECT_NE(std::get_if<Gate::Moved>(&**later), nullptr);

  GateHarness removed(gate_settings());
  auto left = removed.request();
  removed.gate.close("service app was removed from the config");
  ASSERT_TRUE(removed.run_until([&] { return left->has_value(); }));
  ASSERT_NE(refusal_in(left), nullptr);
  EXPECT_EQ(refusal_in(left)->reason, "service app was removed from the config");
}

TEST(Gate, AClientGoneWhileBufferedLeavesWith499AndTheStartsOnlyItWantedCanBeCalledOff) {
  GateHarness h(gate_settings());
  net::WaitAbandon abandon;
  auto r = h.request(&abandon);
  auto starting = h.instance("app-1", 4001);
  auto validation = std::make_shared<Instance>();
  validation->id = "app-v";
  validation->validation = true;
  h.gate.add(validation);
  abandon.abandon();
  ASSERT_TRUE(h.run_until([&] { return r->has_value(); }));
  ASSERT_NE(refusal_in(r), nullptr);
  EXPECT_EQ(refusal_in(r)->status, 499u);
  EXPECT_EQ(h.supervision.count("unwanted"), 1u);
  auto v = h.gate.view();
  EXPECT_EQ(v.client_gone, 1u);
  EXPECT_EQ(v.refused, 0u);  // a client that left is not a refusal
  auto called_off = h.gate.call_off_starts();
  ASSERT_EQ(called_off.size(), 1u);  // the validation instance proves the service and stays
  EXPECT_EQ(called_off[0], starting);
  EXPECT_EQ(h.gate.state(*starting), InstanceState::stopped);
}

TEST(Gate, StartsAreNotCalledOffWhileARequestStillWaits) {
  GateHarness h(gate_settings());
  auto waiting = h.request();
  h.instance("app-1", 4001);
  EXPECT_TRUE(h.gate.call_off_starts().empty());
  EXPECT_FALSE(waiting->has_value());
}

}  // namespace
}  // namespace sluice::app::gateway
