// The simulator's replay loop and CSV output.
#include "autoscaler/simulator.h"

#include <charconv>
#include <chrono>

#include "common/config_error.h"

namespace sluice::autoscaler {
namespace {

void append_number(std::string& out, double v) {
  char buf[64];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc() ? ptr : buf);
}

TimePoint at_second(std::int64_t s) { return TimePoint(std::chrono::seconds(s)); }

}  // namespace

std::vector<SimulationRow> simulate(std::span<const TracePoint> trace, const AutoscalerConfig& config) {
  std::vector<SimulationRow> rows;
  if (trace.empty()) return rows;
  const auto tick = std::chrono::duration_cast<std::chrono::seconds>(config.tick_interval).count();
  if (tick < 1 || std::chrono::seconds(tick) != config.tick_interval) {
    throw ConfigError("tick interval: the simulator needs whole seconds");
  }
  const std::int64_t start = trace.front().time_s;
  std::int32_t modelled_ready = trace.front().ready.value_or(config.initial_scale);
  Kpa kpa(config, modelled_ready, at_second(start));
  std::size_t row = 0;
  for (std::int64_t t = start; t <= trace.back().time_s; ++t) {
    while (row + 1 < trace.size() && trace[row + 1].time_s <= t) ++row;
    const TracePoint& point = trace[row];
    const std::int32_t ready = point.ready.value_or(modelled_ready);
    Stat stat;
    stat.average_concurrent_requests = point.value;
    stat.request_count = point.value;
    const bool poke = kpa.record(at_second(t), stat);
    if ((t - start) % tick != 0 && !poke) continue;
    SimulationRow out;
    out.time_s = t;
    out.observed = point.value;
    out.decision = kpa.decide(at_second(t), ready);
    modelled_ready = out.decision.desired_pods;
    rows.push_back(out);
  }
  return rows;
}

std::string simulation_csv(std::span<const SimulationRow> rows) {
  std::string out(kSimulationCsvHeader);
  out += '\n';
  for (const SimulationRow& r : rows) {
    const Decision& d = r.decision;
    out += std::to_string(r.time_s);
    out += ',';
    append_number(out, r.observed);
    out += ',';
    append_number(out, d.observed_stable);
    out += ',';
    append_number(out, d.observed_panic);
    out += ',' + std::to_string(d.ready_pods) + ',' + std::to_string(d.desired_pods) + ',' +
           std::to_string(d.excess_burst_capacity) + ',' + (d.buffer_in_path ? "1" : "0") + ',';
    out += !d.valid ? "no-data" : d.panicking ? "panic" : "stable";
    out += '\n';
  }
  return out;
}

std::vector<ScaleStep> scale_timeline(std::span<const SimulationRow> rows, bool ready_from_trace) {
  std::vector<ScaleStep> steps;
  std::int32_t count = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Decision& d = rows[i].decision;
    const std::int32_t now = ready_from_trace ? d.ready_pods : d.desired_pods;
    if (i == 0 || now != count) {
      steps.push_back({rows[i].time_s, i == 0 ? now : count, now, d});
      count = now;
    }
  }
  return steps;
}

std::string timeline_text(std::span<const ScaleStep> steps) {
  std::string out;
  for (const ScaleStep& s : steps) {
    out += "t=" + std::to_string(s.time_s) + "s " + std::to_string(s.from) + " -> " + std::to_string(s.to) +
           (s.to == 1 ? " instance" : " instances") + " (decider " + std::to_string(s.decision.decider_pods) +
           ", " + activity_name(s.decision.activity) + (s.decision.buffer_in_path ? ", buffer in path" : "") +
           (s.decision.panicking ? ", panic" : "") + ")\n";
  }
  return out;
}

}  // namespace sluice::autoscaler
