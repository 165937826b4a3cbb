// Command-line options of sluice-demo-app: where to listen and how many threads run the io_context.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::demo {

struct Options {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;  // 0 = ephemeral
  unsigned threads = 1;
};

// Parses argv (and the PORT env var when --port is absent). Throws std::invalid_argument with a
// one-line message naming the offending flag or value.
Options parse_options(int argc, char** argv);

}  // namespace sluice::demo
