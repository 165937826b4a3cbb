// Per-node mode's one-line replies; see replies.h.
#include "app/node/replies.h"

#include <array>

namespace sluice::app::node {
namespace {

struct Shape {
  ReplyWord word;
  std::string_view text;
  bool detailed;  // followed by " DETAIL"
};

constexpr std::array<Shape, 11> kShapes{{
    {ReplyWord::joined, "joined", false},
    {ReplyWord::refused, "refused", true},
    {ReplyWord::drain, "drain", false},
    {ReplyWord::drained, "drained", false},
    {ReplyWord::stopped, "stopped", true},
    {ReplyWord::taken, "taken", false},
    {ReplyWord::listener, "listener", false},
    {ReplyWord::published, "published", true},
    {ReplyWord::unpublished, "unpublished", false},
    {ReplyWord::ready, "ready", false},
    {ReplyWord::starting, "starting", false},
}};

const Shape& shape(ReplyWord word) {
  for (const auto& s : kShapes)
    if (s.word == word) return s;
  return kShapes[1];  // unreachable: every word has its shape
}

}  // namespace

std::string encode_reply(ReplyWord word, std::string_view detail) {
  const auto& s = shape(word);
  std::string text(s.text);
  if (s.detailed) text.append(" ").append(detail);
  return text + "\n";
}

Decoded<Reply> decode_reply(std::string_view text) {
  if (!text.ends_with('\n')) return std::string("not a reply: no line");
  const std::string_view line = text.substr(0, text.size() - 1);
  const std::string_view head = line.substr(0, line.find(' '));
  for (const auto& s : kShapes) {
    if (head != s.text) continue;
    if (!s.detailed) {
      if (line.size() != head.size()) return "not a reply: \"" + std::string(head) + "\" says nothing more";
      return Reply{s.word, {}};
    }
    if (line.size() == head.size()) return "not a reply: \"" + std::string(head) + "\" is followed by what it says";
    return Reply{s.word, std::string(line.substr(head.size() + 1))};
  }
  return "not a reply: unknown word \"" + std::string(head) + "\"";
}

std::optional<Reply> reply_of(const std::optional<Message>& m) {
  if (!m) return std::nullopt;
  auto decoded = decode_reply(m->text);
  if (auto* reply = std::get_if<Reply>(&decoded)) return std::move(*reply);
  return std::nullopt;
}

}  // namespace sluice::app::node
