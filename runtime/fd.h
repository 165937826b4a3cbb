// An owned file descriptor, closed when its owner goes; moves, never copies.
#pragma once

#include <unistd.h>

#include <utility>

namespace sluice::runtime {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // The descriptor, no longer owned: for a holder that keeps raw descriptors of its own (a process's
  // well-known numbers, a struct shared with C-shaped code).
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace sluice::runtime
