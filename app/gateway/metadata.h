// A local stand-in for Cloud Run's metadata server (optional in the runtime contract): on a port given to
// every instance as GCE_METADATA_HOST and GCE_METADATA_IP (loopback, or its pod link's host end), /computeMetadata/v1/... answers
// requests that carry `Metadata-Flavor: Google` (403 without, as Google's does) with the project
// ("local"), region ("local"), the calling instance's id, service and revision, and a service-account
// token that is plainly fake (it works nowhere: it only lets client libraries start).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/control_listener.h"

namespace sluice::app::gateway {

struct MetadataCaller {
  std::string instance, service, revision;
};

// The fake token's value, documented in docs/gateway.md ("The metadata server").
inline constexpr const char* kFakeToken = "sluice-local-fake-token-valid-nowhere";

// The answer for one request; `caller` is the instance that asked, when known. Exposed for tests.
net::ControlResponse metadata_answer(const net::ControlRequest& req, const std::optional<MetadataCaller>& caller);

// Which instance owns the client end of a loopback connection to `server_port` from `client_port`:
// the socket's inode from /proc/net/tcp, then the instance whose process holds it (`pids`: id → pid).
std::optional<std::string> instance_of_connection(std::uint16_t client_port, std::uint16_t server_port,
                                                  const std::vector<std::pair<std::string, int>>& pids);

}  // namespace sluice::app::gateway
