// After a 101 Switching Protocols: bytes flow both ways untouched until both sides are done.
#pragma once

#include "proxy/h1/scratch.h"
#include "proxy/listen/downstream.h"

namespace sluice::proxy::h1 {

// Flushes what each side's buffer already holds to the other side, then copies both directions at
// once. A half-close (EOF) is passed on and the other direction continues; an error ends both.
// `last_activity` is refreshed on every transfer (the idle timeout reads it).
asio::awaitable<void> relay_tunnel(Downstream& client, beast::flat_buffer& client_buffer,
                                   ScratchBuffer& client_scratch, tcp::socket& app,
                                   beast::flat_buffer& app_buffer, ScratchBuffer& app_scratch,
                                   Clock::time_point& last_activity);

}  // namespace sluice::proxy::h1
