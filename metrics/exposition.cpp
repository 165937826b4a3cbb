// Prometheus text exposition; see exposition.h.
#include "metrics/exposition.h"

#include <array>
#include <charconv>
#include <cmath>
#include <vector>

namespace sluice::metrics {
namespace {

void append_labels(std::string& out, std::span<const Label> labels, std::string_view le) {
  if (labels.empty() && le.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    append_label_value(out, value);
    out += '"';
  }
  if (!le.empty()) {
    if (!first) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

void append_help(std::string& out, std::string_view help) {
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

}  // namespace

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    std::array<char, 32> buf{};
    auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    out.append(buf.data(), r.ptr);
  }
}

void append_label_value(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

void write_family(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  out += "# HELP ";
  out += name;
  out += ' ';
  append_help(out, help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void write_sample(std::string& out, std::string_view name, std::span<const Label> labels, double value) {
  out += name;
  append_labels(out, labels, {});
  out += ' ';
  append_value(out, value);
  out += '\n';
}

void write_histogram(std::string& out, std::string_view name, std::span<const Label> labels,
                     std::span<const double> bounds, std::span<const std::uint64_t> bucket_counts, double sum) {
  std::uint64_t cumulative = 0;
  std::string le;
  for (std::size_t i = 0; i < bucket_counts.size(); ++i) {
    cumulative += bucket_counts[i];
    le.clear();
    if (i < bounds.size()) append_value(le, bounds[i]);
    else le = "+Inf";
    out += name;
    out += "_bucket";
    append_labels(out, labels, le);
    out += ' ';
    out += std::to_string(cumulative);
    out += '\n';
  }
  out += name;
  out += "_sum";
  append_labels(out, labels, {});
  out += ' ';
  append_value(out, sum);
  out += '\n';
  out += name;
  out += "_count";
  append_labels(out, labels, {});
  out += ' ';
  out += std::to_string(cumulative);
  out += '\n';
}

TextFamilies::Family& TextFamilies::family(const std::string& name, std::string_view help, std::string_view type) {
  auto [it, fresh] = families_.try_emplace(name);
  if (fresh) {
    it->second.help = help;
    it->second.type = type;
  }
  return it->second;
}

void TextFamilies::counter(const std::string& name, std::string_view help, const Labels& labels, double value) {
  family(name, help, "counter").series[labels] += value;
}

void TextFamilies::gauge(const std::string& name, std::string_view help, const Labels& labels, double value) {
  family(name, help, "gauge").series[labels] = value;
}

std::string TextFamilies::text() const {
  std::string out;
  std::vector<Label> labels;
  for (const auto& [name, f] : families_) {
    if (f.series.empty()) continue;
    write_family(out, name, f.help, f.type);
    for (const auto& [l, value] : f.series) {
      labels.assign(l.begin(), l.end());
      write_sample(out, name, labels, value);
    }
  }
  return out;
}

}  // namespace sluice::metrics
