// The Stat scrape over Beast: connect, one request, one response, all under one deadline.
#include "scaler/stat_scrape.h"

#include "metrics/stat.pb.h"

namespace sluice::scaler {
namespace {

namespace beast = net::beast;
namespace http = net::http;
using net::use_nothrow;

ScrapeResult failure(std::string reason, const boost::system::error_code& ec) {
  const bool timed_out = ec == beast::error::timeout;
  return {.reason = timed_out ? "timeout" : std::move(reason), .detail = ec.message()};
}

}  // namespace

asio::awaitable<ScrapeResult> scrape_stat(tcp::endpoint endpoint, std::chrono::milliseconds timeout) {
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(timeout);
  if (auto [ec] = co_await stream.async_connect(endpoint, use_nothrow); ec) co_return failure("connect", ec);

  http::request<http::empty_body> request{http::verb::get, "/metrics", 11};
  const auto address = endpoint.address();
  request.set(http::field::host, (address.is_v6() ? "[" + address.to_string() + "]" : address.to_string()) + ":" +
                                     std::to_string(endpoint.port()));
  request.set(http::field::accept, "application/protobuf");
  request.set(http::field::user_agent, "sluice-autoscaler");
  if (auto [ec, n] = co_await http::async_write(stream, request, use_nothrow); ec) co_return failure("write", ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxStatBytes);
  if (auto [ec, n] = co_await http::async_read(stream, buffer, parser, use_nothrow); ec) {
    co_return failure("read", ec);
  }
  boost::system::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);

  const auto& response = parser.get();
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
