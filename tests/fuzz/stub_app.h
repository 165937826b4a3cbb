// The app behind the h2 server fuzz target: a Connector whose exchanges answer at once, without a socket.
// It takes the request as the forwarder sends it (fields through the header policy, body, trailers) and
// answers by the request target, so that seeds can reach every response path of the server codec:
//   …interim…  a 103 before the final head        …trailers…  a body of unknown length, then trailers
//   …empty…    204 without a body                 …big…       100 000 bytes (beyond the default windows)
//   …fail…     the app resets before any head     otherwise   200 with a short body of known length
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "proxy/exchange/exchange.h"
#include "proxy/forward/forwarder.h"

namespace sluice::proxy::fuzz {

class StubExchange final : public ClientExchange {
 public:
  asio::awaitable<error_code> send_head(const UpstreamRequest& r, std::optional<asio::const_buffer> body) override {
    struct Sink final : FieldSink {
      std::size_t bytes = 0;
      void field(std::string_view n, std::string_view v) override { bytes += n.size() + v.size(); }
    } sink;
    r.fields(sink);
    target_.assign(r.target);
    head_request_ = r.method == "HEAD";
    if (body) received_ += body->size();
    co_return error_code{};
  }
  asio::awaitable<error_code> write_body(asio::const_buffer data) override {
    received_ += data.size();
    co_return error_code{};
  }
  asio::awaitable<error_code> end_body(const FieldList& t) override {
    request_trailers_ = t.size();
    co_return error_code{};
  }
  asio::awaitable<std::tuple<error_code, http::response_header<>*>> read_head() override {
    if (has("fail")) co_return std::tuple{error_code(asio::error::connection_reset), nullptr};
    head_ = {};
    head_.version(11);
    if (has("interim") && !interim_sent_) {
      interim_sent_ = true;
      head_.result(103);
      head_.set(http::field::link, "</style.css>; rel=preload");
      co_return std::tuple{error_code{}, &head_};
    }
    head_.set(http::field::content_type, "text/plain");
    head_.set("X-Stub", "1");
    if (has("empty")) {
      head_.result(204);
      body_left_ = 0;
    } else if (has("trailers")) {
      head_.result(200);
      body_left_ = 5;
    } else {
      head_.result(200);
      body_left_ = has("big") ? 100000 : 6;
      head_.set(http::field::content_length, std::to_string(body_left_));
    }
    if (head_request_) body_left_ = 0;
    co_return std::tuple{error_code{}, &head_};
  }
  BodyInfo response_body() const override {
    if (head_.result_int() == 204 || head_request_) return {.kind = BodyKind::none};
    if (has("trailers")) return {.kind = BodyKind::unknown};
    return {.kind = BodyKind::length, .content_length = body_left_};
  }
  bool body_at_hand() const override { return body_left_ > 0; }
  asio::awaitable<BodyRead> read_body() override {
    static const std::string chunk(16 * 1024, 'x');
    if (body_left_ == 0) co_return BodyRead{};
    co_return BodyRead{error_code{}, asio::buffer(chunk.data(), std::min(chunk.size(), body_left_))};
  }
  void consume_body(std::size_t n) override { body_left_ -= std::min(n, body_left_); }
  bool body_ended() const override { return body_left_ == 0; }
  const FieldList& trailers() override {
    static const FieldList with{{"grpc-status", "0"}, {"x-trailer", "done"}}, none;
    return has("trailers") ? with : none;
  }
  void cancel() override {}
  Staleness stale() const override { return Staleness::fresh; }
  void release(std::unique_ptr<ClientExchange> self) override { self.reset(); }
  tcp::socket* tunnel_socket(beast::flat_buffer*&) override { return nullptr; }

 private:
  bool has(std::string_view word) const { return target_.find(word) != std::string::npos; }

  std::string target_;
  bool head_request_ = false;
  bool interim_sent_ = false;
  http::response_header<> head_;
  std::size_t body_left_ = 0;
  std::size_t received_ = 0;
  std::size_t request_trailers_ = 0;
};

class StubConnector final : public Connector {
 public:
  asio::awaitable<std::tuple<error_code, std::unique_ptr<ClientExchange>>> open(AppProtocol, const tcp::endpoint*,
                                                                               bool) override {
    ++opened;
    co_return std::tuple{error_code{}, std::make_unique<StubExchange>()};
  }

  std::size_t opened = 0;  // exchanges forwarded
};

}  // namespace sluice::proxy::fuzz
