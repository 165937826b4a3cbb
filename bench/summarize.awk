# Turns bench/peers.sh's rows into the results tables: the median of each metric per target and scenario,
# each proxy's figures as ratios to the best peer of the same run, sluice against its goals, idle figures.
# Input files (told apart by name; na.tsv may be empty):
#   idle.tsv  "target idle_rss_kib idle_tls_rss_kib idle_cpu_us_per_s"   (idle_tls_rss_kib "-" for direct)
#   na.tsv    "target<TAB>scenario<TAB>why"                             (what a target cannot do)
#   runs.tsv  "target scenario round rps p50_us p99_us cpu_us_per_req rss_kib errors other_cpu_pct app_conns"
#             (app_conns: the proxy's connections to the backend half-way through the run; -1 for direct)
# -v targets="direct nginx ..." -v scenarios="h1-c50 ..." fix the row order; -v peers="nginx haproxy h2o"
# are the proxies sluice is compared with: "best" is, per scenario and metric, the best of those (highest
# rps, lowest CPU per request, p99 and RSS).
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
# The best peer's value of metric m in scenario s (max for rps, min otherwise); its name in best_name.
function best(s, m,   i, k, v, b) {
  b = ""; best_name = "-"
  for (i = 1; i <= np; i++) {
    k = P[i] SUBSEP s
    if (!(k SUBSEP m in med)) continue
    v = med[k SUBSEP m]
    if (b == "" || (m == "rps" ? v > b : v < b)) { b = v; best_name = P[i] }
  }
  return b
}
# "0.950* nginx": sluice's ratio to the best peer, * when the goal (r >= goal for rps, else r <= goal) is missed.
function verdict(s, m, goal,   b, r) {
  b = best(s, m)
  r = ratio(med["sluice" SUBSEP s SUBSEP m], b)
  if (r == "n/a") return "n/a"
  return sprintf("%s%s %s", r, ((m == "rps") ? r + 0 < goal : r + 0 > goal) ? "*" : " ", best_name)
}

FILENAME ~ /idle\.tsv$/ { idle[$1] = $2; idle_tls[$1] = $3; idle_cpu[$1] = $4; next }
FILENAME ~ /na\.tsv$/ { split($0, f, "\t"); na[f[1], f[2]] = f[3]; na_list[++nna] = f[1] " " f[2] ": " f[3]; next }
{
  k = $1 SUBSEP $2
  add(k SUBSEP "rps", $4); add(k SUBSEP "p50", $5); add(k SUBSEP "p99", $6)
  add(k SUBSEP "cpu", $7); add(k SUBSEP "rss", $8); add(k SUBSEP "err", $9)
  add(k SUBSEP "oth", $10); if ($10 + 0 > worst_other) worst_other = $10 + 0
  if (NF >= 11 && $11 >= 0) add(k SUBSEP "con", $11)
}
END {
  nt = split(targets, T, " "); ns = split(scenarios, S, " "); np = split(peers, P, " ")
  split("rps p50 p99 cpu rss err oth con", M, " ")
  for (s = 1; s <= ns; s++) for (t = 1; t <= nt; t++) for (m = 1; m <= 8; m++) {
    k = T[t] SUBSEP S[s] SUBSEP M[m]
    if (count[k] > 0) med[k] = median(k)
  }

  printf "%-8s %-8s %9s %8s %8s %10s %8s %9s %6s %6s %9s %9s %9s %9s\n", "target", "scenario", "rps", "p50_us", \
         "p99_us", "cpu_us/req", "rss_kib", "app_conns", "errors", "other%", "rps/best", "cpu/best", "p99/best", \
         "rss/best"
  for (s = 1; s <= ns; s++) {
    for (t = 1; t <= nt; t++) {
      k = T[t] SUBSEP S[s]
      if ((T[t], S[s]) in na) {
        printf "%-8s %-8s %9s   (%s)\n", T[t], S[s], "n/a", na[T[t], S[s]]
        continue
      }
      if (!(k SUBSEP "rps" in med)) continue
      proxied = (T[t] != "direct")
      printf "%-8s %-8s %9.0f %8.0f %8.0f %10.2f %8.0f %9s %6.0f %6.0f %9s %9s %9s %9s\n", T[t], S[s], \
             med[k SUBSEP "rps"], med[k SUBSEP "p50"], med[k SUBSEP "p99"], med[k SUBSEP "cpu"], \
             med[k SUBSEP "rss"], (k SUBSEP "con" in med) ? sprintf("%.0f", med[k SUBSEP "con"]) : "-", \
             med[k SUBSEP "err"], med[k SUBSEP "oth"], \
             proxied ? ratio(med[k SUBSEP "rps"], best(S[s], "rps")) : "-", \
             proxied ? ratio(med[k SUBSEP "cpu"], best(S[s], "cpu")) : "-", \
             proxied ? ratio(med[k SUBSEP "p99"], best(S[s], "p99")) : "-", \
             proxied ? ratio(med[k SUBSEP "rss"], best(S[s], "rss")) : "-"
    }
  }

  if (index(" " targets " ", " sluice ")) {
    printf "\nsluice / best peer, with the peer (goals: rps >= 1.15, cpu/req <= 0.85, p99 <= 1, rss <= 1;" \
           " * = missed)\n"
    printf "%-8s %-16s %-16s %-16s %-16s\n", "scenario", "rps", "cpu/req", "p99", "rss after load"
    for (s = 1; s <= ns; s++) {
      if (!("sluice" SUBSEP S[s] SUBSEP "rps" in med)) continue
      printf "%-8s %-16s %-16s %-16s %-16s\n", S[s], verdict(S[s], "rps", 1.15), verdict(S[s], "cpu", 0.85), \
             verdict(S[s], "p99", 1), verdict(S[s], "rss", 1)
    }
  }

  printf "\n%-8s %9s %13s %14s   (after start-up, before any request)\n", "target", "idle_kib", "idle_tls_kib", \
         "idle_cpu_us/s"
  for (t = 1; t <= nt; t++)
    if (T[t] in idle) printf "%-8s %9s %13s %14s\n", T[t], idle[T[t]], idle_tls[T[t]], idle_cpu[T[t]]
  if ("sluice" in idle)
    printf "sluice idle goals: <= 5120 KiB without TLS (%s), <= 8192 KiB with it (%s), idle CPU ~ 0 (%s us/s)\n", \
           (idle["sluice"] + 0 <= 5120) ? "met" : "missed", (idle_tls["sluice"] + 0 <= 8192) ? "met" : "missed", \
           idle_cpu["sluice"]

  if (nna) printf "\n"
  for (i = 1; i <= nna; i++) printf "n/a: %s\n", na_list[i]
  if (worst_other > 10)
    printf "\nwarning: other processes used up to %d%% of a CPU during a run: figures are unreliable\n", \
           worst_other
}
