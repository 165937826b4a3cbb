// Line splitting for captured output.
#include "runtime/line_splitter.h"

namespace sluice::runtime {
namespace {

std::string_view trim_cr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace

void LineSplitter::feed(std::string_view data, const std::function<void(std::string_view)>& on_line) {
  while (!data.empty()) {
    auto nl = data.find('\n');
    std::string_view chunk = nl == std::string_view::npos ? data : data.substr(0, nl);
    if (partial_.empty() && nl != std::string_view::npos && chunk.size() <= max_) {
      on_line(trim_cr(chunk));  // the common case: a whole line inside one read, no copy
    } else {
      // Carry the piece over; cut at the limit so one endless line cannot grow without bound.
      while (partial_.size() + chunk.size() > max_) {
        auto take = max_ - partial_.size();
        partial_.append(chunk.substr(0, take));
        on_line(partial_);
        partial_.clear();
        chunk.remove_prefix(take);
      }
      partial_.append(chunk);
      if (nl != std::string_view::npos) {
        on_line(trim_cr(partial_));
        partial_.clear();
      }
    }
    if (nl == std::string_view::npos) break;
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::finish(const std::function<void(std::string_view)>& on_line) {
  if (!partial_.empty()) on_line(trim_cr(partial_));
  partial_.clear();
}

}  // namespace sluice::runtime
