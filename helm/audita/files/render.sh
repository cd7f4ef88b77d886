# render.sh: the init container of every Audita pod. Writes the configuration a stage
# reads into AUDITA_CONFIG_OUT (an in-memory volume): audita.toml from the chart's
# ConfigMap, principals.json, duties.json (and predicates.json when audita.toml names
# it) from the registry ConfigMap and, when
# given, the Kafka SASL password (appended to audita.toml's [kafka] table, which the
# chart renders last: librdkafka takes the password only inside its configuration) and
# the log key (sealer pod only; copied with mode 0600, since Kubernetes mounts Secret
# files group-readable under fsGroup and the stage refuses a group-readable key).
# POSIX sh; needs cat, cp, chmod, grep, mkdir, mv and sed. Each failure is one line naming it.
set -eu
fail() { echo "render-config: $*" >&2; exit 1; }
src="${AUDITA_CONFIG_SRC:?AUDITA_CONFIG_SRC is not set}"
reg="${AUDITA_REGISTRY_SRC:?AUDITA_REGISTRY_SRC is not set}"
out="${AUDITA_CONFIG_OUT:?AUDITA_CONFIG_OUT is not set}"
umask 077
for f in "$src/audita.toml" "$reg/principals.json" "$reg/duties.json"; do
  [ -r "$f" ] || fail "cannot read $f"
done
cp "$reg/principals.json" "$out/principals.json.new"
cp "$reg/duties.json" "$out/duties.json.new"
# The predicate file, when audita.toml names one (the monitor is enabled).
if grep -q '^predicates = ' "$src/audita.toml"; then
  [ -r "$reg/predicates.json" ] || fail "cannot read $reg/predicates.json (monitor.enabled needs the predicate file)"
  cp "$reg/predicates.json" "$out/predicates.json.new"
fi
# cat, not cp: the copy must be writable (the password is appended) whatever the
# mode of the mounted source file.
cat "$src/audita.toml" > "$out/audita.toml.new"
if [ -n "${AUDITA_KAFKA_SASL_PASSWORD_FILE:-}" ]; then
  [ -r "$AUDITA_KAFKA_SASL_PASSWORD_FILE" ] || fail "cannot read the Kafka SASL password file $AUDITA_KAFKA_SASL_PASSWORD_FILE"
  # Command substitution drops trailing newlines (kubectl --from-file keeps them).
  pw="$(cat "$AUDITA_KAFKA_SASL_PASSWORD_FILE")"
  [ -n "$pw" ] || fail "the Kafka SASL password in $AUDITA_KAFKA_SASL_PASSWORD_FILE is empty"
  case "$pw" in
    *[[:cntrl:]]*) fail "the Kafka SASL password in $AUDITA_KAFKA_SASL_PASSWORD_FILE holds a control character" ;;
  esac
  # A TOML basic string: escape backslashes, then double quotes.
  esc="$(printf '%s' "$pw" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')"
  printf '"sasl.password" = "%s"\n' "$esc" >> "$out/audita.toml.new"
fi
if [ -n "${AUDITA_LOG_KEY_FILE:-}" ]; then
  [ -r "$AUDITA_LOG_KEY_FILE" ] || fail "cannot read the log key file $AUDITA_LOG_KEY_FILE"
  mkdir -p "$out/keys"
  cat "$AUDITA_LOG_KEY_FILE" > "$out/keys/log.key.new"
  chmod 600 "$out/keys/log.key.new"
  mv -f "$out/keys/log.key.new" "$out/keys/log.key"
fi
mv -f "$out/principals.json.new" "$out/principals.json"
mv -f "$out/duties.json.new" "$out/duties.json"
if [ -e "$out/predicates.json.new" ]; then mv -f "$out/predicates.json.new" "$out/predicates.json"; fi
mv -f "$out/audita.toml.new" "$out/audita.toml"
echo "render-config: wrote $out/audita.toml"
