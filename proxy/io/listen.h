// The listening-socket helpers (common/listen.h), in the proxy's namespace.
#pragma once

#include "common/listen.h"

namespace sluice::proxy {

using net::AddressInUse;
using net::claim_port;
using net::endpoint_text;
using net::open_listener;

}  // namespace sluice::proxy
