// The test collector (tests/support/otlp_receiver.py) as a child process: where it listens, and what it
// decoded, as JSON values.
#pragma once

#include <boost/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/process.h"

namespace sluice::test {

struct OtlpReceiver {
  // `extra`: --http-status 503, --delay 3, ...
  explicit OtlpReceiver(std::vector<std::string> extra = {});
  std::unique_ptr<Process> process;
  int http_port = 0;
  int grpc_port = 0;

  // Every decoded request of a signal ("traces", "metrics", "zipkin") so far.
  std::vector<boost::json::object> received(const std::string& signal) const;
  // Every span of every traces request so far, each with "resource" added.
  std::vector<boost::json::object> spans() const;
};

}  // namespace sluice::test
