// gzip (RFC 1952) of a whole body in memory, for sluice's own endpoints (the :9091 scrape, as
// Prometheus' Go handler compresses it for a scraper that accepts gzip).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sluice::net {

// nullopt only if zlib fails (out of memory).
std::optional<std::string> gzip(std::string_view data);

// Whether a response offered as identity or gzip should be gzip for this Accept-Encoding: the offer with the
// highest q wins, identity on a tie (promhttp's negotiation); neither acceptable (q=0) means identity too.
bool prefers_gzip(std::string_view accept_encoding);

}  // namespace sluice::net
