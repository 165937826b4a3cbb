// Workers and acceptors; see server.h.
#include "proxy/server/server.h"

#include <malloc.h>

#include <algorithm>
#include <optional>
#include <thread>
#include <vector>

#include "common/cpu_budget.h"
#include "common/log.h"
#include "common/thread_cache.h"
#include "proxy/downstream/context.h"
#include "proxy/downstream/plain.h"
#include "proxy/downstream/tls.h"
#include "proxy/forward/context.h"
#include "proxy/io/asio.h"
#include "proxy/io/listen.h"
#include "proxy/upstream/app_sockets.h"
#include "proxy/upstream/upstreams.h"

namespace sluice::proxy {

class Worker final : private ConnectionCount, private ExchangeCount {
 public:
  Worker(const ProxyConfig& config, SharedState& shared, const TlsContexts* tls, std::size_t index,
         std::atomic<std::size_t>& open, tcp::endpoint upstream)
      // Only this worker's thread does I/O on its sockets, so the reactor needs no per-socket locks;
      // posting to the worker from other threads (shutdown) stays safe.
      : io_(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO),
        acceptor_(io_),
        tls_acceptor_(io_),
        watchdogs_(io_.get_executor()),
        upstreams_(config, io_.get_executor(), watchdogs_, upstream),
        forward_(config, shared, index, io_.get_executor(), watchdogs_, upstreams_, upstream),
        context_(config, forward_, watchdogs_),
        tls_(tls),
        open_(open) {
    context_.connection_count = this;
    exchanges_.listener = this;
    forward_.exchanges = &exchanges_;
  }
  // Before any member goes: an exchange's coroutine destroyed with the io_context must not call back.
  ~Worker() { exchanges_.listener = nullptr; }

  std::uint16_t bind(const tcp::endpoint& ep, const std::string& name, const net::Netns& netns) {
    return open_listener(acceptor_, ep, name, true, netns);
  }
  std::uint16_t bind_tls(const tcp::endpoint& ep, const net::Netns& netns) {
    return open_listener(tls_acceptor_, ep, "tls", true, netns);
  }

  void start() {
    asio::co_spawn(io_, accept_loop(acceptor_, false), asio::detached);
    if (tls_acceptor_.is_open()) asio::co_spawn(io_, accept_loop(tls_acceptor_, true), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }

  // Runs on the worker's thread: stop accepting, close idle connections, let the rest finish. Unless a
  // successor accepts on the same sockets, new handshakes are refused first and the listeners close once
  // those under way have been accepted.
  void begin_shutdown(Server::Listeners listeners) {
    asio::post(io_, [this, listeners] {
      if (listeners == Server::Listeners::handed_over) close_listeners();
      context_.draining = true;
      trim_timer_.cancel();  // the process is ending: no trim, and no timer to keep the worker running
      upstreams_.close_idle();
      // Copy: closing may erase from the set.
      std::vector<ConnectionHandle*> conns(context_.connections.begin(), context_.connections.end());
      for (auto* c : conns) c->close_when_idle();
      if (listeners == Server::Listeners::handed_over) return;
      net::refuse_new_handshakes(acceptor_);
      net::refuse_new_handshakes(tls_acceptor_);
      settle_.expires_after(context_.config.timeouts.drain_handshakes);
      settle_.async_wait([this](error_code) { close_listeners(); });
    });
  }

  void stop() { io_.stop(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  bool idle() const { return io_.stopped(); }

 private:
  void close_listeners() {
    close_listener(acceptor_, false);
    close_listener(tls_acceptor_, true);
  }

  // Connections the kernel has completed but nobody accepted yet would be reset by the close: take
  // them and serve their first request (with Connection: close) like any other.
  void close_listener(tcp::acceptor& acceptor, bool tls) {
    error_code ec;
    acceptor.non_blocking(true, ec);
    while (!ec && acceptor.is_open()) {
      tcp::socket socket(io_);
      acceptor.accept(socket, ec);
      if (ec) break;
      open_.fetch_add(1, std::memory_order_relaxed);
      serve(std::move(socket), tls);
    }
    acceptor.close(ec);
  }

  // One per listener: the plain port (HTTP/1.1 and h2c) or the TLS port.
  asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, bool tls) {
    const auto max = context_.config.limits.max_connections;
    while (true) {
      reserve_socket_states();
      auto [ec, socket] = co_await acceptor.async_accept(use_nothrow);
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
        // Out of descriptors and the like: back off briefly instead of spinning.
        log::warn("accept failed").kv("listener", tls ? "tls" : "plain").kv("error", ec.message());
        asio::steady_timer pause(io_, std::chrono::milliseconds(50));
        co_await pause.async_wait(use_nothrow);
        continue;
      }
      if (open_.fetch_add(1, std::memory_order_relaxed) >= max) {
        open_.fetch_sub(1, std::memory_order_relaxed);
        error_code ignore;
        socket.close(ignore);  // over the connection limit: refuse by closing
        continue;
      }
      if (forward_.shared.instances) forward_.shared.instances->on_connection();
      serve(std::move(socket), tls);
    }
  }

  // Asio keeps each socket's reactor state (epoll_reactor::descriptor_state, 176 bytes) in a pool that it
  // never frees, only reuses. Taken one at a time during a burst, the states lie between their connections'
  // other blocks; once the burst is over each one pins a page that malloc_trim cannot give back (4,000 TLS
  // HTTP/1.1 connections closed: 17.9 MiB of heap stayed, 6.1 MiB with the states allocated side by side;
  // bench/README.md, "Memory after load"). So the worker fills the pool ahead of its sockets, a run at a
  // time: when its connections and its connections to the app come within half a run of the states made so
  // far, it opens kStateRun sockets and closes them at once; their states, allocated together, wait in
  // Asio's free list for the next sockets.
  static constexpr std::size_t kStateRun = 128;
  void reserve_socket_states() {
    const auto app = static_cast<std::size_t>(std::max<std::ptrdiff_t>(AppSocketCount::open(), 0));
    if (mine_ + app + kStateRun / 2 < states_) return;
    std::vector<tcp::socket> run;
    run.reserve(kStateRun);
    error_code ec;
    while (run.size() < kStateRun) {
      tcp::socket socket(io_);
      if (socket.open(tcp::v4(), ec); ec) break;  // out of descriptors: the pool grows one by one instead
      run.push_back(std::move(socket));
    }
    states_ += run.size();
  }

  // `open_` counts the connection already; the completion handler uncounts it. A TLS connection is
  // handshaken with the certificate current at accept.
  void serve(tcp::socket socket, bool tls) {
    peak_ = std::max(peak_, ++mine_);
    auto done = [this](std::exception_ptr e, bool resting) { context_.served(e, resting); };
    if (tls) asio::co_spawn(io_, serve_tls(context_, std::move(socket), tls_->current()), done);
    else asio::co_spawn(io_, serve_plain(context_, std::move(socket)), done);
  }

  // Memory a burst took goes back to the system once the burst is over: its free lists go back to malloc
  // and malloc gives its free pages back (malloc_trim). A burst of connections is over when this worker's
  // connections have fallen below half their peak (a peak of kBurst or more) and still are 2 s later. A
  // burst of requests on connections that stay open (4,000 clients each sending a request and keeping
  // its connection, or a load that ended on an ingress's pooled connections) is over when the exchanges
  // in flight fell below half their peak (of kExchangeBurst or more) and fewer than half that peak ran
  // at once in the 2 s since: a load that merely dips is not a burst that ended, and keeps its free
  // lists. Nothing runs while the counts are steady, so an idle worker stays idle.
  static constexpr std::size_t kBurst = 256;
  static constexpr std::size_t kExchangeBurst = 64;
  void connection_ended() override {
    open_.fetch_sub(1, std::memory_order_relaxed);
    --mine_;
    after_burst();
  }
  void exchange_ended() override { after_burst(); }
  bool connections_fell() const { return peak_ >= kBurst && mine_ * 2 < peak_; }
  bool exchanges_fell() const {
    return exchanges_.peak >= kExchangeBurst && exchanges_.now * 2 < exchanges_.peak;
  }
  void after_burst() {
    if (trim_armed_ || context_.draining || !(connections_fell() || exchanges_fell())) return;
    trim_armed_ = true;
    // From here exchanges_.peak is the most in flight during the wait; the burst's own is kept.
    exchanges_before_ = std::max(exchanges_before_, exchanges_.peak);
    exchanges_.peak = exchanges_.now;
    trim_timer_.expires_after(std::chrono::seconds(2));
    trim_timer_.async_wait([this](error_code ec) {
      trim_armed_ = false;
      if (ec) return;
      const bool exchanges_ended = exchanges_before_ >= kExchangeBurst && exchanges_.peak * 2 < exchanges_before_;
      if (!connections_fell() && !exchanges_ended) {
        exchanges_.peak = std::max(exchanges_.peak, exchanges_before_);
        exchanges_before_ = 0;
        after_burst();  // still below half: the next 2 s may be quiet (no exchange may end to ask again)
        return;
      }
      memory::release_thread_cache();
      ::malloc_trim(0);
      peak_ = mine_;
      exchanges_.peak = exchanges_.now;
      exchanges_before_ = 0;
    });
  }

  ExchangesInFlight exchanges_;  // ahead of io_, which may destroy exchanges' coroutines as it goes
  asio::io_context io_;
  tcp::acceptor acceptor_;
  tcp::acceptor tls_acceptor_;  // open only with a TLS configuration
  asio::steady_timer settle_{io_};  // at shutdown, until the listeners close
  // Every deadline of this worker's connections, exchanges and pools, on one timer; first in, last out.
  net::Watchdogs watchdogs_;
  Upstreams upstreams_;    // the app's side: the worker's Connector
  ForwardContext forward_;  // the forwarder's side: the worker's ExchangeHandler
  ServerContext context_;   // the clients' side
  const TlsContexts* tls_;  // the server's, null without a TLS port
  std::atomic<std::size_t>& open_;
  std::size_t mine_ = 0, peak_ = 0;  // this worker's open connections, and their most since the last trim
  std::size_t exchanges_before_ = 0;  // while the trim timer runs: the most exchanges in flight before it
  std::size_t states_ = 0;           // sockets reserve_socket_states() opened: Asio's pool holds that many states
  asio::steady_timer trim_timer_{io_};
  bool trim_armed_ = false;
  std::thread thread_;
};

namespace {

unsigned worker_count(const ProxyConfig& c) {
  return c.workers ? c.workers : usable_cpus();
}

}  // namespace

Server::Server(ProxyConfig config, std::shared_ptr<InstanceSet> instances)
    : config_(std::move(config)),
      shared_(config_, worker_count(config_)),
      tls_(config_.tls ? std::make_unique<TlsContexts>(*config_.tls) : nullptr) {
  shared_.instances = std::move(instances);
  tcp::endpoint upstream(asio::ip::make_address(config_.upstream_host), config_.upstream_port);
  for (unsigned i = 0; i < worker_count(config_); ++i)
    workers_.push_back(std::make_unique<Worker>(config_, shared_, tls_.get(), i, open_connections_, upstream));
}

Server::~Server() {
  for (auto& w : workers_) w->stop();
  for (auto& w : workers_) w->join();
  // Whatever still waits holds timers of the workers' io_contexts, which go first.
  if (shared_.breaker) shared_.breaker->drop_waiters();
  shared_.readiness.drop_waiters();
  if (shared_.instances) shared_.instances->drop_waiters();
}

void Server::start() {
  auto address = asio::ip::make_address(config_.listen_address);
  // The workers share each port through SO_REUSEPORT, which would also let another sluice of the same
  // user in: make sure nobody listens there first. Port 0: the first bind picks, the rest share it.
  const std::string name = shared_.instances ? "gateway" : "proxy";
  claim_port(tcp::endpoint(address, config_.port), name, config_.netns);
  if (tls_) claim_port(tcp::endpoint(address, config_.tls_port), "tls", config_.netns);
  std::uint16_t port = config_.port;
  for (auto& w : workers_) port = w->bind(tcp::endpoint(address, port), name, config_.netns);
  port_ = port;
  if (tls_) {
    std::uint16_t tls_port = config_.tls_port;
    for (auto& w : workers_) tls_port = w->bind_tls(tcp::endpoint(address, tls_port), config_.netns);
    tls_port_ = tls_port;
  }
  for (auto& w : workers_) w->start();
}

void Server::shutdown(ShutdownLimits limits, Listeners listeners) {
  for (auto& w : workers_) w->begin_shutdown(listeners);
  const auto start = Clock::now();
  const auto deadline = limits.in_flight.count() > 0 ? start + limits.in_flight : Clock::time_point::max();
  std::optional<Clock::time_point> only_upgraded_since;
  auto all_idle = [&] {
    for (auto& w : workers_)
      if (!w->idle()) return false;
    return true;
  };
  while (!all_idle()) {
    const auto now = Clock::now();
    if (now >= deadline) break;
    // Upgraded connections are counted among the open ones: when they are all that is left, their wait starts.
    const bool only_upgraded = open_connections() <= shared_.open_tunnels.load(std::memory_order_relaxed);
    if (!only_upgraded) only_upgraded_since.reset();
    else if (!only_upgraded_since) only_upgraded_since = now;
    else if (now - *only_upgraded_since >= limits.upgraded) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& w : workers_) {
    w->stop();
    w->join();
  }
}

}  // namespace sluice::proxy
