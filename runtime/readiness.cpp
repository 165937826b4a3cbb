// Readiness polling through the HTTP/1.1 client's blocking form (common/http_client.h): it runs before any
// event loop may exist for the instance, so each try runs on an io_context of its own.
#include "runtime/readiness.h"

#include <netdb.h>

#include <condition_variable>
#include <cstring>
#include <mutex>

#include "common/http_client.h"

namespace sluice::runtime {
namespace {

using Steady = std::chrono::steady_clock;

// A failed try in the words the instance's log has always used: "connect: Connection refused",
// "http: status 503".
std::string describe(const net::HttpReply& reply, const ReadinessProbe& probe) {
  switch (reply.stage) {
    case net::HttpStage::connect:
      return "connect: " + (reply.timed_out() ? std::string("timed out") : reply.error.message());
    case net::HttpStage::write:
      return "send: " + (reply.timed_out() ? std::string("timed out") : reply.error.message());
    case net::HttpStage::read:
      if (reply.timed_out()) return "http: no status line within " + std::to_string(probe.try_timeout.count()) + " ms";
      if (reply.closed_early()) return "http: connection closed before a status line";
      return "http: " + reply.error.message();
    case net::HttpStage::done:
      break;
  }
  return "http: status " + std::to_string(reply.response.result_int());
}

}  // namespace

bool probe_once(const ReadinessProbe& probe, std::string& error) {
  const auto deadline = Steady::now() + probe.try_timeout;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(probe.host.c_str(), std::to_string(probe.port).c_str(), &hints, &res); rc != 0) {
    error = "resolve " + probe.host + ": " + ::gai_strerror(rc);
    return false;
  }
  net::tcp::endpoint endpoint;
  std::memcpy(endpoint.data(), res->ai_addr, res->ai_addrlen);
  endpoint.resize(res->ai_addrlen);
  ::freeaddrinfo(res);
  // Empty: the connection is the answer (a TCP probe).
  const std::string head = probe.http_path.empty()
                               ? std::string()
                               : "GET " + probe.http_path + " HTTP/1.1\r\nHost: " +
                                     net::host_field(probe.host, static_cast<unsigned>(probe.port)) +
                                     "\r\nUser-Agent: kube-probe//\r\nConnection: close\r\n\r\n";
  auto reply = net::http_fetch_blocking(endpoint, head, {}, {.read_body = false}, deadline);
  const unsigned status = reply.response.result_int();
  if (reply.ok() && (head.empty() || (status >= 200 && status < 400))) return true;
  error = describe(reply, probe);
  return false;
}

ReadinessResult wait_ready(const ReadinessProbe& probe, Steady::time_point deadline, std::stop_token stop,
                           const std::function<bool()>& give_up) {
  ReadinessResult result;
  auto began = Steady::now();
  std::mutex mu;
  std::condition_variable_any cv;
  auto finish = [&](Readiness r) {
    result.outcome = r;
    result.waited = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - began);
    return result;
  };
  while (true) {
    if (stop.stop_requested()) return finish(Readiness::cancelled);
    if (give_up && give_up()) return finish(Readiness::gave_up);
    auto next = Steady::now() + probe.period;
    ++result.attempts;
    if (probe_once(probe, result.last_error)) return finish(Readiness::ready);
    if (Steady::now() >= deadline) return finish(Readiness::deadline);
    std::unique_lock lock(mu);
    // Wakes at once on cancellation instead of finishing the period.
    cv.wait_until(lock, stop, std::min(next, deadline), [] { return false; });
  }
}

}  // namespace sluice::runtime
