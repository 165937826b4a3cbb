// One raw exchange that also tells whether the server closed the connection (as opposed to the wait
// running out): for tests of rejected messages, which must leave no connection behind.
#pragma once

#include <chrono>
#include <string>

namespace sluice::test {

struct RawReply {
  std::string text;     // every byte received
  bool closed = false;  // the server closed (or reset) the connection within the timeout
};

// Sends `bytes` on a fresh connection to 127.0.0.1:`port` and reads until the server closes it or
// `timeout` passes.
RawReply raw_reply(int port, const std::string& bytes, std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace sluice::test
