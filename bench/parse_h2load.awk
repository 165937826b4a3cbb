# Reads one h2load report; prints "rps p50_us p99_us requests errors" like parse_wrk.awk.
# h2load prints no percentiles: peers.sh passes them in (-v p50=... -v p99=..., from --log-file).
# requests = succeeded; errors = failed + errored + timeout + 4xx + 5xx.
BEGIN { rps = 0; req = 0; err = 0 }
/^finished in/ { gsub(",", "", $4); rps = $4 + 0 }
/^requests:/ {
  for (i = 2; i < NF; i++) {
    if ($(i + 1) ~ /^succeeded/) req = $i + 0
    if ($(i + 1) ~ /^(failed|errored|timeout)/) err += $i + 0
  }
}
/^status codes:/ {
  for (i = 3; i < NF; i++) if ($(i + 1) ~ /^[45]xx/) err += $i + 0
}
END { printf "%.2f %.0f %.0f %d %d\n", rps, p50, p99, req, err }
