// One revision of a gateway service: its settings, its gate (app/gateway/gate.h: the request path's
// part, with its own lock) and what the control thread keeps about it (phase, traffic, the supervisor's
// back-off counts, the autoscaler). Fields below the gate are the control thread's and touched nowhere
// else: the workers reach a revision only through its gate.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "app/gateway/config.h"
#include "app/gateway/gate.h"
#include "autoscaler/revision_scaler.h"

namespace sluice::app::gateway {

// Revisions of a service: `serving` takes its requests, `validating` proves a new config can start,
// `retired` drains, `failed` never served.
enum class Phase { validating, serving, retired, failed };
std::string_view to_string(Phase p);

struct Revision {
  // Set at creation on the control thread, before any other thread sees the revision.
  ServiceConfig config;  // `traffic` changes on the control thread only; the rest is immutable
  std::string revision;  // <name>-00001, K_REVISION
  int generation = 1;
  bool scale_to_zero = true;
  std::shared_ptr<std::atomic<int>> instance_numbers;  // shared by a service's revisions: app-1, app-2, ...
  // What the gate asks of the fleet's supervision of this revision's instances; the gate refers to it.
  std::unique_ptr<Supervision> supervision;
  std::unique_ptr<Gate> gate;

  // Control.
  Phase phase = Phase::serving;
  std::string reason;             // why this revision was made, or why it failed
  int percent = 0;                // share of the service's requests (serving)
  std::vector<std::string> tags;  // Knative-Serving-Tag values and <tag>-<service>.localhost hosts
  bool validated = false;         // an instance has become ready at least once
  int failures = 0;               // consecutive start failures, for the retry back-off
  int crash_streak = 0;           // crashes soon after becoming ready, for the restart back-off
  std::uint64_t crashes = 0;
  // The revision's autoscaling loop (autoscaler/revision_scaler.h): fed by the gate's stats, applied
  // through the fleet's supervision of its instances. The scaler refers to the other two: it goes first.
  std::unique_ptr<autoscaler::StatsSource> stats_source;
  std::unique_ptr<autoscaler::ScaleTarget> scale_target;
  std::unique_ptr<autoscaler::RevisionScaler> scaler;
};

}  // namespace sluice::app::gateway
