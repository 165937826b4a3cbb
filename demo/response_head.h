// Builds an HTTP/1.1 response head into a reused string: no Beast fields container, no per-request
// allocation once the string has grown to its working size.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::demo {

class ResponseHead {
 public:
  // Clears `out` and writes the status line.
  ResponseHead(std::string& out, unsigned status);

  ResponseHead& field(std::string_view name, std::string_view value);
  ResponseHead& field(std::string_view name, std::uint64_t value);
  ResponseHead& content_length(std::uint64_t bytes) { return field("Content-Length", bytes); }
  ResponseHead& chunked() { return field("Transfer-Encoding", "chunked"); }
  // Adds the Connection field the request's version and keep-alive need, and the blank line.
  void finish(bool keep_alive, unsigned request_version);

 private:
  std::string& out_;
};

}  // namespace sluice::demo
