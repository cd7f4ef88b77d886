#!/usr/bin/env bash
# Behaviour before and after a change, from the outside: two `audita` binaries over the
# same inputs.
#
#   bash load-tests/behaviour.sh BEFORE_AUDITA AFTER_AUDITA [OUT_DIR]
#
# Compares, and prints one line each:
# - `audita verify` (JSON report, stderr, exit code) of one demo record, one sample
#   record and a damaged copy of it, byte for byte: both binaries read the same files;
# - the demo's verdicts and journal (16 cells, fixed record origin): every verdict
#   record equal per incident once the record anchor (the sealed tree it was judged
#   against, its checkpoint and co-signatures, the arrival time) is set aside — each
#   demo run's keepers have fresh keys, and epochs close by age;
# - the sample records each binary writes, file by file.
# Exit status 1 when verify outputs or verdicts differ.
set -u
before=$1
after=$2
out=${3:-$(mktemp -d /tmp/audita-behaviour.XXXXXX)}
rm -rf "$out" && mkdir -p "$out"
status=0

for who in before after; do
  bin=$before; [ "$who" = after ] && bin=$after
  "$bin" demo --out "$out/demo-$who" --cells 16 --insecure-demo-keys \
    --record-origin 2026-01-01T00:00:00Z --quiet >/dev/null 2>&1 || { echo "demo ($who) failed"; status=1; }
  "$bin" sample-record "$out/sample-$who" --seed 3 --messages 60 >/dev/null 2>&1 ||
    { echo "sample-record ($who) failed"; status=1; }
done

# A damaged copy of the before sample: a flipped envelope byte, a zeroed epoch byte,
# a payload key gone.
cp -r "$out/sample-before" "$out/damaged"
f=$(ls "$out"/damaged/segments/envelopes-*.seg | head -1)
printf '\xff' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
e=$(ls "$out"/damaged/epochs/*.seg | tail -1)
printf '\x00' | dd of="$e" bs=1 seek=100 conv=notrunc 2>/dev/null
rm -f "$(ls "$out"/damaged/payloads/*.key 2>/dev/null | head -1)"

verify() { # NAME DIR ARGS...
  local name=$1 dir=$2; shift 2
  for who in before after; do
    bin=$before; [ "$who" = after ] && bin=$after
    "$bin" verify "$@" "$dir" >"$out/verify-$name-$who.json" 2>"$out/verify-$name-$who.err"
    echo "exit $?" >>"$out/verify-$name-$who.err"
  done
  if cmp -s "$out/verify-$name-before.json" "$out/verify-$name-after.json" &&
     cmp -s "$out/verify-$name-before.err" "$out/verify-$name-after.err"; then
    echo "verify $name: identical ($(tail -1 "$out/verify-$name-after.err"))"
  else
    echo "verify $name: DIFFERS"; status=1
  fi
}
verify demo "$out/demo-before/record"
verify sample "$out/sample-before" --max-list 3
verify damaged "$out/damaged" --max-list 2

python3 - "$out" <<'EOF' || status=1
import json, sys
out = sys.argv[1]
# The record anchor: which sealed tree the verdict was judged against (epochs close by
# age, so their cut depends on timing), its checkpoint and co-signatures, arrival time.
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k != "record_root"}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
def journal(who):
    rows = {}
    for line in open(f"{out}/demo-{who}/journal.jsonl"):
        r = json.loads(line)
        r.pop("received_ms", None)
        r["record"].pop("record", None)
        rows[r["record"]["declaration"]["incident"]] = strip(r)
    return rows
b, a = journal("before"), journal("after")
same = sum(1 for k in b if a.get(k) == b[k])
print(f"demo verdicts: {same} of {len(b)} identical per incident, record anchor aside"
      + ("" if set(a) == set(b) else f"; incidents differ: {sorted(set(a) ^ set(b))}"))
sys.exit(0 if same == len(b) and set(a) == set(b) else 1)
EOF

(cd "$out/sample-before" && find . -type f | sort | xargs sha256sum) >"$out/sample-before.sums"
(cd "$out/sample-after" && find . -type f | sort | xargs sha256sum) >"$out/sample-after.sums"
if diff "$out/sample-before.sums" "$out/sample-after.sums" >"$out/sample.diff"; then
  echo "sample record: every file identical"
else
  echo "sample record: files differ (see $out/sample.diff):"
  grep '^[<>]' "$out/sample.diff" | sed 's/^/  /' | head -20
fi
exit $status
