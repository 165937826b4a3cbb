// The per-node agent's typed messages (app/node/join.h, app/node/messages.h, app/sidecar/node_channel.h):
// each one sent over a real socket pair and decoded as sent, and what is not one refused with its reason,
// its descriptors closed.
#include "app/node/messages.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "app/node/control.h"
#include "app/node/join.h"
#include "app/node/replies.h"
#include "app/sidecar/node_channel.h"
#include "tests/unit/app/node/seqpacket_pair.h"

namespace sluice::app::node {
namespace {

using Wire = test::SeqpacketPair;

long open_descriptors() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator{});
}

ino_t inode(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return st.st_ino;
}

runtime::Fd open_fd(const char* path, int flags = O_RDONLY) { return runtime::Fd(::open(path, flags | O_CLOEXEC)); }

// A message of `text` with `count` descriptors attached (each the null device), as a peer might send it.
Message message(std::string text, std::size_t count) {
  Message m{std::move(text), {}};
  for (std::size_t i = 0; i < count; ++i) m.fds.push_back(open_fd("/dev/null"));
  return m;
}

template <typename T>
std::string refusal(const Decoded<T>& d) {
  const auto* why = std::get_if<std::string>(&d);
  return why ? *why : std::string("(decoded)");
}

TEST(NodeMessages, AJoinArrivesWithItsEnvironmentAndThePodsFourDescriptorsInOrder) {
  Wire p;
  const auto netns = open_fd("/proc/self/ns/net"), root = open_fd("/", O_PATH | O_DIRECTORY);
  ASSERT_TRUE(netns && root);
  auto decoded = decode_join(p.through(
      encode_join({"SERVING_POD=pod-1", "A=1"}, {.netns = netns.get(), .out = STDOUT_FILENO, .err = STDERR_FILENO, .root = root.get()})));
  ASSERT_TRUE(std::holds_alternative<Join>(decoded)) << refusal(decoded);
  const auto& join = std::get<Join>(decoded);
  EXPECT_EQ(join.env, (std::vector<std::string>{"SERVING_POD=pod-1", "A=1"}));
  EXPECT_EQ(inode(join.pod.netns.get()), inode(netns.get()));
  EXPECT_EQ(inode(join.pod.out.get()), inode(STDOUT_FILENO));
  EXPECT_EQ(inode(join.pod.err.get()), inode(STDERR_FILENO));
  EXPECT_EQ(inode(join.pod.root.get()), inode(root.get()));
}

TEST(NodeMessages, AJoinWithoutItsFourDescriptorsIsNoJoinAndClosesWhatCame) {
  const auto before = open_descriptors();
  EXPECT_EQ(refusal(decode_join(message("join\nA=1\n", 3))).rfind("not a join: expected", 0), 0u);
  EXPECT_EQ(refusal(decode_join(message("drain\n", 4))).rfind("not a join: expected", 0), 0u);
  EXPECT_EQ(open_descriptors(), before);
}

TEST(NodeMessages, APodHandedOverArrivesAsItsServiceHeldIt) {
  Wire p;
  const auto conn = open_fd("/dev/null");
  PodDescriptors pod{open_fd("/proc/self/ns/net"), open_fd("/dev/zero"), open_fd("/dev/null", O_WRONLY), open_fd("/", O_PATH)};
  std::vector<runtime::Fd> listeners;
  listeners.push_back(open_fd("/proc/self/stat"));
  listeners.push_back(open_fd("/proc/self/status"));
  ucred peer{};
  peer.uid = 1000;
  peer.gid = 2000;
  peer.pid = 4242;
  auto decoded = decode_pod_handover(p.through(
      encode_pod_handover(peer, "csi-0123", {"SERVING_POD=pod-1", "EMPTY="}, conn, pod, listeners)));
  ASSERT_TRUE(std::holds_alternative<PodHandover>(decoded)) << refusal(decoded);
  const auto& h = std::get<PodHandover>(decoded);
  EXPECT_EQ(h.peer.uid, 1000u);
  EXPECT_EQ(h.peer.gid, 2000u);
  EXPECT_EQ(h.peer.pid, 4242);
  EXPECT_EQ(h.volume, "csi-0123");
  EXPECT_EQ(h.env, (std::vector<std::string>{"SERVING_POD=pod-1", "EMPTY="}));
  EXPECT_EQ(inode(h.connection.get()), inode(conn.get()));
  EXPECT_EQ(inode(h.pod.netns.get()), inode(pod.netns.get()));
  EXPECT_EQ(inode(h.pod.root.get()), inode(pod.root.get()));
  ASSERT_EQ(h.listeners.size(), 2u);
  EXPECT_EQ(inode(h.listeners[1].get()), inode(listeners[1].get()));
}

TEST(NodeMessages, AHandoverThatIsNotOneIsRefusedWithWhyAndItsDescriptorsClose) {
  const auto before = open_descriptors();
  const auto why = [](std::string text, std::size_t fds) { return refusal(decode_pod_handover(message(std::move(text), fds))); };
  constexpr std::string_view kExpected = "not a pod: expected \"pod UID GID PID VOLUME\"";
  for (const char* head : {"pod 1 2 3\n", "pod 1 2 3 v extra\n", "pod -1 2 3 v\n", "pod 1 2 x v\n", "pod 1  2 3 v\n",
                           "pod 1 2 3 v", "join\nA=1\n", "pod 1 2 3 v \n"})
    EXPECT_EQ(why(head, 5).rfind(kExpected, 0), 0u) << head;
  EXPECT_NE(why("pod 1 2 0 v\n", 5).find("(PID 0 is no process)"), std::string::npos);
  EXPECT_NE(why("pod 1 2 3 " + std::string(256, 'v') + "\n", 5).find("VOLUME longer than 255 bytes"), std::string::npos);
  EXPECT_NE(why("pod 1 2 3 v\nNOT A SETTING\n", 5).find("a setting is not KEY=VALUE"), std::string::npos);
  EXPECT_NE(why("pod 1 2 3 v\nA=1\n", 4).find("(4 descriptors, at least 5 expected)"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<PodHandover>(decode_pod_handover(message("pod 1 2 3 v\nA=1\n", 5))));
  EXPECT_EQ(open_descriptors(), before);
}

TEST(NodeMessages, ASpawnOrderCarriesTheRequestAndSortsItsDescriptors) {
  Wire p;
  const auto netns = open_fd("/proc/self/ns/net"), cg1 = open_fd("/dev/null"), cg2 = open_fd("/dev/zero"),
             inherit = open_fd("/", O_PATH);
  runtime::SpawnRequest req;
  req.uid = 1000;
  req.gid = -1;
  req.parent_death_signal = 9;
  req.drop_capabilities = true;
  req.env = {"A=1", "B=two\nlines", "C="};
  req.netns_fd = netns.get();
  req.stdout_fd = STDOUT_FILENO;
  req.stderr_fd = STDERR_FILENO;
  req.join_procs_fds = {cg1.get(), cg2.get()};
  req.inherit_fds = {inherit.get()};
  auto decoded = decode_spawn_order(p.through(encode_spawn_order(req)));
  ASSERT_TRUE(std::holds_alternative<SpawnOrder>(decoded)) << refusal(decoded);
  const auto& o = std::get<SpawnOrder>(decoded);
  EXPECT_EQ(o.uid, 1000);
  EXPECT_EQ(o.gid, -1);
  EXPECT_EQ(o.parent_death_signal, 9);
  EXPECT_TRUE(o.drop_capabilities);
  EXPECT_EQ(o.env, (std::vector<std::string>{"A=1", "C="})) << "a value over lines is no setting";
  ASSERT_EQ(o.join_procs.size(), 2u);
  ASSERT_EQ(o.inherit.size(), 1u);
  EXPECT_EQ(inode(o.join_procs[1].get()), inode(cg2.get()));
  EXPECT_EQ(inode(o.inherit[0].get()), inode(inherit.get()));
  const auto again = o.request();
  EXPECT_EQ(again.netns_fd, o.netns.get()) << "the request borrows the order's descriptors";
  EXPECT_EQ(again.join_procs_fds, (std::vector<int>{o.join_procs[0].get(), o.join_procs[1].get()}));
  EXPECT_EQ(again.inherit_fds, std::vector<int>{o.inherit[0].get()});
  EXPECT_TRUE(again.drop_capabilities);
}

TEST(NodeMessages, ASpawnOrderThatIsNotOneIsRefusedAndItsDescriptorsClose) {
  const auto before = open_descriptors();
  const auto why = [](std::string text, std::size_t fds) { return refusal(decode_spawn_order(message(std::move(text), fds))); };
  EXPECT_EQ(why("spawn 1 2 9 1\n", 3), "not a spawn request: expected \"spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\"");
  EXPECT_EQ(why("spawn 1 2 9 1 -1\n", 3), "not a spawn request: expected \"spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\"");
  EXPECT_EQ(why("spawned 1 2 9 1 0\n", 3), "not a spawn request: expected \"spawn UID GID PDEATHSIG DROPCAPS NCGROUPS\"");
  EXPECT_EQ(why("spawn 1 2 9 2 0\n", 3), "not a spawn request: DROPCAPS is 0 or 1");
  EXPECT_EQ(why("spawn 1 2 9 0 0\nNOPE\n", 3), "not a spawn request: a setting is not KEY=VALUE");
  EXPECT_EQ(why("spawn 1 2 9 0 2\n", 4), "not a spawn request: 4 descriptors for the namespace, stdout, stderr and 2 cgroups");
  EXPECT_EQ(why("spawn 1 2 9 0 0\n", 2), "not a spawn request: 2 descriptors for the namespace, stdout, stderr and 0 cgroups");
  EXPECT_EQ(open_descriptors(), before);
}

TEST(NodeMessages, TheZygotesAnswerIsAProxyWithItsPidfdOrAnError) {
  Wire p;
  const auto pidfd = open_fd("/dev/null");
  auto spawned = decode_spawn_reply(p.through(encode_spawn_reply(4321, pidfd, "")));
  EXPECT_EQ(spawned.pid, 4321);
  EXPECT_TRUE(spawned.error.empty());
  EXPECT_EQ(inode(spawned.pidfd.get()), inode(pidfd.get()));

  auto failed = decode_spawn_reply(p.through(encode_spawn_reply(-1, runtime::Fd(), "set-up: Permission denied")));
  EXPECT_EQ(failed.pid, -1);
  EXPECT_EQ(failed.error, "set-up: Permission denied");
  EXPECT_FALSE(failed.pidfd);

  auto reaped = decode_spawn_reply(p.through(encode_spawn_reply(77, pidfd, "set-up: No such file or directory")));
  EXPECT_EQ(reaped.pid, -1) << "a failure with a child to reap is still a failure";
  EXPECT_TRUE(reaped.pidfd);

  EXPECT_EQ(decode_spawn_reply(message("spawned 12\n", 0)).error, "unexpected answer from the zygote") << "no pidfd";
  EXPECT_EQ(decode_spawn_reply(message("spawned -3\n", 1)).error, "unexpected answer from the zygote");
  EXPECT_EQ(decode_spawn_reply(message("spawned 12\nmore\n", 1)).error, "unexpected answer from the zygote");
  EXPECT_EQ(decode_spawn_reply(message("failed\n", 0)).error, "unexpected answer from the zygote");
}

TEST(NodeMessages, AProxyHandsBackItsListeningSocketsAndNothingElse) {
  Wire p;
  const auto a = open_fd("/dev/null"), b = open_fd("/dev/zero");
  const int sockets[] = {a.get(), b.get()};
  auto back = decode_listening(p.through(encode_listening(sockets)));
  ASSERT_TRUE(std::holds_alternative<std::vector<runtime::Fd>>(back));
  const auto& got = std::get<std::vector<runtime::Fd>>(back);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(inode(got[1].get()), inode(b.get()));
  const auto before = open_descriptors();
  EXPECT_EQ(refusal(decode_listening(message("listening now\n", 2))),
            "not \"listening\": the proxy's channel carries nothing else");
  EXPECT_EQ(open_descriptors(), before);
}

TEST(NodeMessages, EveryReplyIsWrittenAsTheProtocolsSayAndReadBackThroughTheSocket) {
  Wire p;
  const std::vector<std::tuple<ReplyWord, std::string, std::string>> replies = {
      {ReplyWord::joined, "", "joined\n"},
      {ReplyWord::refused, "only root may command the agent", "refused only root may command the agent\n"},
      {ReplyWord::drain, "", "drain\n"},
      {ReplyWord::drained, "", "drained\n"},
      {ReplyWord::stopped, "exited with code 2", "stopped exited with code 2\n"},
      {ReplyWord::taken, "", "taken\n"},
      {ReplyWord::listener, "", "listener\n"},
      {ReplyWord::published, "/var/lib/kubelet/v/node.sock", "published /var/lib/kubelet/v/node.sock\n"},
      {ReplyWord::unpublished, "", "unpublished\n"},
      {ReplyWord::ready, "", "ready\n"},
      {ReplyWord::starting, "", "starting\n"},
  };
  for (const auto& [word, detail, text] : replies) {
    EXPECT_EQ(encode_reply(word, detail), text);
    const auto got = reply_of(p.through(Outgoing{encode_reply(word, detail), {}}));
    ASSERT_TRUE(got) << text;
    EXPECT_TRUE(got->is(word)) << text;
    EXPECT_EQ(got->detail, detail) << text;
  }
  EXPECT_EQ(encode_reply(ReplyWord::joined, "ignored"), "joined\n") << "a bare word says nothing more";
}

TEST(NodeMessages, TheHandoverReplyCarriesTheControlSocketsListeningDescriptor) {
  Wire p;
  const auto control = open_fd("/dev/zero");
  const int fds[] = {control.get()};
  auto m = p.through(Outgoing{encode_reply(ReplyWord::listener), {fds[0]}});
  const auto got = decode_reply(m.text);
  ASSERT_TRUE(std::holds_alternative<Reply>(got) && std::get<Reply>(got).is(ReplyWord::listener)) << refusal(got);
  ASSERT_EQ(m.fds.size(), 1u);
  EXPECT_EQ(inode(m.fds[0].get()), inode(control.get()));
}

TEST(NodeMessages, AReplyThatIsNotOneIsRefusedWithWhy) {
  EXPECT_EQ(refusal(decode_reply("joined")), "not a reply: no line");
  EXPECT_EQ(refusal(decode_reply("joined now\n")), "not a reply: \"joined\" says nothing more");
  EXPECT_EQ(refusal(decode_reply("refused\n")), "not a reply: \"refused\" is followed by what it says");
  EXPECT_EQ(refusal(decode_reply("hello there\n")), "not a reply: unknown word \"hello\"");
  EXPECT_FALSE(reply_of(std::nullopt)) << "no message is no reply";
  EXPECT_FALSE(reply_of(message("spawned 12\n", 0)));
}

TEST(NodeMessages, EveryControlCommandIsWrittenAsTheProtocolSaysAndReadBack) {
  Wire p;
  Publication pub;
  pub.volume = "vol-1";
  pub.pod = {.namespace_name = "ns", .name = "pod-1", .uid = "uid-1"};
  pub.target = "/var/lib/kubelet/pods/uid-1/volumes/v";
  const std::vector<std::pair<ControlCommand, std::string>> commands = {
      {HandoverCommand{"-"}, "handover -\n"},
      {HandoverCommand{"7"}, "handover 7\n"},
      {PublishCommand{pub}, "publish vol-1 ns pod-1 uid-1 /var/lib/kubelet/pods/uid-1/volumes/v\n"},
      {UnpublishCommand{"vol-1", "/t"}, "unpublish vol-1 /t\n"},
      {ReadyCommand{}, "ready\n"},
  };
  for (const auto& [command, text] : commands) {
    EXPECT_EQ(encode_control_command(command), text);
    auto decoded = decode_control_command(p.through(Outgoing{text, {}}).text);
    ASSERT_TRUE(std::holds_alternative<ControlCommand>(decoded)) << refusal(decoded);
    EXPECT_EQ(encode_control_command(std::get<ControlCommand>(decoded)), text);
  }
  auto publish = decode_control_command(commands[2].second);
  const auto& got = std::get<PublishCommand>(std::get<ControlCommand>(publish)).publication;
  EXPECT_EQ(got.volume, "vol-1");
  EXPECT_EQ(got.pod.namespace_name, "ns");
  EXPECT_EQ(got.pod.name, "pod-1");
  EXPECT_EQ(got.pod.uid, "uid-1");
  EXPECT_EQ(got.target, pub.target);
}

TEST(NodeMessages, AControlCommandThatIsNotOneIsRefusedWithWhy) {
  EXPECT_EQ(refusal(decode_control_command("join\nSERVING_POD=p\n")), "unknown command \"join\"")
      << "a pod's join sent to the control socket";
  EXPECT_EQ(refusal(decode_control_command("")), "unknown command \"\"");
  EXPECT_EQ(refusal(decode_control_command("handover\n")), "expected \"handover GENERATION\"");
  EXPECT_EQ(refusal(decode_control_command("publish v ns pod\n")), "expected \"publish VOLUME NAMESPACE NAME UID TARGET\"");
  EXPECT_EQ(refusal(decode_control_command("unpublish v  /t\n")), "expected \"unpublish VOLUME TARGET\"");
  EXPECT_EQ(refusal(decode_control_command("ready now\n")), "expected \"ready\"");
  EXPECT_EQ(refusal(decode_control_command("ready\nmore\n")), "expected \"ready\"");
}

}  // namespace
}  // namespace sluice::app::node
