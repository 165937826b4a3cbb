// The per-node join protocol's messages (app/node/join.h) over a real socket pair.
#include "app/node/join.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>

#include "tests/unit/app/node/seqpacket_pair.h"

namespace sluice::app::node {
namespace {

using Pair = test::SeqpacketPair;

TEST(NodeJoin, TheEnvironmentAndTheNamespaceArriveAsOneMessage) {
  Pair p;
  const int ns = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(ns, 0);
  const int root = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(root, 0);
  const int fds[] = {ns, STDOUT_FILENO, STDERR_FILENO, root};
  ASSERT_TRUE(send_message(p.fd[0], join_text({"USER_PORT=8080", "SERVING_POD=pod-1", "EMPTY="}), fds));
  auto m = receive_message(p.fd[1]);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->fds.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    struct stat sent {}, got {};
    ASSERT_EQ(::fstat(fds[i], &sent), 0);
    ASSERT_EQ(::fstat(m->fds[i].get(), &got), 0);
    EXPECT_EQ(sent.st_ino, got.st_ino) << "descriptor " << i << " is the same file";
  }
  EXPECT_EQ(parse_join(m->text), (std::vector<std::string>{"USER_PORT=8080", "SERVING_POD=pod-1", "EMPTY="}));
  ::close(ns);
  ::close(root);
  m->close_fds();
}

// The receiver learns a message's size before it takes it (a peek): the descriptors still arrive once, and
// none is left open behind the ones handed over.
TEST(NodeJoin, DescriptorsArriveOnceAndNoneIsLeftBehind) {
  const auto open_descriptors = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{});
  };
  Pair p;
  const auto before = open_descriptors();
  const int fds[] = {STDOUT_FILENO, STDERR_FILENO};
  ASSERT_TRUE(send_message(p.fd[0], "pod 1 1\n", fds));
  auto m = receive_message(p.fd[1]);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->fds.size(), 2u);
  EXPECT_EQ(open_descriptors(), before + 2);
  m->close_fds();
  EXPECT_EQ(open_descriptors(), before);
  ::close(p.fd[0]);
  p.fd[0] = -1;
  EXPECT_FALSE(receive_message(p.fd[1])) << "a closed peer is no message";
}

TEST(NodeJoin, AValueOverSeveralLinesIsLeftOutAndAnythingButAJoinIsNone) {
  EXPECT_EQ(parse_join(join_text({"A=1", "B=two\nlines", "C=3"})), (std::vector<std::string>{"A=1", "C=3"}));
  EXPECT_FALSE(parse_join("drain\n"));
  EXPECT_FALSE(parse_join("join\nNOT A SETTING\n"));
  EXPECT_EQ(parse_join("join\n"), std::vector<std::string>{});
}

// A join lives as long as its pod, in the agent and in the stub: what it keeps is its own size, not the
// room the largest message would need.
TEST(NodeJoin, AMessageKeepsItsOwnSizeNotTheRoomOfTheLargest) {
  Pair p;
  ASSERT_TRUE(send_message(p.fd[0], "drain\n"));
  auto small = receive_message(p.fd[1]);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->text, "drain\n");
  EXPECT_LT(small->text.capacity(), 1024u);

  std::string big = "join\n";
  while (big.size() < 60 * 1024) big += "KEY_" + std::to_string(big.size()) + "=value\n";
  ASSERT_TRUE(send_message(p.fd[0], big));
  auto whole = receive_message(p.fd[1]);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->text, big);
  EXPECT_LT(whole->text.capacity(), big.size() + 1024);
}

TEST(NodeJoin, APeerThatClosedIsNoMessage) {
  Pair p;
  ::close(p.fd[0]);
  p.fd[0] = -1;
  EXPECT_FALSE(receive_message(p.fd[1]));
  EXPECT_FALSE(send_message(p.fd[1], "drain\n"));
}

}  // namespace
}  // namespace sluice::app::node
