// The agent's control socket; see control.h.
#include "app/node/control.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
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
                                     runtime::Fd& connection) {
  runtime::Fd conn(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (unix_connect(conn.get(), path) != 0) {
    error = std::strerror(errno);
    connection = runtime::Fd();
    return std::nullopt;
  }
  connection = std::move(conn);
  auto m = send_message(connection.get(), command) ? receive_message(connection.get()) : std::nullopt;
  if (!m) {
    error = "the agent closed the connection";
    return std::nullopt;
  }
  return m;
}

namespace {

// The first line's words, one space apart.
std::vector<std::string_view> line_words(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  std::vector<std::string_view> words;
  for (std::size_t at = 0; at <= line.size();) {
    const auto end = std::min(line.find(' ', at), line.size());
    words.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

template <typename... Words>
std::string command_line(std::string_view verb, const Words&... words) {
  std::string line(verb);
  ((line += " ", line += words), ...);
  return line + "\n";
}

}  // namespace

std::string encode_control_command(const ControlCommand& command) {
  struct Encode {
    std::string operator()(const HandoverCommand& c) const { return command_line("handover", c.generation); }
    std::string operator()(const PublishCommand& c) const {
      const auto& p = c.publication;
      return command_line("publish", p.volume, p.pod.namespace_name, p.pod.name, p.pod.uid, p.target);
    }
    std::string operator()(const UnpublishCommand& c) const { return command_line("unpublish", c.volume, c.target); }
    std::string operator()(const ReadyCommand&) const { return command_line("ready"); }
  };
  return std::visit(Encode{}, command);
}

Decoded<ControlCommand> decode_control_command(std::string_view text) {
  // The first word as a reader of words takes it (up to white space): what an unknown command is called.
  const auto start = text.find_first_not_of(" \t\r\n");
  const std::string verb(start == std::string_view::npos ? std::string_view() : text.substr(start, text.find_first_of(" \t\r\n", start) - start));
  // The verb and exactly `count` words, one line.
  const auto shape = [&](std::size_t count) -> std::optional<std::vector<std::string_view>> {
    auto words = line_words(text);
    const bool one_line = text.find('\n') == text.size() - 1;
    if (!one_line || words.size() != count + 1 || std::ranges::count(words, std::string_view()) != 0) return std::nullopt;
    return words;
  };
  const auto expected = [](std::string_view form) { return "expected \"" + std::string(form) + "\""; };
  if (verb == "handover") {
    const auto w = shape(1);
    if (!w) return expected("handover GENERATION");
    return ControlCommand{HandoverCommand{std::string((*w)[1])}};
  }
  if (verb == "publish") {
    const auto w = shape(5);
    if (!w) return expected("publish VOLUME NAMESPACE NAME UID TARGET");
    Publication p;
    p.volume = (*w)[1];
    p.pod.namespace_name = (*w)[2];
    p.pod.name = (*w)[3];
    p.pod.uid = (*w)[4];
    p.target = (*w)[5];
    return ControlCommand{PublishCommand{std::move(p)}};
  }
  if (verb == "unpublish") {
    const auto w = shape(2);
    if (!w) return expected("unpublish VOLUME TARGET");
    return ControlCommand{UnpublishCommand{std::string((*w)[1]), std::string((*w)[2])}};
  }
  if (verb == "ready") {
    if (!shape(0)) return expected("ready");
    return ControlCommand{ReadyCommand{}};
  }
  return "unknown command \"" + verb + "\"";
}

}  // namespace sluice::app::node
