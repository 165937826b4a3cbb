// A list of HTTP/2 header fields (or trailers) as sluice keeps them: name, value.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sluice::proxy::h2 {

using FieldList = std::vector<std::pair<std::string, std::string>>;

}  // namespace sluice::proxy::h2
