# Reads one `wrk --latency` report; prints "rps p50_us p99_us requests errors" (latencies in µs).
# errors = socket errors (connect+read+write+timeout) + non-2xx/3xx responses.
function to_us(v,   n) {
  n = v + 0
  if (v ~ /us$/) return n
  if (v ~ /ms$/) return n * 1000
  if (v ~ /m$/) return n * 60000000
  if (v ~ /s$/) return n * 1000000
  return n
}
BEGIN { rps = 0; p50 = 0; p99 = 0; req = 0; err = 0 }
/Requests\/sec:/ { rps = $2 + 0 }
$1 == "50%" { p50 = to_us($2) }
$1 == "99%" { p99 = to_us($2) }
/ requests in / { req = $1 + 0 }
/Socket errors:/ {
  for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+,?$/) err += $i + 0
}
/Non-2xx or 3xx responses:/ { err += $NF + 0 }
END { printf "%.2f %.0f %.0f %d %d\n", rps, p50, p99, req, err }
