// Splits a byte stream into lines; a line longer than the limit is cut so memory stays bounded.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace sluice::runtime {

class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line_bytes = 64 * 1024) : max_(max_line_bytes) {}

  // Calls `on_line` (without the newline, and without a trailing '\r') for each complete line in `data`.
  void feed(std::string_view data, const std::function<void(std::string_view)>& on_line);
  // At end of stream: emits a last line that had no newline.
  void finish(const std::function<void(std::string_view)>& on_line);

 private:
  std::size_t max_;
  std::string partial_;
};

}  // namespace sluice::runtime
