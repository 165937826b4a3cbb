# Turns bench/run.sh's per-run rows into the results table: the median of each metric per target and
# scenario, then the ratios sluice/nginx and sluice/direct and the p99 each proxy adds over direct.
# Input files: idle.tsv ("target idle_rss_kib"), then runs.tsv
# ("target conns round rps p50_us p99_us cpu_us_per_req rss_kib errors other_cpu_pct").
# -v targets="direct nginx sluice" -v scenarios="50 256" fix the row order.
function median(key,   n, i, j, v, tmp) {
  n = count[key]
  if (n == 0) return ""
  for (i = 1; i <= n; i++) v[i] = vals[key, i]
  for (i = 2; i <= n; i++) {  # insertion sort: mawk has no asort
    tmp = v[i]
    for (j = i - 1; j >= 1 && v[j] > tmp; j--) v[j + 1] = v[j]
    v[j + 1] = tmp
  }
  return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
function add(key, value) { vals[key, ++count[key]] = value + 0 }
function fmt(x, spec) { return (x == "") ? "n/a" : sprintf(spec, x) }
function ratio(a, b) { return (a == "" || b == "" || b == 0) ? "n/a" : sprintf("%.3f", a / b) }
function diff(a, b) { return (a == "" || b == "") ? "n/a" : sprintf("%+.0f", a - b) }

FNR == NR { idle[$1] = $2; next }
{
  k = $1 SUBSEP $2
  add(k SUBSEP "rps", $4); add(k SUBSEP "p50", $5); add(k SUBSEP "p99", $6)
  add(k SUBSEP "cpu", $7); add(k SUBSEP "rss", $8); add(k SUBSEP "err", $9)
  add(k SUBSEP "oth", $10); if ($10 + 0 > worst_other) worst_other = $10 + 0
}
END {
  nt = split(targets, T, " "); ns = split(scenarios, S, " ")
  printf "%-8s %-9s %10s %9s %9s %11s %9s %10s %7s %7s\n", "target", "scenario", "rps", "p50_us", \
         "p99_us", "cpu_us/req", "rss_kib", "idle_kib", "errors", "other%"
  for (s = 1; s <= ns; s++) for (t = 1; t <= nt; t++) {
    k = T[t] SUBSEP S[s]
    if (count[k SUBSEP "rps"] == 0) continue
    rps[k] = median(k SUBSEP "rps"); p99[k] = median(k SUBSEP "p99"); cpu[k] = median(k SUBSEP "cpu")
    printf "%-8s %-9s %10s %9s %9s %11s %9s %10s %7s %7s\n", T[t], "c" S[s], fmt(rps[k], "%.0f"), \
           fmt(median(k SUBSEP "p50"), "%.0f"), fmt(p99[k], "%.0f"), fmt(cpu[k], "%.2f"), \
           fmt(median(k SUBSEP "rss"), "%.0f"), fmt(idle[T[t]], "%.0f"), \
           fmt(median(k SUBSEP "err"), "%.0f"), fmt(median(k SUBSEP "oth"), "%.0f")
  }
  printf "\n%-9s %13s %14s %16s %17s %13s\n", "scenario", "rps sl/nginx", "rps sl/direct", \
         "p99+ nginx (us)", "p99+ sluice (us)", "cpu sl/nginx"
  for (s = 1; s <= ns; s++) {
    d = "direct" SUBSEP S[s]; n = "nginx" SUBSEP S[s]; l = "sluice" SUBSEP S[s]
    printf "%-9s %13s %14s %16s %17s %13s\n", "c" S[s], ratio(rps[l], rps[n]), ratio(rps[l], rps[d]), \
           diff(p99[n], p99[d]), diff(p99[l], p99[d]), ratio(cpu[l], cpu[n])
  }
  if (worst_other > 10)
    printf "\nwarning: other processes used up to %d%% of a CPU during a run: figures are unreliable\n", \
           worst_other
}
