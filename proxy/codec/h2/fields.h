// A list of HTTP/2 header fields (or trailers) as sluice keeps them: name, value.
#pragma once

#include "proxy/exchange/exchange.h"

namespace sluice::proxy::h2 {

using proxy::FieldList;

}  // namespace sluice::proxy::h2
