// A TCP "app" that records every byte sluice sends it and answers each request head with canned bytes:
// for tests of what reaches the app (nothing, for a rejected request) and of what sluice does with a
// malformed response (502, and a connection that is never used again).
#pragma once

#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice::test {

class RawApp {
 public:
  // `response` goes out after each complete request head, or for a chunked request after its last chunk
  // (a Content-Length body is not waited for); with `close_after`, the connection is closed after it.
  explicit RawApp(std::string response, bool close_after = false);
  ~RawApp();
  RawApp(const RawApp&) = delete;
  RawApp& operator=(const RawApp&) = delete;

  int port() const { return port_; }
  void set_response(std::string response, bool close_after = false);
  std::string received();        // every byte of every connection, in arrival order
  std::size_t connections();     // accepted so far
  std::size_t requests();        // request heads seen so far
  std::size_t closed_by_peer();  // connections sluice has closed

 private:
  void run();

  std::string response_;
  bool close_after_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::mutex mu_;
  std::string received_;
  std::size_t connections_ = 0, requests_ = 0, closed_by_peer_ = 0;
  std::thread thread_;
};

}  // namespace sluice::test
