// tracing.protocol "stdout": spans printed as OpenTelemetry Go's stdouttrace exporter prints them for
// queue-proxy, one JSON object per span and line (the SDK's SpanStub, in Go's encoding/json conventions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "proxy/telemetry/config.h"
#include "proxy/telemetry/span.h"

namespace sluice::proxy::telemetry {

// The line for one span, without its newline.
std::string encode_stdout_span(const FinishedSpan& span, const Attributes& resource);

// Go's time.Time in JSON: RFC 3339 with nanoseconds, trailing zeros of the fraction dropped, the local
// zone's offset ("Z" for UTC). `utc_offset_seconds` is the zone's offset at that time.
void append_go_time(std::string& out, std::uint64_t unix_nano, long utc_offset_seconds);

// A JSON string as Go's encoding/json writes it: <, > and & escaped for HTML, \b and \f short, other
// control characters \u00XX, invalid UTF-8 as U+FFFD, U+2028 and U+2029 escaped.
void append_go_json_string(std::string& out, std::string_view text);

}  // namespace sluice::proxy::telemetry
