// RFC 9112's rules for HTTP/1.1 message heads, on top of what Beast's parser checks itself: a message
// that sluice would read differently from the client is a smuggling hole, so every MUST is enforced on a
// request before anything is forwarded, with the status the RFC names. An app's response is read as
// leniently as the RFC lets a recipient, and as Go's net/http (queue-proxy's) reads it: bare-LF line ends,
// obs-fold (unfolded to SP), whitespace before a field's colon (removed), a status line without a reason,
// repeated identical Content-Length values (one kept) and Content-Length beside chunked (dropped; the
// connection to the app is not reused) are repaired; what is still ambiguous becomes a 502. The raw head
// is checked before Beast parses it (Beast silently unfolds obs-fold and cannot tell why a version was
// bad), the parsed fields after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "proxy/io/asio.h"

namespace sluice::proxy::h1 {

// What was wrong; each maps to a status (`violation_status`) and a short reason (the error message).
enum class Violation {
  bare_cr = 1,              // 400: CR not followed by LF
  bare_lf,                  // 400: LF without CR
  obs_fold,                 // 400: obsolete line folding, or whitespace before the first field line
  bad_request_line,         // 400: not method SP target SP version
  bad_target,               // 400: a byte outside RFC 3986, or a form the method does not allow
  target_too_long,          // 414
  bad_version,              // 400: not HTTP/DIGIT.DIGIT
  unsupported_version,      // 505: a well-formed version other than 1.x (1.2 and up are read as 1.1)
  missing_host,             // 400 (HTTP/1.1)
  several_hosts,            // 400
  bad_host,                 // 400: not uri-host [":" port]
  te_in_http10,             // 400: Transfer-Encoding in an HTTP/1.0 message
  te_not_chunked,           // 400: chunked is not the final coding (length unknowable)
  te_chunked_twice,         // 400
  te_unsupported,           // 501: a coding other than chunked (sluice would pass it on undecoded)
  several_content_lengths,  // 400: more than one Content-Length field, or a list
  content_length_and_te,    // 400: both framings
  header_too_large,         // 431: no end of head within the limit
  field_too_large,          // 431: one field's name or value longer than a head holds (kMaxFieldBytes)
  bad_trailer_declared,     // (responses) Trailer names a field a trailer may not carry
};

const boost::system::error_category& violation_category();
inline error_code make_error_code(Violation v) { return {static_cast<int>(v), violation_category()}; }
inline bool is_violation(error_code ec) { return ec.category() == violation_category(); }
// The status to answer a request with.
unsigned violation_status(error_code ec);

// What the head reader enforces beyond syntax.
struct HeadRules {
  bool request = true;                // a request head (else a response's)
  std::size_t max_head_bytes = 65536;
  std::size_t max_target_bytes = 8192;  // requests: longer targets get 414
};

// Scans a head as its bytes arrive (call again with the grown buffer, the same `scan`): line endings,
// folding, and a request's start line as soon as it is complete. Returns the head's length including
// the empty line once it has all arrived, 0 while more bytes are needed; `ec` set on a violation.
struct HeadScan {
  std::size_t pos = 0;          // next byte to examine
  std::size_t line = 0;         // where the line being examined starts
  bool start_line_done = false;
  // Responses: what repair_response_head must mend before Beast parses the head.
  bool repair = false;
  bool fields_started = false;  // a field line was seen (whitespace before the first one is refused)
  std::uint8_t lengths = 0;     // Content-Length fields (counted up to 2)
  bool transfer_encoding = false;
  // Requests: where the minor digit of an HTTP/1.x version above 1.1 is (read as 1.1), 0 if none.
  std::size_t newer_minor_at = 0;
  bool needs_repair() const { return repair || lengths > 1 || (lengths > 0 && transfer_encoding); }
};
std::size_t scan_head(std::string_view data, HeadScan& scan, const HeadRules& rules, error_code& ec);

// A response head (start line to the empty line, as scan_head found it) rewritten as Beast reads it: CRLF
// line ends, folded lines joined with one SP, no whitespace before a colon, a status line with its SP
// before the (possibly empty) reason and an HTTP/1.1 version, one Content-Length when all were equal, none
// beside Transfer-Encoding (then also `Connection: close`: that connection's framing cannot be trusted).
std::string repair_response_head(std::string_view head);

// The authority of an absolute-form target ("http://host:port/path" → "host:port"), or nullopt.
std::optional<std::string_view> absolute_form_authority(std::string_view target);

// The request-line rules alone (`line` without its CRLF).
error_code check_request_line(std::string_view line, const HeadRules& rules);

// Framing and Host rules on a parsed head.
error_code check_request_fields(const http::request_header<>& req);
error_code check_response_fields(const http::response_header<>& res);

// One step of reading a head: with the whole head in `buffer`, has `parser` parse it (only the head: a
// body stays in `buffer`), checks it and returns true; returns false while more bytes are needed. True
// with `ec` set on a violation or a parse error.
template <class Parser>
bool parse_head_step(beast::flat_buffer& buffer, HeadScan& scan, Parser& parser, const HeadRules& rules,
                     error_code& ec) {
  std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
  if (rules.request && scan.pos == 0) {
    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line (a client
    // may have sent one after a body).
    std::size_t skip = 0;
    while (skip < 4 && data.substr(skip, 2) == "\r\n") skip += 2;
    if (skip > 0) {
      buffer.consume(skip);
      data.remove_prefix(skip);
    }
  }
  const std::size_t end = scan_head(data, scan, rules, ec);
  if (ec) return true;
  if (end == 0) {
    if (data.size() >= rules.max_head_bytes) ec = make_error_code(Violation::header_too_large);
    return static_cast<bool>(ec);
  }
  if (end > rules.max_head_bytes) {
    ec = make_error_code(Violation::header_too_large);
    return true;
  }
  std::string repaired;
  std::string_view head = data.substr(0, end);
  if (!rules.request && scan.needs_repair()) {
    repaired = repair_response_head(head);
    head = repaired;
  }
  if (scan.newer_minor_at != 0) static_cast<char*>(buffer.data().data())[scan.newer_minor_at] = '1';
  std::size_t used = 0;
  try {
    used = parser.put(asio::buffer(head.data(), head.size()), ec);
  } catch (const std::length_error&) {  // Beast's fields refuse a name or value over kMaxFieldBytes
    ec = make_error_code(Violation::field_too_large);
    return true;
  }
  if (!ec && !parser.is_header_done()) ec = http::error::partial_message;
  if (ec) return true;
  buffer.consume(repaired.empty() ? used : end);
  if constexpr (Parser::is_request::value) ec = check_request_fields(parser.get().base());
  else ec = check_response_fields(parser.get().base());
  return true;
}

// Reads a head into `buffer` and parses it with parse_head_step. Errors as Beast's async_read_header
// gives them, plus Violations.
template <class Stream, class Parser>
asio::awaitable<error_code> read_strict_head(Stream& stream, beast::flat_buffer& buffer, Parser& parser,
                                             const HeadRules& rules) {
  HeadScan scan;
  bool got_any = false;
  while (true) {
    error_code ec;
    if (parse_head_step(buffer, scan, parser, rules, ec)) co_return ec;
    const std::size_t room = std::max<std::size_t>(buffer.capacity() - buffer.size(), 4096);
    auto space = buffer.prepare(std::min<std::size_t>(room, rules.max_head_bytes + 4 - buffer.size()));
    auto [rec, n] = co_await stream.async_read_some(space, use_nothrow);
    if (rec) {
      if (rec == asio::error::eof)
        co_return error_code(got_any || buffer.size() > 0 ? http::error::partial_message : http::error::end_of_stream);
      co_return rec;
    }
    got_any = true;
    buffer.commit(n);
  }
}

// Whether Beast's parser, having answered need_more with `data` in hand, is stuck on a chunk line that
// has arrived whole: Beast scans a chunk extension's quoted-string past the line's end, so an
// unterminated quote would make it wait for ever (and buffer without bound). `data` starts where the
// parser stopped: the chunk header, after the CRLF that ended the previous chunk's data. (Only asked
// when the parser wants more bytes: a line it could parse never gets here.)
bool stuck_on_chunk_line(std::string_view data);

// Reads and parses more of a body, as Beast's http::async_read_some does (returns once the parser
// made progress, need_buffer counting as progress), but fails a chunk line or trailer section longer
// than `max_line_bytes` and a malformed chunk extension instead of waiting for more bytes.
template <class Stream, class Parser>
asio::awaitable<error_code> read_body_some(Stream& stream, beast::flat_buffer& buffer, Parser& parser,
                                           std::size_t max_line_bytes) {
  while (true) {
    if (buffer.size() > 0) {
      error_code ec;
      const std::size_t used = parser.put(buffer.data(), ec);
      buffer.consume(used);
      if (ec != http::error::need_more) co_return ec;
      std::string_view data(static_cast<const char*>(buffer.data().data()), buffer.size());
      if (stuck_on_chunk_line(data)) co_return error_code(http::error::bad_chunk_extension);
      if (data.size() >= max_line_bytes) co_return make_error_code(Violation::header_too_large);
    }
    const std::size_t room = std::max<std::size_t>(buffer.capacity() - buffer.size(), 4096);
    auto [rec, n] = co_await stream.async_read_some(buffer.prepare(std::min<std::size_t>(room, 65536)), use_nothrow);
    if (rec == asio::error::eof) {
      error_code ec;
      parser.put_eof(ec);
      co_return ec;
    }
    if (rec) co_return rec;
    buffer.commit(n);
  }
}

}  // namespace sluice::proxy::h1

template <>
struct boost::system::is_error_code_enum<sluice::proxy::h1::Violation> : std::true_type {};
