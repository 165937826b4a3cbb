// The Stat scrape: one GET through the HTTP/1.1 client (common/http_client.h), all under one deadline.
#include "scaler/stat_scrape.h"

#include "common/http_client.h"
#include "metrics/stat.pb.h"

namespace sluice::scaler {
namespace {

namespace http = net::http;

ScrapeResult failure(const net::HttpReply& reply) {
  if (reply.timed_out()) return {.reason = "timeout", .detail = reply.error.message()};
  const char* step = reply.stage == net::HttpStage::connect ? "connect"
                     : reply.stage == net::HttpStage::write ? "write"
                                                            : "read";
  return {.reason = step, .detail = reply.error.message()};
}

}  // namespace

asio::awaitable<ScrapeResult> scrape_stat(tcp::endpoint endpoint, std::chrono::milliseconds timeout) {
  const std::string head = "GET /metrics HTTP/1.1\r\nHost: " +
                           net::host_field(endpoint.address().to_string(), endpoint.port()) +
                           "\r\nAccept: application/protobuf\r\nUser-Agent: sluice-autoscaler\r\n\r\n";
  auto reply = co_await net::http_fetch(endpoint, head, {}, {.body_bytes = kMaxStatBytes}, net::Clock::now() + timeout);
  if (!reply.ok()) co_return failure(reply);

  const auto& response = reply.response;
  if (response.result() != http::status::ok) {
    co_return ScrapeResult{.reason = "status", .detail = "HTTP " + std::to_string(response.result_int())};
  }
  // Knative rejects anything but protobuf here: a text answer means an old queue-proxy or another server.
  const auto type = response[http::field::content_type];
  if (!type.starts_with("application/protobuf")) {
    co_return ScrapeResult{.reason = "content-type", .detail = "Content-Type '" + std::string(type) + "'"};
  }
  metrics::wire::Stat wire;
  if (!wire.ParseFromString(response.body())) {
    co_return ScrapeResult{.reason = "decode", .detail = "the body is not a Stat message"};
  }
  co_return ScrapeResult{
      .ok = true,
      .stat = {.average_concurrent_requests = wire.average_concurrent_requests(),
               .average_proxied_concurrent_requests = wire.average_proxied_concurrent_requests(),
               .request_count = wire.request_count(),
               .proxied_request_count = wire.proxied_request_count()},
      .pod_name = wire.pod_name(),
      .process_uptime = wire.process_uptime()};
}

}  // namespace sluice::scaler
