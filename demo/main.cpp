// sluice-demo-app: a fast HTTP/1.1 + WebSocket backend with scripted behaviours for tests and
// benchmarks. Prints {"message":"listening",...,"port":N} once accepting; SIGTERM/SIGINT: exit 0.
#include <csignal>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "demo/listener.h"
#include "demo/options.h"

namespace {

using namespace sluice::demo;

int serve(const Options& opts) {
  // One thread: tell Asio so it can skip cross-thread wake-ups.
  asio::io_context ioc(opts.threads == 1 ? 1 : static_cast<int>(opts.threads));
  std::optional<tcp::acceptor> acceptor;
  try {
    acceptor.emplace(open_listener(ioc, opts.host, opts.port));
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "{\"level\":\"error\",\"message\":\"cannot listen\",\"host\":\"%s\",\"port\":%u,"
                 "\"error\":\"%s\"}\n",
                 opts.host.c_str(), static_cast<unsigned>(opts.port), e.what());
    return 1;
  }

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const error_code& ec, int) {
    if (!ec) ioc.stop();
  });
  asio::co_spawn(ioc, accept_loop(*acceptor), asio::detached);

  std::printf("{\"message\":\"listening\",\"host\":\"%s\",\"port\":%u}\n", opts.host.c_str(),
              static_cast<unsigned>(acceptor->local_endpoint().port()));
  std::fflush(stdout);

  std::vector<std::thread> extra;
  for (unsigned i = 1; i < opts.threads; ++i) extra.emplace_back([&ioc] { ioc.run(); });
  ioc.run();
  for (auto& t : extra) t.join();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice-demo-app: %s\n", e.what());
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return serve(opts);
  } catch (const std::exception& e) {
    // Only start-up can fail this way (threads, signal_set): the connections report errors as
    // values.
    std::fprintf(stderr, "{\"level\":\"error\",\"message\":\"fatal\",\"error\":\"%s\"}\n",
                 e.what());
    return 1;
  }
}
