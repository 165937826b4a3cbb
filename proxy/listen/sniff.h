// The plain port speaks HTTP/1.1 and h2c: the first bytes decide. A client that opens with the
// HTTP/2 preface gets the h2 codec; anyone else the h1 codec (which may still upgrade to h2c).
#pragma once

#include "proxy/worker_context.h"

namespace sluice::proxy {

asio::awaitable<bool> serve_plain(WorkerContext& worker, tcp::socket socket);

}  // namespace sluice::proxy
