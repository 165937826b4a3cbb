// How a plain-port connection becomes HTTP/2: by prior knowledge (the client preface) or by an
// HTTP/1.1 `Upgrade: h2c` request, which becomes stream 1.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "proxy/exchange/downstream.h"

namespace sluice::proxy::h2 {

inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

struct UpgradeRequest {
  std::string settings;  // the HTTP2-Settings payload, decoded
  http::request_header<> request;
  std::string body;      // read whole before switching, as RFC 7540 §3.2 requires
};

struct Handover {
  Downstream socket;
  std::string initial_bytes;  // read from the socket, not yet given to any codec
  // Held by pointer: a Handover waits in every HTTP/1.1 connection's coroutine frame, an upgrade in few.
  std::unique_ptr<UpgradeRequest> upgrade;
};

// Whether the first bytes of a plain-port connection are neither the HTTP/2 preface nor an HTTP/1.x
// request, however malformed: a first line (ended by CRLF; empty lines before it skipped) with no "HTTP/"
// in any case and no request-target after its first word ("/…", "*", "scheme://…"), such as h2spec's
// "INVALID CONNECTION PREFACE". Such a client gets bad_preface_answer() (RFC 9113 §3.4: an invalid
// preface is a connection error PROTOCOL_ERROR); a malformed HTTP/1.x request line gets its 400 or 505.
bool is_bad_preface(std::string_view first_bytes);
// The server preface (an empty SETTINGS frame), then GOAWAY PROTOCOL_ERROR.
std::string_view bad_preface_answer();

// base64url without padding (RFC 7540 §3.2.1); nullopt when malformed.
std::optional<std::string> decode_base64url(std::string_view in);

}  // namespace sluice::proxy::h2
