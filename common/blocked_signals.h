// Signals kept from the threads a thread starts: while a BlockedSignals lives, the calling thread has its
// signals blocked, and every thread started meanwhile inherits that. Once it ends, they reach only the
// thread that started them, which waits for them (an asio::signal_set's control loop).
//
// Any thread of a process may take a process-directed signal; one busy in a worker is handled there all the
// same, but a ThreadSanitizer build defers a signal until the thread that took it calls into the C library
// again, which an idle worker may not do for as long as it waits: a SIGTERM could go unanswered.
#pragma once

#include <csignal>
#include <initializer_list>

#include <pthread.h>

namespace sluice {

class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals) noexcept {
    sigset_t set;
    sigemptyset(&set);
    for (int s : signals) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &before_);
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &before_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

 private:
  sigset_t before_;
};

}  // namespace sluice
