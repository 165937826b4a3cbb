// The metadata server's answers; see metadata.h.
#include "app/gateway/metadata.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace sluice::app::gateway {
namespace {

constexpr std::string_view kBase = "/computeMetadata/v1/";

net::ControlResponse text(unsigned status, std::string body, std::string type = "application/text") {
  net::ControlResponse r{status, std::move(type), std::move(body), {}};
  r.headers.emplace_back("Metadata-Flavor", "Google");
  r.headers.emplace_back("Server", "Metadata Server for sluice gateway");
  return r;
}

}  // namespace

net::ControlResponse metadata_answer(const net::ControlRequest& req, const std::optional<MetadataCaller>& caller) {
  std::string target(req.target());
  auto query = target.find('?');
  std::string path = target.substr(0, query);
  // Google's server refuses what a proxy forwarded and what lacks the header (SSRF protection).
  if (req.find("X-Forwarded-For") != req.end())
    return text(403, "Request denied: X-Forwarded-For is not allowed\n", "text/plain; charset=utf-8");
  auto flavor = req["Metadata-Flavor"];
  if (flavor != "Google")
    return text(403, "Missing required header: \"Metadata-Flavor: Google\"\n", "text/plain; charset=utf-8");
  if (path == "/" || path == "/computeMetadata/" || path == "/computeMetadata/v1" || path == kBase)
    return text(200, "instance/\nproject/\n");
  if (!path.starts_with(kBase)) return text(404, "not found\n", "text/plain; charset=utf-8");
  auto key = path.substr(kBase.size());
  if (key == "project/project-id") return text(200, "local");
  if (key == "project/numeric-project-id") return text(200, "0");
  if (key == "instance/region") return text(200, "projects/0/regions/local");
  if (key == "instance/zone") return text(200, "projects/0/zones/local-1");
  if (key == "instance/service-accounts/" || key == "instance/service-accounts")
    return text(200, "default/\nlocal@sluice.invalid/\n");
  if (key == "instance/service-accounts/default/email") return text(200, "local@sluice.invalid");
  if (key == "instance/service-accounts/default/scopes") return text(200, "https://www.googleapis.com/auth/cloud-platform\n");
  if (key == "instance/service-accounts/default/token")
    return text(200, std::string(R"({"access_token":")") + kFakeToken + R"(","expires_in":3599,"token_type":"Bearer"})",
                "application/json");
  if (key == "instance/id" || key == "instance/attributes/service" || key == "instance/attributes/revision") {
    if (!caller) return text(404, "not an instance of this gateway\n", "text/plain; charset=utf-8");
    if (key == "instance/id") return text(200, caller->instance);
    if (key == "instance/attributes/service") return text(200, caller->service);
    return text(200, caller->revision);
  }
  return text(404, "not found: " + key + "\n", "text/plain; charset=utf-8");
}

std::optional<std::string> instance_of_connection(std::uint16_t client_port, std::uint16_t server_port,
                                                  const std::vector<std::pair<std::string, int>>& pids) {
  // /proc/net/tcp: "sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode".
  std::ifstream sockets("/proc/net/tcp");
  std::string line, inode;
  std::getline(sockets, line);
  while (std::getline(sockets, line)) {
    std::istringstream in(line);
    std::string sl, local, remote, st, queues, timer, retr, uid, timeout, node;
    in >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> node;
    auto port_of = [](const std::string& a) {
      auto c = a.find(':');
      return c == std::string::npos ? 0UL : std::stoul(a.substr(c + 1), nullptr, 16);
    };
    if (port_of(local) == client_port && port_of(remote) == server_port) {
      inode = node;
      break;
    }
  }
  if (inode.empty() || inode == "0") return std::nullopt;
  const std::string wanted = "socket:[" + inode + "]";
  // The process holding the socket: the instance itself or one of its descendants (a shell's curl).
  auto holds = [&](const std::string& pid) {
    std::error_code ec;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/" + pid + "/fd", ec)) {
      auto link = std::filesystem::read_symlink(fd.path(), ec);
      if (!ec && link.string() == wanted) return true;
    }
    return false;
  };
  auto parent = [](int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    auto close = all.rfind(')');
    int ppid = 0;
    if (close != std::string::npos) std::sscanf(all.c_str() + close + 1, " %*c %d", &ppid);
    return ppid;
  };
  auto instance_of = [&](int pid) -> std::optional<std::string> {
    for (int hops = 0; pid > 1 && hops < 64; ++hops, pid = parent(pid))
      for (const auto& [id, instance_pid] : pids)
        if (instance_pid == pid) return id;
    return std::nullopt;
  };
  for (const auto& [id, pid] : pids)
    if (holds(std::to_string(pid))) return id;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos || !holds(name)) continue;
    return instance_of(std::stoi(name));
  }
  return std::nullopt;
}

}  // namespace sluice::app::gateway
