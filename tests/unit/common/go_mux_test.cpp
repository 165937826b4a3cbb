// Go's ServeMux answers for queue-proxy's single-path muxes: redirects of unclean paths, 404, 405.
#include "common/go_mux.h"

#include <gtest/gtest.h>

namespace sluice::net {
namespace {

ControlRequest request(http::verb method, std::string_view target) {
  ControlRequest r{method, target, 11};
  return r;
}

std::string header(const ControlResponse& r, std::string_view name) {
  for (const auto& [n, v] : r.headers)
    if (n == name) return v;
  return {};
}

TEST(GoMux, CleansPathsAsGoDoes) {
  EXPECT_EQ(go_clean_path("/metrics"), "/metrics");
  EXPECT_EQ(go_clean_path("//metrics"), "/metrics");
  EXPECT_EQ(go_clean_path("/a/../metrics"), "/metrics");
  EXPECT_EQ(go_clean_path("/./metrics/"), "/metrics/");
  EXPECT_EQ(go_clean_path("/.."), "/");
  EXPECT_EQ(go_clean_path(""), "/");
  EXPECT_EQ(target_path("/metrics?x=1"), "/metrics");
  EXPECT_EQ(target_path("http://h:9090/metrics?x"), "/metrics");
  EXPECT_EQ(target_path("HTTP://h"), "");
}

TEST(GoMux, ThePatternsPathWithAQueryIsServed) {
  EXPECT_FALSE(go_mux_refusal(request(http::verb::get, "/metrics?x=1"), {.path = "/metrics"}));
  EXPECT_FALSE(go_mux_refusal(request(http::verb::post, "/metrics"), {.path = "/metrics"}));
  EXPECT_FALSE(go_mux_refusal(request(http::verb::head, "/metrics"), {.path = "/metrics", .get_only = true}));
}

TEST(GoMux, OtherPathsAre404AndOtherMethods405) {
  auto r = go_mux_refusal(request(http::verb::get, "/metrics/"), {.path = "/metrics"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404u);
  EXPECT_EQ(r->body, "404 page not found\n");
  EXPECT_EQ(header(*r, "X-Content-Type-Options"), "nosniff");
  r = go_mux_refusal(request(http::verb::post, "/metrics"), {.path = "/metrics", .get_only = true});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405u);
  EXPECT_EQ(r->body, "Method Not Allowed\n");
  EXPECT_EQ(header(*r, "Allow"), "GET, HEAD");
  r = go_mux_refusal(request(http::verb::post, "/"), {.path = "/metrics", .get_only = true});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404u);  // the path decides first
}

TEST(GoMux, UncleanPathsAreRedirectedWithTheirQuery) {
  auto r = go_mux_refusal(request(http::verb::get, "//metrics"), {.path = "/metrics"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 301u);
  EXPECT_EQ(header(*r, "Location"), "/metrics");
  EXPECT_EQ(r->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(r->body, "<a href=\"/metrics\">Moved Permanently</a>.\n\n");
  r = go_mux_refusal(request(http::verb::post, "/a/../nope?x=1"), {.path = "/metrics"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 301u);  // whether or not the clean path is served
  EXPECT_EQ(header(*r, "Location"), "/nope?x=1");
  EXPECT_EQ(r->content_type, "");
  EXPECT_EQ(r->body, "");
  r = go_mux_refusal(request(http::verb::get, "/metric%73"), {.path = "/metrics"});
  ASSERT_TRUE(r);
  EXPECT_EQ(header(*r, "Location"), "/metrics");
}

}  // namespace
}  // namespace sluice::net
