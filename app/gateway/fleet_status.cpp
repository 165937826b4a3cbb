// The fleet as others see it: GET /.sluice/status (one object per service, its revisions and their
// instances) and /metrics (Prometheus text through prometheus-cpp, a series per revision); see fleet.h.
// On the control thread, which owns the list of revisions; each revision is read under its own lock.
#include <algorithm>
#include <cmath>
#include <map>

#include <boost/json/array.hpp>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "app/gateway/fleet.h"

namespace sluice::app::gateway {

namespace json = boost::json;

json::object Fleet::status() const {
  json::object out;
  json::array services;
  // Every revision's lock at once, in list order (the only place that holds more than one: nothing else
  // can wait for one of them while holding another, so no cycle).
  std::vector<std::unique_lock<std::mutex>> locks;
  for (const auto& s : services_) locks.emplace_back(s->mu);
  // One object per service: its serving revision's numbers, every live revision, every instance.
  std::vector<std::string> names;
  for (const auto& s : services_)
    if (std::find(names.begin(), names.end(), s->config.name) == names.end()) names.push_back(s->config.name);
  for (const auto& name : names) {
    const Revision* main = nullptr;
    for (const auto& s : services_)
      if (s->config.name == name && (!main || (s->phase == Phase::serving &&
                                               (main->phase != Phase::serving || s->percent > main->percent))))
        main = s.get();
    if (main->phase == Phase::retired && main->instances.empty()) continue;  // removed from the config
    const Revision* s = main;
    json::object o;
    o["name"] = s->config.name;
    o["revision"] = s->revision;
    json::array hosts;
    for (const auto& h : s->config.hosts) hosts.emplace_back(h);
    o["hosts"] = std::move(hosts);
    o["default"] = s->config.is_default;
    o["throttling"] = s->throttling.load();
    o["scale_to_zero"] = s->scale_to_zero;
    o["container_concurrency"] = s->config.scaling.container_concurrency;
    o["desired"] = s->scaler->desired();
    o["in_flight"] = s->in_flight;
    o["queued"] = s->waiters.size();
    o["rps"] = std::round(s->scaler->rps() * 100) / 100;
    o["concurrency"] = std::round(s->scaler->concurrency() * 100) / 100;
    o["requests_total"] = s->requests_total;
    o["refused_total"] = s->refused;
    o["client_gone_total"] = s->client_gone;
    o["cold_starts"] = s->cold_starts;
    o["crashes"] = s->crashes;
    o["crash_streak"] = s->crash_streak;  // early crashes in a row: each doubles the restart delay
    o["validated"] = s->validated;
    if (s->last_cold_start_ms >= 0) o["last_cold_start_ms"] = std::round(s->last_cold_start_ms * 10) / 10;
    if (!s->failed_reason.empty() && s->phase == Phase::serving) o["failed"] = s->failed_reason;
    // Every revision's requests together: latency percentiles and the cold starts, oldest first.
    std::vector<double> latencies;
    std::vector<std::pair<std::int64_t, double>> cold;
    for (const auto& r : services_)
      if (r->config.name == name) {
        latencies.insert(latencies.end(), r->latencies_ms.begin(), r->latencies_ms.end());
        cold.insert(cold.end(), r->cold_start_log.begin(), r->cold_start_log.end());
      }
    if (!latencies.empty()) {
      std::sort(latencies.begin(), latencies.end());
      auto at = [&](double q) {
        return std::round(latencies[std::min(latencies.size() - 1, static_cast<std::size_t>(q * static_cast<double>(latencies.size())))] * 100) / 100;
      };
      o["latency_ms"] = json::object{{"p50", at(0.5)}, {"p90", at(0.9)}, {"p99", at(0.99)},
                                     {"samples", latencies.size()}};
    }
    std::sort(cold.begin(), cold.end());
    json::array history;
    for (const auto& [at, ms] : cold) history.emplace_back(json::object{{"at", at}, {"ms", std::round(ms * 10) / 10}});
    o["cold_start_history"] = std::move(history);
    json::array revisions, instances;
    for (const auto& r : services_) {
      if (r->config.name != name) continue;
      // Revisions that no longer matter (retired and empty, failed long ago) stay out, but the last failure shows.
      bool last_failed = r->phase == Phase::failed && r->generation == generations_.at(name);
      if (r->phase != Phase::serving && r->phase != Phase::validating && r->instances.empty() && !last_failed) continue;
      json::object ro;
      ro["name"] = r->revision;
      ro["phase"] = std::string(to_string(r->phase));
      ro["traffic_percent"] = r->percent;
      if (!r->tags.empty()) {
        json::array tags;
        for (const auto& t : r->tags) tags.emplace_back(t);
        ro["tags"] = std::move(tags);
      }
      if (!r->reason.empty()) ro["reason"] = r->reason;
      if (r->phase != Phase::serving) ro["in_flight"] = r->in_flight;
      revisions.emplace_back(std::move(ro));
      for (const auto& i : r->instances) {
        if (i->state == InstanceState::stopped) continue;  // gone: only its removal from the list is left
        json::object io;
        io["id"] = i->id;
        io["revision"] = r->revision;
        io["port"] = i->port;
        io["address"] = i->address.to_string();
        io["pid"] = i->pid;
        io["state"] = (i->state == InstanceState::ready && i->frozen) ? "frozen" : std::string(gateway::to_string(i->state));
        io["in_flight"] = i->in_flight;
        io["requests"] = i->requests;
        instances.emplace_back(std::move(io));
      }
    }
    o["revisions"] = std::move(revisions);
    o["instances"] = std::move(instances);
    services.emplace_back(std::move(o));
  }
  out["services"] = std::move(services);
  out["throttle"] = std::string(runtime::to_string(runtime_.throttle().kind));
  return out;
}

std::string Fleet::prometheus() const {
  prometheus::Registry registry;
  auto counter = [&](const std::string& name, const std::string& help) -> auto& {
    return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
  };
  auto gauge = [&](const std::string& name, const std::string& help) -> auto& {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  };
  auto& requests = counter("sluice_requests_total",
                           "Requests routed to the revision that have ended, by the status code they ended with.");
  auto& refused = counter("sluice_refused_requests_total", "Requests answered 503/504 by the cold-start buffer.");
  auto& client_gone = counter("sluice_client_gone_requests_total",
                              "Requests that left the cold-start buffer because their client went away (499).");
  auto& in_flight = gauge("sluice_inflight_requests", "Requests at an instance now.");
  auto& queued = gauge("sluice_queue_depth", "Requests waiting for an instance now.");
  auto& cold_starts = counter("sluice_cold_starts_total", "Times the service went from no ready instance to one.");
  auto& crashes = counter("sluice_instance_crashes_total", "Instances that exited without being asked to.");
  auto& instances = gauge("sluice_instances", "Instances by state.");
  auto& desired = gauge("sluice_desired_instances", "The KPA's decision.");
  for (const auto& s : services_) {
    const std::map<std::string, std::string> labels{{"service", s->config.name}, {"revision", s->revision}};
    auto with_state = [&](const std::string& state) {
      auto l = labels;
      l.emplace("state", state);
      return l;
    };
    desired.Add(labels).Set(s->scaler->desired());  // control thread's own
    std::lock_guard lock(s->mu);
    for (const auto& [status, n] : s->ended_by_status) {
      auto l = labels;
      l.emplace("code", std::to_string(status));
      requests.Add(l).Increment(static_cast<double>(n));
    }
    refused.Add(labels).Increment(static_cast<double>(s->refused));
    client_gone.Add(labels).Increment(static_cast<double>(s->client_gone));
    in_flight.Add(labels).Set(static_cast<double>(s->in_flight));
    queued.Add(labels).Set(static_cast<double>(s->waiters.size()));
    cold_starts.Add(labels).Increment(static_cast<double>(s->cold_starts));
    crashes.Add(labels).Increment(static_cast<double>(s->crashes));
    std::map<std::string, int> by_state{{"starting", 0}, {"ready", 0}, {"frozen", 0}, {"draining", 0}};
    for (const auto& i : s->instances) {
      if (i->state == InstanceState::stopped) continue;
      ++by_state[i->state == InstanceState::ready && i->frozen ? "frozen" : std::string(gateway::to_string(i->state))];
    }
    for (const auto& [state, n] : by_state) instances.Add(with_state(state)).Set(n);
  }
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace sluice::app::gateway
