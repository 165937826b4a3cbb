// The HTTP/2 server codec's receiving side: nghttp2's callbacks turn HEADERS, DATA and stream closes into
// the session's streams (server_stream.h), and a complete request head into its exchange (Session::launch).
#include "proxy/downstream/h2_session.h"

#include <cstring>
#include <iterator>

#include "proxy/io/field_value.h"

namespace sluice::proxy::h2 {

Stream& Session::add_stream(std::int32_t id) {
  auto& s = streams_.emplace_back(*this, socket_.get_executor(), id);
  s.place = std::prev(streams_.end());
  ++open_streams_;
  return s;
}

// A stream goes once nghttp2 closed it and its exchange finished.
void Session::forget_if_done(Stream& s) {
  if (s.state == Stream::State::closed && !s.running) streams_.erase(s.place);
}

int Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = self_of(p);
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto& s = self.add_stream(f->hd.stream_id);
  nghttp2_session_set_stream_user_data(self.wire_.session(), f->hd.stream_id, &s);
  return 0;
}

int Session::on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* p) {
  auto& self = self_of(p);
  auto* s = self.find(f->hd.stream_id);
  if (!s) return 0;
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  const auto max_bytes = self.worker_.config.limits.max_header_bytes;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_HEADERS) {  // trailers
    s->trailer_bytes += namelen + valuelen + 32;
    if (s->trailer_bytes > max_bytes) {
      self.reject_stream(s->id, "request trailers too large");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // RST_STREAM for this stream only
    }
    s->request_trailers_.emplace_back(n, v);
    return 0;
  }
  s->header_bytes += namelen + valuelen + 32;
  if (s->header_bytes > max_bytes || namelen > kMaxFieldBytes || valuelen > kMaxFieldBytes) {
    s->too_large = true;  // answered 431 once the block has ended; the rest is not kept
    // Far beyond: HPACK amplification (one byte naming a 4 KiB table entry). A reset stops nghttp2
    // from checking every further field of the block.
    if (s->header_bytes > 4 * max_bytes) {
      self.reject_stream(s->id, "request header list amplified beyond the limit");
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
  }
  if (n == ":method") {
    s->req.method_string(v);
    s->has_method = true;
  } else if (n == ":path") {
    s->req.target(v);
    s->has_path = true;
  } else if (n == ":authority") {
    s->authority.assign(v);
  } else if (n == ":scheme" || n == ":protocol") {
    // The app sees X-Forwarded-Proto / Forwarded; the scheme of the hop is the listener's.
  } else if (n == "cookie" && s->req.find(http::field::cookie) != s->req.end()) {
    // HTTP/2 splits cookies into several fields; HTTP/1.1 needs them joined (RFC 9113 §8.2.3).
    std::string joined(s->req[http::field::cookie]);
    joined += "; ";
    joined += v;
    if (joined.size() > kMaxFieldBytes) s->too_large = true;
    else s->req.set(http::field::cookie, joined);
  } else {
    s->req.insert(n, v);
  }
  return 0;
}

int Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* p) {
  auto& self = self_of(p);
  auto* s = self.find(f->hd.stream_id);
  if (!s) return 0;
  bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
    s->request_state = end ? Stream::RequestBody::received : Stream::RequestBody::receiving;
    self.launch(*s);
    return 0;
  }
  if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && end) {
    if (s->request_state == Stream::RequestBody::receiving) s->request_state = Stream::RequestBody::received;
    s->wake.notify();
  }
  return 0;
}

int Session::on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len,
                           void* p) {
  auto& self = self_of(p);
  auto* s = self.find(id);
  if (!s || s->reset || s->request_state == Stream::RequestBody::unwanted) {
    nghttp2_session_consume(ng, id, len);  // nobody will take it: keep the connection window open
    return 0;
  }
  auto buf = s->request_body_.prepare(len);
  std::memcpy(buf.data(), data, len);
  s->request_body_.commit(len);
  s->wake.notify();
  return 0;
}

int Session::on_stream_close(nghttp2_session* ng, int32_t id, uint32_t error, void* p) {
  auto& self = self_of(p);
  auto* s = self.find(id);
  if (!s) return 0;
  nghttp2_session_set_stream_user_data(ng, id, nullptr);
  --self.open_streams_;
  s->close(error != NGHTTP2_NO_ERROR || !s->out->done);
  self.forget_if_done(*s);
  return 0;
}

}  // namespace sluice::proxy::h2
