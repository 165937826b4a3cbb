// One ScaledObject's scrape/record/decide loop; see revision_scaler.h.
#include "scaler/revision_scaler.h"

#include <utility>
#include <vector>

#include "common/log.h"

namespace sluice::scaler {

using net::use_nothrow;

struct RevisionScaler::Pod {
  tcp::endpoint endpoint;
  bool scraping = false;
  std::optional<ScrapeResult> result;  // arrived since the last merge
  bool failing = false;                // the last scrape failed (logged once per streak)
};

// The operations one round started and waits for; late ones finish into a later round.
struct RevisionScaler::Round {
  int outstanding = 0;
};

namespace {

std::string address_text(const tcp::endpoint& e) {
  const auto a = e.address();
  return (a.is_v6() ? "[" + a.to_string() + "]" : a.to_string()) + ":" + std::to_string(e.port());
}

bool idle(const autoscaler::Stat& s) { return s.average_concurrent_requests == 0 && s.request_count == 0; }

}  // namespace

RevisionScaler::RevisionScaler(asio::io_context& io, ScalerMetrics& metrics, RevisionLabels labels,
                               ScaledObjectSettings settings, ScalerTiming timing)
    : io_(io),
      metrics_(metrics),
      labels_(std::move(labels)),
      timing_(timing),
      timer_(io),
      wakeup_(io),
      settings_(std::move(settings)),
      last_used_(Clock::now()) {
  published_.why_undecided = "no sidecar scraped yet";
}

RevisionScaler::~RevisionScaler() = default;

void RevisionScaler::start() { asio::co_spawn(io_, run(), asio::detached); }

void RevisionScaler::stop() {
  stopped_ = true;
  asio::post(io_, [self = shared_from_this()] {
    self->timer_.cancel();
    self->wakeup_.cancel();
  });
  changed_.notify_all();
}

void RevisionScaler::update(ScaledObjectSettings settings) {
  std::lock_guard lock(mu_);
  last_used_ = Clock::now();
  if (settings.autoscaling != settings_.autoscaling) ++settings_generation_;
  settings_ = std::move(settings);
}

Published RevisionScaler::wait_decision(milliseconds wait) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] { return published_.decided || stopped_; });
  last_used_ = Clock::now();
  return published_;
}

Published RevisionScaler::wait_activity_change(std::optional<bool> seen, milliseconds wait) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, wait, [&] {
    return stopped_ || (published_.decided && (!seen || published_.active != *seen));
  });
  last_used_ = Clock::now();
  return published_;
}

bool RevisionScaler::at_zero() const {
  std::lock_guard lock(mu_);
  return published_.decided && !published_.active;
}

void RevisionScaler::stream_opened() {
  std::lock_guard lock(mu_);
  ++streams_;
}

void RevisionScaler::stream_closed() {
  std::lock_guard lock(mu_);
  --streams_;
  last_used_ = Clock::now();
}

asio::awaitable<void> RevisionScaler::run() {
  const auto self = shared_from_this();  // the loop owns its scaler while it runs
  auto next = Clock::now();
  while (!stopped_) {
    {
      std::lock_guard lock(mu_);
      if (streams_ == 0 && Clock::now() - last_used_ > timing_.forget_after) {
        log::info("forgetting a ScaledObject no one asks about").kv("namespace", labels_.namespace_name)
            .kv("name", labels_.name);
        forgotten_ = true;
        break;
      }
    }
    const auto started = Clock::now();
    auto round = std::make_shared<Round>();
    current_round_ = round;
    co_await resolve(round);
    if (stopped_) break;
    round = std::make_shared<Round>();
    current_round_ = round;
    co_await scrape(round);
    if (stopped_) break;
    feed(started);

    const bool inactive = at_zero();
    next += inactive ? timing_.inactive_interval : timing_.active_interval;
    if (next < Clock::now()) next = Clock::now();
    timer_.expires_at(next);
    co_await timer_.async_wait(use_nothrow);
  }
  current_round_.reset();
  metrics_.drop_revision(labels_);
}

asio::awaitable<void> RevisionScaler::wait_round(const std::shared_ptr<Round>& round, Clock::time_point deadline) {
  if (round->outstanding == 0) co_return;
  wakeup_.expires_at(deadline);
  co_await wakeup_.async_wait(use_nothrow);
}

void RevisionScaler::finished(const std::shared_ptr<Round>& round) {
  if (--round->outstanding == 0 && round == current_round_) wakeup_.cancel();
}

// IP literals stand for themselves; DNS names are looked up again each round (a headless Service's
// records follow its ready pods), each lookup in a coroutine of its own. A lookup slower than the
// budget finishes in the background and the round goes on with that name's previous answer.
asio::awaitable<void> RevisionScaler::resolve(const std::shared_ptr<Round>& round) {
  std::vector<SidecarAddress> sidecars;
  {
    std::lock_guard lock(mu_);
    sidecars = settings_.sidecars;
  }
  for (const auto& s : sidecars) {
    boost::system::error_code not_ip;
    asio::ip::make_address(s.host, not_ip);
    if (!not_ip || resolving_[s.host]) continue;
    resolving_[s.host] = true;
    ++round->outstanding;
    asio::co_spawn(
        io_,
        [self = shared_from_this(), round, s]() -> asio::awaitable<void> {
          tcp::resolver resolver(self->io_);
          auto [ec, results] = co_await resolver.async_resolve(s.host, std::to_string(s.port), use_nothrow);
          std::vector<tcp::endpoint> endpoints;
          for (const auto& r : results) endpoints.push_back(r.endpoint());
          if (ec) {
            self->metrics_.scrape_failed(self->labels_, s.host, "resolve");
            log::warn("cannot resolve the sidecars' name").kv("namespace", self->labels_.namespace_name)
                .kv("name", self->labels_.name).kv("host", s.host).kv("error", ec.message());
          }
          // A name that no longer exists has no pods: an empty answer is an answer.
          if (!ec || ec == asio::error::host_not_found) self->resolved_[s.host] = std::move(endpoints);
          self->resolving_[s.host] = false;
          self->finished(round);
        },
        asio::detached);
  }
  co_await wait_round(round, Clock::now() + timing_.resolve_budget);

  // This round's pods: every address now listed; pods no longer listed are dropped with their series.
  std::map<std::string, tcp::endpoint> listed;
  for (const auto& s : sidecars) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(s.host, ec);
    if (!ec) {
      const tcp::endpoint e(address, s.port);
      listed.emplace(address_text(e), e);
      continue;
    }
    for (const auto& e : resolved_[s.host]) listed.emplace(address_text(e), e);
  }
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    log::info("sidecar dropped").kv("namespace", labels_.namespace_name).kv("name", labels_.name)
        .kv("pod", it->first);
    metrics_.drop_pod(labels_, it->first);
    it = pods_.erase(it);
  }
  for (const auto& [text, e] : listed) {
    auto& pod = pods_[text];
    if (!pod) pod = std::make_shared<Pod>(Pod{.endpoint = e});
  }
}

asio::awaitable<void> RevisionScaler::scrape(const std::shared_ptr<Round>& round) {
  for (const auto& [text, pod] : pods_) {
    if (pod->scraping) continue;  // still waiting on its last scrape: this round goes on without it
    pod->scraping = true;
    ++round->outstanding;
    asio::co_spawn(
        io_,
        [self = shared_from_this(), round, pod]() -> asio::awaitable<void> {
          auto result = co_await scrape_stat(pod->endpoint, self->timing_.scrape_timeout);
          pod->scraping = false;
          pod->result = std::move(result);
          self->finished(round);
        },
        asio::detached);
  }
  // Every scrape ends within its timeout; the round waits at most 4/5 of its interval for them, and
  // a scrape still running then is merged into the round in which it ends.
  const bool inactive = at_zero();
  const auto interval = inactive ? timing_.inactive_interval : timing_.active_interval;
  const auto wait = std::min<Clock::duration>(timing_.scrape_timeout + milliseconds(50), interval * 4 / 5);
  co_await wait_round(round, Clock::now() + wait);
}

void RevisionScaler::feed(Clock::time_point now) {
  std::vector<autoscaler::Stat> answered;
  std::string last_error;
  for (const auto& [text, pod] : pods_) {
    if (!pod->result) continue;
    const ScrapeResult r = std::move(*pod->result);
    pod->result.reset();
    if (r.ok) {
      metrics_.scraped(labels_, text);
      answered.push_back(r.stat);
      if (pod->failing) log::info("sidecar scrape recovered").kv("name", labels_.name).kv("pod", text);
      pod->failing = false;
      continue;
    }
    metrics_.scrape_failed(labels_, text, r.reason);
    last_error = text + ": " + r.reason + " (" + r.detail + ")";
    if (!pod->failing) {
      log::warn("sidecar scrape failed").kv("namespace", labels_.namespace_name).kv("name", labels_.name)
          .kv("pod", text).kv("reason", r.reason).kv("error", r.detail);
    }
    pod->failing = true;
  }

  autoscaler::AutoscalerConfig config;
  std::uint64_t generation;
  {
    std::lock_guard lock(mu_);
    config = settings_.config;
    generation = settings_generation_;
  }
  const auto ready = static_cast<std::int32_t>(answered.size());
  if (kpa_ && generation != kpa_generation_) {
    // In place, as Knative updates a running decider and metric: the windows are resized keeping their
    // history; panic state and the scale-to-zero timing carry on.
    log::info("autoscaling settings changed: the KPA takes them in place").kv("name", labels_.name);
    kpa_->update(config, now);
    kpa_generation_ = generation;
    metric_ = config.metric;
  }
  bool fresh = false;
  if (!kpa_) {
    // Built on the first answers, so that a scaler restarted among several pods starts in panic mode
    // (never scaling down on an empty history), as Knative's does. No pods at all is an answer too.
    if (answered.empty() && !pods_.empty()) {
      std::lock_guard lock(mu_);
      published_.why_undecided = last_error.empty() ? "no sidecar answered yet" : "no sidecar answered: " + last_error;
      return;
    }
    kpa_.emplace(config, ready, now);
    kpa_generation_ = generation;
    metric_ = config.metric;
    recorded_bucket_ = -1;
    fresh = true;
  }

  bool poke = false;
  if (!answered.empty()) {
    // A pod that did not answer this round carries no load we know of: the merge is over those that did.
    const auto merged = autoscaler::merge_pod_stats(answered, answered.size());
    const auto bucket = autoscaler::bucket_index(now, config.bucket_size);
    const bool inactive = at_zero();
    // One record per 1 s bucket, as the windows sum a bucket's records. The exception is the quick rounds
    // at zero: the first traffic may land in a bucket that so far holds only zeros, which it then fills.
    if (bucket != recorded_bucket_) {
      poke = kpa_->record(now, merged);
      recorded_bucket_ = bucket;
      recorded_bucket_idle_ = idle(merged);
    } else if (inactive && recorded_bucket_idle_ && !idle(merged)) {
      poke = kpa_->record(now, merged);
      recorded_bucket_idle_ = false;
    }
  }
  if (fresh || poke || now - last_decision_ >= timing_.decide_interval) decide(now, ready);
}

void RevisionScaler::decide(Clock::time_point now, std::int32_t ready) {
  const auto d = kpa_->decide(now, ready);
  last_decision_ = now;
  Published p{.decided = true, .desired = d.desired_pods, .active = d.desired_pods > 0};
  {
    std::lock_guard lock(mu_);
    if (!published_.decided || published_.desired != p.desired) {
      log::info("scale").kv("namespace", labels_.namespace_name).kv("name", labels_.name)
          .kv("from", published_.desired).kv("to", p.desired).kv("ready", ready)
          .kv("observed_stable", d.observed_stable).kv("observed_panic", d.observed_panic)
          .kv("panicking", d.panicking);
    }
  }
  metrics_.decided(labels_, metric_, d, p.active);
  publish(p);
}

void RevisionScaler::publish(const Published& p) {
  {
    std::lock_guard lock(mu_);
    published_ = p;
  }
  changed_.notify_all();
}

}  // namespace sluice::scaler
