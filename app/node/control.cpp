// The agent's control socket; see control.h.
#include "app/node/control.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "app/node/node_socket.h"

namespace sluice::app::node {

std::string secure_control_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "making " + dir + ": " + ec.message();
  // Whoever made it before, it is root's alone from here on: a socket in it cannot be reached by anyone else.
  if (::chown(dir.c_str(), 0, 0) != 0 || ::chmod(dir.c_str(), 0700) != 0) return dir + ": " + std::strerror(errno);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + ": not a directory";
  return {};
}

bool peer_is_root(int connection, long& peer_uid) {
  ucred peer{};
  socklen_t size = sizeof peer;
  peer_uid = -1;
  if (::getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0) return false;
  peer_uid = static_cast<long>(peer.uid);
  return peer.uid == 0;
}

std::optional<Message> control_command(const std::string& path, std::string_view command, std::string& error,
                                     int& connection) {
  connection = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (unix_connect(connection, path) != 0) {
    error = std::strerror(errno);
    ::close(connection);
    connection = -1;
    return std::nullopt;
  }
  auto m = send_message(connection, command) ? receive_message(connection) : std::nullopt;
  if (!m) {
    error = "the agent closed the connection";
    return std::nullopt;
  }
  return m;
}

}  // namespace sluice::app::node
