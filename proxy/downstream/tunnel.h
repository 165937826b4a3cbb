// After a 101 Switching Protocols: bytes flow both ways untouched until both sides are done.
#pragma once

#include "proxy/codec/h1/scratch.h"
#include "proxy/exchange/downstream.h"

namespace sluice::proxy::h1 {

// Flushes what each side's buffer already holds to the other side (and lets the buffers go), then copies
// both directions at once, reading into `shared` (the worker's read buffer: each read is passed on before
// the next wait). A half-close (EOF) is passed on and the other direction continues; an error ends both.
// `last_activity` is refreshed on every transfer (the idle timeout reads it).
asio::awaitable<void> relay_tunnel(Downstream& client, beast::flat_buffer& client_buffer, tcp::socket& app,
                                   beast::flat_buffer& app_buffer, std::span<char> shared,
                                   Clock::time_point& last_activity);

}  // namespace sluice::proxy::h1
