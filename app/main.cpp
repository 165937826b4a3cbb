// sluice entry point: picks the mode (app/modes.cpp).
#include <csignal>
#include <string_view>
#include <vector>

#include "app/modes.h"

int main(int argc, char** argv) {
  // A peer that resets a connection is an error value on the write, never a signal: OpenSSL writes the
  // TLS sockets itself (proxy/io/tls_socket.h) without MSG_NOSIGNAL. Children get the default back (spawn.cpp).
  std::signal(SIGPIPE, SIG_IGN);
  std::vector<std::string_view> args(argv + 1, argv + argc);
  const std::string_view mode = args.empty() ? std::string_view() : args.front();
  if (!args.empty()) args.erase(args.begin());
  return sluice::app::run_mode(mode, args);
}
