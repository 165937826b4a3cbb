// The gateway's routing table: Host, Knative-Serving-Tag, <tag>-<service>.localhost and the percent split.
#include <gtest/gtest.h>

#include <new>

#include "app/gateway/revision.h"
#include "app/gateway/router.h"

namespace sluice::app::gateway {
namespace {

struct Revisions {
  Revision front, api_old, api_new;

  std::shared_ptr<Router::Table> table() {
    auto t = std::make_shared<Router::Table>();
    t->hosts = {{"api.test", "api"}};
    t->serving["front"] = {Router::Target{&front, 100, {}}};
    t->serving["api"] = {Router::Target{&api_old, 80, {}}, Router::Target{&api_new, 20, {"canary"}}};
    t->tag_hosts["canary-api.localhost"] = &api_new;
    t->default_service = "front";
    t->default_primary = &front;
    return t;
  }
};

TEST(GatewayRouter, RoutesByHostIgnoringPortAndCaseAndSendsUnknownHostsToTheDefault) {
  Revisions r;
  Router router;
  router.publish(r.table());
  EXPECT_EQ(router.route("api.test", "", 0), &r.api_old);
  EXPECT_EQ(router.route("API.Test:8080", "", 0), &r.api_old);
  EXPECT_EQ(router.route("elsewhere.example", "", 0), &r.front);
  EXPECT_EQ(router.route("[::1]:8080", "", 0), &r.front);
  EXPECT_EQ(router.default_primary(), &r.front);
}

TEST(GatewayRouter, ThePercentSplitFollowsTheRoll) {
  Revisions r;
  Router router;
  router.publish(r.table());
  for (int roll = 0; roll < 80; ++roll) EXPECT_EQ(router.route("api.test", "", roll), &r.api_old) << roll;
  for (int roll = 80; roll < 100; ++roll) EXPECT_EQ(router.route("api.test", "", roll), &r.api_new) << roll;
}

TEST(GatewayRouter, ATagHeaderOrATagHostPicksTheTaggedRevisionAndAnUnknownTagTheSplit) {
  Revisions r;
  Router router;
  router.publish(r.table());
  EXPECT_EQ(router.route("api.test", "canary", 0), &r.api_new);
  EXPECT_EQ(router.route("canary-api.localhost:8080", "", 0), &r.api_new);
  EXPECT_EQ(router.route("api.test", "nosuchtag", 0), &r.api_old);
}

TEST(GatewayRouter, TagHeaderRoutingCanBeTurnedOff) {
  Revisions r;
  Router router;
  auto t = r.table();
  t->tag_header_routing = false;
  router.publish(t);
  EXPECT_EQ(router.route("api.test", "canary", 0), &r.api_old);
  EXPECT_EQ(router.route("canary-api.localhost", "", 0), &r.api_new);  // the tag host still routes
}

TEST(GatewayRouter, ANewTableIsSeenByAThreadThatCachedTheOldOne) {
  Revisions r;
  Router router;
  EXPECT_EQ(router.route("api.test", "", 0), nullptr);  // nothing published yet: nothing routed
  router.publish(r.table());
  EXPECT_EQ(router.route("api.test", "", 0), &r.api_old);  // this thread caches the first table
  auto next = r.table();
  next->serving["api"] = {Router::Target{&r.api_new, 100, {}}};
  router.publish(next);
  EXPECT_EQ(router.route("api.test", "", 0), &r.api_new);
  // A router made later at the same address is not mistaken for this one by the cache.
  router.~Router();
  new (&router) Router();
  EXPECT_EQ(router.route("api.test", "", 0), nullptr);
}

}  // namespace
}  // namespace sluice::app::gateway
