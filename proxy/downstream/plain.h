// The plain port speaks HTTP/1.1 and h2c: the first bytes decide. A client that opens with the
// HTTP/2 preface gets the h2 codec; anyone else the h1 codec (which may still upgrade to h2c).
#pragma once

#include "proxy/downstream/context.h"

namespace sluice::proxy {

asio::awaitable<bool> serve_plain(ServerContext& worker, tcp::socket socket);

}  // namespace sluice::proxy
