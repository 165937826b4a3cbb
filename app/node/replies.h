// The one-line replies of per-node mode's protocols, typed: the join's (app/node/join.h), the control
// socket's (app/node/control.h) and the handover's (app/node/messages.h). The one place each is written:
// a word and its '\n' ("joined\n", "drain\n", "drained\n", "taken\n", "listener\n", "unpublished\n",
// "ready\n", "starting\n"), or a word, a space, and what it says up to the '\n' ("refused REASON\n",
// "stopped REASON\n", "published PATH\n").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "app/seqpacket.h"

namespace sluice::app::node {

enum class ReplyWord { joined, refused, drain, drained, stopped, taken, listener, published, unpublished, ready, starting };

struct Reply {
  ReplyWord word;
  std::string detail;  // REASON or PATH for refused, stopped, published; "" for the others
  bool is(ReplyWord w) const { return word == w; }
};

// A word alone; with `detail` for refused, stopped and published (as "" for the others).
std::string encode_reply(ReplyWord word, std::string_view detail = {});
// The reply `text` is, or why it is none (an unknown word, a detail missing or where none belongs).
Decoded<Reply> decode_reply(std::string_view text);
// A message received as a reply: nullopt when none came or it is not one.
std::optional<Reply> reply_of(const std::optional<Message>& m);

}  // namespace sluice::app::node
