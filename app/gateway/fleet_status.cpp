// The fleet as others see it: GET /.sluice/status (one object per service, its revisions and their
// instances) and /metrics (Prometheus text, a series per revision); see fleet.h.
#include <algorithm>
#include <cmath>
#include <map>

#include <boost/json/array.hpp>

#include "app/gateway/fleet.h"

namespace sluice::app::gateway {

namespace json = boost::json;

json::object Fleet::status() const {
  json::object out;
  json::array services;
  std::lock_guard lock(mu_);
  // One object per service: its serving revision's numbers, every live revision, every instance.
  std::vector<std::string> names;
  for (const auto& s : services_)
    if (std::find(names.begin(), names.end(), s->config.name) == names.end()) names.push_back(s->config.name);
  for (const auto& name : names) {
    const Service* main = nullptr;
    for (const auto& s : services_)
      if (s->config.name == name && (!main || (s->phase == Phase::serving &&
                                               (main->phase != Phase::serving || s->percent > main->percent))))
        main = s.get();
    if (main->phase == Phase::retired && main->instances.empty()) continue;  // removed from the config
    const Service* s = main;
    json::object o;
    o["name"] = s->config.name;
    o["revision"] = s->revision;
    json::array hosts;
    for (const auto& h : s->config.hosts) hosts.emplace_back(h);
    o["hosts"] = std::move(hosts);
    o["default"] = s->config.is_default;
    o["throttling"] = s->throttling;
    o["scale_to_zero"] = s->scale_to_zero;
    o["container_concurrency"] = s->config.scaling.container_concurrency;
    o["desired"] = s->desired;
    o["in_flight"] = s->in_flight;
    o["queued"] = s->waiters.size();
    o["rps"] = std::round(s->last_rps * 100) / 100;
    o["concurrency"] = std::round(s->last_concurrency * 100) / 100;
    o["requests_total"] = s->requests_total;
    o["refused_total"] = s->refused;
    o["cold_starts"] = s->cold_starts;
    o["crashes"] = s->crashes;
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
  std::string out;
  auto add = [&out](std::string_view name, std::string_view help, std::string_view type) {
    out.append("# HELP ").append(name).append(" ").append(help).append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
  };
  auto sample = [&out](std::string_view name, const std::string& labels, double v) {
    out.append(name).append("{").append(labels).append("} ");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out.append(buf).append("\n");
  };
  std::lock_guard lock(mu_);
  auto label = [](const Service& s) { return "service=\"" + s.config.name + "\",revision=\"" + s.revision + "\""; };
  add("sluice_requests_total", "Requests routed to the service.", "counter");
  for (const auto& s : services_) sample("sluice_requests_total", label(*s), static_cast<double>(s->requests_total));
  add("sluice_refused_requests_total", "Requests answered 503/504 by the cold-start buffer.", "counter");
  for (const auto& s : services_) sample("sluice_refused_requests_total", label(*s), static_cast<double>(s->refused));
  add("sluice_inflight_requests", "Requests at an instance now.", "gauge");
  for (const auto& s : services_) sample("sluice_inflight_requests", label(*s), static_cast<double>(s->in_flight));
  add("sluice_queue_depth", "Requests waiting for an instance now.", "gauge");
  for (const auto& s : services_) sample("sluice_queue_depth", label(*s), static_cast<double>(s->waiters.size()));
  add("sluice_cold_starts_total", "Times the service went from no ready instance to one.", "counter");
  for (const auto& s : services_) sample("sluice_cold_starts_total", label(*s), static_cast<double>(s->cold_starts));
  add("sluice_instance_crashes_total", "Instances that exited without being asked to.", "counter");
  for (const auto& s : services_) sample("sluice_instance_crashes_total", label(*s), static_cast<double>(s->crashes));
  add("sluice_instances", "Instances by state.", "gauge");
  for (const auto& s : services_) {
    std::map<std::string, int> by_state{{"starting", 0}, {"ready", 0}, {"frozen", 0}, {"draining", 0}};
    for (const auto& i : s->instances) {
      if (i->state == InstanceState::stopped) continue;
      ++by_state[i->state == InstanceState::ready && i->frozen ? "frozen" : std::string(gateway::to_string(i->state))];
    }
    for (const auto& [state, n] : by_state) sample("sluice_instances", label(*s) + ",state=\"" + state + "\"", n);
  }
  add("sluice_desired_instances", "The KPA's decision.", "gauge");
  for (const auto& s : services_) sample("sluice_desired_instances", label(*s), s->desired);
  return out;
}

}  // namespace sluice::app::gateway
