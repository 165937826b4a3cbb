// The routing table; see router.h.
#include "app/gateway/router.h"

#include <algorithm>
#include <random>

#include "common/ascii.h"

namespace sluice::app::gateway {

std::string host_of(std::string_view host) {
  if (auto colon = host.rfind(':'); colon != std::string_view::npos && host.find(']') == std::string_view::npos)
    host = host.substr(0, colon);
  else if (auto bracket = host.find("]:"); bracket != std::string_view::npos)
    host = host.substr(0, bracket + 1);
  return ascii_lower(host);
}

namespace {
// Versions unique over every router of the process: a thread's cache of a router destroyed since cannot
// pass for the table of a new one at the same address.
std::atomic<std::uint64_t> versions{0};
}  // namespace

Router::Router() : table_(std::make_shared<const Table>()), version_(++versions) {}

void Router::publish(std::shared_ptr<const Table> table) {
  {
    std::lock_guard lock(table_mu_);
    table_ = std::move(table);
  }
  version_.store(++versions, std::memory_order_release);
}

// Each thread keeps the table it last read and the version it read it at; the shared counter is only
// read on the request path, so its cache line stays shared between the workers.
const Router::Table& Router::current() const {
  struct Cached {
    const Router* router = nullptr;
    std::uint64_t version = 0;
    std::shared_ptr<const Table> table;
  };
  thread_local Cached cached;
  auto version = version_.load(std::memory_order_acquire);
  if (cached.router != this || cached.version != version) {
    {
      std::lock_guard lock(table_mu_);
      cached.table = table_;
    }
    cached.router = this;
    cached.version = version;
  }
  return *cached.table;
}

bool Router::names(std::string_view host) const {
  const Table& t = current();
  auto h = host_of(host);
  return t.hosts.contains(h) || t.tag_hosts.contains(h);
}

Revision* Router::route(std::string_view host, std::string_view tag, int roll) const {
  const Table& t = current();
  auto h = host_of(host);
  if (auto th = t.tag_hosts.find(h); th != t.tag_hosts.end()) return th->second;  // <tag>-<service>.localhost
  auto named = t.hosts.find(h);
  const std::string& service = named != t.hosts.end() ? named->second : t.default_service;
  auto serving = t.serving.find(service);
  if (serving == t.serving.end()) return nullptr;
  // Knative-Serving-Tag picks the tagged revision (an unknown tag: the split, as Knative does).
  if (!tag.empty() && t.tag_header_routing)
    for (const auto& target : serving->second)
      if (std::find(target.tags.begin(), target.tags.end(), tag) != target.tags.end()) return target.revision;
  // The percent split.
  if (roll < 0) {
    thread_local std::minstd_rand rng{std::random_device{}()};
    roll = static_cast<int>(rng() % 100);
  }
  int seen = 0;
  Revision* last = nullptr;
  for (const auto& target : serving->second) {
    if (target.percent <= 0) continue;
    last = target.revision;
    seen += target.percent;
    if (roll < seen) return last;
  }
  return last;
}

Revision* Router::default_primary() const { return current().default_primary; }

}  // namespace sluice::app::gateway
