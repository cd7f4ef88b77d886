#!/usr/bin/env bash
# Builds the two images the Helm chart runs, with buildah (no daemon, no registry):
#
#   audita:VERSION         FROM scratch: the `audita` binary (stripped), exactly the
#                          shared libraries ldd resolves for it, CA certificates,
#                          /etc/passwd and /etc/group with user 65532, an SBOM of the
#                          Rust dependencies (CycloneDX, cargo-cyclonedx) and the
#                          copyright files and versions of the Debian packages the
#                          libraries come from. No shell.
#   audita-render:VERSION  FROM scratch: Debian's static BusyBox for the chart's
#                          config-render init container (helm/audita/files/render.sh).
#
# VERSION is the `audita` package's version, which must equal the chart's appVersion
# (so `helm template` with the chart's values names these images). Reproducible: file
# times and the image creation time are SOURCE_DATE_EPOCH (default: the last commit's
# time), the layer is one COPY of a staged tree, and the SBOM's timestamp and serial
# number are derived from that time and the binary's digest: the same binary and
# commit give the same image ID (image/smoke.sh checks it).
#
# Usage: bash image/build.sh [--binary PATH] [--tag TAG] [--archive DIR]
#   --binary PATH  the audita binary to package (default: `cargo build --release
#                  --locked -p audita`, then the target directory's release/audita);
#                  CI passes its test-profile build (a release build would double CI)
#   --tag TAG      image tag (default VERSION)
#   --archive DIR  also write DIR/audita-TAG.oci.tar and DIR/audita-render-TAG.oci.tar
#                  (`buildah push IMAGE oci-archive:…`), e.g. to `skopeo copy` them to a
#                  registry
# Environment: AUDITA_BUILDAH_DRIVER (storage driver, default vfs: works as root in
# sandboxes without overlay), AUDITA_IMAGE_SOURCE (the source URL label; default the
# git remote `origin`, else file://<this checkout>), SOURCE_DATE_EPOCH.
# Needs: buildah, cargo, cargo-cyclonedx 0.5 (`cargo install --locked cargo-cyclonedx`),
# python3, strip (binutils), ldd, dpkg-query, ca-certificates, busybox-static.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "image/build.sh: $*" >&2; exit 1; }

binary="" tag="" archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) [ $# -ge 2 ] || die "--binary needs a path"; binary="$2"; shift 2 ;;
    --tag) [ $# -ge 2 ] || die "--tag needs a value"; tag="$2"; shift 2 ;;
    --archive) [ $# -ge 2 ] || die "--archive needs a directory"; archive="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
for tool in buildah cargo python3 strip ldd dpkg-query; do
  command -v "$tool" >/dev/null || die "needs $tool on PATH"
done
cargo cyclonedx --help >/dev/null 2>&1 \
  || die "needs cargo-cyclonedx (cargo install --locked cargo-cyclonedx --version 0.5.9)"
[ -x /bin/busybox ] || die "needs Debian's busybox-static (/bin/busybox)"
[ -r /etc/ssl/certs/ca-certificates.crt ] || die "needs Debian's ca-certificates (/etc/ssl/certs/ca-certificates.crt)"
bh() { buildah --storage-driver "${AUDITA_BUILDAH_DRIVER:-vfs}" "$@"; }

meta="$(cargo metadata --locked --no-deps --format-version 1)" || die "cargo metadata failed"
version="$(python3 -c 'import json,sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "audita"))' <<<"$meta")"
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' helm/audita/Chart.yaml)"
[ "$version" = "$app_version" ] \
  || die "the audita package is version $version but helm/audita/Chart.yaml's appVersion is $app_version: the chart would name another image"
tag="${tag:-$version}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
source_url="${AUDITA_IMAGE_SOURCE:-$(git config --get remote.origin.url 2>/dev/null || echo "file://$PWD")}"

if [ -z "$binary" ]; then
  echo "image/build.sh: cargo build --release --locked -p audita --bin audita"
  cargo build --release --locked -p audita --bin audita
  target="$(python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' <<<"$meta")"
  binary="$target/release/audita"
fi
[ -x "$binary" ] || die "$binary is not an executable file"

stage="$(mktemp -d /tmp/audita-image.XXXXXX)"
trap 'rm -rf "$stage"' EXIT

# --- audita: the binary, its libraries, certificates, users, SBOM, licences -------
root="$stage/audita/rootfs"
mkdir -p "$root"/{usr/local/bin,etc/ssl/certs,usr/lib/ssl,usr/share/doc/audita,tmp}
strip --strip-all -o "$root/usr/local/bin/audita" "$binary"
chmod 0755 "$root/usr/local/bin/audita"

# Merged /usr: /lib and /lib64 are links on Debian; keep the same shape so the paths
# the binary's interpreter and ldd name resolve in the image.
for top in /lib /lib64 /bin /sbin; do
  if [ -L "$top" ]; then ln -s "$(readlink "$top")" "$root$top"; fi
done
copy_lib() { # PATH as the binary's loader names it
  local p="$1" dir real
  dir="$(readlink -f "$(dirname "$p")")"
  real="$(readlink -f "$p")"
  mkdir -p "$root$dir"
  install -m "$(stat -c %a "$real")" "$real" "$root$dir/$(basename "$real")"  # ld.so keeps its x bit
  if [ "$(basename "$p")" != "$(basename "$real")" ]; then
    ln -sf "$(basename "$real")" "$root$dir/$(basename "$p")"
  fi
  echo "$real"
}
ldd_out="$(ldd "$binary")" || die "ldd $binary failed (not a dynamically linked ELF?)"
if grep -q "not found" <<<"$ldd_out"; then die "ldd: a library of $binary is not found: $(grep 'not found' <<<"$ldd_out" | head -n 1)"; fi
libs=()
while read -r path; do libs+=("$(copy_lib "$path")"); done < <(
  awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$ldd_out" | sort -u)
[ "${#libs[@]}" -gt 0 ] || die "ldd names no library of $binary"

cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"
ln -s /etc/ssl/certs "$root/usr/lib/ssl/certs"
printf 'audita:x:65532:65532:audita:/nonexistent:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'audita:x:65532:\n' >"$root/etc/group"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
chmod 1777 "$root/tmp"

# The Debian packages of the copied files: their versions and copyright files.
pkg_of() { # FILE → its package, trying the merged-/usr alias too
  local f="$1" alt
  alt="$(sed -e 's|^/usr/lib/|/lib/|;t' -e 's|^/lib/|/usr/lib/|' <<<"$f")"
  { dpkg-query -S "$f" 2>/dev/null || dpkg-query -S "$alt" 2>/dev/null; } | head -n 1 | cut -d: -f1
}
pkgs="$( { for f in "${libs[@]}"; do pkg_of "$f"; done; echo ca-certificates; } | sort -u)"
: >"$root/usr/share/doc/audita/debian-packages.txt"
for p in $pkgs; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Package} ${Version} ${Architecture}\n' "$p" >>"$root/usr/share/doc/audita/debian-packages.txt"
  if [ -r "/usr/share/doc/$p/copyright" ]; then
    install -D -m 0644 "/usr/share/doc/$p/copyright" "$root/usr/share/doc/$p/copyright"
  fi
done

# The SBOM: cargo-cyclonedx over the audita package's normal dependencies for this
# target (what is linked into the binary), made deterministic.
sbom_dir="$stage/sbom"
mkdir -p "$sbom_dir"
# cargo-cyclonedx writes <package>_bin.cdx.json beside every Cargo.toml of the
# workspace with a binary; keep the audita one, remove all it wrote.
before="$(find . -name '*.cdx.json' -not -path './target/*' -not -path '*/node_modules/*' | sort)"
cargo cyclonedx --manifest-path cli/Cargo.toml --format json --spec-version 1.5 \
  --describe binaries --target x86_64-unknown-linux-gnu --no-build-deps -q \
  || die "cargo cyclonedx failed"
[ -s cli/audita_bin.cdx.json ] || die "cargo cyclonedx wrote no cli/audita_bin.cdx.json"
mv cli/audita_bin.cdx.json "$sbom_dir/raw.json"
comm -13 <(echo "$before") <(find . -name '*.cdx.json' -not -path './target/*' -not -path '*/node_modules/*' | sort) | xargs -r rm -f
bin_digest="$(sha256sum "$root/usr/local/bin/audita" | cut -d' ' -f1)"
python3 - "$sbom_dir/raw.json" "$root/usr/share/doc/audita/sbom.cdx.json" "$created" "$bin_digest" "$revision" "$PWD" <<'PY'
import json, sys, uuid
src, dst, created, digest, revision, workspace = sys.argv[1:]
# The workspace's own crates are named by path: make those paths relative to the
# workspace, or the SBOM (and the image) would depend on where the clone is.
bom = json.loads(open(src).read().replace("file://" + workspace + "/", "file://./"))
# Same binary, same commit, same SBOM: a name-based UUID instead of a random one.
bom["serialNumber"] = "urn:uuid:" + str(uuid.uuid5(uuid.NAMESPACE_URL, f"audita-image:{digest}:{revision}"))
meta = bom.setdefault("metadata", {})
meta["timestamp"] = created
comp = meta.get("component", {})
comp.setdefault("hashes", []).append({"alg": "SHA-256", "content": digest})
comp.setdefault("properties", []).append({"name": "audita:vcs-revision", "value": revision})
meta["component"] = comp
n = len(bom.get("components", []))
if n < 50:
    sys.exit(f"image/build.sh: the SBOM lists only {n} components: cargo-cyclonedx did not resolve the dependencies")
json.dump(bom, open(dst, "w"), indent=1, sort_keys=True)
print(f"SBOM: {n} Rust components (CycloneDX {bom.get('specVersion')})")
PY

# --- audita-render: BusyBox and the applets render.sh calls -------------------------
rroot="$stage/render/rootfs"
mkdir -p "$rroot"/{bin,etc,tmp,usr/share/doc/busybox-static}
install -m 0755 /bin/busybox "$rroot/bin/busybox"
for applet in sh cat cp chmod grep mkdir mv sed printf rm ls env; do ln -s busybox "$rroot/bin/$applet"; done
printf 'audita:x:65532:65532:audita:/nonexistent:/sbin/nologin\n' >"$rroot/etc/passwd"
printf 'audita:x:65532:\n' >"$rroot/etc/group"
chmod 1777 "$rroot/tmp"
cp /usr/share/doc/busybox-static/copyright "$rroot/usr/share/doc/busybox-static/copyright"
dpkg-query -W -f='${Package} ${Version} ${Architecture}\n' busybox-static >"$rroot/usr/share/doc/busybox-static/version.txt"

# --- build both ------------------------------------------------------------------
for tree in "$stage/audita" "$stage/render"; do
  find "$tree" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
done
cp image/Containerfile "$stage/audita/Containerfile"
cp image/Containerfile.render "$stage/render/Containerfile"
build() { # NAME CONTEXT
  bh bud --quiet --isolation chroot --layers=false --timestamp "$SOURCE_DATE_EPOCH" \
    --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    --build-arg "CREATED=$created" --build-arg "SOURCE=$source_url" \
    -f "$2/Containerfile" -t "$1:$tag" "$2" >/dev/null
}
build audita "$stage/audita"
build audita-render "$stage/render"

# --- report: IDs, sizes (uncompressed, and gzip layers as a registry stores them) ---
for image in audita audita-render; do
  oci="$stage/oci-$image"
  bh push --quiet "$image:$tag" "oci:$oci:$image" >/dev/null
  python3 - "$oci" "$image:$tag" "$(bh images --no-trunc --format '{{.ID}}' "$image:$tag" | head -n 1)" <<'PY'
import json, os, sys
oci, name, image_id = sys.argv[1:]
index = json.load(open(os.path.join(oci, "index.json")))
blob = lambda d: os.path.join(oci, "blobs", *d["digest"].split(":"))
manifest = json.load(open(blob(index["manifests"][0])))
compressed = sum(l["size"] for l in manifest["layers"]) + manifest["config"]["size"]
config = json.load(open(blob(manifest["config"])))
print(f"image {name}: id {image_id.removeprefix('sha256:')[:12]}, {compressed / 1e6:.1f} MB compressed "
      f"(gzip layers + config), user {config['config'].get('User')}, "
      f"{len(config['config'].get('Labels', {}))} labels, created {config.get('created')}")
PY
  if [ -n "$archive" ]; then
    mkdir -p "$archive"
    rm -f "$archive/$image-$tag.oci.tar"
    bh push --quiet "$image:$tag" "oci-archive:$archive/$image-$tag.oci.tar:$image:$tag" >/dev/null
    echo "  wrote $archive/$image-$tag.oci.tar"
  fi
done
echo "libraries: $(printf '%s\n' "${libs[@]}" | xargs -n1 basename | tr '\n' ' ')"
echo "binary: $binary ($(du -h "$root/usr/local/bin/audita" | cut -f1) stripped), revision $revision"
