// A RuntimeService for the gateway's fleet tests: it records every call (and the thread it came on),
// "starts" an instance by listening on its PORT on loopback (so the fleet's real, asynchronous readiness
// probe finds it), and fails on request. Thread-safe: the fleet calls it from its spawner and throttler
// threads.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "runtime/runtime_service.h"

namespace sluice::test {

class FakeRuntime final : public runtime::RuntimeService {
 public:
  struct Call {
    std::string what;  // "create app-1", "freeze app-1", ...
    std::thread::id thread;
  };

  // Set before the calls they affect.
  void fail_create(std::string why) {
    std::lock_guard lock(mu_);
    fail_create_ = std::move(why);
  }
  void listen_on_start(bool on) {
    std::lock_guard lock(mu_);
    listen_ = on;
  }

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& c : calls()) out.push_back(c.what);
    return out;
  }
  std::size_t count(const std::string& what) const {
    auto n = names();
    return static_cast<std::size_t>(std::count(n.begin(), n.end(), what));
  }
  std::uint16_t port_of(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = instances_.find(id);
    return it == instances_.end() ? 0 : it->second.port;
  }

  const runtime::ThrottleChoice& throttle() const override { return throttle_; }

  runtime::Outcome create(const runtime::InstanceSpec& spec) override {
    std::lock_guard lock(mu_);
    record("create " + spec.id);
    if (!fail_create_.empty()) return runtime::Outcome::failure(fail_create_);
    instances_[spec.id].port = static_cast<std::uint16_t>(spec.port);
    return {};
  }
  runtime::Outcome start(const std::string& id) override {
    std::lock_guard lock(mu_);
    record("start " + id);
    auto it = instances_.find(id);
    if (it == instances_.end()) return runtime::Outcome::failure("no instance " + id);
    it->second.running = true;
    if (listen_) listen(it->second);
    return {};
  }
  // A started instance that did not listen (listen_on_start(false)) begins to.
  void listen_now(const std::string& id) {
    std::lock_guard lock(mu_);
    if (auto it = instances_.find(id); it != instances_.end() && it->second.running) listen(it->second);
  }
  runtime::Outcome stop(const std::string& id, std::optional<std::chrono::milliseconds>) override {
    std::lock_guard lock(mu_);
    record("stop " + id);
    if (auto it = instances_.find(id); it != instances_.end()) {
      it->second.acceptor.reset();
      it->second.running = false;
    }
    return {};
  }
  runtime::Outcome remove(const std::string& id) override {
    std::lock_guard lock(mu_);
    record("remove " + id);
    instances_.erase(id);
    return {};
  }
  runtime::Outcome freeze(const std::string& id) override {
    std::lock_guard lock(mu_);
    record("freeze " + id);
    return {};
  }
  runtime::Outcome thaw(const std::string& id) override {
    std::lock_guard lock(mu_);
    record("thaw " + id);
    return {};
  }
  std::optional<runtime::InstanceStatus> status(const std::string& id) const override {
    std::lock_guard lock(mu_);
    auto it = instances_.find(id);
    if (it == instances_.end()) return std::nullopt;
    runtime::InstanceStatus st;
    st.id = id;
    st.state = it->second.running ? runtime::InstanceState::running : runtime::InstanceState::exited;
    return st;
  }
  runtime::ExecResult exec(const std::string&, const std::vector<std::string>&, std::chrono::milliseconds) override {
    return {};
  }
  std::optional<std::string> sandbox_unavailable_reason() override { return "a fake runtime has no sandboxes"; }
  runtime::Outcome run_pod_sandbox(const runtime::PodSandboxConfig&, const std::string&) override {
    return runtime::Outcome::failure("a fake runtime has no sandboxes");
  }
  runtime::Outcome remove_pod_sandbox(const std::string&) override { return {}; }
  std::optional<runtime::PodSandboxStatus> pod_sandbox_status(const std::string&) const override { return std::nullopt; }

 private:
  struct Fake {
    std::uint16_t port = 0;
    bool running = false;
    std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor;
  };
  void record(std::string what) { calls_.push_back(Call{std::move(what), std::this_thread::get_id()}); }
  void listen(Fake& f) {
    namespace asio = boost::asio;
    f.acceptor = std::make_unique<asio::ip::tcp::acceptor>(io_);
    asio::ip::tcp::endpoint at(asio::ip::address_v4::loopback(), f.port);
    f.acceptor->open(at.protocol());
    f.acceptor->set_option(asio::socket_base::reuse_address(true));
    f.acceptor->bind(at);
    f.acceptor->listen();  // the kernel completes connects; nobody needs to accept them
  }

  runtime::ThrottleChoice throttle_{runtime::ThrottleKind::cgroup2_freeze, {}, "fake"};
  boost::asio::io_context io_;  // owns the listeners; never run
  mutable std::mutex mu_;
  std::vector<Call> calls_;
  std::map<std::string, Fake> instances_;
  std::string fail_create_;
  bool listen_ = true;
};

}  // namespace sluice::test
