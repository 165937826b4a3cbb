// sluice-csi: per-node mode's CSI plugin. `sluice node` starts it (it sits next to `sluice`) when
// SLUICE_CSI_SOCKET is set: it serves CSI's Identity and Node services on that socket and the kubelet's
// plugin registration on SLUICE_CSI_REGISTRATION_SOCKET, and passes each pod's volume on to the agent's
// control socket (csi/plugin.h). A program of its own so that gRPC stays out of the sidecar binary, which
// every pod's proxy is forked from. Configuration errors print one line and exit 2.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "app/node/control.h"
#include "common/config_error.h"
#include "common/log.h"
#include "csi/plugin.h"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr std::string_view kHelp =
    "usage: sluice-csi   (started by `sluice node` when SLUICE_CSI_SOCKET is set)\n"
    "\n"
    "Per-node mode's CSI plugin: each pod's sluice volume (an ephemeral inline volume) becomes the pod's own\n"
    "socket to the node agent, made by the agent on the kubelet's NodePublishVolume.\n"
    "\n"
    "  SLUICE_CSI_SOCKET                 the CSI socket (required; e.g. /var/lib/kubelet/plugins/csi.sluice.dev/csi.sock)\n"
    "  SLUICE_CSI_REGISTRATION_SOCKET    the kubelet's registration socket for this plugin (e.g.\n"
    "                                    /var/lib/kubelet/plugins_registry/csi.sluice.dev-reg.sock; default: none)\n"
    "  SLUICE_CSI_DRIVER_NAME            the driver's name, as in the CSIDriver object (default csi.sluice.dev)\n"
    "  SLUICE_CSI_ENDPOINT               the CSI socket as the kubelet sees it (default: SLUICE_CSI_SOCKET)\n"
    "  SLUICE_NODE_CONTROL_SOCKET        the agent's control socket (default /run/sluice-control/control.sock)\n"
    "  NODE_NAME                         the node's name, NodeGetInfo's node id (default: the host name)\n";

std::string env_or(const char* key, std::string fallback) {
  const char* v = std::getenv(key);
  return v && *v ? std::string(v) : fallback;
}

// A fresh unix socket path for gRPC: what an earlier plugin left there goes.
std::string unix_listener(const std::string& path, const char* key) {
  if (path.empty() || path.front() != '/') throw ConfigError(std::string(key) + "=\"" + path + "\": expected an absolute path");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) throw ConfigError(std::string(key) + "=\"" + path + "\": " + ec.message());
  ::unlink(path.c_str());
  return "unix:" + path;
}

int serve() {
  const std::string socket = env_or("SLUICE_CSI_SOCKET", "");
  if (socket.empty()) throw ConfigError("SLUICE_CSI_SOCKET is required but not set");
  const std::string registration = env_or("SLUICE_CSI_REGISTRATION_SOCKET", "");
  const std::string control = env_or("SLUICE_NODE_CONTROL_SOCKET", std::string(app::node::kDefaultControlSocket));
  sluice::csi::PluginSettings settings;
  settings.driver_name = env_or("SLUICE_CSI_DRIVER_NAME", settings.driver_name);
  settings.endpoint = env_or("SLUICE_CSI_ENDPOINT", socket);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  settings.node_id = env_or("NODE_NAME", host);
#ifdef SLUICE_VERSION
  settings.version = SLUICE_VERSION;
#endif

  auto services = sluice::csi::make_services(settings, [control](const std::string& command, std::string& error) {
    runtime::Fd conn;
    auto reply = app::node::control_command(control, command, error, conn);
    if (!reply) return std::string();
    return reply->text;
  });
  grpc::ServerBuilder builder;
  builder.AddListeningPort(unix_listener(socket, "SLUICE_CSI_SOCKET"), grpc::InsecureServerCredentials());
  if (!registration.empty())
    builder.AddListeningPort(unix_listener(registration, "SLUICE_CSI_REGISTRATION_SOCKET"), grpc::InsecureServerCredentials());
  builder.RegisterService(services.identity.get());
  builder.RegisterService(services.node.get());
  builder.RegisterService(services.registration.get());
  // Signals are waited for below, on this thread alone.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = builder.BuildAndStart();
  if (!server) throw std::runtime_error("cannot listen on " + socket + (registration.empty() ? "" : " and " + registration));
  // Only the kubelet (root) speaks to the plugin.
  for (const auto& path : {socket, registration})
    if (!path.empty()) ::chmod(path.c_str(), 0600);
  log::info("listening").kv("listener", "csi").kv("socket", socket).kv("registration", registration)
      .kv("driver", settings.driver_name).kv("node_id", settings.node_id);
  int signo = 0;
  sigwait(&signals, &signo);
  log::info("shutting down").kv("signal", signo);
  server->Shutdown(std::chrono::system_clock::now() + 2s);
  for (const auto& path : {socket, registration})
    if (!path.empty()) ::unlink(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::fputs(kHelp.data(), stdout);
    return 0;
  }
  try {
    return serve();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "sluice-csi: configuration error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-csi: fatal: %s\n", e.what());
    return 1;
  }
}
