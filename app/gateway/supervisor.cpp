// The instance supervisor; see supervisor.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "app/gateway/supervisor.h"

#include <future>

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
// An instance still not listening this long after it started is told about, once: the usual cause is an
// app that listens on a port of its own instead of $PORT.
constexpr auto kNotListeningNote = std::chrono::seconds(5);

}  // namespace

// What a gate asks, under its lock: posted, so that the supervisor decides on the control thread, and
// freezes and thaws keep their order on the throttler.
class InstanceSupervisor::Asks final : public Supervision {
 public:
  Asks(InstanceSupervisor& supervisor, Revision& revision) : supervisor_(supervisor), revision_(revision) {}
  void wanted() override {
    if (start_posted_.exchange(true)) return;  // one decision for the requests of one burst
    asio::post(supervisor_.control_, [this] {
      start_posted_ = false;
      supervisor_.want(revision_);
    });
  }
  void thaw(const std::shared_ptr<Instance>& instance) override { supervisor_.post_thaw(instance->id); }
  void idle(const std::shared_ptr<Instance>& instance) override { supervisor_.post_freeze(revision_, instance); }
  void stopped(const std::shared_ptr<Instance>& instance) override { supervisor_.end(revision_, instance); }
  void unwanted() override {
    asio::post(supervisor_.control_, [this] { supervisor_.call_off_starts(revision_); });
  }

 private:
  InstanceSupervisor& supervisor_;
  Revision& revision_;
  std::atomic<bool> start_posted_{false};
};

void Tasks::spawn(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    ++running_;
  }
  std::thread([this, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      log::error("gateway task failed").kv("error", e.what());
    }
    std::lock_guard lock(mu_);
    if (--running_ == 0) cv_.notify_all();
  }).detach();
}

void Tasks::wait_all() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return running_ == 0; });
}

InstanceSupervisor::InstanceSupervisor(const GatewayConfig& config, runtime::RuntimeService& runtime,
                                       asio::io_context& control, RevisionEvents& events,
                                       std::function<Clock::time_point()> clock)
    : config_(config),
      runtime_(runtime),
      control_(control),
      events_(events),
      clock_(std::move(clock)),
      pods_(config, runtime),
      images_(!config.image_cache.empty()            ? std::filesystem::path(config.image_cache)
              : std::getenv("SLUICE_IMAGE_CACHE") ? std::filesystem::path(std::getenv("SLUICE_IMAGE_CACHE"))
                                                     : runtime::ImageStore::default_cache_dir()) {}

InstanceSupervisor::~InstanceSupervisor() {
  stopping_ = true;
  spawner_.join();
  throttler_.join();
  tasks_.wait_all();
}

void InstanceSupervisor::wait_stopped() {
  // Starts already posted find stopping_ set and stop what they made; then every stop has been spawned.
  std::promise<void> spawned;
  asio::post(spawner_, [&] { spawned.set_value(); });
  spawned.get_future().wait();
  tasks_.wait_all();
}

std::pair<Revision*, std::shared_ptr<Instance>> InstanceSupervisor::find(const std::string& id) const {
  std::lock_guard lock(registry_mu_);
  auto it = registry_.find(id);
  if (it == registry_.end()) return {nullptr, nullptr};
  return {it->second.revision, it->second.instance};
}

void InstanceSupervisor::on_runtime_event(const runtime::Event& e) {
  if (e.kind != runtime::EventKind::exited) return;
  asio::post(control_, [this, st = e.status] { handle_exit(st); });
}

void InstanceSupervisor::on_output(const std::string& id, runtime::Stream stream, std::string_view line) {
  std::string service;
  {
    std::lock_guard lock(registry_mu_);
    if (auto it = registry_.find(id); it != registry_.end()) service = it->second.revision->config.name;
  }
  logs_.add(service, id, line);
  if (plain_output_) {
    std::string out = id + " \u2502 ";
    out.append(line);
    log::write_line(out);
    return;
  }
  log::info("output").kv("service", service).kv("instance", id)
      .kv("stream", stream == runtime::Stream::out ? "stdout" : "stderr").kv("line", line);
}

void InstanceSupervisor::attach_gate(Revision& s, GateSettings settings) {
  s.supervision = std::make_unique<Asks>(*this, s);
  s.gate = std::make_unique<Gate>(std::move(settings), *s.supervision, clock_);
}

void InstanceSupervisor::want(Revision& s) {
  if (stopping_ || s.phase != Phase::serving) return;
  auto v = s.gate->view();
  if (v.active == 0 && v.queued != 0) start(s, false);
}

void InstanceSupervisor::start(Revision& s, bool validation) {
  if (stopping_) return;
  auto inst = std::make_shared<Instance>();
  inst->id = s.config.name + "-" + std::to_string(++*s.instance_numbers);
  // In a pod every instance has its own address and takes PORT 8080; on the host each needs a free port.
  inst->port = s.config.port ? s.config.port : pods_.enabled() ? 8080 : free_port();
  inst->validation = validation;
  inst->created = now();
  s.gate->add(inst);
  instances_changed();
  {
    std::lock_guard lock(registry_mu_);
    registry_[inst->id] = Registered{&s, inst};
  }
  log::info("instance starting").kv("event", "instance.starting").kv("service", s.config.name)
      .kv("revision", s.revision).kv("instance", inst->id).kv("port", static_cast<unsigned>(inst->port));
  Revision* sp = &s;
  asio::post(spawner_, [this, sp, inst] { launch(sp, inst); });
}

// On the spawner thread: the pod, then create and start the instance; then readiness, on the control thread.
void InstanceSupervisor::launch(Revision* s, std::shared_ptr<Instance> inst) {
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
  // Python writes to a pipe in blocks: its prints would reach the log only when 8 KiB piled up (or at
  // exit). Unbuffered, as Google's buildpacks set it, unless the service or the gateway's shell says otherwise.
  if (!c.env.contains("PYTHONUNBUFFERED") && !std::getenv("PYTHONUNBUFFERED")) spec.env.emplace("PYTHONUNBUFFERED", "1");
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
  proxy_env(address->host, spec.env);
  if (auto ok = runtime_.create(spec); !ok) return failed(ok.error());
  if (auto ok = runtime_.start(spec.id); !ok) return failed(ok.error());
  if (auto hook = pods_.post_start(c, spec.id); !hook.empty()) return failed(hook);
  auto st = runtime_.status(spec.id);
  // Stopped while it started (shutdown, a superseded revision): the stop that ended it found nothing to stop.
  if (!s->gate->started(*inst, static_cast<std::uint16_t>(spec.port), st ? st->pid : 0)) {
    end(*s, inst);
    return;
  }
  auto probing = await_ready(s, inst);
  asio::co_spawn(control_, std::move(probing), asio::detached);
}

// Other services by name, with the app's own HTTP client: its plain-http calls go through the gateway as
// their forward proxy (http_proxy, which curl, Python, Go, Ruby and Node with NODE_USE_ENV_PROXY read), so
// `http://web/` reaches service web wherever its instances are; loopback names go direct (no_proxy, with
// the gateway's own list after). HTTPS calls are not touched. A service that sets http_proxy keeps its
// own (in its env or its image's). An instance in a pod reaches the gateway at its link's host end only when the gateway listens on
// every address.
void InstanceSupervisor::proxy_env(const std::string& host_seen_from_instance,
                                   std::map<std::string, std::string>& env) const {
  if (gateway_port_ == 0 || env.contains("http_proxy") || env.contains("HTTP_PROXY")) return;
  std::string where;
  if (gateway_address_ == "0.0.0.0" || gateway_address_ == "::") where = host_seen_from_instance;
  else if (!pods_.enabled()) where = gateway_address_;
  else return;
  if (where.find(':') != std::string::npos) where = "[" + where + "]";
  const auto url = "http://" + where + ":" + std::to_string(gateway_port_);
  std::string bypass = "localhost,127.0.0.1,::1";
  for (const char* name : {"no_proxy", "NO_PROXY"})
    if (const char* own = std::getenv(name); own && *own) {
      bypass += ",";
      bypass += own;
      break;
    }
  for (const char* name : {"http_proxy", "HTTP_PROXY"}) env.emplace(name, url);
  for (const char* name : {"no_proxy", "NO_PROXY"}) env.try_emplace(name, bypass);
  env.try_emplace("NODE_USE_ENV_PROXY", "1");
}

// On the spawner thread: the service's image (unpacked on its first use) as the instance's rootfs, with
// what its config says where the service says nothing. An image that is not on this machine fails the
// instance with the reason (and is looked for again at the next start), unless a Knative container also
// gave a command to run here instead.
bool InstanceSupervisor::image_spec(const Revision* s, runtime::InstanceSpec& spec, std::string& error) {
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
  return runtime::apply_image(*image, {c.image, c.handler, c.command, c.args, c.run_as_user, c.run_as_group}, spec, error);
}

// On the control thread: probe the instance's port (or readiness path) until it answers, it exits
// (handle_exit reports that), or the start deadline passes.
asio::awaitable<void> InstanceSupervisor::await_ready(Revision* s, std::shared_ptr<Instance> inst) {
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
  bool told = false;
  while (true) {
    if (s->gate->state(*inst) != InstanceState::starting || stopping_) co_return;
    auto attempt = probe.try_once(kProbeTryTimeout);  // named: see STYLE.md on co_await
    if (co_await std::move(attempt)) {
      log::debug("instance listening").kv("instance", inst->id).kv("listen_ms", ms_between(inst->created, now()));
      became_ready(*s, inst);
      co_return;
    }
    const auto t = now();
    if (!told && t - inst->created >= kNotListeningNote && c.readiness_path.empty()) {
      told = true;
      const std::string what = inst->id + " runs, but nothing listens on PORT " + std::to_string(pc.port) +
                               " after " + std::to_string(kNotListeningNote.count()) +
                               " s: does the app listen on $PORT?";
      log::warn(what + " (waiting up to start-deadline)").kv("event", "instance.not_listening")
          .kv("service", c.name).kv("instance", inst->id).kv("port", static_cast<unsigned>(pc.port));
      s->gate->note_start_waits(what);
    }
    if (t >= deadline) {
      start_failed(*s, inst, "not listening on PORT " + std::to_string(pc.port) + " after " +
                                 std::to_string(std::chrono::duration_cast<std::chrono::seconds>(c.start_deadline).count()) +
                                 " s");
      co_return;
    }
    pause.expires_after(std::min<Clock::duration>(probe_pause(t - inst->created), deadline - t));
    auto [ec] = co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
  }
}

void InstanceSupervisor::became_ready(Revision& s, const std::shared_ptr<Instance>& inst) {
  const auto t = now();
  // A validation instance of a revision that scales to zero goes once it proved the service, unless a
  // request took it first (decided under the gate's lock, so no request gets it as it goes).
  const bool validated_only = inst->validation && s.config.scaling.min_scale == 0 && s.scale_to_zero &&
                              s.config.scaling.initial_scale == 0;
  const auto readied = s.gate->became_ready(inst, t, validated_only);
  if (readied == Gate::Readied::no) return;  // stopped meanwhile
  instances_changed();
  s.supervised.failures = 0;
  s.supervised.validated = true;
  log::info("instance ready").kv("event", "instance.ready").kv("service", s.config.name).kv("instance", inst->id)
      .kv("port", static_cast<unsigned>(inst->port)).kv("start_ms", ms_between(inst->created, t));
  if (readied == Gate::Readied::stopped) {
    log::info("service validated; scaled to zero until the first request")
        .kv("event", "service.validated").kv("service", s.config.name);
    drained(s, inst, Gate::Drained::stopped);
  } else if (readied == Gate::Readied::idle) {
    post_freeze(s, inst);
  }
  if (s.phase == Phase::validating) events_.validated(s);
}

void InstanceSupervisor::start_failed(Revision& s, const std::shared_ptr<Instance>& inst, const std::string& reason) {
  if (s.gate->state(*inst) == InstanceState::stopped) return;
  if (s.phase == Phase::validating) {
    stop(s, inst);
    events_.failed(s, reason);
    return;
  }
  ++s.supervised.failures;
  auto backoff = std::chrono::seconds(std::min(60, 1 << std::min(s.supervised.failures, 6)));
  log::error("instance failed to start").kv("event", "instance.failed").kv("service", s.config.name)
      .kv("instance", inst->id).kv("reason", reason).kv("retry_after_s", static_cast<std::int64_t>(backoff.count()));
  // Requests are refused with the reason until the retry is due, unless another instance serves meanwhile.
  if (s.gate->start_failed(*inst, reason, now() + backoff)) {
    instances_changed();
    end(s, inst);
  }
}

void InstanceSupervisor::drain(Revision& s, const std::shared_ptr<Instance>& inst) { drained(s, inst, s.gate->drain(*inst)); }

void InstanceSupervisor::drained(Revision& s, const std::shared_ptr<Instance>& inst, Gate::Drained how) {
  if (how == Gate::Drained::no) return;
  instances_changed();
  log::info("instance draining").kv("event", "instance.draining").kv("service", s.config.name).kv("instance", inst->id);
  if (how == Gate::Drained::stopped) end(s, inst);
}

void InstanceSupervisor::call_off_starts(Revision& s) {
  if (stopping_ || s.phase != Phase::serving || s.supervised.desired > 0) return;
  for (const auto& i : s.gate->call_off_starts()) {
    log::info("instance start called off: the requests it was for went away").kv("event", "instance.called_off")
        .kv("service", s.config.name).kv("instance", i->id);
    instances_changed();
    end(s, i);
  }
}

void InstanceSupervisor::stop(Revision& s, const std::shared_ptr<Instance>& inst) {
  if (s.gate->stop(*inst)) end(s, inst);
}

void InstanceSupervisor::end(Revision& s, const std::shared_ptr<Instance>& inst) {
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
    logs_.ended(inst->id);
    auto line = log::info("instance stopped");
    line.kv("event", "instance.stopped").kv("service", sp->config.name).kv("instance", inst->id);
    if (st) line.kv("status", exit_description(*st));
  });
}

void InstanceSupervisor::instances_changed() {
  if (!instances_changed_ || change_posted_.exchange(true)) return;
  asio::post(control_, [this] {
    change_posted_ = false;
    instances_changed_();
  });
}

void InstanceSupervisor::post_thaw(const std::string& id) {
  asio::post(throttler_, [this, id] {
    if (auto ok = runtime_.thaw(id); !ok) log::warn("thaw failed").kv("instance", id).kv("error", ok.error());
  });
}

void InstanceSupervisor::post_freeze(Revision& s, const std::shared_ptr<Instance>& inst) {
  asio::post(control_, [this, &s, inst] { freeze_if_idle(s, inst); });
}

void InstanceSupervisor::freeze_if_idle(Revision& s, const std::shared_ptr<Instance>& inst) {
  // Posted under the gate's lock: a request that thaws it posts its thaw after this, and the throttler
  // runs them in that order.
  s.gate->freeze_if_idle(*inst, now(), [&] {
    asio::post(throttler_, [this, &s, inst] {
      if (auto ok = runtime_.freeze(inst->id); !ok) {
        log::warn("freeze failed").kv("instance", inst->id).kv("error", ok.error());
        s.gate->freeze_failed(*inst);  // the revision runs unthrottled from now on
      }
    });
  });
}

void InstanceSupervisor::handle_exit(const runtime::InstanceStatus& st) {
  auto [s, inst] = find(st.id);
  if (!inst) return;
  constexpr std::size_t kOutputLinesTold = 5;
  const auto last_output = logs_.last(st.id, kOutputLinesTold);
  std::string what = exit_description(st);
  if (!last_output.empty()) what += "; last output: " + joined(last_output);
  const auto state = s->gate->state(*inst);
  if (state == InstanceState::stopped || state == InstanceState::draining) return;
  if (state == InstanceState::starting) {
    start_failed(*s, inst, what + " before listening on PORT " + std::to_string(inst->port));
    return;
  }
  ++s->supervised.crashes;
  std::size_t in_flight = 0;
  for (const auto& i : s->gate->view().instances)
    if (i.id == inst->id) in_flight = i.in_flight;
  log::error("instance crashed").kv("event", "instance.crashed").kv("service", s->config.name)
      .kv("instance", inst->id).kv("reason", what).kv("in_flight", static_cast<std::uint64_t>(in_flight));
  // Its exchanges fail on their own (the connection breaks); the lease still releases it.
  stop(*s, inst);
  // A replacement: at once after a long life, after a growing back-off when it keeps crashing early.
  Clock::duration delay = 0s;
  if (now() - inst->ready_at < 10s) {
    ++s->supervised.crash_streak;
    delay = std::chrono::seconds(std::min(30, 1 << std::min(s->supervised.crash_streak, 5)));
  } else {
    s->supervised.crash_streak = 0;
  }
  replace_later(*s, delay);
}

void InstanceSupervisor::replace_later(Revision& s, Clock::duration delay) {
  auto timer = std::make_shared<asio::steady_timer>(control_, delay);
  timer->async_wait([this, &s, timer](error_code ec) {
    if (ec || s.phase != Phase::serving) return;
    auto wanted = static_cast<std::size_t>(std::max(s.supervised.desired, s.config.scaling.min_scale));
    const auto v = s.gate->view();
    if (v.queued != 0) wanted = std::max<std::size_t>(wanted, 1);
    if (v.active < wanted) start(s, false);
  });
}

void InstanceSupervisor::scale(Revision& s, std::int32_t desired) {
  s.supervised.desired = desired;
  if (stopping_) return;
  auto want = static_cast<std::size_t>(std::max(desired, 0));
  const auto v = s.gate->view();
  // Requests are waiting for an instance that is not coming: the decision lags, the buffer does not.
  if (v.queued != 0) want = std::max<std::size_t>(want, 1);
  auto have = v.active;
  if (have < want) {
    if (!v.failed_reason.empty() && now() < v.retry_at) return;
    for (; have < want; ++have) start(s, false);
    return;
  }
  // Scale down ready instances only (a starting one is about to serve), idle and frozen ones first.
  if (have == want) return;
  for (const auto& [inst, how] : s.gate->drain_idlest(have - want)) drained(s, inst, how);
}

void InstanceSupervisor::refreeze(Revision& s, Clock::time_point t) {
  for (auto& i : s.gate->warm_expired(t)) freeze_if_idle(s, i);
}

}  // namespace sluice::app::gateway
