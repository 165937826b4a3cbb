// Output capture splits lines across reads, keeps order, and bounds line length.
#include "runtime/line_splitter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sluice::runtime {
namespace {

struct Collect {
  std::vector<std::string> lines;
  std::function<void(std::string_view)> fn() {
    return [this](std::string_view l) { lines.emplace_back(l); };
  }
};

TEST(LineSplitter, WholeLinesInOneRead) {
  LineSplitter s;
  Collect c;
  s.feed("a\nbb\n\nccc\n", c.fn());
  EXPECT_EQ(c.lines, (std::vector<std::string>{"a", "bb", "", "ccc"}));
}

TEST(LineSplitter, LineSplitAcrossReadsIsJoined) {
  LineSplitter s;
  Collect c;
  s.feed("hel", c.fn());
  EXPECT_TRUE(c.lines.empty());
  s.feed("lo\nwor", c.fn());
  s.feed("ld\n", c.fn());
  EXPECT_EQ(c.lines, (std::vector<std::string>{"hello", "world"}));
}

TEST(LineSplitter, CarriageReturnBeforeNewlineIsDropped) {
  LineSplitter s;
  Collect c;
  s.feed("dos\r\nline\r", c.fn());
  s.feed("\n", c.fn());
  EXPECT_EQ(c.lines, (std::vector<std::string>{"dos", "line"}));
}

TEST(LineSplitter, LastLineWithoutNewlineComesAtFinish) {
  LineSplitter s;
  Collect c;
  s.feed("one\ntwo", c.fn());
  s.finish(c.fn());
  s.finish(c.fn());
  EXPECT_EQ(c.lines, (std::vector<std::string>{"one", "two"}));
}

TEST(LineSplitter, OverlongLineIsCutAtTheLimit) {
  LineSplitter s(4);
  Collect c;
  s.feed("abcdefghij\nxy\n", c.fn());
  EXPECT_EQ(c.lines, (std::vector<std::string>{"abcd", "efgh", "ij", "xy"}));
  Collect d;
  LineSplitter t(4);
  t.feed("ab", d.fn());
  t.feed("cdefg", d.fn());
  t.feed("\n", d.fn());
  EXPECT_EQ(d.lines, (std::vector<std::string>{"abcd", "efg"}));
}

}  // namespace
}  // namespace sluice::runtime
