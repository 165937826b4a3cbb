// A misspelt key's nearest known name (common/spelling.h).
#include "common/spelling.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(Spelling, ASwapOfNeighboursIsOneEditAsIsAnInsertDeleteOrReplace) {
  EXPECT_EQ(edit_distance("scale", "scael"), 1u);
  EXPECT_EQ(edit_distance("command", "comand"), 1u);
  EXPECT_EQ(edit_distance("command", "commands"), 1u);
  EXPECT_EQ(edit_distance("size", "sise"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

TEST(Spelling, TheNearestNameIsSuggestedOnlyWhenItIsASlip) {
  const std::vector<std::string_view> keys = {"command", "env", "max-scale", "min-scale", "buffer-size"};
  EXPECT_EQ(nearest_name("comand", keys), "command");
  EXPECT_EQ(nearest_name("max-scael", keys), "max-scale");
  EXPECT_EQ(nearest_name("buffer-sise", keys), "buffer-size");
  EXPECT_EQ(nearest_name("envv", keys), "env");
  EXPECT_EQ(nearest_name("replicas", keys), "") << "no key is near";
  EXPECT_EQ(nearest_name("ev", keys), "env") << "a short word allows one edit";
  EXPECT_EQ(nearest_name("xy", keys), "");
}

}  // namespace
}  // namespace sluice
