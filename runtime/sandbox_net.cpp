// Pod namespaces and link through netlink, in the calling thread: unshare(CLONE_NEWNET | CLONE_NEWIPC)
// changes only that thread, which returns to its own namespaces (setns) before this returns. A short-lived
// thread instead was measured ~3 ms slower on a loaded machine (bench/runtime/sandbox.sh: it waits for a CPU).
#include "runtime/sandbox_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <charconv>
#include <cstring>

#include "runtime/cgroup_fs.h"
#include "runtime/netlink.h"

namespace sluice::runtime {
namespace {

constexpr int kLinkPrefix = 31;  // point-to-point: two addresses per pod, no network or broadcast address

bool fail(std::string& error, std::string what) {
  error = std::move(what);
  return false;
}

bool set_up(int slot, std::uint32_t range, PodNetwork& out, std::string& error) {
  int host_ns = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  int host_ipc = ::open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
  auto close_home = [&] {
    if (host_ns >= 0) ::close(host_ns);
    if (host_ipc >= 0) ::close(host_ipc);
  };
  if (host_ns < 0 || host_ipc < 0) {
    close_home();
    return fail(error, std::string("open own namespaces: ") + std::strerror(errno));
  }
  netlink::Socket host;
  if (!host.ok()) {
    close_home();
    return fail(error, host.error());
  }
  if (::unshare(CLONE_NEWNET | CLONE_NEWIPC) != 0) {
    close_home();
    return fail(error, std::string("unshare(CLONE_NEWNET | CLONE_NEWIPC): ") + std::strerror(errno));
  }
  out.netns_fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  out.ipcns_fd = ::open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
  netlink::Socket pod;  // bound to the new namespace: created after unshare
  out.host_link = host_link_name(slot);
  out.host_address = range + 2U * static_cast<std::uint32_t>(slot);
  out.pod_address = out.host_address + 1;
  bool ok = out.netns_fd >= 0 && out.ipcns_fd >= 0 && pod.ok();
  if (!ok) error = pod.ok() ? std::string("open the new namespaces: ") + std::strerror(errno) : pod.error();
  // The slot is ours (its file was created exclusively), so a link of its name is a leftover: replace it.
  auto create = [&] {
    if (host.create_veth(out.host_link, "eth0", out.netns_fd)) return true;
    return errno == EEXIST && host.delete_link(out.host_link) && host.create_veth(out.host_link, "eth0", out.netns_fd);
  };
  ok = ok && (create() || fail(error, host.error()));
  std::optional<int> host_index, pod_index;
  ok = ok && ((host_index = host.link_index(out.host_link)) || fail(error, host.error()));
  ok = ok && (host.add_ipv4(*host_index, out.host_address, kLinkPrefix) || fail(error, host.error()));
  ok = ok && ((pod_index = pod.link_index("eth0")) || fail(error, pod.error()));
  ok = ok && (pod.add_ipv4(*pod_index, out.pod_address, kLinkPrefix) || fail(error, pod.error()));
  ok = ok && (pod.set_up("lo") || fail(error, pod.error()));
  ok = ok && (pod.set_up("eth0") || fail(error, pod.error()));
  // Back home, also for the host end's settings (/proc/sys/net shows the opening thread's namespace). A thread
  // left in a pod's namespaces would put later work there: that is not survivable, so it cannot happen.
  if (::setns(host_ns, CLONE_NEWNET) != 0 || ::setns(host_ipc, CLONE_NEWIPC) != 0) {
    std::fprintf(stderr, "sluice: cannot return to the runtime's namespaces (setns: %s)\n", std::strerror(errno));
    std::abort();
  }
  close_home();
  const std::string conf = "/proc/sys/net/ipv4/conf/" + out.host_link + "/forwarding";
  ok = ok && (cgroup::write_file(conf, "0", &error) || fail(error, "disable forwarding on " + out.host_link + ": " + error));
  ok = ok && (host.set_up(out.host_link) || fail(error, host.error()));
  if (!ok) {
    if (!out.host_link.empty()) host.delete_link(out.host_link);
    if (out.netns_fd >= 0) ::close(out.netns_fd);
    if (out.ipcns_fd >= 0) ::close(out.ipcns_fd);
    out = PodNetwork{};
  }
  return ok;
}

}  // namespace

std::optional<std::pair<std::uint32_t, int>> parse_cidr(std::string_view text) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string addr(text.substr(0, slash));
  int prefix = 0;
  auto tail = text.substr(slash + 1);
  auto [p, ec] = std::from_chars(tail.data(), tail.data() + tail.size(), prefix);
  if (ec != std::errc() || p != tail.data() + tail.size() || prefix < 8 || prefix > 30) return std::nullopt;
  in_addr a{};
  if (::inet_pton(AF_INET, addr.c_str(), &a) != 1) return std::nullopt;
  std::uint32_t host = ntohl(a.s_addr);
  std::uint32_t mask = ~0U << (32 - prefix);
  if ((host & ~mask) != 0) return std::nullopt;  // "10.1.2.3/16" is a typo, not a range
  return std::pair{host, prefix};
}

std::string ipv4_text(std::uint32_t address) {
  in_addr a{};
  a.s_addr = htonl(address);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

int pod_slots(int prefix) { return static_cast<int>((1U << (32 - prefix)) / 2); }

std::string host_link_name(int slot) { return "sluice" + std::to_string(slot); }

bool create_pod_network(int slot, std::uint32_t range, PodNetwork& out, std::string& error) {
  return set_up(slot, range, out, error);
}

bool delete_host_link(const std::string& name, std::string& error) {
  netlink::Socket s;
  if (!s.ok()) return fail(error, s.error());
  if (s.delete_link(name)) return true;
  return fail(error, s.error());
}

void destroy_pod_network(PodNetwork& net) {
  std::string ignored;
  if (!net.host_link.empty()) delete_host_link(net.host_link, ignored);
  if (net.netns_fd >= 0) ::close(net.netns_fd);
  if (net.ipcns_fd >= 0) ::close(net.ipcns_fd);
  net = PodNetwork{};
}

}  // namespace sluice::runtime
