// `sluice run`: one instance under the runtime in the foreground; lifecycle events as JSON lines on stdout,
// SIGTERM/SIGINT drain it (thaw, SIGTERM, grace, SIGKILL), SIGUSR1 thaws and SIGUSR2 freezes it.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/modes.h"
#include "common/config_error.h"
#include "common/log.h"
#include "runtime/readiness.h"
#include "runtime/runtime.h"

namespace sluice::app {
namespace {

namespace rt = sluice::runtime;
using namespace std::chrono_literals;

constexpr const char* kRunUsage =
    "usage: sluice run [options] -- CMD ARGS...\n"
    "  --handler NAME         process (default), runc or crun\n"
    "  --rootfs DIR           root filesystem for OCI handlers\n"
    "  --port N               PORT given to the instance and probed for readiness (default 8080)\n"
    "  --name ID              instance id (default: run-<pid>)\n"
    "  --env KEY=VALUE        extra environment (repeatable)\n"
    "  --grace S              SIGTERM-to-SIGKILL grace period in seconds (default 10)\n"
    "  --start-deadline S     how long to wait for the port (default 240)\n"
    "  --throttle-idle        freeze the instance once ready (SIGUSR1 thaws, SIGUSR2 freezes)\n"
    "  --throttle MECH        auto (default), cgroup2-freeze, cgroup2-cpu-max, cgroup1-freezer,\n"
    "                         cgroup1-cfs-quota, sigstop, none\n"
    "  --log-dir DIR          where <id>.log is written (default: a temporary dir)\n";

struct RunOptions {
  rt::InstanceSpec spec;
  bool throttle_idle = false;
  std::string throttle = "auto";
  std::chrono::milliseconds grace = 10s;
  std::chrono::milliseconds start_deadline = 240s;
  std::string log_dir;
};

double parse_seconds(std::string_view flag, const std::string& v) {
  try {
    size_t used = 0;
    double s = std::stod(v, &used);
    if (used == v.size() && s >= 0 && s <= 86400) return s;
  } catch (const std::exception&) {
  }
  throw ConfigError("--" + std::string(flag) + "=" + v + " is not a number of seconds in [0, 86400]");
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

std::optional<RunOptions> parse(Args args) {
  RunOptions o;
  o.spec.id = "run-" + std::to_string(::getpid());
  size_t i = 0;
  auto value = [&](std::string_view flag, std::string_view arg) -> std::string {
    auto eq = arg.find('=');
    if (eq != std::string_view::npos) return std::string(arg.substr(eq + 1));
    if (i + 1 >= args.size()) throw ConfigError("--" + std::string(flag) + " needs a value");
    return std::string(args[++i]);
  };
  for (; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--") {
      for (++i; i < args.size(); ++i) o.spec.command.emplace_back(args[i]);
      break;
    }
    if (a == "--help" || a == "-h") {
      std::fputs(kRunUsage, stdout);
      return std::nullopt;
    }
    if (a.substr(0, 2) != "--") throw ConfigError("unexpected argument '" + std::string(a) + "' (put the command after --)");
    auto name = a.substr(2, a.find('=') == std::string_view::npos ? std::string_view::npos : a.find('=') - 2);
    if (name == "throttle-idle") {
      o.throttle_idle = true;
    } else if (name == "handler") {
      o.spec.handler = value(name, a);
    } else if (name == "rootfs") {
      o.spec.rootfs = value(name, a);
    } else if (name == "name") {
      o.spec.id = value(name, a);
    } else if (name == "throttle") {
      o.throttle = value(name, a);
    } else if (name == "log-dir") {
      o.log_dir = value(name, a);
    } else if (name == "grace") {
      o.grace = millis(parse_seconds(name, value(name, a)));
    } else if (name == "start-deadline") {
      o.start_deadline = millis(parse_seconds(name, value(name, a)));
    } else if (name == "port") {
      auto v = value(name, a);
      int port = 0;
      try {
        port = std::stoi(v);
      } catch (const std::exception&) {
      }
      if (port < 1 || port > 65535 || std::to_string(port) != v)
        throw ConfigError("--port=" + v + " is not a port in [1, 65535]");
      o.spec.port = port;
    } else if (name == "env") {
      auto kv = value(name, a);
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) throw ConfigError("--env=" + kv + " is not KEY=VALUE");
      o.spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    } else {
      throw ConfigError("unknown flag '" + std::string(a) + "'\n" + kRunUsage);
    }
  }
  if (o.spec.command.empty()) throw ConfigError(std::string("no command given (sluice run -- CMD ARGS)\n") + kRunUsage);
  return o;
}

void print_event(const rt::Event& e) {
  auto line = log::info("instance " + std::string(rt::to_string(e.kind)));
  line.kv("event", rt::to_string(e.kind)).kv("instance", e.status.id).kv("handler", e.status.handler);
  if (e.status.pid > 0) line.kv("pid", static_cast<std::int64_t>(e.status.pid));
  if (e.kind == rt::EventKind::exited) {
    line.kv("reason", e.status.reason);
    if (e.status.signal != 0)
      line.kv("signal", e.status.signal);
    else
      line.kv("exit_code", e.status.exit_code);
  }
  if (e.kind == rt::EventKind::created) line.kv("log_file", e.status.log_file.string());
}

int exit_code_of(const rt::InstanceStatus& st) { return st.signal != 0 ? 128 + st.signal : st.exit_code; }

}  // namespace

int run_instance(Args args) {
  auto parsed = parse(args);
  if (!parsed) return 0;
  RunOptions o = std::move(*parsed);

  // Blocked before the runtime starts its thread, so only sigtimedwait below sees these; children unblock.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  rt::RuntimeOptions ro;
  ro.throttle = o.throttle;
  ro.default_grace = o.grace;
  if (!o.log_dir.empty()) ro.log_dir = o.log_dir;
  ro.on_event = print_event;
  ro.on_output = [](const std::string& id, rt::Stream s, std::string_view text) {
    log::info("output").kv("instance", id).kv("stream", s == rt::Stream::out ? "stdout" : "stderr").kv("line", text);
  };
  rt::Runtime runtime(ro);
  log::info("runtime ready")
      .kv("event", "runtime")
      .kv("throttle", rt::to_string(runtime.throttle().kind))
      .kv("throttle_detail", runtime.throttle().detail)
      .kv("cgroup", runtime.throttle().base.string());
  if (auto ok = runtime.check_handler(o.spec.handler); !ok) throw ConfigError(ok.error());
  const std::string id = o.spec.id;
  o.spec.die_with_starter = true;  // started from this (the main) thread: a killed `sluice run` takes it along
  if (auto ok = runtime.create(o.spec); !ok) throw ConfigError(ok.error());
  if (auto ok = runtime.start(id); !ok) {
    log::error("instance failed to start").kv("event", "start_failed").kv("instance", id).kv("error", ok.error());
    (void)runtime.remove(id);
    return 1;
  }

  auto exited = [&] { return runtime.status(id)->state == rt::InstanceState::exited; };
  std::jthread readiness([&](std::stop_token stop) {
    rt::ReadinessProbe probe;
    probe.port = o.spec.port;
    auto r = rt::wait_ready(probe, std::chrono::steady_clock::now() + o.start_deadline, stop, exited);
    if (r.outcome == rt::Readiness::ready) {
      log::info("instance ready").kv("event", "ready").kv("instance", id).kv("port", o.spec.port)
          .kv("waited_ms", static_cast<std::int64_t>(r.waited.count()));
      if (o.throttle_idle) {
        if (auto f = runtime.freeze(id); !f) log::warn("freeze failed").kv("instance", id).kv("error", f.error());
      }
    } else if (r.outcome == rt::Readiness::deadline) {
      log::warn("instance not listening on PORT").kv("event", "not_ready").kv("instance", id)
          .kv("port", o.spec.port).kv("waited_ms", static_cast<std::int64_t>(r.waited.count()))
          .kv("last_error", r.last_error);
    }
  });

  bool drained = false;
  while (!exited()) {
    timespec tick{0, 50'000'000};
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      auto r = sig == SIGUSR1 ? runtime.thaw(id) : runtime.freeze(id);
      if (!r) log::warn("throttle request failed").kv("instance", id).kv("error", r.error());
    } else if (sig == SIGTERM || sig == SIGINT) {
      log::info("draining instance").kv("event", "drain").kv("instance", id)
          .kv("grace_ms", static_cast<std::int64_t>(o.grace.count()));
      readiness.request_stop();
      readiness.join();
      if (auto r = runtime.stop(id, o.grace); !r) log::error("stop failed").kv("instance", id).kv("error", r.error());
      drained = true;
      break;
    }
  }
  readiness.request_stop();
  if (readiness.joinable()) readiness.join();
  auto st = runtime.status(id);
  if (!drained) (void)runtime.stop(id);  // already exited: releases what it left behind
  int code = st && st->state == rt::InstanceState::exited ? exit_code_of(*st) : 1;
  (void)runtime.remove(id);
  return code;
}

}  // namespace sluice::app
