// The HTTP/2 server session's abuse and RFC 9113 §8 hooks; the accounting is in guard.h, the session in
// server_session.h.
#include "common/log.h"
#include "proxy/downstream/h2_session.h"

namespace sluice::proxy::h2 {
int Session::on_begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* p) {
  auto& self = self_of(p);
  return self.guard_.frame(*hd) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;  // fatal: end_abusive() follows
}

int Session::on_invalid_frame(nghttp2_session*, const nghttp2_frame* f, int error, void* p) {
  auto& self = self_of(p);
  if (f->hd.stream_id == 0) return 0;  // a connection error: nghttp2 sends GOAWAY itself
  return self.reject_stream(f->hd.stream_id, nghttp2_strerror(error)) ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

int Session::on_frame_not_send(nghttp2_session* ng, const nghttp2_frame* f, int error, void* p) {
  // Only a head larger than nghttp2 may send: a stream the client closed meanwhile, or a session that is
  // ending, needs nothing.
  if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id == 0 || error != NGHTTP2_ERR_FRAME_SIZE_ERROR) return 0;
  log::warn("h2 response head not sent").kv("peer", self_of(p).peer_.peer).kv("stream", f->hd.stream_id)
      .kv("error", nghttp2_strerror(error));
  nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_INTERNAL_ERROR);
  return 0;
}

bool Session::reject_stream(std::int32_t id, std::string_view why) {
  if (!rejection_logged_) {  // once per connection: a flood of them ends in end_abusive()'s line
    rejection_logged_ = true;
    log::info("h2 stream rejected").kv("peer", peer_.peer).kv("stream", id).kv("reason", why);
  }
  if (guard_.stream_rejected()) return true;
  end_abusive(NGHTTP2_ENHANCE_YOUR_CALM, why);
  return false;
}

void Session::end_abusive(std::uint32_t code, std::string_view why, bool cut) {
  if (broken_) return;
  log::warn("h2 connection closed")
      .kv("peer", peer_.peer)
      .kv("limit", guard_.violation().empty() ? std::string_view("-") : guard_.violation())
      .kv("reason", why)
      .kv("goaway", nghttp2_http2_strerror(code));
  going_away_ = true;
  nghttp2_session_terminate_session(wire_.session(), code);  // the writer sends the GOAWAY, then ends the read loop
  wire_.want_write();
  if (wire_.writing() && cut) {  // the client does not read: no GOAWAY will get through
    error_code ignore;
    socket_.cancel(ignore);
  }
}

bool Session::response_waiting() const {
  if (wire_.writing()) return true;
  for (const auto& s : streams_)
    if (s.out->unsent() > 0) return true;
  return false;
}

}  // namespace sluice::proxy::h2
