-- wrk script for bench/peers.sh's post-1m scenario: every request is a POST of 1 MiB (1048576 bytes of
-- "a", Content-Length framing; wrk adds the Content-Length header for a body).
wrk.method = "POST"
wrk.body = string.rep("a", 1048576)
wrk.headers["Content-Type"] = "application/octet-stream"
