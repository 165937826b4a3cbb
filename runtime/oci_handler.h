// OCI handlers (`runc`, `crun`): a generated bundle per instance, run in the foreground by the OCI runtime.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/handler.h"

namespace sluice::runtime {

class OciHandler : public Handler {
 public:
  // `binary` is looked up in PATH; `state_root` is the runtime's --root (container state).
  OciHandler(std::string binary, std::filesystem::path state_root);
  std::string_view name() const override { return name_; }
  // Runs a trivial bundle once (host /usr bound read-only, /bin/true) and remembers the verdict.
  std::optional<std::string> unavailable_reason() override;
  std::unique_ptr<Task> start(const StartRequest& req, std::string& error) override;

 private:
  std::string name_;
  std::string path_;  // resolved binary; empty when not installed
  std::filesystem::path state_root_;
  std::mutex mu_;
  std::optional<std::optional<std::string>> verdict_;
};

}  // namespace sluice::runtime
