// Revisions: a changed config or changed watched files make a new revision of a service, which is
// validated (an instance must become ready) before traffic moves to it and the old one drains; see fleet.h.
#include <cstdio>
#include <cstring>
#include <set>

#include "app/gateway/fleet.h"
#include "common/ascii.h"
#include "common/log.h"
#include "runtime/exec.h"

extern char** environ;

namespace sluice::app::gateway {

using namespace std::chrono_literals;

// Phases, shares and tags are the control thread's (this file's) own.
Revision* Fleet::primary(const std::string& name) {
  Revision* best = nullptr;
  for (auto& s : services_)
    if (s->config.name == name && s->phase == Phase::serving && (!best || s->percent > best->percent)) best = s.get();
  return best;
}

void Fleet::reindex() {
  auto t = std::make_shared<Router::Table>();
  for (auto& s : services_) {
    if (s->phase != Phase::serving) continue;
    t->serving[s->config.name].push_back(Router::Target{s.get(), s->percent, s->tags});
    for (const auto& h : s->config.hosts) t->hosts[ascii_lower(h)] = s->config.name;
    for (const auto& tag : s->tags) t->tag_hosts[ascii_lower(tag + "-" + s->config.name + ".localhost")] = s.get();
  }
  // A service's bare name routes to it too, unless a service's hosts claim it: what an instance calls
  // it by through http_proxy (http://web/), as compose's service names resolve.
  for (const auto& [name, targets] : t->serving) t->hosts.try_emplace(ascii_lower(name), name);
  t->default_service = default_name_;
  t->default_primary = primary(default_name_);
  t->tag_header_routing = config_.features.tag_header_routing != FeatureState::disabled;
  router_.publish(std::move(t));
}

Revision& Fleet::add_revision(const ServiceConfig& sc, const GatewayConfig& g, Phase phase, std::string reason) {
  auto now = clock_now();
  auto s = std::make_unique<Revision>();
  s->config = sc;
  s->generation = ++generations_[sc.name];
  char number[16];
  std::snprintf(number, sizeof number, "%05d", s->generation);
  s->revision = sc.revision_name.empty() ? sc.name + "-" + number : sc.revision_name;
  s->phase = phase;
  s->reason = std::move(reason);
  s->scale_to_zero = scale_to_zero_on(g, sc);
  supervisor_.attach_gate(*s, GateSettings{.service = sc.name,
                               .revision = s->revision,
                               .container_concurrency = static_cast<std::size_t>(sc.scaling.container_concurrency),
                               .buffer_size = sc.buffer_size,
                               .buffer_timeout = sc.buffer_timeout,
                               .request_timeout = sc.request_timeout,
                               .h2c = h2c_upstream_on(g, sc),
                               .throttling = throttling_on(g, sc) && supervisor_.throttle_kind() != runtime::ThrottleKind::none,
                               .freeze_delay = sc.throttle_delay});
  auto scaling = sc.scaling;
  // Knative gives up on a revision stuck activating after its progress deadline + 30 s; the gateway's
  // start deadline plays the progress deadline's part.
  scaling.activation_timeout = std::chrono::duration_cast<autoscaler::Duration>(sc.start_deadline) + 30s;
  // start() brings the service to its initial scale itself (as Knative creates the Deployment with it);
  // a new revision starts with the one instance that validates it.
  attach_scaler(*s, scaling, phase == Phase::validating ? std::max(1, sc.scaling.min_scale)
                                               : std::max(sc.scaling.min_scale, sc.scaling.initial_scale),
                now);
  auto& numbers = instance_numbers_[sc.name];
  if (!numbers) numbers = std::make_shared<std::atomic<int>>(0);
  s->instance_numbers = numbers;
  if (sc.is_default) default_name_ = sc.name;
  {
    std::lock_guard lock(list_mu_);
    services_.push_back(std::move(s));
  }
  reindex();
  return *services_.back();
}

Revision* Fleet::latest(const std::string& name) {
  Revision* found = nullptr;
  for (auto& s : services_)
    if (s->config.name == name && !s->earlier_document && (s->phase == Phase::serving || s->phase == Phase::validating))
      found = s.get();
  return found;
}

Revision* Fleet::named(const std::string& name, const std::string& revision) {
  Revision* found = nullptr;
  for (auto& s : services_)
    if (s->config.name == name && s->revision == revision && s->phase != Phase::failed) found = s.get();
  return found;
}

void Fleet::revive(Revision& s) {
  log::info("revision " + s.revision + " is named by traffic again: it serves").kv("event", "revision.revived")
      .kv("service", s.config.name).kv("revision", s.revision);
  s.phase = Phase::serving;
  s.gate->reopen();
  // A new autoscaling loop from zero: the old one stopped when the revision retired.
  attach_scaler(s, s.config.scaling, 0, clock_now());
}

void Fleet::failed(Revision& s, const std::string& reason) {
  s.phase = Phase::failed;
  s.reason = reason;
  auto line = log::error("revision " + s.revision + " failed: " + reason);
  line.kv("event", "revision.failed").kv("service", s.config.name).kv("revision", s.revision).kv("reason", reason);
  for (const auto& other : services_)
    if (other.get() != &s && other->config.name == s.config.name && other->phase == Phase::serving)
      line.kv("serving", other->revision);
}

void Fleet::promote(Revision& next) {
  Revision* old = nullptr;
  for (auto& s : services_)
    if (s.get() != &next && s->config.name == next.config.name && s->phase == Phase::serving &&
        (!old || s->generation > old->generation))
      old = s.get();
  if (next.phase != Phase::validating) return;  // superseded meanwhile
  if (old && old->generation > next.generation) {  // a newer one serves already: this one is too late
    next.phase = Phase::failed;
    next.reason = "superseded by " + old->revision;
    return;
  }
  next.phase = Phase::serving;
  log::info("revision " + next.revision + " is ready: traffic moves to it" + (old ? " from " + old->revision : ""))
      .kv("event", "revision.serving").kv("service", next.config.name).kv("revision", next.revision)
      .kv("reason", next.reason).kv("previous", old ? old->revision : "");
  assign_traffic(next.config.name, next.config.traffic, next);
}

void Fleet::assign_traffic(const std::string& name, const std::vector<TrafficTarget>& traffic, Revision& latest) {
  std::vector<Revision*> serving;
  for (auto& s : services_)
    if (s->config.name == name && s->phase == Phase::serving) {
      serving.push_back(s.get());
      s->percent = 0;
      s->tags.clear();
    }
  if (traffic.empty()) latest.percent = 100;
  for (const auto& t : traffic) {
    Revision* target = &latest;
    if (!t.revision.empty()) {
      auto it = std::find_if(serving.begin(), serving.end(), [&](Revision* s) { return s->revision == t.revision; });
      Revision* back = it == serving.end() ? named(name, t.revision) : nullptr;
      if (it != serving.end()) {
        target = *it;
      } else if (back && back->phase == Phase::retired) {  // as after a fresh start with this file
        revive(*back);
        serving.push_back(back);
        target = back;
      } else {
        log::warn("traffic names revision " + t.revision + ", which does not run here: its share goes to " + latest.revision)
            .kv("event", "traffic.unknown_revision").kv("service", name);
      }
    }
    target->percent += t.percent;
    if (!t.tag.empty()) target->tags.push_back(t.tag);
  }
  for (auto* s : serving)
    if (s != &latest && s->percent == 0 && s->tags.empty()) retire(*s, &latest);
  reindex();
}

void Fleet::retire(Revision& old, Revision* successor) {
  old.percent = 0;
  old.tags.clear();
  old.phase = Phase::retired;
  // Requests waiting for the old revision wait for the new one instead; none is refused.
  if (successor) old.gate->move_to(*successor->gate);
  else old.gate->close("service " + old.config.name + " was removed from the config");
  for (const auto& i : old.gate->instances()) supervisor_.drain(old, i);
}

void Fleet::apply(GatewayConfig next) {
  auto g = std::make_shared<GatewayConfig>(std::move(next));
  if (g->listen_address != config_.listen_address || g->port != config_.port ||
      g->admin_address != config_.admin_address || g->admin_port != config_.admin_port ||
      g->workers != config_.workers || g->sandbox != config_.sandbox || g->throttle_mechanism != config_.throttle_mechanism ||
      g->https_port.has_value() != config_.https_port.has_value() ||
      (g->https_port && *g->https_port != 0 && g->https_port != config_.https_port))
    log::warn("listen, admin, https, workers, sandbox and throttle-mechanism take effect at the next start only")
        .kv("event", "config.restart_needed");
  std::set<std::string> names;
  for (const auto& sc : g->services) {
    names.insert(sc.name);
    Revision* current = latest(sc.name);
    // A Knative file's earlier documents that its traffic names and that never ran here (added to the
    // file since): made now, as a fresh start with this file makes them.
    for (const auto& t : current ? sc.traffic : std::vector<TrafficTarget>{})
      for (auto earlier : sc.earlier)
        if (!t.revision.empty() && earlier.revision_name == t.revision && !named(sc.name, t.revision)) {
          earlier.is_default = sc.is_default;
          earlier.hosts = sc.hosts;
          add_revision(earlier, *g, Phase::retired, "named by traffic").earlier_document = true;
        }
    if (!current) {
      auto& s = add_revision(sc, *g, Phase::serving, "new service");
      log::info("service added: " + sc.name).kv("event", "service.added").kv("service", sc.name).kv("revision", s.revision);
      if (sc.validate) supervisor_.start(s, true);
      continue;
    }
    if (current->config.fingerprint != sc.fingerprint) {
      roll(sc, g, "config changed");
    } else if (current->config.traffic != sc.traffic) {  // a new split is not a new revision (Knative's rule)
      current->config.traffic = sc.traffic;
      if (current->phase == Phase::serving) assign_traffic(sc.name, sc.traffic, *current);
      log::info("traffic of " + sc.name + " changed").kv("event", "traffic.changed").kv("service", sc.name);
    }
  }
  bool removed = false;
  for (auto& s : services_)
    if (!names.contains(s->config.name) && (s->phase == Phase::serving || s->phase == Phase::validating)) {
      log::info("service removed: " + s->config.name + " drains").kv("event", "service.removed").kv("service", s->config.name);
      removed = true;
      if (s->phase == Phase::serving) retire(*s, nullptr);
      else s->phase = Phase::failed;
    }
  if (removed) reindex();
  current_ = g;
}

void Fleet::files_changed(const std::string& service, const std::string& what, Clock::time_point last) {
  Revision* current = latest(service);
  if (!current) return;
  {
    std::lock_guard lock(builds_mu_);
    auto b = builds_.find(service);
    // What a build writes is its own doing, not an edit: changes seen while it ran are ignored.
    if (b != builds_.end() && last >= b->second.started && (b->second.running || last <= b->second.finished + 50ms))
      return;
  }
  roll(current->config, current_, "changed: " + what);
}

void Fleet::roll(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason, bool built) {
  if (supervisor_.is_stopping()) return;
  if (!sc.build.empty() && !built) {
    {
      std::lock_guard lock(builds_mu_);
      builds_[sc.name] = Build{true, Clock::now(), {}};
    }
    builds_running_.spawn([this, sc, g, reason] { run_build(sc, g, reason); });
    return;
  }
  // An older revision still validating will not get traffic now: this one replaces it.
  for (auto& s : services_)
    if (s->config.name == sc.name && s->phase == Phase::validating) {
      s->phase = Phase::failed;
      s->reason = "superseded";
      for (const auto& i : s->gate->instances()) supervisor_.stop(*s, i);
    }
  auto& s = add_revision(sc, *g, Phase::validating, reason);
  log::info("revision " + s.revision + " starting (" + reason + ")").kv("event", "revision.validating")
      .kv("service", sc.name).kv("revision", s.revision).kv("reason", reason);
  supervisor_.start(s, false);
}

// On a task thread: the service's build command, its output shown line by line; then, back on the
// control thread, the new revision (or, when it failed, nothing: the serving revision stays).
void Fleet::run_build(const ServiceConfig& sc, std::shared_ptr<GatewayConfig> g, std::string reason) {
  auto finished = [&](bool ok) {
    std::lock_guard lock(builds_mu_);
    builds_[sc.name].running = false;
    builds_[sc.name].finished = Clock::now();
    return ok;
  };
  const auto started = Clock::now();
  log::info("build " + sc.name + " started").kv("event", "build.started").kv("service", sc.name).kv("reason", reason);
  // In the gateway's process group, as a command run from its terminal: a Ctrl-C stops the build too.
  runtime::SpawnRequest req;
  req.argv = sc.build;
  for (char** e = environ; *e; ++e) req.env.emplace_back(*e);
  req.working_dir = sc.working_dir;
  req.own_process_group = false;
  std::string last;
  const auto result = runtime::run_lines(std::move(req), sc.build_timeout, [&](std::string_view line) {
    last = line;
    log::info("build").kv("event", "build.output").kv("service", sc.name).kv("line", line);
  });
  const auto ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  if (!result.succeeded()) {
    std::string why = !result.error.empty() ? result.error
                      : result.timed_out    ? "still running after the build-timeout, killed"
                      : result.signal != 0  ? "killed by signal " + std::to_string(result.signal)
                                            : "exited with code " + std::to_string(result.exit_code);
    if (!last.empty()) why += "; last output: " + last;
    finished(false);
    log::error("build " + sc.name + " failed: " + why + "; the serving revision stays")
        .kv("event", "build.failed").kv("service", sc.name).kv("reason", why).kv("ms", ms);
    return;
  }
  log::info("build " + sc.name + " done").kv("event", "build.done").kv("service", sc.name).kv("ms", ms);
  finished(true);
  asio::post(control_, [this, sc, g, reason] { roll(sc, g, reason, true); });
}

// These three run on the control thread: the list is its own; instances are read from their gates.
std::vector<std::pair<std::string, int>> Fleet::instance_pids() const {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& s : services_)
    for (const auto& i : s->gate->view().instances)
      if (i.pid > 0) out.emplace_back(i.id, i.pid);
  return out;
}

std::optional<std::string> Fleet::instance_at(const asio::ip::address_v4& address) const {
  for (const auto& s : services_)
    for (const auto& i : s->gate->view().instances)
      if (i.address == address && i.state != InstanceState::stopped) return i.id;
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> Fleet::service_and_revision(const std::string& instance) const {
  auto [s, inst] = supervisor_.find(instance);
  if (!s) return std::nullopt;
  return std::pair{s->config.name, s->revision};
}

std::vector<ServiceConfig> Fleet::service_configs() const {
  std::vector<ServiceConfig> out;
  for (const auto& s : services_)
    if (s->phase == Phase::serving) out.push_back(s->config);
  return out;
}

}  // namespace sluice::app::gateway
