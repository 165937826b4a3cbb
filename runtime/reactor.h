// The runtime's I/O thread: reads instances' output pipes and waits for their exit on pidfds.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>

#include "runtime/instance.h"

namespace sluice::runtime {

class Reactor {
 public:
  Reactor();
  ~Reactor();  // stops the thread; watches still open are closed there
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  boost::asio::io_context& io() { return io_; }
  // Runs `fn` on the reactor thread and returns when it has run (at once when called from that thread).
  void run_sync(const std::function<void()>& fn);
  bool on_reactor_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::thread thread_;
};

struct WatchCallbacks {
  std::function<void(Stream, std::string_view)> on_line;  // reactor thread, in arrival order per stream
  // Reactor thread, once the child is reaped and the output it left in the pipes has been read.
  std::function<void(int exit_code, int signal)> on_exit;
};

// Watches one started instance. Create, start and close it on the reactor thread only.
class Watch : public std::enable_shared_from_this<Watch> {
 public:
  // Takes ownership of the pipe read ends; `pidfd` is duplicated (the task keeps its own).
  static std::shared_ptr<Watch> open(Reactor& reactor, int out_fd, int err_fd, int pidfd, WatchCallbacks cb);
  ~Watch();
  void start();
  // Emits partial last lines, cancels the waits and closes the descriptors.
  void close();

  struct State;

 private:
  explicit Watch(std::unique_ptr<State> s);
  void wait_pipe(int index);
  void wait_exit();
  void reap();  // after the pidfd turned readable
  bool drain(int index);  // false at EOF or error
  std::unique_ptr<State> s_;
};

}  // namespace sluice::runtime
