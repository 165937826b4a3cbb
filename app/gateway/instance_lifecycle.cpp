// The supervisor: an instance's life. Start (on the spawner thread), readiness (an async probe on the
// control thread: Asio sockets and timers, no thread and no tight polling), freeze and thaw (on the
// throttler thread), drain, stop (on a task thread: it waits for the grace period), crash and OOM with
// their back-off. Decisions run on the control thread; an instance's state changes only through its
// revision's gate (gate.h), which asks for starts, thaws and freezes through `Asks`. See fleet.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "app/gateway/fleet.h"
#include "common/log.h"
#include "proxy/control/readiness_probe.h"

namespace sluice::app::gateway {
namespace {

using namespace std::chrono_literals;

// A port nobody listens on now, for an instance's PORT. The kernel picks it; the instance binds it
// moments later (another process could take it between: then the instance fails to start, visibly).
std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string exit_description(const runtime::InstanceStatus& st) {
  if (st.reason == "OOMKilled" && st.memory_limit_bytes)
    return "OOMKilled (memory limit " + std::to_string(*st.memory_limit_bytes >> 20) + " MiB)";
  if (st.signal != 0) return "killed by signal " + std::to_string(st.signal);
  return "exited with code " + std::to_string(st.exit_code);
}

std::string joined(const std::deque<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) {
    if (!out.empty()) out += " | ";
    out += l;
  }
  return out;
}

// Readiness probing, by the instance's age: every 2 ms for its first 50 ms (an app that starts in a few
// ms pays at most 2 ms more), every 5 ms up to 1 s, then every 25 ms (SPEC §8's 25-50 ms). Each try is an
// async connect (or GET) bounded by 100 ms; a refused connect costs microseconds.
Clock::duration probe_pause(Clock::duration age) { return age < 50ms ? 2ms : age < 1s ? 5ms : 25ms; }
constexpr proxy::Millis kProbeTryTimeout{100};

}  // namespace

// What a gate asks, under its lock: posted, so that the supervisor decides on the control thread, and
// freezes and thaws keep their order on the throttler.
class Fleet::Asks final : public Supervision {
 public:
  Asks(Fleet& fleet, Revision& revision) : fleet_(fleet), revision_(revision) {}
  void wanted() override {
    if (start_posted_.exchange(true)) return;  // one decision for the requests of one burst
    asio::post(fleet_.control_, [this] {
      start_posted_ = false;
      fleet_.want_instance(revision_);
    });
  }
  void thaw(const std::shared_ptr<Instance>& instance) override { fleet_.post_thaw(instance->id); }
  void idle(const std::shared_ptr<Instance>& instance) override { fleet_.post_freeze(revision_, instance); }
  void stopped(const std::shared_ptr<Instance>& instance) override { fleet_.end_instance(revision_, instance); }
  void unwanted() override {
    asio::post(fleet_.control_, [this] { fleet_.call_off_starts(revision_); });
  }

 private:
  Fleet& fleet_;
  Revision& revision_;
  std::atomic<bool> start_posted_{false};
};

void Fleet::attach_gate(Revision& s, GateSettings settings) {
  s.supervision = std::make_unique<Asks>(*this, s);
  s.gate = std::make_unique<Gate>(std::move(settings), *s.supervision, clock_);
}

void Fleet::want_instance(Revision& s) {
  if (stopping_ || s.phase != Phase::serving) return;
  auto v = s.gate->view();
  if (v.active == 0 && v.queued != 0) start_instance(s, false);
}

void Fleet::start_instance(Revision& s, bool validation) {
  if (stopping_) return;
  auto inst = std::make_shared<Instance>();
  inst->id = s.config.name + "-" + std::to_string(++*s.instance_numbers);
  // In a pod every instance has its own address and takes PORT 8080; on the host each needs a free port.
  inst->port = s.config.port ? s.config.port : pods_.enabled() ? 8080 : free_port();
  inst->validation = validation;
  inst->created = clock_now();
  s.gate->add(inst);
  instances_changed();
  {
    std::lock_guard lock(registry_mu_);
    registry_[inst->id] = Registered{&s, inst, {}};
  }
  log::info("instance starting").kv("event", "instance.starting").kv("service", s.config.name)
      .kv("revision", s.revision).kv("instance", inst->id).kv("port", static_cast<unsigned>(inst->port));
  Revision* sp = &s;
  asio::post(spawner_, [this, sp, inst] { launch(sp, inst); });
}

// On the spawner thread: the pod, then create and start the instance; then readiness, on the control thread.
void Fleet::launch(Revision* s, std::shared_ptr<Instance> inst) {
  if (stopping_) return;  // shutting down: the fleet's destructor drains this thread
  auto failed = [&](std::string why) {
    asio::post(control_, [this, s, inst, why = std::move(why)] { start_failed(*s, inst, why); });
  };
  const auto& c = s->config;
  runtime::InstanceSpec spec;
  if (s->gate->state(*inst) != InstanceState::starting) return;  // stopped before it started
  spec.port = inst->port;  // set before the instance was added; changed only below
  spec.id = inst->id;
  spec.handler = c.handler;
  spec.command = c.command;
  spec.env = c.env;
  spec.working_dir = c.working_dir;
  spec.rootfs = c.rootfs;
  if (std::string why; !c.image.empty() && !image_spec(s, spec, why)) return failed(why);
  spec.service = c.name;
  spec.configuration = c.name;
  spec.revision = s->revision;
  spec.die_with_starter = true;
  std::string pod_error;
  auto address = pods_.open(c, spec, pod_error);
  if (!address) return failed(pod_error);
  // Known before the app runs, so that its first question to the metadata server finds it.
  s->gate->set_address(*inst, asio::ip::make_address_v4(address->address));
  // The metadata server as the instance reaches it: the host's end of its pod's link, or loopback.
  if (metadata_port_ != 0) {
    const auto where = address->host + ":" + std::to_string(metadata_port_);
    spec.env.emplace("GCE_METADATA_HOST", where);
    spec.env.emplace("GCE_METADATA_IP", where);
  }
  if (auto ok = runtime_.create(spec); !ok) return failed(ok.error());
  if (auto ok = runtime_.start(spec.id); !ok) return failed(ok.error());
  if (auto hook = pods_.post_start(c, spec.id); !hook.empty()) return failed(hook);
  auto st = runtime_.status(spec.id);
  // Stopped while it started (shutdown, a superseded revision): the stop that ended it found nothing to stop.
  if (!s->gate->started(*inst, static_cast<std::uint16_t>(spec.port), st ? st->pid : 0)) {
    end_instance(*s, inst);
    return;
  }
  auto probing = await_ready(s, inst);
  asio::co_spawn(control_, std::move(probing), asio::detached);
}

// On the spawner thread: the service's image (unpacked on its first use) as the instance's rootfs, with
// what its config says where the service says nothing. An image that is not on this machine fails the
// instance with the reason (and is looked for again at the next start), unless a Knative container also
// gave a command to run here instead.
bool Fleet::image_spec(const Revision* s, runtime::InstanceSpec& spec, std::string& error) {
  const auto& c = s->config;
  auto [it, first] = revision_images_.try_emplace(s);
  auto& resolved = it->second;
  if (first) {
    resolved.image = images_.pull(c.image, resolved.error);
    if (resolved.image && resolved.image->unpacked)
      log::info("image " + c.image + " unpacked").kv("event", "image.unpacked").kv("service", c.name)
          .kv("image", resolved.image->id).kv("rootfs", resolved.image->rootfs.string()).kv("ms", resolved.image->unpack_ms);
    else if (!resolved.image && c.image_fallback)
      log::info("image " + c.image + " is not on this machine: " + c.name + " runs its command here")
          .kv("event", "image.fallback").kv("service", c.name).kv("revision", s->revision).kv("reason", resolved.error);
  }
  const auto& image = resolved.image;  // not used after the erase below
  if (!image) {
    if (!c.image_fallback) {
      // Looked for again at the next start: the image may have been built or saved meanwhile.
      error = resolved.error;
      revision_images_.erase(it);
      return false;
    }
    if (c.args) spec.command.insert(spec.command.end(), c.args->begin(), c.args->end());
    return true;
  }
  spec.handler = c.handler == "process" ? "runc" : c.handler;
  spec.rootfs = image->rootfs;
  spec.command = runtime::container_argv(image->config, c.command, c.args);
  if (spec.command.empty()) {
    error = "image " + c.image + " has no entrypoint or cmd: give the container a command:";
    return false;
  }
  // The image's environment first; the service's own values win, and the runtime adds the contract's.
  for (const auto& kv : image->config.env)
    if (auto eq = kv.find('='); eq != std::string::npos) spec.env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  spec.env.emplace("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  if (spec.working_dir.empty() && !image->config.working_dir.empty()) spec.working_dir = image->config.working_dir;
  if (!c.run_as_user && !image->config.user.empty()) {
    int uid = 0, gid = 0;
    if (!runtime::image_user_ids(*image, uid, gid, error)) return false;
    spec.run_as_user = uid;
    if (!c.run_as_group) spec.run_as_group = gid;
  }
  return true;
}

// On the control thread: probe the instance's port (or readiness path) until it answers, it exits
// (handle_exit reports that), or the start deadline passes.
asio::awaitable<void> Fleet::await_ready(Revision* s, std::shared_ptr<Instance> inst) {
  const auto& c = s->config;
  proxy::ReadinessProbeConfig pc;
  for (const auto& i : s->gate->view().instances)
    if (i.id == inst->id) {
      pc.host = i.address.to_string();
      pc.port = i.port;
    }
  if (!c.readiness_path.empty()) {
    pc.kind = proxy::ReadinessProbeConfig::Kind::http_get;
    pc.path = c.readiness_path;
  }
  proxy::UserReadiness probe(pc);
  const auto deadline = inst->created + c.start_deadline;
  asio::steady_timer pause(control_);
  while (true) {
    if (s->gate->state(*inst) != InstanceState::starting || stopping_) co_return;
    auto attempt = probe.try_once(kProbeTryTimeout);  // named: see STYLE.md on co_await
    if (co_await std::move(attempt)) {
      log::debug("instance listening").kv("instance", inst->id).kv("listen_ms", ms_between(inst->created, clock_now()));
      became_ready(*s, inst);
      co_return;
    }
    auto now = clock_now();
    if (now >= deadline) {
      start_failed(*s, inst, "not listening on PORT " + std::to_string(pc.port) + " after " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(c.start_deadline).count()) +
                                 " s");
      co_return;
    }
    pause.expires_after(std::min<Clock::duration>(probe_pause(now - inst->created), deadline - now));
    auto [ec] = co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

void Fleet::became_ready(Revision& s, const std::shared_ptr<Instance>& inst) {
  const auto now = clock_now();
  auto idle = s.gate->became_ready(inst, now);
  if (!idle) return;  // stopped meanwhile
  instances_changed();
  s.failures = 0;
  s.validated = true;
  log::info("instance ready").kv("event", "instance.ready").kv("service", s.config.name).kv("instance", inst->id)
      .kv("port", static_cast<unsigned>(inst->port)).kv("start_ms", ms_between(inst->created, now));
  if (*idle && inst->validation && s.config.scaling.min_scale == 0 && s.scale_to_zero &&
      s.config.scaling.initial_scale == 0) {
    log::info("service validated; scaled to zero until the first request")
        .kv("event", "service.validated").kv("service", s.config.name);
    drain_instance(s, inst);
  } else if (*idle) {
    post_freeze(s, inst);
  }
  if (s.phase == Phase::validating) promote(s);
}

void Fleet::start_failed(Revision& s, const std::shared_ptr<Instance>& inst, const std::string& reason) {
  if (s.gate->state(*inst) == InstanceState::stopped) return;
  if (s.phase == Phase::validating) {
    // A new revision that cannot start never gets traffic: the serving one stays, nothing is retried.
    s.phase = Phase::failed;
    s.reason = reason;
    stop_instance(s, inst);
    auto line = log::error("revision " + s.revision + " failed: " + reason);
    line.kv("event", "revision.failed").kv("service", s.config.name).kv("revision", s.revision).kv("reason", reason);
    for (const auto& other : services_)  // control thread: the list is ours
      if (other.get() != &s && other->config.name == s.config.name && other->phase == Phase::serving)
        line.kv("serving", other->revision);
    return;
  }
  ++s.failures;
  auto backoff = std::chrono::seconds(std::min(60, 1 << std::min(s.failures, 6)));
  log::error("instance failed to start").kv("event", "instance.failed").kv("service", s.config.name)
      .kv("instance", inst->id).kv("reason", reason).kv("retry_after_s", static_cast<std::int64_t>(backoff.count()));
  // Requests are refused with the reason until the retry is due, unless another instance serves meanwhile.
  if (s.gate->start_failed(*inst, reason, clock_now() + backoff)) {
    instances_changed();
    end_instance(s, inst);
  }
}

void Fleet::drain_instance(Revision& s, const std::shared_ptr<Instance>& inst) { drained(s, inst, s.gate->drain(*inst)); }

void Fleet::drained(Revision& s, const std::shared_ptr<Instance>& inst, Gate::Drained how) {
  if (how == Gate::Drained::no) return;
  instances_changed();
  log::info("instance draining").kv("event", "instance.draining").kv("service", s.config.name).kv("instance", inst->id);
  if (how == Gate::Drained::stopped) end_instance(s, inst);
}

void Fleet::call_off_starts(Revision& s) {
  if (stopping_ || s.phase != Phase::serving || s.scaler->desired() > 0) return;
  for (const auto& i : s.gate->call_off_starts()) {
    log::info("instance start called off: the requests it was for went away").kv("event", "instance.called_off")
        .kv("service", s.config.name).kv("instance", i->id);
    instances_changed();
    end_instance(s, i);
  }
}

void Fleet::stop_instance(Revision& s, const std::shared_ptr<Instance>& inst) {
  if (s.gate->stop(*inst)) end_instance(s, inst);
}

void Fleet::end_instance(Revision& s, const std::shared_ptr<Instance>& inst) {
  instances_changed();
  Revision* sp = &s;
  auto grace = s.config.grace;
  tasks_.spawn([this, sp, inst, grace] {
    auto left = pods_.pre_stop(sp->config, inst->id, grace);
    (void)runtime_.stop(inst->id, left);
    auto st = runtime_.status(inst->id);
    (void)runtime_.remove(inst->id);
    pods_.close(inst->id);
    sp->gate->remove(inst);
    instances_changed();
    {
      std::lock_guard lock(registry_mu_);
      if (auto it = registry_.find(inst->id); it != registry_.end() && it->second.instance == inst) registry_.erase(it);
    }
    auto line = log::info("instance stopped");
    line.kv("event", "instance.stopped").kv("service", sp->config.name).kv("instance", inst->id);
    if (st) line.kv("status", exit_description(*st));
  });
}

void Fleet::instances_changed() {
  if (!instances_changed_ || change_posted_.exchange(true)) return;
  asio::post(control_, [this] {
    change_posted_ = false;
    instances_changed_();
  });
}

void Fleet::post_thaw(const std::string& id) {
  asio::post(throttler_, [this, id] {
    if (auto ok = runtime_.thaw(id); !ok) log::warn("thaw failed").kv("instance", id).kv("error", ok.error());
  });
}

void Fleet::post_freeze(Revision& s, const std::shared_ptr<Instance>& inst) {
  asio::post(control_, [this, &s, inst] { freeze_if_idle(s, inst); });
}

void Fleet::freeze_if_idle(Revision& s, const std::shared_ptr<Instance>& inst) {
  // Posted under the gate's lock: a request that thaws it posts its thaw after this, and the throttler
  // runs them in that order.
  s.gate->freeze_if_idle(*inst, clock_now(), [&] {
    asio::post(throttler_, [this, &s, inst] {
      if (auto ok = runtime_.freeze(inst->id); !ok) {
        log::warn("freeze failed").kv("instance", inst->id).kv("error", ok.error());
        s.gate->freeze_failed(*inst);  // the revision runs unthrottled from now on
      }
    });
  });
}

void Fleet::handle_exit(const runtime::InstanceStatus& st) {
  auto [s, inst] = find(st.id);
  if (!inst) return;
  std::deque<std::string> last_output;
  {
    std::lock_guard lock(registry_mu_);
    if (auto it = registry_.find(st.id); it != registry_.end()) last_output = it->second.last_output;
  }
  std::string what = exit_description(st);
  if (!last_output.empty()) what += "; last output: " + joined(last_output);
  const auto state = s->gate->state(*inst);
  if (state == InstanceState::stopped || state == InstanceState::draining) return;
  if (state == InstanceState::starting) {
    start_failed(*s, inst, what + " before listening on PORT " + std::to_string(inst->port));
    return;
  }
  ++s->crashes;
  std::size_t in_flight = 0;
  for (const auto& i : s->gate->view().instances)
    if (i.id == inst->id) in_flight = i.in_flight;
  log::error("instance crashed").kv("event", "instance.crashed").kv("service", s->config.name)
      .kv("instance", inst->id).kv("reason", what).kv("in_flight", static_cast<std::uint64_t>(in_flight));
  // Its exchanges fail on their own (the connection breaks); the lease still releases it.
  stop_instance(*s, inst);
  // A replacement: at once after a long life, after a growing back-off when it keeps crashing early.
  Clock::duration delay = 0s;
  if (clock_now() - inst->ready_at < 10s) {
    ++s->crash_streak;
    delay = std::chrono::seconds(std::min(30, 1 << std::min(s->crash_streak, 5)));
  } else {
    s->crash_streak = 0;
  }
  replace_later(*s, delay);
}

void Fleet::replace_later(Revision& s, Clock::duration delay) {
  auto timer = std::make_shared<asio::steady_timer>(control_, delay);
  timer->async_wait([this, &s, timer](error_code ec) {
    if (ec || s.phase != Phase::serving) return;
    auto want = static_cast<std::size_t>(std::max(s.scaler->desired(), s.config.scaling.min_scale));
    const auto v = s.gate->view();
    if (v.queued != 0) want = std::max<std::size_t>(want, 1);
    if (v.active < want) start_instance(s, false);
  });
}

}  // namespace sluice::app::gateway
