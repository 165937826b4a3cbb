// The fleet as others see it: GET /.sluice/status (one object per service, its revisions and their
// instances) and /metrics (Prometheus text, a series per revision); see fleet.h.
// On the control thread, which owns the list of revisions and their phases; each gate is read through its view.
#include <algorithm>
#include <cmath>
#include <map>

#include <boost/json/array.hpp>
#include "app/gateway/fleet.h"
#include "metrics/exposition.h"

namespace sluice::app::gateway {

namespace json = boost::json;

json::object Fleet::status() const {
  json::object out;
  json::array services;
  // Each gate's view is read once, under its own lock.
  std::vector<GateView> views;
  for (const auto& s : services_) views.push_back(s->gate->view(/*history=*/true));
  // One object per service: its serving revision's numbers, every live revision, every instance.
  std::vector<std::string> names;
  for (const auto& s : services_)
    if (std::find(names.begin(), names.end(), s->config.name) == names.end()) names.push_back(s->config.name);
  for (const auto& name : names) {
    std::size_t main = services_.size();
    for (std::size_t k = 0; k < services_.size(); ++k) {
      const auto& s = *services_[k];
      if (s.config.name != name) continue;
      if (main == services_.size() ||
          (s.phase == Phase::serving &&
           (services_[main]->phase != Phase::serving || s.percent > services_[main]->percent)))
        main = k;
    }
    const Revision* s = services_[main].get();
    const GateView& v = views[main];
    if (s->phase == Phase::retired && v.instances.empty()) continue;  // removed from the config
    json::object o;
    o["name"] = s->config.name;
    o["revision"] = s->revision;
    json::array hosts;
    for (const auto& h : s->config.hosts) hosts.emplace_back(h);
    o["hosts"] = std::move(hosts);
    o["default"] = s->config.is_default;
    o["throttling"] = v.throttling;
    o["scale_to_zero"] = s->scale_to_zero;
    o["container_concurrency"] = s->config.scaling.container_concurrency;
    // The service's numbers are its revisions' together: a split's every share, and the revisions it
    // rolled over from (a request moved from one revision's buffer to the next counts once, where it came).
    std::int64_t desired = 0;
    double rps = 0, concurrency = 0;
    std::uint64_t requests_total = 0, refused = 0, client_gone = 0, cold_starts = 0;
    std::size_t in_flight = 0, queued = 0;
    std::string failed;
    for (std::size_t k = 0; k < services_.size(); ++k) {
      const auto& r = *services_[k];
      if (r.config.name != name) continue;
      const auto& rv = views[k];
      requests_total += rv.requests_total;
      refused += rv.refused;
      client_gone += rv.client_gone;
      cold_starts += rv.cold_starts;
      in_flight += rv.in_flight;
      queued += rv.queued;
      if (r.phase != Phase::serving) continue;
      desired += r.scaler->desired();
      rps += r.scaler->rps();
      concurrency += r.scaler->concurrency();
      if (failed.empty()) failed = rv.failed_reason;
    }
    o["desired"] = desired;
    o["in_flight"] = in_flight;
    o["queued"] = queued;
    o["rps"] = std::round(rps * 100) / 100;
    o["concurrency"] = std::round(concurrency * 100) / 100;
    o["requests_total"] = requests_total;
    o["refused_total"] = refused;
    o["client_gone_total"] = client_gone;
    o["cold_starts"] = cold_starts;
    o["crashes"] = s->supervised.crashes;
    o["crash_streak"] = s->supervised.crash_streak;  // early crashes in a row: each doubles the restart delay
    o["validated"] = s->supervised.validated;
    if (!failed.empty()) o["failed"] = failed;
    // Every revision's requests together: latency percentiles and the cold starts, oldest first.
    std::vector<double> latencies;
    std::vector<std::pair<std::int64_t, double>> cold;
    for (std::size_t k = 0; k < services_.size(); ++k)
      if (services_[k]->config.name == name) {
        latencies.insert(latencies.end(), views[k].latencies_ms.begin(), views[k].latencies_ms.end());
        cold.insert(cold.end(), views[k].cold_start_log.begin(), views[k].cold_start_log.end());
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
    if (!cold.empty()) o["last_cold_start_ms"] = std::round(cold.back().second * 10) / 10;
    json::array history;
    for (const auto& [at, ms] : cold) history.emplace_back(json::object{{"at", at}, {"ms", std::round(ms * 10) / 10}});
    o["cold_start_history"] = std::move(history);
    json::array revisions, instances;
    for (std::size_t k = 0; k < services_.size(); ++k) {
      const auto& r = services_[k];
      const auto& rv = views[k];
      if (r->config.name != name) continue;
      // Revisions that no longer matter (retired and empty, failed long ago) stay out, but the last failure shows.
      bool last_failed = r->phase == Phase::failed && r->generation == generations_.at(name);
      if (r->phase != Phase::serving && r->phase != Phase::validating && rv.instances.empty() && !last_failed) continue;
      json::object ro;
      ro["name"] = r->revision;
      // A serving revision whose instances cannot start answers nothing but 503s: shown failed, with why.
      const bool failing = r->phase == Phase::serving && !rv.failed_reason.empty();
      ro["phase"] = failing ? std::string("failed") : std::string(to_string(r->phase));
      ro["traffic_percent"] = r->percent;
      if (!r->tags.empty()) {
        json::array tags;
        for (const auto& t : r->tags) tags.emplace_back(t);
        ro["tags"] = std::move(tags);
      }
      if (failing) ro["reason"] = rv.failed_reason;
      else if (!r->reason.empty()) ro["reason"] = r->reason;
      ro["in_flight"] = rv.in_flight;
      ro["queued"] = rv.queued;
      ro["requests_total"] = rv.requests_total;
      ro["cold_starts"] = rv.cold_starts;
      if (r->phase == Phase::serving) ro["desired"] = r->scaler->desired();
      revisions.emplace_back(std::move(ro));
      for (const auto& i : rv.instances) {
        if (i.state == InstanceState::stopped) continue;  // gone: only its removal from the list is left
        json::object io;
        io["id"] = i.id;
        io["revision"] = r->revision;
        io["port"] = i.port;
        io["address"] = i.address.to_string();
        io["pid"] = i.pid;
        io["state"] = (i.state == InstanceState::ready && i.frozen) ? "frozen" : std::string(gateway::to_string(i.state));
        io["in_flight"] = i.in_flight;
        io["requests"] = i.requests;
        instances.emplace_back(std::move(io));
      }
    }
    o["revisions"] = std::move(revisions);
    o["instances"] = std::move(instances);
    services.emplace_back(std::move(o));
  }
  out["services"] = std::move(services);
  out["throttle"] = std::string(runtime::to_string(supervisor_.throttle_kind()));
  return out;
}

std::string Fleet::prometheus() const {
  metrics::TextFamilies out;
  for (const auto& s : services_) {
    const metrics::TextFamilies::Labels labels{{"revision", s->revision}, {"service", s->config.name}};
    auto with = [&](const std::string& name, const std::string& value) {
      auto l = labels;
      l.emplace(name, value);
      return l;
    };
    out.gauge("sluice_desired_instances", "The KPA's decision.", labels, s->scaler->desired());  // control thread's own
    const auto v = s->gate->view();
    for (const auto& [status, n] : v.ended_by_status)
      out.counter("sluice_requests_total", "Requests routed to the revision that have ended, by the status code they ended with.",
                  with("code", std::to_string(status)), static_cast<double>(n));
    out.counter("sluice_refused_requests_total", "Requests answered 503/504 by the cold-start buffer.", labels,
                static_cast<double>(v.refused));
    out.counter("sluice_client_gone_requests_total",
                "Requests whose client went away before their answer began (499), in the cold-start buffer or at an "
                "instance.",
                labels, static_cast<double>(v.client_gone));
    out.gauge("sluice_inflight_requests", "Requests at an instance now.", labels, static_cast<double>(v.in_flight));
    out.gauge("sluice_queue_depth", "Requests waiting for an instance now.", labels, static_cast<double>(v.queued));
    out.counter("sluice_cold_starts_total", "Times the service went from no ready instance to one.", labels,
                static_cast<double>(v.cold_starts));
    out.counter("sluice_instance_crashes_total", "Instances that exited without being asked to.", labels,
                static_cast<double>(s->supervised.crashes));
    std::map<std::string, int> by_state{{"starting", 0}, {"ready", 0}, {"frozen", 0}, {"draining", 0}};
    for (const auto& i : v.instances) {
      if (i.state == InstanceState::stopped) continue;
      ++by_state[i.state == InstanceState::ready && i.frozen ? "frozen" : std::string(gateway::to_string(i.state))];
    }
    for (const auto& [state, n] : by_state) out.gauge("sluice_instances", "Instances by state.", with("state", state), n);
  }
  return out.text();
}

}  // namespace sluice::app::gateway
