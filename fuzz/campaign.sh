#!/usr/bin/env bash
# The bounded fuzzing campaign of BENCHMARKS.md ("Fuzzing campaign"): every target,
# one at a time, niced, up to RUNS executions or SECONDS_PER_TARGET seconds (whichever
# comes first; slow targets get SLOW_SECONDS), RSS capped at 2 GiB; each run starts
# from the committed corpus (fuzz/corpus/<target>) plus optional seeds
# (SEEDS/<target>), and the new corpus is minimized back into fuzz/corpus/<target>.
# Prints one table row per target: executions, wall time, exec/s, result.
# Build first (outside this script, under the shared cargo lock): the fast targets
# with AddressSanitizer, the whole-record targets without (safe Rust only; 5x the
# executions per second), all with cfg(fuzzing)'s signature stand-in:
#   cargo +nightly fuzz build -O
#   for t in record_verify proven_verify record_dir; do cargo +nightly fuzz build -O -s none $t; done
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-10000000}"
SECONDS_PER_TARGET="${SECONDS_PER_TARGET:-300}"
SLOW_SECONDS="${SLOW_SECONDS:-3600}"
SEEDS="${SEEDS:-}"
BIN=fuzz/target/x86_64-unknown-linux-gnu/release
LOGS="${LOGS:-/tmp/audita-fuzz-logs}"
mkdir -p "$LOGS"
targets="${TARGETS:-envelope_decode checkpoint_parse proof_verify model_json duties_json adverse_json vda5050_read record_verify proven_verify record_dir}"
for t in $targets; do
  case $t in record_verify|proven_verify|record_dir) secs=$SLOW_SECONDS ;; *) secs=$SECONDS_PER_TARGET ;; esac
  corpus="fuzz/corpus/$t"
  work="$LOGS/work-$t"
  rm -rf "$work"; mkdir -p "$corpus" "$work"
  extra=()
  [ -n "$SEEDS" ] && [ -d "$SEEDS/$t" ] && extra+=("$SEEDS/$t")
  start=$(date +%s)
  nice -n 10 "$BIN/$t" "$work" "$corpus" "${extra[@]}" -rss_limit_mb=2048 -max_len=8192 \
    -runs="$RUNS" -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$LOGS/$t-" \
    > "$LOGS/$t.log" 2>&1
  rc=$?
  end=$(date +%s)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$LOGS/$t.log" | grep -o '[0-9]*$' | tail -1)
  # Minimize: merge everything found into a fresh copy of the corpus.
  min="$LOGS/min-$t"; rm -rf "$min"; mkdir -p "$min"
  nice -n 10 "$BIN/$t" -merge=1 -max_len=8192 -rss_limit_mb=2048 "$min" "$corpus" "$work" > "$LOGS/$t.merge.log" 2>&1
  rm -rf "$corpus"; mv "$min" "$corpus"
  wall=$((end - start)); [ "$wall" -eq 0 ] && wall=1
  result="no crash"; [ "$rc" -ne 0 ] && result="exit $rc: see $LOGS/$t.log"
  printf '| `%s` | %s | %s s | %s | %s | %s files |\n' "$t" "${execs:-?}" "$wall" "$(( ${execs:-0} / wall ))" "$result" "$(ls "$corpus" | wc -l)"
done
