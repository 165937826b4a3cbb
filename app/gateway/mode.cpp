// `sluice gateway`: a local serverless gateway. The proxy's workers take requests on :8080 and ask the
// fleet for an instance of the service the Host names; the fleet starts instances on demand (holding
// requests in its cold-start buffer meanwhile), scales them with each service's KPA, freezes idle ones,
// and on SIGTERM/SIGINT the gateway drains: no new connections, in-flight and buffered requests finish,
// then every instance is stopped (SIGTERM, grace, SIGKILL) and the process exits 0. A repeat of the
// signal within a second is the same stop (a terminal's Ctrl-C and a wrapper script's SIGTERM arrive
// together); one after that kills every instance and exits 130 at once. SIGHUP re-reads the config.
// Whatever the exit, /tmp/sluice-<pid> (instance dirs and logs) goes with the gateway.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json/serialize.hpp>

#include "app/gateway/config.h"
#include "app/gateway/dashboard.h"
#include "app/gateway/fleet.h"
#include "app/gateway/json_text.h"
#include "app/gateway/local_ca.h"
#include "app/gateway/metadata.h"
#include "app/gateway/status_view.h"
#include "app/gateway/watcher.h"
#include "app/modes.h"
#include "common/config_error.h"
#include "common/control_listener.h"
#include "common/log.h"
#include "proxy/server/server.h"
#include "runtime/runtime.h"
#include "runtime/sandbox_net.h"

namespace sluice::app {
namespace {

namespace gw = sluice::app::gateway;
namespace asio = boost::asio;
using namespace std::chrono_literals;

constexpr const char* kGatewayUsage =
    "usage: sluice gateway [options] -- CMD ARGS...   one service on :8080, started on the first request\n"
    "       sluice gateway [options] --config FILE    services from sluice.yaml (or a Procfile)\n"
    "       sluice gateway --check FILE               validate FILE and exit\n"
    "With neither, ./sluice.yaml or ./Procfile is used when present.\n"
    "options:\n"
    "  --listen [ADDR:]PORT   where requests arrive (default 127.0.0.1:8080)\n"
    "  --admin [ADDR:]PORT    dashboard, /.sluice/status and /metrics (default 127.0.0.1:8079; 0: any free port)\n"
    "  --https PORT|off       HTTPS and h2 on this port of the listen address, with a certificate from a\n"
    "                         local CA made once (~/.local/share/sluice/ca; the log says how to trust it)\n"
    "  --workers N            proxy worker threads (default: one per CPU)\n"
    "  --status MODE          auto (table on a terminal, JSON lines otherwise), tty, json or none\n"
    "  --request-lines on|off one line a request (method, path, status, time, instance; default on)\n"
    "  --throttle MECH        auto, cgroup2-freeze, cgroup2-cpu-max, cgroup1-freezer, cgroup1-cfs-quota,\n"
    "                         sigstop or none (no throttling)\n"
    "  --no-throttle          the one-liner's service runs unthrottled\n"
    "  --sandbox MODE         auto, on or off (default): each instance in a pod of its own (network\n"
    "                         namespace, address, cgroup with the service's memory/cpu limits)\n";

// The command line's settings over the file's: at start, and again on every reload of the file, so that
// a reload compares like with like (and reports no restart as needed for a flag that never changed).
struct Flags {
  std::vector<std::pair<std::string, std::string>> overrides;
  bool no_throttle = false;
  void apply(gw::GatewayConfig& g) const;
};

struct Cli {
  std::optional<gw::GatewayConfig> config;
  Flags flags;
  bool check = false;
  bool help = false;
};

std::pair<std::string, std::uint16_t> host_port_flag(const std::string& flag, const std::string& v,
                                                     const std::string& default_host) {
  if (auto hp = gw::parse_host_port(v, default_host)) return *hp;
  throw ConfigError("--" + flag + "=" + v + " is not [ADDRESS:]PORT");
}

// What a gateway killed outright (kill -9) left in the temp dir: /tmp/sluice-<pid> of a process that is gone.
void sweep_leftover_state_dirs() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
    auto name = entry.path().filename().string();
    if (!name.starts_with("sluice-") || name.size() == 7) continue;
    auto digits = name.substr(7);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    int pid = std::stoi(digits);
    if (pid <= 1 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::getuid()) continue;
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
    log::info("removed what an earlier gateway left").kv("dir", entry.path().string());
  }
}

void Flags::apply(gw::GatewayConfig& g) const {
  if (no_throttle)
    for (auto& s : g.services) s.throttling = false;
  for (const auto& [name, value] : overrides) {
    if (name == "listen") std::tie(g.listen_address, g.port) = host_port_flag(name, value, g.listen_address);
    else if (name == "admin") std::tie(g.admin_address, g.admin_port) = host_port_flag(name, value, g.admin_address);
    else if (name == "https") {
      bool ok = false;
      g.https_port = gw::parse_https_port(value, ok);
      if (!ok) throw ConfigError("--https=" + value + " is not a port or off");
    } else if (name == "status") {
      if (value != "auto" && value != "tty" && value != "json" && value != "none")
        throw ConfigError("--status=" + value + " is not auto, tty, json or none");
      g.status_output = value;
    } else if (name == "request-lines") {
      if (value != "on" && value != "off") throw ConfigError("--request-lines=" + value + " is not on or off");
      g.request_lines = value == "on";
    } else if (name == "throttle") {
      g.throttle_mechanism = value;
    } else if (name == "sandbox") {
      auto mode = gw::parse_sandbox_mode(value);
      if (!mode) throw ConfigError("--sandbox=" + value + " is not auto, on or off");
      g.sandbox = *mode;
    } else if (name == "workers") {
      try {
        size_t used = 0;
        int n = std::stoi(value, &used);
        if (used != value.size() || n < 0 || n > 256) throw std::out_of_range("workers");
        g.workers = static_cast<unsigned>(n);
      } catch (const std::exception&) {
        throw ConfigError("--workers=" + value + " is not a number in [0, 256]");
      }
    }
  }
}

Cli parse_cli(Args args) {
  Cli cli;
  std::vector<std::string> command;
  std::string file;
  auto& overrides = cli.flags.overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a(args[i]);
    if (a == "--") {
      for (++i; i < args.size(); ++i) command.emplace_back(args[i]);
      break;
    }
    if (a == "--help" || a == "-h") {
      cli.help = true;
      return cli;
    }
    if (a == "--no-throttle") {
      cli.flags.no_throttle = true;
      continue;
    }
    if (a.substr(0, 2) != "--") throw ConfigError("unexpected argument '" + a + "' (put the command after --)");
    std::string name = a.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= args.size()) throw ConfigError("--" + name + " needs a value");
      value = std::string(args[++i]);
    }
    if (name == "config" || name == "check") {
      file = value;
      cli.check = cli.check || name == "check";
    } else if (name == "listen" || name == "admin" || name == "workers" || name == "status" || name == "throttle" ||
               name == "sandbox" || name == "request-lines" || name == "https") {
      overrides.emplace_back(name, value);
    } else {
      throw ConfigError("unknown flag '--" + name + "'\n" + kGatewayUsage);
    }
  }
  if (!command.empty() && !file.empty()) throw ConfigError("give either --config FILE or -- CMD ARGS, not both");
  if (command.empty() && file.empty()) {
    if (std::filesystem::exists("sluice.yaml")) file = "sluice.yaml";
    else if (std::filesystem::exists("Procfile")) file = "Procfile";
    else throw ConfigError(std::string("no command and no sluice.yaml or Procfile here\n") + kGatewayUsage);
  }
  gw::GatewayConfig g = file.empty() ? gw::one_liner(std::move(command)) : gw::load_file(file);
  cli.flags.apply(g);
  cli.config = std::move(g);
  return cli;
}

}  // namespace

int run_gateway(Args args) {
  Cli cli = parse_cli(args);
  if (cli.help) {
    std::fputs(kGatewayUsage, stdout);
    return 0;
  }
  const gw::GatewayConfig& cfg = *cli.config;
  if (const char* level = std::getenv("SLUICE_LOG_LEVEL")) {
    log::Level l = log::Level::info;
    if (!log::parse_level(level, l)) throw ConfigError(std::string("SLUICE_LOG_LEVEL=") + level + " is not debug, info, warn or error");
    log::set_level(l);
  }
  if (cli.check) {
    for (const auto& w : cfg.warnings) std::printf("warning: %s\n", w.c_str());
    std::printf("%s: ok, %zu service%s:", cfg.source.c_str(), cfg.services.size(), cfg.services.size() == 1 ? "" : "s");
    for (const auto& s : cfg.services) std::printf(" %s%s", s.name.c_str(), s.is_default ? " (default)" : "");
    std::printf("\n");
    return 0;
  }

  // Plain lines on a terminal, JSON otherwise: decided before the first line (the sweep below may log).
  const bool terminal = gw::StatusView::is_terminal(cfg.status_output);
  log::set_plain(terminal);

  // Before any thread starts, so that every thread's signals reach the signal set.
  asio::io_context control(1);
  asio::signal_set signals(control, SIGTERM, SIGINT, SIGHUP);
  sweep_leftover_state_dirs();
  const std::filesystem::path state_dir = std::filesystem::temp_directory_path() / ("sluice-" + std::to_string(::getpid()));

  std::atomic<gw::Fleet*> fleet_ptr{nullptr};
  runtime::RuntimeOptions ro;
  ro.throttle = cfg.throttle_mechanism;
  ro.sandbox_network = cfg.sandbox_network;
  ro.state_dir = state_dir;
  ro.on_event = [&fleet_ptr](const runtime::Event& e) {
    if (auto* f = fleet_ptr.load()) f->on_runtime_event(e);
  };
  ro.on_output = [&fleet_ptr](const std::string& id, runtime::Stream s, std::string_view line) {
    if (auto* f = fleet_ptr.load()) f->on_output(id, s, line);
  };
  runtime::Runtime runtime(ro);
  for (const auto& s : cfg.services)
    if (auto ok = runtime.check_handler(s.handler); !ok)
      throw ConfigError(cfg.source + ": services." + s.name + ".handler: " + ok.error());

  auto fleet = std::make_shared<gw::Fleet>(cfg, runtime, control);
  fleet_ptr = fleet.get();
  // Each field the file has that sluice does not use, said once (a reload says only new ones).
  std::set<std::string> warned;
  auto warn_ignored = [&warned](const std::vector<std::string>& warnings) {
    for (const auto& w : warnings)
      if (warned.insert(w).second) log::warn(w).kv("event", "config.ignored");
  };
  warn_ignored(cfg.warnings);
  // The metadata server, on a port of its own (Cloud Run's contract: GCE_METADATA_HOST). Instances on the
  // host reach it on loopback; instances in pods at their link's host end, so with pods it listens on every
  // address and answers loopback and the pods' range only. The caller is the instance that owns the
  // loopback connection, or the pod the address belongs to.
  std::unique_ptr<net::ControlListener> metadata;
  const auto pod_range = fleet->sandboxed() ? runtime::parse_cidr(cfg.sandbox_network) : std::nullopt;
  const std::string metadata_address = pod_range ? "0.0.0.0" : "127.0.0.1";
  if (cfg.metadata_server) {
    metadata = std::make_unique<net::ControlListener>(
        control, "metadata", metadata_address, 0,
        [&](const net::ControlRequest& req) -> asio::awaitable<net::ControlResponse> {
          const auto peer = std::string(req[net::kPeerField]);
          const auto colon = peer.rfind(':');
          boost::system::error_code ec;
          const auto ip = asio::ip::make_address_v4(peer.substr(0, colon), ec);
          const std::uint32_t mask = pod_range ? ~0U << (32 - pod_range->second) : 0;
          std::optional<std::string> id;
          if (!ec && ip.is_loopback() && colon != std::string::npos) {
            const auto client_port = static_cast<std::uint16_t>(std::stoul(peer.substr(colon + 1)));
            id = gw::instance_of_connection(client_port, metadata->port(), fleet->instance_pids());
          } else if (!ec && pod_range && (ip.to_uint() & mask) == pod_range->first) {
            id = fleet->instance_at(ip);
          } else {
            co_return net::ControlResponse{403, "text/plain", "the metadata server answers this machine's instances only\n"};
          }
          std::optional<gw::MetadataCaller> caller;
          if (id)
            if (auto sr = fleet->service_and_revision(*id)) caller = gw::MetadataCaller{*id, sr->first, sr->second};
          co_return gw::metadata_answer(req, caller);
        });
    fleet->set_metadata_port(metadata->port());
  }
  fleet->set_plain_output(terminal);
  fleet->set_request_lines(cfg.request_lines);
  {
    auto line = log::info("gateway starting");
    line.kv("event", "gateway").kv("throttle", runtime::to_string(runtime.throttle().kind))
        .kv("throttle_detail", runtime.throttle().detail)
        .kv("sandbox", fleet->sandboxed() ? "pods" : "host-network")
        .kv("instance_logs", (state_dir / "logs").string() + " (removed when the gateway exits)");
    for (const auto& s : cfg.services)
      line.kv("service." + s.name, std::string(gw::throttling_on(cfg, s) ? "throttled" : "unthrottled") +
                                       (gw::scale_to_zero_on(cfg, s) ? ", scales to zero" : ", min-scale ≥ 1"));
  }

  // HTTPS: a certificate from the local CA for every name the gateway answers to, made again when the
  // config changes them (the proxy picks up the new files within a second).
  std::optional<gw::LocalCa> ca;
  const auto tls_dir = state_dir / "tls";
  auto issue_certificate = [&](const gw::GatewayConfig& g) {
    std::vector<std::string> names = {"localhost", "127.0.0.1", "::1"};
    auto add = [&names](const std::string& name) {
      const bool dns_name = !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-:") == std::string::npos;
      if (dns_name && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    };
    for (const auto& s : g.services) {
      for (const auto& h : s.hosts) add(gw::host_of(h));
      for (const auto& t : s.traffic)
        if (!t.tag.empty()) add(gw::host_of(t.tag + "-" + s.name + ".localhost"));
    }
    if (g.listen_address != "0.0.0.0" && g.listen_address != "::") add(g.listen_address);
    gw::issue_server_cert(*ca, names, tls_dir / "cert.pem", tls_dir / "key.pem");
  };
  if (cfg.https_port) {
    ca = gw::load_or_create_ca(gw::default_ca_dir());
    std::error_code made;
    std::filesystem::create_directories(state_dir, made);
    if (::mkdir(tls_dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw ConfigError(tls_dir.string() + ": cannot be made: " + std::strerror(errno));
    issue_certificate(cfg);
    if (ca->created) {
      const auto pem = ca->cert_file().string();
      log::info("made a local certificate authority for https; trust it once: curl --cacert " + pem +
                "; Debian/Ubuntu: sudo cp " + pem + " /usr/local/share/ca-certificates/sluice-local-ca.crt && "
                "sudo update-ca-certificates; Chromium/Firefox: certutil -d sql:$HOME/.pki/nssdb -A -t C,, -n sluice -i " + pem)
          .kv("event", "https.ca_created").kv("ca", pem);
    }
  }

  proxy::ProxyConfig pc;
  pc.listen_address = cfg.listen_address;
  pc.port = cfg.port;
  pc.workers = cfg.workers;
  pc.upstream_max_idle = 64;
  pc.timeouts.request = cfg.request_timeout;
  pc.timeouts.instance_accept = cfg.accept_timeout;
  if (cfg.https_port) {
    pc.tls = proxy::TlsConfig{.cert_file = (tls_dir / "cert.pem").string(),
                              .key_file = (tls_dir / "key.pem").string(),
                              .min_version = proxy::TlsVersion::v1_2,
                              .max_version = proxy::TlsVersion::v1_3,
                              .reload_interval = std::chrono::seconds(1)};
    pc.tls_port = *cfg.https_port;
  }
  proxy::Server server(pc, fleet);

  net::ControlListener admin(control, "admin", cfg.admin_address, cfg.admin_port,
                               [&](const net::ControlRequest& req) -> asio::awaitable<net::ControlResponse> {
                                 auto target = req.target();
                                 if (target == "/.sluice/status")
                                   co_return net::ControlResponse{200, "application/json",
                                                                    gw::json_text(fleet->status()) + "\n"};
                                 if (target == "/metrics")
                                   co_return net::ControlResponse{200, "text/plain; version=0.0.4", fleet->prometheus()};
                                 if (target == "/.sluice/requests")
                                   co_return net::ControlResponse{200, "application/json",
                                                                    gw::json_text(fleet->recent_requests()) + "\n"};
                                 if (target == "/.sluice/logs")
                                   co_return net::ControlResponse{200, "application/json",
                                                                    gw::json_text(fleet->instance_logs()) + "\n"};
                                 if (target == "/healthz") co_return net::ControlResponse{200, "text/plain", "ok\n"};
                                 if (target == "/" || target == "/index.html")
                                   co_return net::ControlResponse{200, "text/html; charset=utf-8",
                                                                    std::string(gw::dashboard_html())};
                                 co_return net::ControlResponse{404, "text/plain", "not found: try /, /.sluice/status, /.sluice/requests, /.sluice/logs or /metrics\n"};
                               });
  // SIGHUP or an edit of the file: it is read again; a bad edit is reported (file:line) and the running
  // config stays. On the control thread.
  const bool from_file = cfg.source != "command line";
  std::unique_ptr<gw::Watcher> watcher;
  auto reload = [&] {
    if (!from_file) {
      log::info("nothing to reload: the service comes from the command line");
      return;
    }
    try {
      auto next = gw::load_file(cfg.source);
      cli.flags.apply(next);
      log::info("config reloaded").kv("event", "config.reloaded").kv("file", cfg.source)
          .kv("services", static_cast<std::uint64_t>(next.services.size()));
      auto services = next.services;
      auto inputs = next.inputs;
      warn_ignored(next.warnings);
      if (ca) issue_certificate(next);  // new hosts, new names
      fleet->apply(std::move(next));
      if (watcher) watcher->watch(services, inputs);
    } catch (const ConfigError& e) {
      log::error("config not reloaded: " + std::string(e.what()) + " (the running config stays)")
          .kv("event", "config.invalid").kv("file", cfg.source).kv("error", e.what());
    }
  };
  watcher = std::make_unique<gw::Watcher>(
      control, from_file ? cfg.source : "", cfg.debounce, reload,
      [&](const std::string& service, const std::string& what, std::chrono::steady_clock::time_point last) {
        fleet->files_changed(service, what, last);
      });
  watcher->watch(cfg.services, cfg.inputs);
  watcher->start();
  server.start();
  fleet->set_gateway_listener(cfg.listen_address, server.port());  // bound now; before any instance starts
  admin.start();
  if (metadata) metadata->start();
  asio::post(control, [&] { fleet->start(); });
  const std::string https_url =
      ca ? "https://" + (cfg.listen_address == "127.0.0.1" ? std::string("localhost") : cfg.listen_address) + ":" +
               std::to_string(server.tls_port()) + "/"
         : "";
  const std::string serving = "· http://" + cfg.listen_address + ":" + std::to_string(server.port()) + "/" +
                              (ca ? " · " + https_url : "") + " · dashboard http://" + cfg.admin_address + ":" + std::to_string(admin.port()) +
                              "/ · Ctrl-C drains and stops";
  gw::StatusView view(control, *fleet, cfg.status_output, serving);
  view.start();
  log::info("listening").kv("listener", "admin").kv("address", cfg.admin_address).kv("port", static_cast<unsigned>(admin.port()));
  if (metadata)
    log::info("listening").kv("listener", "metadata").kv("address", metadata_address).kv("port", static_cast<unsigned>(metadata->port()));
  if (ca)
    log::info("listening").kv("listener", "https").kv("address", cfg.listen_address)
        .kv("port", static_cast<unsigned>(server.tls_port())).kv("ca", ca->cert_file().string());
  // Last: harnesses wait for this line, by which time every port above is bound.
  log::info("listening").kv("listener", "gateway").kv("address", cfg.listen_address)
      .kv("port", static_cast<unsigned>(server.port())).kv("workers", server.workers())
      .kv("services", static_cast<std::uint64_t>(cfg.services.size()));


  std::promise<void> finished;
  std::thread drainer;
  asio::co_spawn(control, [&]() -> asio::awaitable<void> {
    std::optional<std::chrono::steady_clock::time_point> stopping_since;
    while (true) {
      auto [ec, sig] = co_await signals.async_wait(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      if (sig == SIGHUP) {
        if (!stopping_since) reload();
        continue;
      }
      if (stopping_since) {
        if (std::chrono::steady_clock::now() - *stopping_since < 1s) {
          log::info("already draining (a second signal a second or more later kills at once)").kv("signal", sig);
          continue;
        }
        log::warn("second signal: killing every instance and exiting").kv("signal", sig);
        for (const auto& st : runtime.list())
          if (st.pid > 0 && st.state == runtime::InstanceState::running) ::kill(st.pid, SIGKILL);
        std::error_code rm;
        std::filesystem::remove_all(state_dir, rm);
        std::_Exit(130);
      }
      stopping_since = std::chrono::steady_clock::now();
      watcher->stop();
      log::info("draining").kv("signal", sig).kv("open_connections", server.open_connections());
      view.stop();
      // Off the control thread: the fleet keeps starting instances for buffered requests meanwhile.
      drainer = std::thread([&] {
        server.shutdown({.in_flight = cfg.drain_timeout, .upgraded = cfg.drain_timeout});
        log::info("drained: stopping instances");
        fleet->stop_all();
        finished.set_value();
      });
    }
  }, asio::detached);
  std::thread control_thread([&] { control.run(); });
  finished.get_future().wait();
  drainer.join();
  control.stop();
  control_thread.join();
  admin.close();  // the control thread is gone: nothing else touches the acceptor now
  if (metadata) metadata->close();
  fleet_ptr = nullptr;
  log::info("stopped");
  return 0;
}

}  // namespace sluice::app
