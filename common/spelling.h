// "Did you mean ...?" for a misspelt name (a configuration key): the known name nearest to it, counting
// a swap of two neighbouring letters as one edit, as people mistype (Damerau's optimal string alignment).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sluice {

// Edits (insert, delete, replace, swap of neighbours) from `a` to `b`.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` when it is near enough to be a slip (at most 2 edits, and at most a third
// of the word's length, at least 1); "" when none is.
std::string nearest_name(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace sluice
