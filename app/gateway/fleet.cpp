// The fleet's frame: construction, the instance registry, the runtime's callbacks, shutdown; see fleet.h.
#include "app/gateway/fleet.h"

#include <algorithm>
#include <future>

#include "common/log.h"

namespace sluice::app::gateway {

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::validating: return "validating";
    case Phase::serving: return "serving";
    case Phase::retired: return "retired";
    case Phase::failed: return "failed";
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

Fleet::Fleet(const GatewayConfig& config, runtime::RuntimeService& runtime, asio::io_context& control,
             std::function<Clock::time_point()> clock)
    : config_(config),
      runtime_(runtime),
      clock_(std::move(clock)),
      pods_(config, runtime),
      images_(!config.image_cache.empty()            ? std::filesystem::path(config.image_cache)
              : std::getenv("SLUICE_IMAGE_CACHE") ? std::filesystem::path(std::getenv("SLUICE_IMAGE_CACHE"))
                                                     : runtime::ImageStore::default_cache_dir()),
      control_(control),
      stat_timer_(control),
      scale_timer_(control),
      housekeeping_timer_(control) {
  current_ = std::make_shared<GatewayConfig>(config);
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
  spawner_.join();
  throttler_.join();
  tasks_.wait_all();
}

template <class Fn>
void Fleet::for_each_revision(Fn&& fn) const {
  std::lock_guard lock(list_mu_);
  for (const auto& s : services_) fn(*s);
}

std::pair<Revision*, std::shared_ptr<Instance>> Fleet::find(const std::string& id) const {
  std::lock_guard lock(registry_mu_);
  auto it = registry_.find(id);
  if (it == registry_.end()) return {nullptr, nullptr};
  return {it->second.revision, it->second.instance};
}

void Fleet::on_runtime_event(const runtime::Event& e) {
  if (e.kind != runtime::EventKind::exited) return;
  asio::post(control_, [this, st = e.status] { handle_exit(st); });
}

void Fleet::on_output(const std::string& id, runtime::Stream stream, std::string_view line) {
  constexpr std::size_t kOutputLinesKept = 5;
  std::string service;
  {
    std::lock_guard lock(registry_mu_);
    if (auto it = registry_.find(id); it != registry_.end()) {
      auto& kept = it->second.last_output;
      kept.emplace_back(line);
      if (kept.size() > kOutputLinesKept) kept.pop_front();
      service = it->second.revision->config.name;
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

void Fleet::drop_waiters() {
  for_each_revision([](Revision& s) { s.gate->clear_waiters(); });
}

void Fleet::stop_all() {
  stopping_ = true;
  // On the control thread, which owns the list and the timers and is still running.
  std::promise<void> stopping;
  asio::post(control_, [&] {
    stat_timer_.cancel();
    scale_timer_.cancel();
    housekeeping_timer_.cancel();
    for (auto& s : services_)
      for (auto& i : s->gate->instances()) stop_instance(*s, i);
    stopping.set_value();
  });
  stopping.get_future().wait();
  // Starts already posted find stopping_ set and stop what they made; then every stop has been spawned.
  std::promise<void> spawned;
  asio::post(spawner_, [&] { spawned.set_value(); });
  spawned.get_future().wait();
  tasks_.wait_all();
}

}  // namespace sluice::app::gateway
