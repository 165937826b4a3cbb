// Prometheus text exposition (format 0.0.4), every family sluice serves: the OpenTelemetry-shaped ones
// queue-proxy >= 1.19 serves on :9091 (labels sorted by name, `le` last, as Go's client writes them), the
// legacy ones, the gateway's and the scaler's.
#pragma once

#include <cstdint>
#include <map>
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

// Families built at scrape time from numbers kept elsewhere (the gateway's, the scaler's), written as a
// registry writes them: families by name, each family's series by their labels; a family without series
// is left out.
class TextFamilies {
 public:
  using Labels = std::map<std::string, std::string>;  // by name, as written

  // A counter's series (`value` added to what the series has) or a gauge's (`value` set).
  void counter(const std::string& name, std::string_view help, const Labels& labels, double value);
  void gauge(const std::string& name, std::string_view help, const Labels& labels, double value);
  std::string text() const;

 private:
  struct Family {
    std::string help, type;
    std::map<Labels, double> series;
  };
  Family& family(const std::string& name, std::string_view help, std::string_view type);
  std::map<std::string, Family> families_;
};

// A value as the exposition spells it: the shortest digits that read back the same; +Inf, -Inf, NaN.
void append_value(std::string& out, double v);
// A label value with \, " and newline escaped.
void append_label_value(std::string& out, std::string_view v);

}  // namespace sluice::metrics
