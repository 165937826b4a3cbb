// The runtime's records of one instance and one PodSandbox (private to runtime*.cpp).
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "runtime/handler.h"
#include "runtime/pod_cgroup.h"
#include "runtime/reactor.h"
#include "runtime/runtime.h"
#include "runtime/sandbox_lease.h"
#include "runtime/sandbox_net.h"

namespace sluice::runtime {

struct Runtime::Sandbox {
  PodSandboxConfig config;
  std::string handler;
  std::mutex op_mu;                     // one sandbox operation at a time
  SandboxState state = SandboxState::ready;   // under Runtime::mu_
  Clock::time_point created_at;
  std::set<std::string> containers;     // under Runtime::mu_
  std::unique_ptr<SandboxLease> lease;  // the rest under op_mu; fixed while containers run
  PodNetwork net;
  unsigned long long netns_inode = 0;
  std::unique_ptr<PodCgroup> cgroup;
  SandboxContext context;
};

struct Runtime::Record {
  InstanceSpec spec;
  InstanceStatus status;          // guarded by Runtime::mu_
  std::mutex op_mu;               // one lifecycle operation at a time per instance
  std::unique_ptr<Task> task;     // under op_mu
  std::shared_ptr<Watch> watch;   // reactor thread only (created and closed there)
  int log_fd = -1;                // written on the reactor thread, closed after the watch
  std::shared_ptr<Sandbox> sandbox;  // fixed at create
  std::uint64_t oom_baseline = 0;    // the sandbox's OOM kills when this instance started
};

}  // namespace sluice::runtime
