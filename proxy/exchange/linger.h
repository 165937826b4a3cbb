// A lingering close, as nginx's: after sluice shut down its sending side, what the client still sends is
// read and dropped until the client closes, for `limits.linger` and `limits.linger_bytes` at most.
// Closing with unread bytes would make the kernel answer with a RST, and a RST can make the client's
// kernel drop the last answer (or GOAWAY) before the client has read it. Both codecs end this way.
#pragma once

#include <span>

#include "proxy/exchange/config.h"
#include "proxy/exchange/downstream.h"

namespace sluice::proxy {

asio::awaitable<void> linger(Downstream& socket, std::span<char> buffer, const Limits& limits);

}  // namespace sluice::proxy
