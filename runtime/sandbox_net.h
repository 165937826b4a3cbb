// A pod's namespaces: its own network namespace (own loopback) with a veth pair to the host, on a /31 out of a
// private range sluice owns on this machine. No default route inside and forwarding off on the host end:
// a pod reaches the host end of its link and nothing else, so nothing is ever routed off the machine. And
// an IPC namespace its containers share, as in a Kubernetes pod.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sluice::runtime {

struct PodNetwork {
  int netns_fd = -1;                  // pins the namespace; processes join it with setns
  int ipcns_fd = -1;                  // likewise for the pod's IPC namespace
  std::string host_link;              // the host end, "sluice<slot>"; the pod end is "eth0"
  std::uint32_t host_address = 0;     // host byte order
  std::uint32_t pod_address = 0;
};

// "169.254.64.0/18" → (network, prefix); nullopt when malformed or the prefix is not in [8, 30].
std::optional<std::pair<std::uint32_t, int>> parse_cidr(std::string_view text);
std::string ipv4_text(std::uint32_t address);
// How many /31 links a range holds.
int pod_slots(int prefix);

// Creates the namespaces and link for `slot` of the range; the calling thread is back in its own namespaces
// when this returns. False with `error` set; nothing is left behind then.
bool create_pod_network(int slot, std::uint32_t range, PodNetwork& out, std::string& error);
// Deletes the veth (both ends) and drops the namespace pins; the namespaces go with their last process.
void destroy_pod_network(PodNetwork& net);
// The host end's name for a slot (also what a sweep deletes after a crash).
std::string host_link_name(int slot);
// Deletes a link by name in the caller's namespace; true when it is gone (or never was).
bool delete_host_link(const std::string& name, std::string& error);

}  // namespace sluice::runtime
