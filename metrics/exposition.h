// Prometheus text exposition (format 0.0.4) for the families sluice writes itself: the OpenTelemetry-shaped
// ones queue-proxy >= 1.19 serves on :9091 (labels sorted by name, `le` last, as Go's client writes them).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::metrics {

using Label = std::pair<std::string_view, std::string_view>;  // name, value

// "# HELP" and "# TYPE" lines.
void write_family(std::string& out, std::string_view name, std::string_view help, std::string_view type);
// One sample line; `labels` are written in the order given (callers keep them sorted by name).
void write_sample(std::string& out, std::string_view name, std::span<const Label> labels, double value);
// A histogram's _bucket lines (cumulative, `le` after `labels`), _sum and _count.
void write_histogram(std::string& out, std::string_view name, std::span<const Label> labels,
                     std::span<const double> bounds, std::span<const std::uint64_t> bucket_counts, double sum);

// A value as the exposition spells it: the shortest digits that read back the same; +Inf, -Inf, NaN.
void append_value(std::string& out, double v);
// A label value with \, " and newline escaped.
void append_label_value(std::string& out, std::string_view v);

}  // namespace sluice::metrics
