#!/usr/bin/env bash
# Builds the images (image/build.sh, arguments passed on) and checks them from the
# outside, as an operator's runtime would run them (`buildah run --isolation chroot`,
# the image's own user):
#   1. audita: `audita demo` into a bind-mounted temporary directory, then `audita
#      verify` of the record it wrote: both exit 0, verify reports no problem, and the
#      files are owned by 65532 (the stages never run as root).
#   2. audita: no shell in the image; the SBOM is valid CycloneDX JSON naming the
#      binary's digest; the OCI labels carry version, revision, source and created.
#   3. audita-render: the chart's own helm/audita/files/render.sh under BusyBox, with
#      a SASL password holding `"` and `\` and a log key: the rendered audita.toml
#      ends with the escaped password, the key is mode 0600.
#   4. `helm template` with the chart's example values names exactly these two images.
#   5. Reproducible: building again from the same binary and commit gives the same
#      image IDs.
# Usage: bash image/smoke.sh [--binary PATH] [--tag TAG]   (see image/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "image/smoke.sh: FAILED: $*" >&2; exit 1; }
bh() { buildah --storage-driver "${AUDITA_BUILDAH_DRIVER:-vfs}" "$@"; }

version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/audita/Chart.yaml)"
tag="$version"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--tag" ] && tag="${args[$((i + 1))]}"
done

build_log="$(mktemp)"
work="$(mktemp -d /tmp/audita-smoke.XXXXXX)"
containers=()
cleanup() {
  for c in "${containers[@]}"; do bh rm "$c" >/dev/null 2>&1 || true; done
  rm -rf "$work" "$build_log"
}
trap cleanup EXIT

t0=$SECONDS
bash image/build.sh "$@" | tee "$build_log"
ids() { for i in audita audita-render; do bh images --no-trunc --format '{{.ID}}' "$i:$tag" | head -n 1; done; }
first_ids="$(ids)"
echo "built in $((SECONDS - t0)) s"

# 1. demo + verify inside the image, as its own user.
ctr="$(bh from --pull=never "audita:$tag")"
containers+=("$ctr")
user="$(bh inspect --type container --format '{{.OCIv1.Config.User}}' "$ctr")"
[ "$user" = "65532:65532" ] || fail "the image's user is '$user', not 65532:65532"
mkdir -p "$work/out"
chown 65532:65532 "$work/out"
t0=$SECONDS
bh run --isolation chroot -v "$work/out:/work" "$ctr" -- /usr/local/bin/audita demo --out /work/demo --quiet \
  >"$work/demo.txt" 2>&1 || { cat "$work/demo.txt"; fail "audita demo inside the image exited non-zero"; }
tail -n 3 "$work/demo.txt"
echo "demo in the image: $((SECONDS - t0)) s"
bh run --isolation chroot -v "$work/out:/work" "$ctr" -- /usr/local/bin/audita verify --brief /work/demo/record \
  >"$work/verify.json" 2>"$work/verify.err" || { cat "$work/verify.err"; head -c 2000 "$work/verify.json"; fail "audita verify of the demo's record inside the image exited non-zero"; }
python3 - "$work/verify.json" <<'PY' || fail "audita verify's summary is not clean"
import json, sys
v = json.load(open(sys.argv[1]))
counts = v["counts"]
assert v["clean"] is True, f"not clean: {v['problem_codes']}"
assert counts["certified"] > 0 and counts["epochs"] > 0, counts
print(f"verify in the image: clean, {counts['certified']} certified in {counts['epochs']} epochs")
PY
owner="$(stat -c %u "$work/out/demo/record/FORMAT")"
[ "$owner" = 65532 ] || fail "the demo's files are owned by uid $owner, not 65532"

# 2. What the image holds, and its labels.
mnt="$(bh mount "$ctr")"
for sh in bin/sh usr/bin/sh bin/bash bin/busybox; do
  [ ! -e "$mnt/$sh" ] || fail "the audita image holds /$sh"
done
python3 - "$mnt/usr/share/doc/audita/sbom.cdx.json" "$(sha256sum "$mnt/usr/local/bin/audita" | cut -d' ' -f1)" <<'PY' || fail "the SBOM does not describe the binary"
import json, sys
bom = json.load(open(sys.argv[1]))
assert bom["bomFormat"] == "CycloneDX", bom.get("bomFormat")
names = {c["name"] for c in bom["components"]}
for dep in ("ed25519-dalek", "rdkafka", "timely", "differential-dataflow", "sha2", "serde"):
    assert dep in names, f"{dep} is not in the SBOM"
hashes = [h["content"] for h in bom["metadata"]["component"].get("hashes", [])]
assert sys.argv[2] in hashes, "the SBOM does not name the binary's digest"
print(f"SBOM: {len(names)} components, binary digest bound")
PY
[ -s "$mnt/usr/share/doc/audita/debian-packages.txt" ] || fail "no Debian package list"
echo "Debian packages in the image: $(cut -d' ' -f1,2 "$mnt/usr/share/doc/audita/debian-packages.txt" | tr '\n' ';')"
bh umount "$ctr" >/dev/null
bh inspect --type image "audita:$tag" >"$work/inspect.json"
python3 - "$work/inspect.json" "$version" <<'PY' || fail "the OCI labels are incomplete"
import json, sys
l = json.load(open(sys.argv[1]))["OCIv1"]["config"]["Labels"]
for k in ("version", "revision", "source", "created", "title", "licenses"):
    v = l.get(f"org.opencontainers.image.{k}", "")
    assert v and v != "unknown", f"label org.opencontainers.image.{k} is '{v}'"
assert l["org.opencontainers.image.version"] == sys.argv[2]
print("labels:", ", ".join(f"{k.split('.')[-1]}={v}" for k, v in sorted(l.items()) if k.startswith("org.opencontainers")))
PY

# 3. The chart's render script inside audita-render.
rctr="$(bh from --pull=never "audita-render:$tag")"
containers+=("$rctr")
mkdir -p "$work/src" "$work/reg" "$work/sec" "$work/etc"
cp helm/audita/files/render.sh "$work/src/render.sh"
printf '[log]\norigin = "smoke.example/log"\npredicates = "/etc/audita/predicates.json"\n[kafka]\n"bootstrap.servers" = "k:9092"\n' >"$work/src/audita.toml"
echo '{"principals": []}' >"$work/reg/principals.json"
echo '{"principals": {}}' >"$work/reg/duties.json"
echo '{"predicates": []}' >"$work/reg/predicates.json"
printf 'pa"ss\\word\n' >"$work/sec/password"
printf 'PRIVATE+KEY+smoke\n' >"$work/sec/log.key"
chmod 0444 "$work"/src/* "$work"/reg/* "$work"/sec/*
chown 65532:65532 "$work/etc"
bh run --isolation chroot \
  -v "$work/src:/etc/audita-src:ro" -v "$work/reg:/etc/audita-registry:ro" \
  -v "$work/sec:/var/run/secrets/audita:ro" -v "$work/etc:/etc/audita" \
  -e AUDITA_CONFIG_SRC=/etc/audita-src -e AUDITA_REGISTRY_SRC=/etc/audita-registry \
  -e AUDITA_CONFIG_OUT=/etc/audita -e AUDITA_KAFKA_SASL_PASSWORD_FILE=/var/run/secrets/audita/password \
  -e AUDITA_LOG_KEY_FILE=/var/run/secrets/audita/log.key \
  "$rctr" -- /bin/sh /etc/audita-src/render.sh >"$work/render.txt" 2>&1 \
  || { cat "$work/render.txt"; fail "render.sh inside audita-render exited non-zero"; }
[ "$(tail -n 1 "$work/etc/audita.toml")" = '"sasl.password" = "pa\"ss\\word"' ] \
  || fail "render.sh wrote the password line as: $(tail -n 1 "$work/etc/audita.toml")"
[ "$(stat -c %a "$work/etc/keys/log.key")" = 600 ] || fail "the rendered log key is mode $(stat -c %a "$work/etc/keys/log.key")"
cmp -s "$work/etc/predicates.json" "$work/reg/predicates.json" || fail "render.sh did not copy the predicate file"
echo "render.sh in audita-render: $(cat "$work/render.txt")"
# BusyBox's sh must refuse what dash refuses (deploy/tests/helm.rs runs the script
# under the build machine's /bin/sh).
printf 'pa\001ss\n' >"$work/sec/password"
if bh run --isolation chroot \
  -v "$work/src:/etc/audita-src:ro" -v "$work/reg:/etc/audita-registry:ro" \
  -v "$work/sec:/var/run/secrets/audita:ro" -v "$work/etc:/etc/audita" \
  -e AUDITA_CONFIG_SRC=/etc/audita-src -e AUDITA_REGISTRY_SRC=/etc/audita-registry \
  -e AUDITA_CONFIG_OUT=/etc/audita -e AUDITA_KAFKA_SASL_PASSWORD_FILE=/var/run/secrets/audita/password \
  "$rctr" -- /bin/sh /etc/audita-src/render.sh >"$work/render.txt" 2>&1; then
  fail "render.sh inside audita-render accepted a password with a control character"
fi
grep -q "holds a control character" "$work/render.txt" || fail "render.sh refused the password with: $(cat "$work/render.txt")"

# 4. The chart's example values name these images.
helm_bin="$(command -v helm || echo "$(go env GOPATH 2>/dev/null)/bin/helm")"
[ -x "$helm_bin" ] || fail "helm is not installed"
named="$("$helm_bin" template smoke helm/audita -f helm/audita/ci/minimal-values.yaml \
  | sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' | sort -u | tr '\n' ' ')"
[ "$named" = "audita-render:$version audita:$version " ] || [ "$tag" != "$version" ] \
  || fail "helm template with ci/minimal-values.yaml names images: $named"
echo "helm template (ci/minimal-values.yaml) names: $named"

# 5. Reproducible.
bash image/build.sh "$@" >/dev/null
[ "$(ids)" = "$first_ids" ] || fail "a second build from the same binary and commit gave other image IDs"
echo "rebuilt: same image IDs"
echo "image/smoke.sh: OK: $(grep '^image audita:' "$build_log" | cut -d, -f2 | sed 's/^ //')"
