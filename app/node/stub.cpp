// `sluice node-stub` (and the sluice-node-stub binary, app/node/stub_main.cpp): what a pod runs in
// queue-proxy's place on a per-node cluster. It joins the node's agent (app/node/mode.cpp) with the pod's
// settings, network namespace, stdout and stderr (app/node/join.h), then sleeps until the pod goes away
// (SIGTERM: drain, exit once drained), its proxy stops (exit with the proxy's code) or the agent goes away
// (join the next one). It runs for the pod's whole life, so it uses nothing but this folder, the message
// transport (app/seqpacket.h), the options and the log: the binary of its own is a fraction of the whole
// sluice's memory.
#include <fcntl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "app/modes.h"
#include "app/node/join.h"
#include "app/node/node_socket.h"
#include "app/node/replies.h"
#include "common/config_error.h"
#include "common/log.h"

extern char** environ;

namespace sluice::app {

int run_node_stub(Args args) {
  const auto socket = node::socket_option(args, "node-stub");
  if (!socket) return 0;
  const std::string& path = *socket;
  const int signals = node::signal_descriptor();
  const int netns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (netns < 0) throw ConfigError(std::string("/proc/self/ns/net: ") + std::strerror(errno));
  // The container's file system, which the agent's does not show: the pod's proxy reads Knative's TLS
  // pair through it.
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) throw ConfigError(std::string("/: ") + std::strerror(errno));
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);

  const auto join = node::encode_join(env, {.netns = netns, .out = STDOUT_FILENO, .err = STDERR_FILENO, .root = root});

  bool told_waiting = false;
  while (true) {
    const runtime::Fd connection(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    const int conn = connection.get();
    if (node::unix_connect(conn, path) != 0) {
      if (!told_waiting) log::info("waiting for the node agent").kv("socket", path).kv("error", std::strerror(errno));
      told_waiting = true;
      if (node::wait_readable({signals}, 1000) == 0) return 0;  // SIGTERM before any agent: nothing to drain
      continue;
    }
    told_waiting = false;
    const auto reply = node::reply_of(send_message(conn, join) ? receive_message(conn) : std::nullopt);
    if (reply && reply->is(node::ReplyWord::refused)) {
      log::error("the node agent refused this pod").kv("reason", reply->detail);
      return 1;
    }
    if (reply && reply->is(node::ReplyWord::joined)) {
      log::info("joined the node agent").kv("socket", path);
      if (node::wait_readable({conn, signals}, -1) == 1) {
        // SIGTERM: the pod is going away. Exit once the agent has drained it (or is gone itself); a
        // second signal exits at once, with 1, as queue-proxy does, and the agent ends the pod's proxy.
        log::info("draining");
        signalfd_siginfo first;
        (void)!::read(signals, &first, sizeof first);
        send_message(conn, node::encode_reply(node::ReplyWord::drain));
        if (node::wait_readable({conn, signals}, -1) == 1) {
          log::warn("second signal: exiting at once");
          return 1;
        }
        const auto drained = node::reply_of(receive_message(conn));
        log::info(drained && drained->is(node::ReplyWord::drained) ? "drained" : "the node agent went away while draining");
        return 0;
      }
      if (const auto m = node::reply_of(receive_message(conn)); m && m->is(node::ReplyWord::stopped)) {
        // The proxy's own exit code (2: a configuration error), as if this container had been it; the
        // kubelet restarts the container, which joins again.
        const std::string& status = m->detail;
        log::error("the pod's proxy stopped").kv("status", status);
        constexpr std::string_view kExited = "exited with code ";
        return status.rfind(kExited, 0) == 0 ? std::atoi(status.c_str() + kExited.size()) : 1;
      }
    }
    log::warn("the node agent went away: joining again when it is back");
    if (node::wait_readable({signals}, 1000) == 0) return 0;
  }
}

}  // namespace sluice::app
