#include <gtest/gtest.h>

#include "common/log.h"

namespace sluice::log {
namespace {

TEST(JsonString, EscapesQuotesBackslashesAndControlCharacters) {
  std::string out;
  append_json_string(out, "a\"b\\c\nd\x01");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(LogLevel, ParsesZapLevelNames) {
  Level l = Level::info;
  ASSERT_TRUE(parse_level("debug", l));
  EXPECT_EQ(l, Level::debug);
  ASSERT_TRUE(parse_level("fatal", l));
  EXPECT_EQ(l, Level::error);
  EXPECT_FALSE(parse_level("loud", l));
}

}  // namespace
}  // namespace sluice::log
