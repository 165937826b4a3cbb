// The dashboard in a real browser: headless Chromium loads GET / from the admin port after traffic and
// its DOM must show the services, revisions with their traffic, instances with their states, the
// request counts, latency percentiles and the cold starts. Chromium comes from scripts/dev.sh's
// PACKAGES (Debian's `chromium`); without it the test skips, saying so, or fails where the machine is
// declared to have it (capability "chromium", tests/support/capability.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/integration/gateway/gateway_harness.h"
#include "tests/support/capability.h"

namespace sluice::test {
namespace {

std::string chromium() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(p)) return p;
  return {};
}

// The page's DOM after its scripts ran (polling /.sluice/status) for up to `budget_ms` of virtual time.
std::string rendered(int admin_port, int budget_ms = 3000) {
  auto r = run_command({chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                        "--no-first-run", "--virtual-time-budget=" + std::to_string(budget_ms), "--dump-dom",
                        "http://127.0.0.1:" + std::to_string(admin_port) + "/"},
                       60s);
  return r.out;
}

TEST(GatewayDashboard, HeadlessChromiumShowsServicesRevisionsInstancesAndColdStarts) {
  SLUICE_NEED("chromium");
  TempFile config("sluice-dash.yaml", std::string("services:\n  web:\n    command: sleep 0.2; exec ") + DEMO_APP_BIN +
                                          "\n  api:\n    command: " + DEMO_APP_BIN + "\n");
  Gateway gw({"--config", config.path()});
  ASSERT_TRUE(eventually([&] { return gw.instances("", "web") == 0 && gw.instances("", "api") == 0; }, 20s));
  for (int i = 0; i < 20; ++i) ASSERT_EQ(curl({"-H", "Host: web.localhost", gw.url("/delay/5")}).out, "delayed 5\n");
  auto dom = rendered(gw.admin_port);
  EXPECT_NE(dom.find("<section class=\"service\" data-service=\"web\">"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<section class=\"service\" data-service=\"api\">"), std::string::npos) << dom;
  EXPECT_NE(dom.find("data-revision=\"web-00001\"><td>web-00001</td><td>serving</td><td class=\"traffic\">100%</td>"),
            std::string::npos) << dom;
  EXPECT_TRUE(std::regex_search(dom, std::regex("data-instance=\"web-[0-9]+\" data-state=\"(ready|frozen)\"")))
      << dom;
  EXPECT_NE(dom.find("<b class=\"requests\">20</b>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<b class=\"cold-starts\">1</b>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<svg class=\"coldstarts\" width=\"360\" height=\"60\" data-count=\"1\">"), std::string::npos) << dom;
  EXPECT_TRUE(std::regex_search(dom, std::regex("<b class=\"p50\">[0-9.]+ ms</b>"))) << dom;
  // Live: more traffic, and a new page load shows it (the page itself polls every second).
  for (int i = 0; i < 5; ++i) ASSERT_EQ(curl({"-H", "Host: api.localhost", gw.url("/")}).exit_code, 0);
  auto later = rendered(gw.admin_port);
  EXPECT_TRUE(std::regex_search(later, std::regex("data-service=\"api\">.*?<b class=\"requests\">5</b>")));
}

TEST(GatewayDashboard, ThePageNeedsNothingFromOutside) {
  Gateway gw({"--", DEMO_APP_BIN});
  auto page = body_of(http_get(gw.admin_port, "/"));
  EXPECT_NE(page.find("<title>sluice gateway</title>"), std::string::npos);
  for (const char* external : {"http://", "https://", "//cdn", "<link ", "src=\""})
    EXPECT_EQ(page.find(external), std::string::npos) << external;
}

}  // namespace
}  // namespace sluice::test
