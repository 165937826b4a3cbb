// The decisions for step_trace.csv with step_config.txt, computed by hand from Knative's formulas; both the
// library test (tests/unit/autoscaler) and the binary test (tests/e2e/autoscaler) check against this table.
#pragma once

#include <array>
#include <string_view>

namespace sluice::autoscaler::test {

struct ExpectedDecision {
  long time;
  double observed, stable, panic;
  int ready, desired, excess_burst_capacity, buffer;
  std::string_view mode;
};

// Config: target 10 × utilization 100 % = 10 per pod, stable window 10 s (10 buckets), panic window
// 20 % = 2 s, grace 6 s, TBC 211, rates 1000× up / 2× down. Ready pods follow the last decision; start 1.
// stable/panic = mean of the buckets in the window (fewer while the window fills); pods = ceil(value / 10);
// panic when ceil(panic / 10) / max(ready, 1) >= 2; EBC = floor(ready × 10 − 211 − panic).
inline constexpr std::array<ExpectedDecision, 24> kStepTraceDecisions{{
    {0, 10, 10, 10, 1, 1, -211, 1, "stable"},   // 1 bucket each
    {2, 10, 10, 10, 1, 1, -211, 1, "stable"},
    {4, 10, 10, 10, 1, 1, -211, 1, "stable"},
    {6, 10, 10, 10, 1, 1, -211, 1, "stable"},
    {8, 10, 10, 10, 1, 1, -211, 1, "stable"},
    // (9×10 + 50) / 10 = 14 → 2 pods; panic (10 + 50) / 2 = 30 → 3 pods ≥ 2 × 1 ready: panic, want 3.
    {10, 50, 14, 30, 1, 3, -231, 1, "panic"},
    // (7×10 + 3×50) / 10 = 22 → 3; panic 50 → 5 (5/3 < 2, but panic lasts 10 s after t=10): 5.
    {12, 50, 22, 50, 3, 5, -231, 1, "panic"},
    {14, 50, 30, 50, 5, 5, -211, 1, "panic"},   // (5×10 + 5×50) / 10
    {16, 50, 38, 50, 5, 5, -211, 1, "panic"},
    {18, 50, 46, 50, 5, 5, -211, 1, "panic"},
    // Load gone: panic (50 + 0) / 2 = 25 → 3 pods, but in panic never below the 5 reached.
    {20, 0, 45, 25, 5, 5, -186, 1, "panic"},
    // t=22 > 10 + 10 s: un-panic. 7×50 / 10 = 35 → 4 pods (2× down clamp allows 2).
    {22, 0, 35, 0, 5, 4, -161, 1, "stable"},
    {24, 0, 25, 0, 4, 3, -171, 1, "stable"},
    {26, 0, 15, 0, 3, 2, -181, 1, "stable"},
    {28, 0, 5, 0, 2, 1, -191, 1, "stable"},
    // Stable value 0 → 0 pods wanted from t=30. Knative's reconciler: active since t=0, i.e. for more than
    // the 10 s stable window, so deactivated; the buffer has been in the path since t=0 (EBC < 0 all
    // along), longer than the 6 s grace period, so zero at once.
    {30, 0, 0, 0, 1, 0, -201, 1, "stable"},
    {32, 0, 0, 0, 0, 0, -211, 1, "stable"},
    {34, 0, 0, 0, 0, 0, -211, 1, "stable"},
    {36, 0, 0, 0, 0, 0, -211, 1, "stable"},
    {38, 0, 0, 0, 0, 0, -211, 1, "stable"},
    {40, 0, 0, 0, 0, 0, -211, 1, "stable"},
    {42, 0, 0, 0, 0, 0, -211, 1, "stable"},
    // Requests at zero pods poke a decision at once (odd second): 20 / 10 buckets = 2 → 1 pod;
    // panic (0 + 20) / 2 = 10 → 1 pod, 1 / max(0, 1) < 2.
    {43, 20, 2, 10, 0, 1, -221, 1, "stable"},
    // 40 / 10 = 4 → 1 pod; panic 20 → 2 pods ≥ 2 × 1 ready: panic again.
    {44, 20, 4, 20, 1, 2, -221, 1, "panic"},
}};

}  // namespace sluice::autoscaler::test
