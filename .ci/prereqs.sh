# What the tests need beyond a Rust toolchain, installed or checked (sourced by
# .ci/run and by .ci/test, the README's test command, so that either works on a fresh
# machine; each step does nothing when what it installs is already there):
#   install_prereqs   Debian packages, Python packages, Go tools and modules, the
#                     VDA 5050 fleet's npm packages, cargo-nextest, cargo-cyclonedx and
#                     the Kafka broker's jars; puts Go's bin directory on PATH
#   build_wheel       the Python package's wheel (maturin, dev profile), installed
# Needs .ci/lib.sh (phase, ensure_nextest, ensure_cyclonedx, $ci_cache) and the clone
# as the working directory; apt-get runs as root (CI and this machine are).

install_prereqs() {
  phase "install: Debian packages"
  # rdkafka's bundled librdkafka build (cmake, a C toolchain, zlib), mold (the linker
  # of CI's build, below), Java 17 + Maven (the broker jars), Python, promtool
  # (Debian's prometheus; sinks/tests/metrics.rs and the chart's alert rules), Mosquitto
  # (the VDA 5050 bridge's tests start their own brokers), Node.js (the third-party VDA
  # 5050 fleet of cli/tests/it/vda5050_incident.rs), Chromium (report screenshots),
  # openssh-client (litewitness keeps its key in an ssh-agent), buildah and busybox-static
  # (the container image is built and run by image/smoke.sh), faketime (libfaketime: the
  # nemesis's clock jumps, load-tests/src/kafka_run/nemesis.rs), prometheus-alertmanager
  # (the notifier's test posts to the real one, cli/tests/it/notifier.rs). One update, one install,
  # only of what is missing.
  want="cmake build-essential pkg-config libcurl4-openssl-dev libssl-dev libsasl2-dev zlib1g-dev mold
    prometheus prometheus-alertmanager mosquitto chromium fonts-dejavu-core openssh-client buildah busybox-static faketime"
  command -v java >/dev/null || want="$want openjdk-17-jre-headless"
  command -v mvn >/dev/null || want="$want maven"
  command -v python3 >/dev/null || want="$want python3 python3-pip"
  { command -v node >/dev/null && command -v npm >/dev/null; } || want="$want nodejs npm"
  missing=""
  for p in $want; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "installing:$missing"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
  fi
  java -version 2>&1 | head -n 1
  promtool --version 2>&1 | head -n 1
  /usr/sbin/mosquitto -h 2>/dev/null | head -n 1 || true
  echo "node $(node --version)"
  chromium --version
  mold --version

  phase "install: Python packages"
  # pyarrow, duckdb, polars: the independent readers of our Parquet tables
  # (cli/tests/it/analytics.rs runs the README's examples); securesystemslib: the
  # independent DSSE verifier (cli/tests/it/dsse_interop.rs); the OpenTelemetry SDK and its
  # OTLP/HTTP JSON exporter (cli/tests/it/trace_cli.rs); kubernetes-validate (offline
  # Kubernetes schemas, deploy/tests/helm.rs); maturin and pytest (the Python package);
  # the agent frameworks of cli/tests/it/trace_frameworks.rs, each with its own
  # OpenTelemetry instrumentation and a scripted model (pydantic-ai, AG2, the OpenAI
  # Agents SDK with the official instrumentation and with OpenInference's, LangGraph with
  # OpenInference and LangMem's summarisation node, LlamaIndex's FunctionAgent with
  # OpenInference, Strands Agents with its own tracing; opentelemetry-util-genai pinned:
  # its newest release breaks the OpenAI one).
  py_pkgs="pyarrow==26.0.1 duckdb==2.0.1 polars==2.1.0 securesystemslib[crypto]==1.6.0
    opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-json-http==0.66b1
    kubernetes-validate==1.37.0 maturin==1.15.0 pytest==9.2.0
    pydantic-ai-slim==2.68.0 ag2==1.2.1
    openai-agents==0.24.0 opentelemetry-instrumentation-openai-agents-v2==0.1.0 opentelemetry-util-genai==1.1b0 httpx==0.29.0
    langgraph==1.2.22 langchain-core==1.8.1 openinference-instrumentation-langchain==0.1.80
    langmem==0.0.30 langchain==1.5.2 langchain-openai==1.8.1 langchain-anthropic==1.7.10 anthropic==2.17.0
    openinference-instrumentation-openai-agents==2.6.0
    llama-index-core==0.14.25 openinference-instrumentation-llama-index==4.6.1
    strands-agents==1.62.0"
  py_probe='import pyarrow, duckdb, polars, securesystemslib.dsse, cryptography, maturin, pytest
import opentelemetry.sdk.trace, opentelemetry.exporter.otlp.json.http.trace_exporter
import kubernetes_validate
import pydantic_ai, ag2, agents, opentelemetry.instrumentation.openai_agents, langgraph.prebuilt, httpx
import openinference.instrumentation.langchain, openinference.instrumentation.openai_agents, langmem.short_term
import llama_index.core.agent.workflow, openinference.instrumentation.llama_index
import strands, strands.memory, strands.vended_memory_stores.test_memory_store'
  if ! python3 -c "$py_probe" 2>/dev/null; then
    python3 -m pip install -q $py_pkgs || python3 -m pip install -q --break-system-packages $py_pkgs
  fi
  python3 -c 'import pyarrow, duckdb, polars, securesystemslib
from opentelemetry.sdk.version import __version__ as otel
print("pyarrow", pyarrow.__version__, "duckdb", duckdb.__version__, "polars", polars.__version__,
      "securesystemslib", securesystemslib.__version__, "opentelemetry-sdk", otel)'
  kubernetes-validate --version

  phase "install: Go tools and modules"
  # Helm (deploy/tests/helm.rs); golang.org/x/mod for the independent tlog verifier
  # cli/tests/it/tlog_interop.rs builds from record/interop; independent C2SP tlog-witness
  # implementations for keeper/tests/it/interop.rs: litewitness and witnessctl
  # (filippo.io/torchwood) and Tessera's posix-oneshot log as a third-party witness
  # client. Each binary is (re)built only when missing or of another version; the Go
  # verifier in keeper/interop is built by the test itself, its modules fetched here.
  [ -d /usr/local/go/bin ] && export PATH="$PATH:/usr/local/go/bin"
  gobin="$(go env GOPATH)/bin"
  export PATH="$PATH:$gobin"
  go_log="$(mktemp)"
  for tool in "helm.sh/helm/v3 v3.22.0 cmd/helm" \
    "filippo.io/torchwood v0.6.1 cmd/litewitness" "filippo.io/torchwood v0.6.1 cmd/witnessctl" \
    "github.com/transparency-dev/tessera v1.0.1 cmd/examples/posix-oneshot"; do
    set -- $tool
    if ! go version -m "$gobin/$(basename "$3")" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$1[[:space:]]+$2([[:space:]]|$)"; then
      go install "$1/$3@$2" >"$go_log" 2>&1 || { cat "$go_log"; exit 1; }
    fi
  done
  # Toxiproxy (the nemesis's network partitions), whose command is named `server`:
  # built into a directory of its own version and linked as toxiproxy-server.
  toxi="$ci_cache/toxiproxy-v2.5.0"
  if [ ! -x "$toxi/server" ]; then
    GOBIN="$toxi" go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 >"$go_log" 2>&1 || { cat "$go_log"; exit 1; }
  fi
  mkdir -p "$gobin" && ln -sf "$toxi/server" "$gobin/toxiproxy-server"
  (cd record/interop && GOFLAGS=-mod=mod go mod download) >"$go_log" 2>&1 || { cat "$go_log"; exit 1; }
  (cd keeper/interop && GOFLAGS=-mod=mod go build -o /dev/null ./verify) >"$go_log" 2>&1 || { cat "$go_log"; exit 1; }
  rm -f "$go_log"
  helm version --short
  toxiproxy-server -version 2>&1 | head -n 1

  phase "install: npm packages (VDA 5050 fleet)"
  # vda-5050-lib 1.4.0 from the npm registry, pinned by cli/tests/vda5050/package-lock.json.
  npm_dir=cli/tests/vda5050
  npm_cache="$ci_cache/npm-$(sha256sum "$npm_dir/package-lock.json" | cut -c1-16)"
  npm_ok() { (cd "$npm_dir" && node -e 'process.exit(require("vda-5050-lib/package.json").version === "1.4.0" ? 0 : 1)') 2>/dev/null; }
  if ! npm_ok && [ -d "$npm_cache/node_modules" ]; then
    rm -rf "$npm_dir/node_modules"
    cp -a "$npm_cache/node_modules" "$npm_dir/node_modules"
  fi
  if ! npm_ok; then
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
    rm -rf "$npm_cache" && mkdir -p "$npm_cache" && cp -a "$npm_dir/node_modules" "$npm_cache/"
  fi

  phase "install: cargo-nextest"
  ensure_nextest
  cargo nextest --version | head -n 1

  phase "install: cargo-cyclonedx (the image's SBOM)"
  ensure_cyclonedx

  phase "install: Kafka broker jars (Maven)"
  bash .ci/kafka.sh resolve
}

build_wheel() {
  phase "build: Python package (maturin wheel, dev profile)"
  wheels="$(target_dir)/wheels"
  rm -rf "$wheels"
  maturin build --quiet -m python/Cargo.toml --profile dev -o "$wheels"
  python3 -m pip install -q --force-reinstall "$wheels"/audita-*.whl \
    || python3 -m pip install -q --force-reinstall --break-system-packages "$wheels"/audita-*.whl
  python3 -c 'import audita; print("audita (python)", audita.__file__)'
}
