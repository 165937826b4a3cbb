// The recent past for the dashboard; see recent.h.
#include "app/gateway/recent.h"

#include <cmath>

namespace sluice::app::gateway {
namespace {

std::string cut(std::string_view text, std::size_t keep) {
  if (text.size() <= keep) return std::string(text);
  // At a UTF-8 character's start, so that the JSON stays valid text.
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return std::string(text.substr(0, keep)) + "\u2026";
}

}  // namespace

void RecentRequests::add(Entry e) {
  e.path = cut(e.path, kPathKept);
  std::lock_guard lock(mu_);
  if (entries_.size() == kKept) entries_.pop_front();
  entries_.push_back(std::move(e));
}

boost::json::array RecentRequests::json() const {
  std::deque<Entry> copy;
  {
    std::lock_guard lock(mu_);
    copy = entries_;
  }
  boost::json::array out;
  for (auto it = copy.rbegin(); it != copy.rend(); ++it)
    out.emplace_back(boost::json::object{{"at", it->at_ms},
                                         {"method", it->method},
                                         {"path", it->path},
                                         {"status", it->status},
                                         {"duration_ms", std::round(it->duration_ms * 10) / 10},
                                         {"service", it->service},
                                         {"revision", it->revision},
                                         {"instance", it->instance},
                                         {"cold_start", it->cold_start}});
  return out;
}

void InstanceLogs::add(const std::string& service, const std::string& instance, std::string_view line) {
  auto kept = cut(line, kLineKept);
  std::lock_guard lock(mu_);
  auto& entry = by_instance_[instance];
  if (entry.service.empty()) entry.service = service;
  auto& lines = entry.lines;
  if (lines.size() == kLinesKept) lines.pop_front();
  lines.push_back(std::move(kept));
}

std::deque<std::string> InstanceLogs::last(const std::string& instance, std::size_t n) const {
  std::lock_guard lock(mu_);
  auto it = by_instance_.find(instance);
  if (it == by_instance_.end()) return {};
  const auto& lines = it->second.lines;
  return {lines.end() - static_cast<std::ptrdiff_t>(std::min(n, lines.size())), lines.end()};
}

void InstanceLogs::ended(const std::string& instance) {
  std::lock_guard lock(mu_);
  auto it = by_instance_.find(instance);
  if (it == by_instance_.end() || it->second.ended) return;
  it->second.ended = true;
  ended_.push_back(instance);
  if (ended_.size() > kEndedKept) {
    by_instance_.erase(ended_.front());
    ended_.pop_front();
  }
}

boost::json::object InstanceLogs::json() const {
  boost::json::object out;
  std::lock_guard lock(mu_);
  for (const auto& [id, kept] : by_instance_) {
    boost::json::array lines;
    for (const auto& l : kept.lines) lines.emplace_back(l);
    out[id] = boost::json::object{{"service", kept.service}, {"ended", kept.ended}, {"lines", std::move(lines)}};
  }
  return out;
}

}  // namespace sluice::app::gateway
