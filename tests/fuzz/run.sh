#!/usr/bin/env bash
# One fuzz target as a test: replays the committed corpus, then fuzzes for SECONDS. New interesting
# inputs go to WORK (not the repository); a crash leaves its input in WORK/crash-* — copy it into the
# corpus, fix the bug, and it is replayed by every run from then on.
set -euo pipefail
bin=$1 corpus=$2 work=$3 seconds=$4
mkdir -p "$work/new"
exec "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 \
  -artifact_prefix="$work/" "$work/new" "$corpus"
