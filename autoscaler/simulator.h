// Replays a load trace through the KPA with a simulated clock: what Knative would decide for this traffic.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "autoscaler/config.h"
#include "autoscaler/kpa.h"
#include "autoscaler/trace.h"

namespace sluice::autoscaler {

struct SimulationRow {
  std::int64_t time_s = 0;
  double observed = 0;  // the trace's value at this second
  Decision decision;
};

// Every second from the first to the last trace time, the trace's value is recorded as the merged stat
// (concurrency and requests/s alike; the config's metric picks which one scales). A decision is made every
// tick interval from the start, and at once on a poke (requests while the decider wants zero). Ready
// instances come from the trace's ready column, or else follow the applied scale instantly.
std::vector<SimulationRow> simulate(std::span<const TracePoint> trace, const AutoscalerConfig& config);

inline constexpr std::string_view kSimulationCsvHeader =
    "time,observed,stable,panic,ready,desired,excess_burst_capacity,buffer,mode";

// One CSV line per row (with the header first): time in seconds; observed, stable and panic values;
// ready and desired instances; excess burst capacity; buffer = 1 when the cold-start buffer stays in
// the path; mode = stable, panic, or no-data.
std::string simulation_csv(std::span<const SimulationRow> rows);

// When each instance count is reached: the first row, then every row where the count changes. The count
// is the ready column when the trace gives one, else the scale the KPA applied (instances assumed ready
// as soon as wanted).
struct ScaleStep {
  std::int64_t time_s = 0;
  std::int32_t from = 0;
  std::int32_t to = 0;
  Decision decision;  // the decision of that row
};
std::vector<ScaleStep> scale_timeline(std::span<const SimulationRow> rows, bool ready_from_trace);

// One line per step: `t=70s 1 -> 0 instances (decider 0, inactive, buffer in path)`.
std::string timeline_text(std::span<const ScaleStep> steps);

}  // namespace sluice::autoscaler
