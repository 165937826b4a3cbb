// Wait for a condition with a deadline instead of sleeping and hoping.
#pragma once

#include <chrono>
#include <thread>

namespace sluice::test {

// Polls `pred` every millisecond until it holds or `timeout` passes; returns its last value.
template <class Pred>
bool eventually(Pred&& pred, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace sluice::test
