// One revision of a gateway service: its settings, then its fields grouped by the part that owns them —
// the gate (app/gateway/gate.h: the request path's part, with its own lock), the revision set (phase,
// traffic), the supervisor (back-off counts) and the scaling loop (its autoscaler). Everything but the
// gate is the control thread's and touched nowhere else: workers reach a revision only through its gate.
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

  // The revision set's (fleet_revisions.cpp).
  Phase phase = Phase::serving;
  std::string reason;             // why this revision was made, or why it failed
  int percent = 0;                // share of the service's requests (serving)
  std::vector<std::string> tags;  // Knative-Serving-Tag values and <tag>-<service>.localhost hosts
  bool earlier_document = false;  // made from a Knative file's earlier document: never the latest revision

  // The supervisor's (supervisor.h).
  struct Supervised {
    bool validated = false;    // an instance has become ready at least once
    int failures = 0;          // consecutive start failures, for the retry back-off
    int crash_streak = 0;      // crashes soon after becoming ready, for the restart back-off
    std::uint64_t crashes = 0;
    std::int32_t desired = 0;  // the autoscaler's last decision, as applied
  } supervised;

  // The scaling loop's (scaling_loop.cpp). The revision's autoscaling loop (autoscaler/revision_scaler.h): fed by the gate's stats, applied
  // through the fleet's supervision of its instances. The scaler refers to the other two: it goes first.
  std::unique_ptr<autoscaler::StatsSource> stats_source;
  std::unique_ptr<autoscaler::ScaleTarget> scale_target;
  std::unique_ptr<autoscaler::RevisionScaler> scaler;
};

}  // namespace sluice::app::gateway
