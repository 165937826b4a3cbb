// What the agent (app/node/mode.cpp) and the stub (app/node/stub.cpp) both do around the node's unix
// socket: where it is, its address, waiting on it and on signals, and reading a reply's words.
#pragma once

#include <sys/types.h>
#include <sys/un.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/modes.h"

namespace sluice::app::node {

// The stub's socket to the agent, from --socket or SLUICE_NODE_SOCKET (default kDefaultSocket); nullopt once
// --help was answered (for `mode`).
std::optional<std::string> socket_option(Args args, std::string_view mode);

// connect(2) and bind(2) of a unix socket at `path`, whatever its length: a path longer than a socket
// address holds (a kubelet's volume paths come close: /var/lib/kubelet/pods/UID/volumes/kubernetes.io~csi/
// NAME/mount/node.sock) is reached through its directory, /proc/self/fd/N/NAME. 0, or -1 with errno set.
int unix_connect(int socket, const std::string& path);
int unix_bind(int socket, const std::string& path);

// A listening unix socket (SOCK_SEQPACKET, non-blocking) at `path` with permissions `mode`, which appears
// there only once it listens: bound as `.NAME` beside it, then renamed over whatever was at `path` (an
// earlier agent's socket that no longer answers). Whoever sees the path can connect. The descriptor, or -1
// with errno set (and nothing left behind).
int unix_listen_in_place(const std::string& path, mode_t mode);

// SIGTERM and SIGINT as a descriptor to poll; blocked in every thread started after this.
int signal_descriptor();

// Readable within `timeout_ms` (or forever, -1): the index of the first readable of `fds`, or -1.
int wait_readable(std::vector<int> fds, int timeout_ms);


}  // namespace sluice::app::node
