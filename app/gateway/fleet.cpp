// The gateway's instances and cold-start buffer; see fleet.h.
#include "app/gateway/fleet.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <random>

#include <boost/json/array.hpp>

#include "common/log.h"
#include "runtime/readiness.h"

namespace sluice::app::gateway {
namespace {

namespace json = boost::json;
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

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
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

constexpr std::size_t kOutputLinesKept = 5;

}  // namespace

std::string_view to_string(InstanceState s) {
  switch (s) {
    case InstanceState::starting: return "starting";
    case InstanceState::ready: return "ready";
    case InstanceState::draining: return "draining";
    case InstanceState::stopped: return "stopped";
  }
  return "?";
}

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

class Fleet::Hold {
 public:
  Hold(Fleet& f, Service& s, std::shared_ptr<Instance> i, Clock::time_point arrived)
      : fleet_(f), service_(s), instance_(std::move(i)), arrived_(arrived) {}
  ~Hold() { fleet_.release(service_, instance_, arrived_); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

 private:
  Fleet& fleet_;
  Service& service_;
  std::shared_ptr<Instance> instance_;
  Clock::time_point arrived_;
};

Fleet::Fleet(const GatewayConfig& config, runtime::Runtime& runtime, asio::io_context& control)
    : config_(config),
      runtime_(runtime),
      pods_(config, runtime),
      control_(control),
      stat_timer_(control),
      scale_timer_(control),
      housekeeping_timer_(control) {
  current_ = std::make_shared<GatewayConfig>(config);
  std::lock_guard lock(mu_);
  for (const auto& sc : config.services) {
    for (auto earlier : sc.earlier) {  // a Knative file's older revisions of the Service
      earlier.is_default = sc.is_default;
      earlier.hosts = sc.hosts;
      add_revision(earlier, config, Phase::serving, "");
    }
    assign_traffic(sc.name, sc.traffic, add_revision(sc, config, Phase::serving, ""));
  }
}

Fleet::~Fleet() {
  stopping_ = true;
  tasks_.wait_all();
  spawner_.join();
}

Fleet::Service* Fleet::primary(const std::string& name) {
  Service* best = nullptr;
  for (auto& s : services_)
    if (s->config.name == name && s->phase == Phase::serving && (!best || s->percent > best->percent)) best = s.get();
  return best;
}

Fleet::Service* Fleet::route(std::string_view host, std::string_view tag) {
  if (auto colon = host.rfind(':'); colon != std::string_view::npos && host.find(']') == std::string_view::npos)
    host = host.substr(0, colon);
  else if (auto bracket = host.find("]:"); bracket != std::string_view::npos)
    host = host.substr(0, bracket + 1);
  // Lookups in indexes rebuilt when revisions change: the cost does not grow with the number of services.
  auto h = lower(host);
  if (auto t = tag_host_index_.find(h); t != tag_host_index_.end()) return t->second;  // <tag>-<service>.localhost
  auto named = host_index_.find(h);
  const std::string& service = named != host_index_.end() ? named->second : default_name_;
  auto serving = serving_index_.find(service);
  if (serving == serving_index_.end()) return nullptr;
  // Knative-Serving-Tag picks the tagged revision (an unknown tag: the split, as Knative does).
  if (!tag.empty() && config_.features.tag_header_routing != FeatureState::disabled)
    for (auto* s : serving->second)
      if (std::find(s->tags.begin(), s->tags.end(), tag) != s->tags.end()) return s;
  // The percent split.
  thread_local std::minstd_rand rng{std::random_device{}()};
  int roll = static_cast<int>(rng() % 100), seen = 0;
  Service* last = nullptr;
  for (auto* s : serving->second) {
    if (s->percent <= 0) continue;
    last = s;
    seen += s->percent;
    if (roll < seen) return last;
  }
  return last;
}

void Fleet::reindex() {
  host_index_.clear();
  tag_host_index_.clear();
  serving_index_.clear();
  for (auto& s : services_) {
    if (s->phase != Phase::serving) continue;
    serving_index_[s->config.name].push_back(s.get());
    for (const auto& h : s->config.hosts) host_index_[h] = s->config.name;
    for (const auto& t : s->tags) tag_host_index_[lower(t + "-" + s->config.name + ".localhost")] = s.get();
  }
}

std::shared_ptr<Instance> Fleet::pick(Service& s) const {
  const auto cc = static_cast<std::size_t>(s.config.scaling.container_concurrency);
  std::shared_ptr<Instance> best;
  for (const auto& i : s.instances) {
    if (i->state != InstanceState::ready || (cc != 0 && i->in_flight >= cc)) continue;
    // Least loaded first; among equals a thawed one (no thaw to pay), then the oldest.
    if (!best || i->in_flight < best->in_flight || (i->in_flight == best->in_flight && best->frozen && !i->frozen))
      best = i;
  }
  return best;
}

void Fleet::account(Service& s, Clock::time_point now) {
  s.concurrency_integral +=
      static_cast<double>(s.in_flight + s.waiters.size()) * std::chrono::duration<double>(now - s.integral_since).count();
  s.integral_since = now;
}

void Fleet::grant(Service& s, Instance& inst, std::vector<std::string>& thaw) {
  ++inst.in_flight;
  ++inst.requests;
  ++s.in_flight;
  if (inst.frozen) {
    inst.frozen = false;
    thaw.push_back(inst.id);
  }
  inst.prewarm_until = {};
}

void Fleet::thaw_all(const std::vector<std::string>& ids) {
  for (const auto& id : ids)
    if (auto ok = runtime_.thaw(id); !ok) log::warn("thaw failed").kv("instance", id).kv("error", ok.error());
}

void Fleet::dispatch(Service& s, std::vector<std::string>& thaw) {
  while (!s.waiters.empty()) {
    auto inst = pick(s);
    if (!inst) return;
    grant(s, *inst, thaw);
    s.waiters.hand_front(inst);
  }
}

asio::awaitable<std::variant<proxy::BackendLease, proxy::BackendRefusal>> Fleet::acquire(
    std::string_view host, std::string_view tag, Clock::time_point deadline) {
  Service* s = nullptr;
  {
    std::lock_guard lock(mu_);
    s = route(host, tag);
  }
  if (!s) co_return proxy::BackendRefusal{404, "no service is routed for Host '" + std::string(host) + "'"};
  auto ex = co_await asio::this_coro::executor;
  auto now = Clock::now();
  // A revision replaced while this request waited hands it on to the new one: wait there.
  for (int moves = 0;; ++moves) {
    auto attempt = acquire_at(*s, ex, now, deadline, moves == 0);  // named: see STYLE.md on co_await
    auto got = co_await std::move(attempt);
    if (auto* moved = std::get_if<Moved>(&got)) {
      s = moved->to;
      continue;
    }
    if (auto* refusal = std::get_if<proxy::BackendRefusal>(&got)) co_return *refusal;
    co_return std::get<proxy::BackendLease>(got);
  }
}

asio::awaitable<std::variant<proxy::BackendLease, proxy::BackendRefusal, Fleet::Moved>> Fleet::acquire_at(
    Service& service, const asio::any_io_executor& ex, Clock::time_point now, Clock::time_point deadline,
    bool arrival) {
  Service* s = &service;
  std::vector<std::string> thaw;
  auto lease_of = [&](std::shared_ptr<Instance> inst) {
    return proxy::BackendLease{tcp::endpoint(inst->address, inst->port),
                               std::make_shared<Hold>(*this, *s, inst, now), s->h2c,
                               s->config.request_timeout.value_or(Millis{0})};
  };
  proxy::WaitQueue<Handed>::Ticket ticket;
  {
    std::unique_lock lock(mu_);
    if (s->phase == Phase::retired && s->successor) co_return Moved{s->successor};
    if (s->phase != Phase::serving)
      co_return proxy::BackendRefusal{503, "service " + s->config.name + " was removed from the config"};
    account(*s, now);
    if (arrival) {
      ++s->arrivals;
      ++s->requests_total;
    }
    if (s->waiters.empty()) {
      if (auto inst = pick(*s)) {
        grant(*s, *inst, thaw);
        lock.unlock();
        thaw_all(thaw);
        co_return lease_of(inst);
      }
    }
    if (!s->failed_reason.empty() && now < s->retry_at && active(*s) == 0) {
      ++s->refused;
      // Retry-After: when the next start attempt is due (at least 1 s), as Cloud Run's 503s carry.
      auto wait = std::chrono::ceil<std::chrono::seconds>(s->retry_at - now).count();
      co_return proxy::BackendRefusal{503, "service " + s->config.name + " failed to start: " + s->failed_reason,
                                      static_cast<unsigned>(std::max<long long>(1, wait))};
    }
    // Knative's activator pokes the autoscaler; here the first instance starts at once.
    if (active(*s) == 0) start_instance(*s, false);
    if (s->waiters.size() >= s->config.buffer_size) {
      ++s->refused;
      co_return proxy::BackendRefusal{503, "service " + s->config.name + ": cold-start buffer full (" +
                                               std::to_string(s->waiters.size()) + " requests waiting)"};
    }
    bool none_ready = std::none_of(s->instances.begin(), s->instances.end(),
                                   [](const auto& i) { return i->state == InstanceState::ready; });
    if (none_ready && !s->cold_start_since) {
      s->cold_start_since = now;
      s->cold_start_buffered = 0;
    }
    if (none_ready) ++s->cold_start_buffered;
    auto wait_until = std::min(deadline, now + s->config.buffer_timeout);
    if (s->config.request_timeout) wait_until = std::min(wait_until, now + *s->config.request_timeout);
    ticket = s->waiters.join(ex, wait_until);
  }
  co_await ticket.wait();
  std::unique_lock lock(mu_);
  if (auto& handed = ticket.outcome()) {
    if (auto* refusal = std::get_if<proxy::BackendRefusal>(&*handed)) co_return *refusal;
    if (auto* moved = std::get_if<Moved>(&*handed)) co_return *moved;
    auto inst = std::get<std::shared_ptr<Instance>>(*handed);
    lock.unlock();
    // Thawed by grant() if it was frozen: the list was handed to the thread that granted it.
    co_return lease_of(inst);
  }
  account(*s, Clock::now());
  s->waiters.leave(ticket);
  ++s->refused;
  bool none_ready = std::none_of(s->instances.begin(), s->instances.end(),
                                 [](const auto& i) { return i->state == InstanceState::ready; });
  auto waited = std::to_string(static_cast<long long>(ms_between(now, Clock::now()))) + " ms";
  co_return proxy::BackendRefusal{
      504, none_ready ? "service " + s->config.name + ": no instance became ready within " + waited
                      : "service " + s->config.name + ": no instance was free within " + waited};
}

void Fleet::release(Service& s, const std::shared_ptr<Instance>& inst, Clock::time_point arrived) {
  std::vector<std::string> thaw;
  bool freeze = false;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mu_);
    account(s, now);
    // Arrival to the end of the exchange, any wait in the buffer included: the dashboard's percentiles.
    if (s.latencies_ms.size() < kLatenciesKept) s.latencies_ms.push_back(ms_between(arrived, now));
    else s.latencies_ms[s.latency_next] = ms_between(arrived, now);
    s.latency_next = (s.latency_next + 1) % kLatenciesKept;
    --inst->in_flight;
    --s.in_flight;
    if (inst->state == InstanceState::ready && !s.waiters.empty()) {
      dispatch(s, thaw);
    } else if (inst->in_flight == 0) {
      if (inst->state == InstanceState::draining) stop_instance(s, inst);
      else if (inst->state == InstanceState::ready && s.throttling) freeze = true;
    }
  }
  thaw_all(thaw);
  if (freeze) asio::post(control_, [this, &s, inst] { freeze_if_idle(s, inst); });
}

void Fleet::freeze_if_idle(Service& s, const std::shared_ptr<Instance>& inst) {
  {
    std::lock_guard lock(mu_);
    if (inst->in_flight != 0 || inst->frozen || inst->state != InstanceState::ready) return;
    if (inst->prewarm_until > Clock::now()) return;
    inst->frozen = true;
  }
  // A request arriving now thaws it: runtime.thaw waits for this freeze to finish, then undoes it.
  if (auto ok = runtime_.freeze(inst->id); !ok) {
    log::warn("freeze failed").kv("instance", inst->id).kv("error", ok.error());
    std::lock_guard lock(mu_);
    s.throttling = false;  // once is enough to know: the service runs unthrottled from now on
    inst->frozen = false;
  }
}

void Fleet::on_connection() {
  // The request's Host is not known yet: warm the default service, whose requests these mostly are.
  std::string id;
  {
    std::lock_guard lock(mu_);
    auto* service = primary(default_name_);
    if (!service || !service->throttling) return;
    auto inst = pick(*service);
    if (!inst || !inst->frozen || inst->in_flight != 0) return;
    inst->frozen = false;
    inst->prewarm_until = Clock::now() + 1s;
    id = inst->id;
  }
  thaw_all({id});
}

void Fleet::drop_waiters() {
  std::lock_guard lock(mu_);
  for (auto& s : services_) s->waiters.clear();
}

std::size_t Fleet::active(const Service& s) const {
  return static_cast<std::size_t>(std::count_if(s.instances.begin(), s.instances.end(), [](const auto& i) {
    return i->state == InstanceState::starting || i->state == InstanceState::ready;
  }));
}

void Fleet::start_instance(Service& s, bool validation) {
  if (stopping_) return;
  auto inst = std::make_shared<Instance>();
  inst->id = s.config.name + "-" + std::to_string(++instance_numbers_[s.config.name]);
  // In a pod every instance has its own address and takes PORT 8080; on the host each needs a free port.
  inst->port = s.config.port ? s.config.port : pods_.enabled() ? 8080 : free_port();
  inst->validation = validation;
  inst->created = Clock::now();
  s.instances.push_back(inst);
  log::info("instance starting").kv("event", "instance.starting").kv("service", s.config.name)
      .kv("revision", s.revision).kv("instance", inst->id).kv("port", static_cast<unsigned>(inst->port));
  Service* sp = &s;
  tasks_.spawn([this, sp, inst] { launch(sp, inst); });
}

// On a task thread: create and start the instance, then poll its port until it listens.
void Fleet::launch(Service* s, std::shared_ptr<Instance> inst) {
  const auto& c = s->config;
  runtime::InstanceSpec spec;
  spec.id = inst->id;
  spec.handler = c.handler;
  spec.command = c.command;
  spec.env = c.env;
  if (!metadata_host_.empty()) {
    spec.env.emplace("GCE_METADATA_HOST", metadata_host_);
    spec.env.emplace("GCE_METADATA_IP", metadata_host_);
  }
  spec.working_dir = c.working_dir;
  spec.rootfs = c.rootfs;
  spec.port = inst->port;
  spec.service = c.name;
  spec.configuration = c.name;
  spec.revision = s->revision;
  spec.die_with_starter = true;
  std::string pod_error;
  auto address = pods_.open(c, spec, pod_error);
  if (!address) return start_failed(*s, inst, pod_error);
  {
    std::lock_guard lock(mu_);
    inst->address = asio::ip::make_address_v4(*address);
    inst->port = static_cast<std::uint16_t>(spec.port);
  }
  std::promise<std::string> started;
  Clock::time_point created_at;
  asio::post(spawner_, [&] {
    if (auto ok = runtime_.create(spec); !ok) return started.set_value(ok.error());
    created_at = Clock::now();
    auto ok = runtime_.start(spec.id);
    started.set_value(ok ? std::string() : ok.error());
  });
  if (auto error = started.get_future().get(); !error.empty()) return start_failed(*s, inst, error);
  if (auto hook = pods_.post_start(c, spec.id); !hook.empty()) return start_failed(*s, inst, hook);
  const auto spawned = Clock::now();
  if (auto st = runtime_.status(spec.id)) {
    std::lock_guard lock(mu_);
    inst->pid = st->pid;
  }
  runtime::ReadinessProbe probe;
  probe.host = *address;
  probe.port = inst->port;
  probe.http_path = c.readiness_path;
  const auto deadline = inst->created + c.start_deadline;
  std::string error;
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (inst->state != InstanceState::starting) return;
    }
    if (stopping_) return;
    auto st = runtime_.status(spec.id);
    if (!st || st->state == runtime::InstanceState::exited) return;  // handle_exit reports it
    if (runtime::probe_once(probe, error)) {
      log::debug("instance listening").kv("instance", inst->id).kv("create_ms", ms_between(inst->created, created_at)).kv("spawn_ms", ms_between(inst->created, spawned))
          .kv("listen_ms", ms_between(spawned, Clock::now()));
      return became_ready(*s, inst);
    }
    auto now = Clock::now();
    if (now >= deadline) {
      return start_failed(*s, inst, "not listening on PORT " + std::to_string(inst->port) + " after " +
                                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(c.start_deadline).count()) +
                                        " s (" + error + ")");
    }
    // A cold start pays at most one period beyond the app's own start: poll tightly at first.
    auto age = now - inst->created;
    std::this_thread::sleep_for(age < 5s ? 1ms : age < 30s ? 10ms : 50ms);
  }
}

void Fleet::became_ready(Service& s, const std::shared_ptr<Instance>& inst) {
  std::vector<std::string> thaw;
  bool freeze = false;
  {
    std::lock_guard lock(mu_);
    if (inst->state != InstanceState::starting) return;
    auto now = Clock::now();
    inst->state = InstanceState::ready;
    inst->ready_at = now;
    s.failures = 0;
    s.failed_reason.clear();
    s.validated = true;
    if (s.phase == Phase::validating) promote(s);
    log::info("instance ready").kv("event", "instance.ready").kv("service", s.config.name).kv("instance", inst->id)
        .kv("port", static_cast<unsigned>(inst->port)).kv("start_ms", ms_between(inst->created, now));
    if (s.cold_start_since) {
      s.last_cold_start_ms = ms_between(*s.cold_start_since, now);
      ++s.cold_starts;
      s.cold_start_log.emplace_back(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        std::chrono::system_clock::now().time_since_epoch()).count(),
                                    s.last_cold_start_ms);
      if (s.cold_start_log.size() > 50) s.cold_start_log.pop_front();
      log::info("cold start " + s.config.name + ": 0→1 in " + std::to_string(static_cast<long long>(s.last_cold_start_ms)) +
                " ms (" + std::to_string(s.cold_start_buffered) + (s.cold_start_buffered == 1 ? " request" : " requests") +
                " buffered)")
          .kv("event", "cold_start").kv("service", s.config.name).kv("ms", s.last_cold_start_ms)
          .kv("buffered", static_cast<std::uint64_t>(s.cold_start_buffered));
      s.cold_start_since.reset();
    }
    dispatch(s, thaw);
    if (inst->validation && inst->in_flight == 0 && s.waiters.empty() && s.config.scaling.min_scale == 0 &&
        s.scale_to_zero && s.config.scaling.initial_scale == 0) {
      log::info("service validated; scaled to zero until the first request")
          .kv("event", "service.validated").kv("service", s.config.name);
      drain_instance(s, inst);
    } else if (inst->in_flight == 0 && s.throttling) {
      freeze = true;
    }
  }
  thaw_all(thaw);
  if (freeze) asio::post(control_, [this, &s, inst] { freeze_if_idle(s, inst); });
}

void Fleet::start_failed(Service& s, const std::shared_ptr<Instance>& inst, const std::string& reason) {
  std::lock_guard lock(mu_);
  if (inst->state == InstanceState::stopped) return;
  if (s.phase == Phase::validating) {
    // A new revision that cannot start never gets traffic: the serving one stays, nothing is retried.
    s.phase = Phase::failed;
    s.reason = reason;
    auto line = log::error("revision " + s.revision + " failed: " + reason);
    line.kv("event", "revision.failed").kv("service", s.config.name).kv("revision", s.revision).kv("reason", reason);
    for (const auto& other : services_)
      if (other->config.name == s.config.name && other->phase == Phase::serving) line.kv("serving", other->revision);
    stop_instance(s, inst);
    return;
  }
  ++s.failures;
  s.failed_reason = reason;
  auto backoff = std::chrono::seconds(std::min(60, 1 << std::min(s.failures, 6)));
  s.retry_at = Clock::now() + backoff;
  log::error("instance failed to start").kv("event", "instance.failed").kv("service", s.config.name)
      .kv("instance", inst->id).kv("reason", reason).kv("retry_after_s", static_cast<std::int64_t>(backoff.count()));
  stop_instance(s, inst);
  if (active(s) == 0) {
    account(s, Clock::now());
    s.refused += s.waiters.size();
    s.waiters.hand_all(proxy::BackendRefusal{503, "service " + s.config.name + " failed to start: " + reason,
                                             static_cast<unsigned>(backoff.count())});
    s.cold_start_since.reset();
  }
}

void Fleet::drain_instance(Service& s, const std::shared_ptr<Instance>& inst) {
  if (inst->state != InstanceState::ready && inst->state != InstanceState::starting) return;
  inst->state = InstanceState::draining;
  log::info("instance draining").kv("event", "instance.draining").kv("service", s.config.name).kv("instance", inst->id);
  if (inst->in_flight == 0) stop_instance(s, inst);
}

void Fleet::stop_instance(Service& s, const std::shared_ptr<Instance>& inst) {
  if (inst->state == InstanceState::stopped) return;
  inst->state = InstanceState::stopped;
  Service* sp = &s;
  auto grace = s.config.grace;
  tasks_.spawn([this, sp, inst, grace] {
    auto left = pods_.pre_stop(sp->config, inst->id, grace);
    (void)runtime_.stop(inst->id, left);
    auto st = runtime_.status(inst->id);
    (void)runtime_.remove(inst->id);
    pods_.close(inst->id);
    {
      std::lock_guard lock(mu_);
      std::erase(sp->instances, inst);
    }
    auto line = log::info("instance stopped");
    line.kv("event", "instance.stopped").kv("service", sp->config.name).kv("instance", inst->id);
    if (st) line.kv("status", exit_description(*st));
  });
}

std::pair<Fleet::Service*, std::shared_ptr<Instance>> Fleet::find(const std::string& id) {
  for (auto& s : services_)
    for (auto& i : s->instances)
      if (i->id == id) return {s.get(), i};
  return {nullptr, nullptr};
}

void Fleet::on_runtime_event(const runtime::Event& e) {
  if (e.kind != runtime::EventKind::exited) return;
  asio::post(control_, [this, st = e.status] { handle_exit(st); });
}

void Fleet::on_output(const std::string& id, runtime::Stream stream, std::string_view line) {
  std::string service;
  {
    std::lock_guard lock(mu_);
    auto [s, inst] = find(id);
    if (inst) {
      inst->last_output.emplace_back(line);
      if (inst->last_output.size() > kOutputLinesKept) inst->last_output.pop_front();
      service = s->config.name;
    }
  }
  if (plain_output_) {
    std::string out = id + " \u2502 ";
    out.append(line);
    log::write_line(out);
    return;
  }
  log::info("output").kv("service", service).kv("instance", id)
      .kv("stream", stream == runtime::Stream::out ? "stdout" : "stderr").kv("line", line);
}

void Fleet::handle_exit(const runtime::InstanceStatus& st) {
  std::unique_lock lock(mu_);
  auto [s, inst] = find(st.id);
  if (!inst || inst->state == InstanceState::stopped || inst->state == InstanceState::draining) return;
  std::string what = exit_description(st);
  if (!inst->last_output.empty()) what += "; last output: " + joined(inst->last_output);
  if (inst->state == InstanceState::starting) {
    lock.unlock();
    start_failed(*s, inst, what + " before listening on PORT " + std::to_string(inst->port));
    return;
  }
  ++s->crashes;
  log::error("instance crashed").kv("event", "instance.crashed").kv("service", s->config.name)
      .kv("instance", inst->id).kv("reason", what).kv("in_flight", static_cast<std::uint64_t>(inst->in_flight));
  // Its exchanges fail on their own (the connection breaks); the lease still releases it.
  stop_instance(*s, inst);
  // A replacement: at once after a long life, after a growing back-off when it keeps crashing early.
  Clock::duration delay = 0s;
  if (Clock::now() - inst->ready_at < 10s) {
    ++s->crash_streak;
    delay = std::chrono::seconds(std::min(30, 1 << std::min(s->crash_streak, 5)));
  } else {
    s->crash_streak = 0;
  }
  lock.unlock();
  replace_later(*s, delay);
}

void Fleet::replace_later(Service& s, Clock::duration delay) {
  auto timer = std::make_shared<asio::steady_timer>(control_, delay);
  timer->async_wait([this, &s, timer](error_code ec) {
    if (ec) return;
    std::lock_guard lock(mu_);
    if (s.phase != Phase::serving) return;
    auto want = static_cast<std::size_t>(std::max(s.desired, s.config.scaling.min_scale));
    if (!s.waiters.empty()) want = std::max<std::size_t>(want, 1);
    if (active(s) < want) start_instance(s, false);
  });
}

void Fleet::start() {
  {
    std::lock_guard lock(mu_);
    for (auto& s : services_) {
      if (s->phase != Phase::serving) continue;
      auto want = std::max<std::int32_t>({s->config.scaling.min_scale, s->config.scaling.initial_scale,
                                          s->config.validate ? 1 : 0});
      for (std::int32_t i = 0; i < want; ++i) start_instance(*s, i == 0 && s->config.validate);
      s->desired = std::max(s->config.scaling.min_scale, s->config.scaling.initial_scale);
    }
  }
  asio::co_spawn(control_, every(stat_timer_, 1s, &Fleet::stat_tick), asio::detached);
  asio::co_spawn(control_, every(scale_timer_, 2s, &Fleet::scale_tick), asio::detached);
  asio::co_spawn(control_, every(housekeeping_timer_, 250ms, &Fleet::housekeeping), asio::detached);
}

asio::awaitable<void> Fleet::every(asio::steady_timer& timer, Clock::duration period, void (Fleet::*tick)()) {
  while (true) {
    timer.expires_after(period);
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec || stopping_) co_return;
    (this->*tick)();
  }
}

// Knative's queue-proxy reports each second; here the gateway is its own reporter: the time-weighted
// concurrency (in flight plus waiting) and the arrivals of the last second, to each service's KPA.
void Fleet::stat_tick() {
  const auto now = Clock::now();
  for (auto& s : services_) {
    autoscaler::Stat stat;
    {
      std::lock_guard lock(mu_);
      if (s->phase != Phase::serving) continue;
      auto elapsed = std::chrono::duration<double>(now - s->stat_since).count();
      account(*s, now);
      if (elapsed <= 0) continue;
      stat.average_concurrent_requests = s->concurrency_integral / elapsed;
      stat.request_count = static_cast<double>(s->arrivals) / elapsed;
      s->last_concurrency = stat.average_concurrent_requests;
      s->last_rps = stat.request_count;
      s->concurrency_integral = 0;
      s->arrivals = 0;
      s->stat_since = now;
    }
    if (s->kpa->record(now, stat)) decide(*s, now);
  }
}

void Fleet::scale_tick() {
  const auto now = Clock::now();
  for (auto& s : services_) {
    {
      std::lock_guard lock(mu_);
      if (s->phase != Phase::serving) continue;
    }
    decide(*s, now);
  }
}

void Fleet::decide(Service& s, Clock::time_point now) {
  std::int32_t ready = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& i : s.instances) ready += i->state == InstanceState::ready;
  }
  auto d = s.kpa->decide(now, ready);
  std::lock_guard lock(mu_);
  if (d.desired_pods != s.desired)
    log::info("scale").kv("event", "scale").kv("service", s.config.name).kv("from", s.desired)
        .kv("to", d.desired_pods).kv("ready", ready).kv("observed_stable", d.observed_stable)
        .kv("observed_panic", d.observed_panic).kv("panicking", d.panicking)
        .kv("decider", d.decider_pods).kv("activity", autoscaler::activity_name(d.activity));
  if (d.activity != s.activity)
    log::info("revision " + std::string(autoscaler::activity_name(d.activity)))
        .kv("event", "activity").kv("service", s.config.name).kv("activity", autoscaler::activity_name(d.activity))
        .kv("desired", d.desired_pods).kv("ready", ready).kv("buffer_in_path", d.buffer_in_path);
  s.activity = d.activity;
  s.desired = d.desired_pods;
  scale(s, d.desired_pods);
}

void Fleet::scale(Service& s, std::int32_t desired) {
  if (stopping_) return;
  auto want = static_cast<std::size_t>(std::max(desired, 0));
  // Requests are waiting for an instance that is not coming: the decision lags, the buffer does not.
  if (!s.waiters.empty()) want = std::max<std::size_t>(want, 1);
  auto have = active(s);
  if (have < want) {
    if (!s.failed_reason.empty() && Clock::now() < s.retry_at) return;
    for (; have < want; ++have) start_instance(s, false);
    return;
  }
  if (have == want) return;
  // Scale down ready instances only (a starting one is about to serve), idle and frozen ones first.
  std::vector<std::shared_ptr<Instance>> ready;
  for (const auto& i : s.instances)
    if (i->state == InstanceState::ready) ready.push_back(i);
  std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) {
    if (a->in_flight != b->in_flight) return a->in_flight < b->in_flight;
    return a->ready_at > b->ready_at;  // the newest goes first: the oldest has the warmest caches
  });
  for (std::size_t k = 0; k < ready.size() && have > want; ++k, --have) drain_instance(s, ready[k]);
}

void Fleet::housekeeping() {
  const auto now = Clock::now();
  std::vector<std::pair<Service*, std::shared_ptr<Instance>>> refreeze;
  {
    std::lock_guard lock(mu_);
    for (auto& s : services_) {
      if (!s->throttling) continue;
      for (auto& i : s->instances)
        if (i->state == InstanceState::ready && !i->frozen && i->in_flight == 0 && i->prewarm_until != Clock::time_point{} &&
            i->prewarm_until <= now) {
          i->prewarm_until = {};
          refreeze.emplace_back(s.get(), i);
        }
    }
  }
  for (auto& [s, i] : refreeze) freeze_if_idle(*s, i);
}

void Fleet::stop_all() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& s : services_) {
      for (auto& i : s->instances) stop_instance(*s, i);
    }
  }
  tasks_.wait_all();
  // The timers belong to the control thread, which is still running: cancel them there.
  std::promise<void> cancelled;
  asio::post(control_, [&] {
    stat_timer_.cancel();
    scale_timer_.cancel();
    housekeeping_timer_.cancel();
    cancelled.set_value();
  });
  cancelled.get_future().wait();
}

}  // namespace sluice::app::gateway
