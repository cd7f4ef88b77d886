# Shared by .ci/run and .ci/test (sourced, not run).
#
# - Caches live outside the clone, under $AUDITA_CI_CACHE (default
#   ~/.cache/audita-ci). Each is keyed by what decides its content, is reused when
#   present, and is never required: an empty or deleted cache only makes a run slower.
# - `phase NAME` closes the running phase and opens the next; `phase_table` prints the
#   wall time of every phase (also when a step failed).

ci_cache="${AUDITA_CI_CACHE:-$HOME/.cache/audita-ci}"
mkdir -p "$ci_cache"

# The cargo-nextest the test run uses, built from the crate registry.
nextest_version="0.9.151"

_phase_file="${_phase_file:-$(mktemp /tmp/audita-ci-phases.XXXXXX)}"
_phase_name=""
_phase_t0=""

_now_us() { echo "${EPOCHREALTIME/./}"; }

phase() {
  local now; now=$(_now_us)
  if [ -n "$_phase_name" ]; then
    printf '%s\t%s\n' "$_phase_name" "$(( now - _phase_t0 ))" >>"$_phase_file"
  fi
  _phase_name="$1"
  _phase_t0="$now"
  [ -n "$1" ] && echo "== $1"
  return 0
}

phase_table() {
  phase ""
  echo
  echo "== wall time by phase"
  awk -F'\t' '{ s = $2 / 1e6; t += s; printf "  %-44s %8.1f s\n", $1, s } END { printf "  %-44s %8.1f s\n", "total", t }' "$_phase_file"
}

# Puts cargo-nextest $nextest_version on PATH, building it into the cache when it is
# not there (`cargo install --locked`, without its self-update feature).
ensure_nextest() {
  local root="$ci_cache/cargo-nextest-$nextest_version"
  if ! "$root/bin/cargo-nextest" --version 2>/dev/null | grep -q "^cargo-nextest $nextest_version "; then
    echo "building cargo-nextest $nextest_version into $root"
    local log; log="$(mktemp)"
    # A test runner, not a product: a light release profile builds it in a fraction
    # of the time of its own (LTO) one.
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
      CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false \
      CARGO_TARGET_DIR="$ci_cache/cargo-nextest-build" \
      cargo install --locked --quiet cargo-nextest --version "$nextest_version" \
        --no-default-features --features default-no-update --root "$root" >"$log" 2>&1 \
      || { cat "$log"; return 1; }
    rm -rf "$log" "$ci_cache/cargo-nextest-build"
  fi
  export PATH="$root/bin:$PATH"
}

# The cargo-cyclonedx image/build.sh writes the image's SBOM with, built from the
# crate registry into the cache when it is not there (a debug build: it reads
# `cargo metadata`, nothing of it is hot).
cyclonedx_version="0.5.9"
ensure_cyclonedx() {
  local root="$ci_cache/cargo-cyclonedx-$cyclonedx_version"
  if ! "$root/bin/cargo-cyclonedx" cyclonedx --version 2>/dev/null | grep -q " $cyclonedx_version\$"; then
    echo "building cargo-cyclonedx $cyclonedx_version into $root"
    local log; log="$(mktemp)"
    CARGO_TARGET_DIR="$ci_cache/cargo-cyclonedx-build" \
      cargo install --locked --quiet --debug cargo-cyclonedx --version "$cyclonedx_version" \
        --root "$root" >"$log" 2>&1 \
      || { cat "$log"; return 1; }
    rm -rf "$log" "$ci_cache/cargo-cyclonedx-build"
  fi
  export PATH="$root/bin:$PATH"
}

# The target directory cargo uses (CARGO_TARGET_DIR when set).
target_dir() {
  cargo metadata --format-version 1 --no-deps 2>/dev/null \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])'
}

# Where nextest keeps the reports of profile `ci` (its store is the workspace's
# `target/nextest`, whatever CARGO_TARGET_DIR says), and the doctest tally beside them.
report_dir="target/nextest/ci"

# The tests of the last nextest run of profile `ci` (its JUnit report): how many ran,
# how many failed, and the 20 slowest with their durations.
test_report() {
  local junit; junit="$report_dir/junit.xml"
  [ -f "$junit" ] || { echo "(no test report at $junit)"; return 0; }
  python3 - "$junit" "${1:-20}" <<'PY'
import os, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = []
for suite in root.iter("testsuite"):
    for case in suite.iter("testcase"):
        bad = case.find("failure") is not None or case.find("error") is not None
        cases.append((float(case.get("time", 0)), case.get("classname", ""), case.get("name", ""), bad))
failed = [c for c in cases if c[3]]
doc = os.path.join(os.path.dirname(sys.argv[1]), "doctests.tsv")
doc_n, doc_failed = (0, 0)
if os.path.exists(doc):
    doc_n, doc_failed = (int(x) for x in open(doc).read().split())
print(f"== tests executed: {len(cases) + doc_n} ({len(cases)} by nextest, {doc_n} doctests; "
      f"{len(failed) + doc_failed} failed)")
for _, cls, name, _ in failed:
    print(f"  FAILED {cls} {name}")
n = int(sys.argv[2])
print(f"== the {min(n, len(cases))} slowest tests")
for t, cls, name, bad in sorted(cases, reverse=True)[:n]:
    print(f"  {t:8.1f} s  {cls} {name}")
PY
}
