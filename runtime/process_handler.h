// The `process` handler: fork/exec in its own process group, inside a per-instance cgroup when throttling uses one.
#pragma once

#include "runtime/handler.h"
#include "runtime/throttle.h"

namespace sluice::runtime {

class ProcessHandler : public Handler {
 public:
  explicit ProcessHandler(const ThrottleChoice& throttle) : throttle_(throttle) {}
  std::string_view name() const override { return "process"; }
  std::optional<std::string> unavailable_reason() override { return std::nullopt; }
  std::unique_ptr<Task> start(const StartRequest& req, std::string& error) override;

 private:
  const ThrottleChoice& throttle_;
};

}  // namespace sluice::runtime
