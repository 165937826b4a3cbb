// The dashboard in a real browser: headless Chromium loads GET / from the admin port after traffic and
// its DOM must show the services, revisions with their traffic, instances with their states and last
// output lines, the request counts, latency percentiles, the cold starts and the last requests; a failing
// service is shown failed, with why (DOM and screenshot). Chromium comes from scripts/dev.sh's
// PACKAGES (Debian's `chromium`); without it the test skips, saying so, or fails where the machine is
// declared to have it (capability "chromium", tests/support/capability.h).
#include <gtest/gtest.h>
#include <unistd.h>

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

// A screenshot of the page (PNG, `size` as "W,H"), after its scripts ran; the count of pixels of `rgb`.
long pixels_of(int admin_port, const std::string& png, const std::string& rgb) {
  auto shot = run_command({chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--hide-scrollbars", "--window-size=1200,1600", "--virtual-time-budget=3000",
                           "--screenshot=" + png, "http://127.0.0.1:" + std::to_string(admin_port) + "/"},
                          60s);
  if (!std::filesystem::exists(png)) {
    ADD_FAILURE() << "no screenshot: " << shot.out << shot.err;
    return -1;
  }
  auto count = run_command({"/usr/bin/python3", std::string(SOURCE_DIR) + "/tests/integration/gateway/png_pixels.py", png, rgb});
  std::filesystem::remove(png);
  return count.exit_code == 0 ? std::stol(count.out) : -1;
}

// The failure colour of dashboard.cpp's `.failed` banner and `.failing` border (#c62828).
constexpr const char* kFailureRed = "c62828";

TEST(GatewayDashboard, AFailingServiceIsShownFailedWithWhyAndItsInstancesLastWords) {
  SLUICE_NEED("chromium");
  TempFile config("sluice-dash-fail.yaml",
                  std::string("services:\n  web:\n    command: ") + DEMO_APP_BIN +
                      "\n  db:\n    command: \"echo 'connecting to postgres://db:5432'; "
                      "echo 'FATAL: password authentication failed' >&2; exit 3\"\n");
  Gateway gw({"--config", config.path()});
  ASSERT_TRUE(eventually([&] { return gw.service("db").contains("failed"); }, 20s)) << json::serialize(gw.status());
  // Requests reach both: the failing one answers 503 with the reason.
  ASSERT_EQ(curl({"-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: db.localhost", gw.url("/")}).out, "503");
  ASSERT_EQ(curl({"-sS", "-H", "Host: web.localhost", gw.url("/")}).exit_code, 0);

  auto dom = rendered(gw.admin_port);
  // The service: marked failing, with the reason in its banner.
  EXPECT_NE(dom.find("<section class=\"service failing\" data-service=\"db\">"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<section class=\"service\" data-service=\"web\">"), std::string::npos) << dom;
  EXPECT_TRUE(std::regex_search(dom, std::regex("<div class=\"failed\">failed: exited with code 3[^<]*FATAL: password authentication failed")))
      << dom;
  // Its revision: phase failed, and why.
  EXPECT_TRUE(std::regex_search(dom, std::regex("data-revision=\"db-00001\"><td>db-00001</td><td>failed</td><td class=\"traffic\">100%</td><td></td>"
                                                "<td>exited with code 3")))
      << dom;
  // The instance that tried: its last output lines, both streams, though it is gone.
  EXPECT_TRUE(std::regex_search(dom, std::regex("<details class=\"logs\" data-logs=\"db-[0-9]+\"><summary>db-[0-9]+: last 2 output lines \\(ended\\)</summary>"
                                                "<pre>connecting to postgres://db:5432\nFATAL: password authentication failed</pre>")))
      << dom;
  // The last requests: newest first, with status, service, revision, instance and cold start.
  EXPECT_TRUE(std::regex_search(dom, std::regex("<tr class=\"request\" data-status=\"200\"><td>[^<]+</td><td>GET</td><td>/</td><td class=\"s2\">200</td>"
                                                "<td>[0-9.]+ ms</td><td>web</td><td>web-00001</td><td>web-[0-9]+</td><td>(cold start)?</td></tr>"
                                                "<tr class=\"request\" data-status=\"503\"><td>[^<]+</td><td>GET</td><td>/</td><td class=\"s5\">503</td>"
                                                "<td>[0-9.]+ ms</td><td>db</td><td></td><td></td><td></td></tr>")))
      << dom;

  // What it looks like: the failure red is on the page, and only because of the failing service.
  const auto png = std::filesystem::temp_directory_path() / ("sluice-dash-" + std::to_string(::getpid()) + ".png");
  const long red = pixels_of(gw.admin_port, png.string(), kFailureRed);
  EXPECT_GT(red, 5000) << "the failing service's banner and border are not on the screenshot";
  Gateway healthy({"--", DEMO_APP_BIN});
  EXPECT_EQ(pixels_of(healthy.admin_port, png.string(), kFailureRed), 0);
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
