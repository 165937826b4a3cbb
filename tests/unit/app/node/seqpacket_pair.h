// A connected SOCK_SEQPACKET socket pair for the per-node message tests, closed with the test.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "app/seqpacket.h"

namespace sluice::app::test {

struct SeqpacketPair {
  SeqpacketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fd), 0); }
  ~SeqpacketPair() {
    ::close(fd[0]);
    ::close(fd[1]);
  }
  SeqpacketPair(const SeqpacketPair&) = delete;
  SeqpacketPair& operator=(const SeqpacketPair&) = delete;
  // `m` sent on one end and received on the other.
  Message through(const Outgoing& m) {
    EXPECT_TRUE(send_message(fd[0], m));
    auto got = receive_message(fd[1]);
    EXPECT_TRUE(got);
    return got ? std::move(*got) : Message{};
  }
  int fd[2] = {-1, -1};
};

}  // namespace sluice::app::test
