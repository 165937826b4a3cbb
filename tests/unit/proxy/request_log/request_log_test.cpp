#include "proxy/request_log/request_log.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>

namespace sluice::proxy {
namespace {

TEST(RequestLog, IsOneJsonObjectWithKnativesFields) {
  ExchangeRecord r{.start = Clock::now(), .method = "POST", .target = "/x?\"q\"", .request_id = "rid-1",
                   .user_agent = "curl/8", .peer = "127.0.0.1:5000", .status = 201,
                   .request_bytes = 10, .response_bytes = 20};
  std::string line;
  format_request_log(line, r, r.start + std::chrono::milliseconds(1500), "10.0.0.5");
  auto v = boost::json::parse(line);  // throws if not valid JSON
  auto& req = v.at("httpRequest").as_object();
  EXPECT_EQ(req.at("requestMethod").as_string(), "POST");
  EXPECT_EQ(req.at("requestUrl").as_string(), "/x?\"q\"");
  EXPECT_EQ(req.at("status").as_int64(), 201);
  EXPECT_EQ(req.at("responseSize").as_string(), "20");
  EXPECT_EQ(req.at("requestSize").as_string(), "10");
  EXPECT_EQ(req.at("latency").as_string(), "1.500000000s");
  EXPECT_EQ(req.at("serverIp").as_string(), "10.0.0.5");
  EXPECT_EQ(v.at("requestId").as_string(), "rid-1");
}

}  // namespace
}  // namespace sluice::proxy
