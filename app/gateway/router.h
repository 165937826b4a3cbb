// Host (and Knative-Serving-Tag) → revision: the gateway's routing table. The control thread builds a
// new immutable table whenever revisions, shares or tags change and publishes it; a worker reads the
// table it cached, checking one version counter per request (no lock, no shared write on the request
// path), so the cost of a lookup does not grow with the number of services.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "app/gateway/config.h"

namespace sluice::app::gateway {

struct Revision;

class Router {
 public:
  struct Target {
    Revision* revision;
    int percent;                    // its share of the service's split
    std::vector<std::string> tags;  // Knative-Serving-Tag values that pick it
  };
  struct Table {
    std::unordered_map<std::string, std::string> hosts;           // host (lower case) → service; its name too
    std::unordered_map<std::string, Revision*> tag_hosts;         // <tag>-<service>.localhost
    std::unordered_map<std::string, std::vector<Target>> serving;  // service → serving revisions
    std::string default_service;  // where requests with an unknown Host go
    Revision* default_primary = nullptr;  // its revision with the largest share (connection pre-warm)
    bool tag_header_routing = true;
  };

  Router();

  // Any thread: the revision for this request, or nullptr when nothing is routed. `roll` (0..99)
  // picks within a percent split; -1: a per-thread random number.
  Revision* route(std::string_view host, std::string_view tag, int roll = -1) const;
  // Any thread: whether `host` is a service's (its hosts, its name, a tag's host), not the default's by fallback.
  bool names(std::string_view host) const;
  // Any thread: the default service's primary revision, for pre-warming on a new connection.
  Revision* default_primary() const;

  // Control thread: the next table.
  void publish(std::shared_ptr<const Table> table);

 private:
  const Table& current() const;

  // Behind a lock, not std::atomic<shared_ptr>: libstdc++ 12's load() releases its internal lock with
  // relaxed order, so a publish's write of the pointer races its read (ThreadSanitizer reports it). Readers
  // take the lock only when the version changed (current()).
  mutable std::mutex table_mu_;
  std::shared_ptr<const Table> table_;
  std::atomic<std::uint64_t> version_;
};

// "Host:port", "[v6]:port" → the host, lower case.
std::string host_of(std::string_view authority);

}  // namespace sluice::app::gateway
