//! The Helm chart (`helm/audita`) rendered by the real `helm` and checked as a cluster
//! would take it, and as the stages would read it.
//!
//! What is checked:
//! - `helm lint --strict` passes on the chart alone and with `ci/minimal-values.yaml`
//!   and `ci/full-values.yaml` (every option: SASL_SSL with mutual TLS, existing Secrets,
//!   keepers, ServiceMonitor, HPA, singleton PDBs); the chart's defaults alone refuse to
//!   render (there is no default identity), and so do values that would put a secret in
//!   the ConfigMap or name two sources of one secret.
//! - Every rendered manifest validates (strict: no unknown field) against the bundled
//!   Kubernetes 1.37 JSON schemas of `kubernetes-validate`; the one custom resource,
//!   the ServiceMonitor (monitoring.coreos.com/v1, whose CRD schema is not available
//!   offline), is skip-listed and checked structurally here instead.
//! - Properties: no `seed` anywhere; every container (init ones too) non-root,
//!   read-only root filesystem, no privilege escalation, ALL capabilities dropped,
//!   seccomp RuntimeDefault; every stage container has liveness/readiness/startup
//!   probes on its metrics port, which `--metrics` binds; exactly one sealer (a
//!   StatefulSet of 1) and one sink; the slicer (which runs the detectors when enabled) is one
//!   replica with `Recreate`, and audita.toml names the predicate file exactly then; the log
//!   key Secret is mounted only into the sealer pod's init container; selectors of
//!   Services, PDBs, the HPA and the ServiceMonitor reach what they mean to.
//! - The configuration the stages read: each workload's pod is simulated on disk (its
//!   ConfigMap, registry and Secret volumes written as Kubernetes would, Secret files
//!   group-readable as under fsGroup), its init container's script is run with its
//!   environment, and `audita_deploy::Config::load` must accept the stage's `--config`
//!   with the values given (SASL password with quotes and backslashes included); the
//!   sealer's `Config::log_key` must load the deployment's key, every other stage's
//!   must fail (no key in its pod).
//!
//! - The PrometheusRule passes `promtool check rules`, and `promtool test rules` with
//!   `ci/alerts-test.yaml`: every alert has a case where it fires (labels and
//!   annotations checked) and one where it stays silent.
//!
//! The test fails, never skips, when `helm` or `kubernetes-validate` is missing:
//! `.ci/run` installs both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use audita_deploy::Config;
use base64::Engine as _;
use serde::Deserialize as _;
use serde_json::Value;

const PASSWORD: &str = "s3cr\"et\\pa$(ss) `w`'d";

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../helm/audita")
}

fn ci_values(name: &str) -> PathBuf {
    chart().join("ci").join(name)
}

/// `name` on PATH, else in Go's bin directories.
fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(gopath) = std::env::var_os("GOPATH") {
        dirs.push(PathBuf::from(gopath).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn helm() -> PathBuf {
    find_tool("helm").unwrap_or_else(|| {
        panic!("helm not found on PATH, in $GOPATH/bin or $HOME/go/bin: `go install helm.sh/helm/v3/cmd/helm@v3.22.0` (.ci/run does)")
    })
}

/// The validator's command line (the script, or its module through python3).
fn validator() -> Command {
    if let Some(p) = find_tool("kubernetes-validate") {
        return Command::new(p);
    }
    let ok = Command::new("python3")
        .args(["-c", "import kubernetes_validate"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "kubernetes-validate not found: `python3 -m pip install kubernetes-validate==1.37.0` (.ci/run does)"
    );
    let mut c = Command::new("python3");
    c.args(["-m", "kubernetes_validate"]);
    c
}

/// A fresh deployment made by `audita init` and `principal add`'s code.
struct Deployment {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    origin: String,
    vkey: String,
}

fn deployment() -> Deployment {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deployment");
    let origin = "chart-test.example/audita".to_string();
    let made = audita_deploy::init(&dir, &origin).unwrap();
    audita_deploy::add_principal(&made.config, "planner-1", "planner", None, Some(0)).unwrap();
    audita_deploy::add_principal(&made.config, "robot-7", "robot", None, Some(0)).unwrap();
    std::fs::write(dir.join("sasl-password"), PASSWORD).unwrap();
    Deployment {
        _tmp: tmp,
        dir,
        origin,
        vkey: made.log_vkey,
    }
}

/// Arguments naming the deployment's identity and registries.
fn identity_args(d: &Deployment) -> Vec<String> {
    vec![
        "--set".into(),
        format!("log.origin={}", d.origin),
        "--set-string".into(),
        format!("log.vkey={}", d.vkey),
        "--set-file".into(),
        format!(
            "registry.principals={}",
            d.dir.join("principals.json").display()
        ),
        "--set-file".into(),
        format!("registry.duties={}", d.dir.join("duties.json").display()),
        "--set".into(),
        "registry.existingConfigMap=".into(),
    ]
}

/// `helm template` of the chart with these arguments: its output, or its error text.
fn template(args: &[String]) -> Result<String, String> {
    let out = Command::new(helm())
        .args(["template", "rel"])
        .arg(chart())
        .args(["--namespace", "audit"])
        .args(args)
        .output()
        .expect("run helm");
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn docs(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).expect("rendered YAML parses"))
        .filter(|v| !v.is_null())
        .collect()
}

fn kind(v: &Value) -> &str {
    v["kind"].as_str().unwrap_or("")
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or("")
}

fn component(v: &Value) -> &str {
    v["metadata"]["labels"]["app.kubernetes.io/component"]
        .as_str()
        .unwrap_or("")
}

fn find<'a>(all: &'a [Value], k: &str, n: &str) -> &'a Value {
    all.iter()
        .find(|v| kind(v) == k && name(v) == n)
        .unwrap_or_else(|| panic!("no {k} {n} rendered"))
}

fn workloads(all: &[Value]) -> Vec<&Value> {
    all.iter()
        .filter(|v| matches!(kind(v), "Deployment" | "StatefulSet"))
        .collect()
}

fn workload<'a>(all: &'a [Value], comp: &str) -> &'a Value {
    let w: Vec<_> = workloads(all)
        .into_iter()
        .filter(|v| component(v) == comp)
        .collect();
    assert_eq!(w.len(), 1, "exactly one {comp} workload");
    w[0]
}

/// Every label of `selector` is on `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let sel = selector.as_object().expect("selector is a map");
    !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Runs the validator (strict) over one rendered stream: every manifest must pass,
/// except the skip-listed custom resources, which must be reported as unknown.
fn validate(text: &str, all: &[Value]) {
    // monitoring.coreos.com/v1 ServiceMonitor and PrometheusRule: CRDs whose schema is not bundled (and
    // cannot be fetched offline); checked structurally in `check_properties`.
    const SKIP: &[&str] = &["ServiceMonitor", "PrometheusRule"];
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("rendered.yaml");
    std::fs::write(&file, text).unwrap();
    let out = validator().arg("--strict").arg(&file).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubernetes-validate failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for v in all {
        let id = format!("{}/{}", kind(v).to_lowercase(), name(v));
        if SKIP.contains(&kind(v)) {
            assert!(
                stdout.contains(&format!("Couldn't find schema for kind {}", kind(v))),
                "{id}: expected the validator to report it unknown:\n{stdout}"
            );
            continue;
        }
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with("INFO") && l.contains(&format!("passed for resource {id} "))),
            "{id} was not validated:\n{stdout}"
        );
    }
    let warned: Vec<&str> = stdout
        .lines()
        .filter(|l| {
            l.starts_with("WARN") && !SKIP.iter().any(|k| l.contains(&format!("kind {k} ")))
        })
        .collect();
    assert!(
        warned.is_empty(),
        "unexpected validator warnings: {warned:?}"
    );
}

/// Secret data and public keys: opaque strings a word check must not look into.
fn scrub(text: &str, all: &[Value], opaque: &[&str]) -> String {
    let mut t = text.to_string();
    for v in all.iter().filter(|v| kind(v) == "Secret") {
        for (_, d) in v["data"].as_object().into_iter().flatten() {
            t = t.replace(d.as_str().unwrap(), "");
        }
    }
    for o in opaque {
        t = t.replace(o, "");
    }
    t
}

fn check_security(what: &str, c: &Value) {
    let s = &c["securityContext"];
    assert_eq!(s["runAsNonRoot"], true, "{what}: runAsNonRoot");
    assert_eq!(
        s["readOnlyRootFilesystem"], true,
        "{what}: readOnlyRootFilesystem"
    );
    assert_eq!(
        s["allowPrivilegeEscalation"], false,
        "{what}: allowPrivilegeEscalation"
    );
    assert_ne!(s["privileged"], true, "{what}: privileged");
    assert_eq!(
        s["seccompProfile"]["type"], "RuntimeDefault",
        "{what}: seccomp"
    );
    let drop: Vec<&str> = s["capabilities"]["drop"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(drop.contains(&"ALL"), "{what}: capabilities.drop has ALL");
    assert!(
        s["capabilities"]["add"].is_null(),
        "{what}: no capability added"
    );
    assert!(
        c["resources"]["requests"].is_object(),
        "{what}: resource requests"
    );
    assert!(
        c["resources"]["limits"]["memory"].is_string(),
        "{what}: memory limit"
    );
}

/// What one render must hold, whatever the values.
struct Expect<'a> {
    port: u64,
    log_key_secret: &'a str,
    sasl_secret: Option<&'a str>,
    hpa: bool,
    service_monitor: bool,
    singleton_pdbs: bool,
    ingest_replicas: u64,
    grace: u64,
    monitor: bool,
    /// `slicer.processes`.
    slicer_processes: u64,
    /// `notifier.enabled` (with its TLS and basic-auth Secrets).
    notifier: bool,
}

fn check_properties(text: &str, all: &[Value], e: &Expect, opaque: &[&str]) {
    // No seed: not as a key, not as a word, in any manifest (key material aside).
    let words = scrub(text, all, opaque).to_lowercase();
    assert!(
        !words.contains("seed"),
        "the rendered chart mentions a seed"
    );
    let config = all
        .iter()
        .find(|v| kind(v) == "ConfigMap" && v["data"]["audita.toml"].is_string())
        .expect("the config ConfigMap");
    let toml: toml::Table = v_str(&config["data"]["audita.toml"]).parse().unwrap();
    assert!(!toml.contains_key("insecure"), "[insecure] in audita.toml");
    assert!(
        toml["kafka"]
            .as_table()
            .unwrap()
            .keys()
            .all(|k| !k.contains("password")),
        "a password in the ConfigMap"
    );

    let w = workloads(all);
    let comps: BTreeSet<&str> = w.iter().map(|v| component(v)).collect();
    // A slicer of one runs the monitor's detectors over its join: no workload of
    // their own; beside a slicer cluster they run as `audita stage monitor`.
    let mut stages = BTreeSet::from(["engine", "ingest", "sealer", "sink", "slicer"]);
    if e.monitor && e.slicer_processes > 1 {
        stages.insert("monitor");
    }
    if e.notifier {
        stages.insert("notifier");
    }
    assert_eq!(comps, stages, "one workload per stage");
    // Alertmanager's CA and password reach the notifier's pod only.
    for wl in &w {
        let mounts: Vec<&str> = wl["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| v_str(&m["name"]))
            .collect();
        let alertmanager = mounts.iter().any(|m| m.starts_with("alertmanager-"));
        assert_eq!(
            alertmanager,
            component(wl) == "notifier",
            "{}: Alertmanager's Secrets are the notifier's alone: {mounts:?}",
            name(wl)
        );
    }
    let toml_predicates = toml["registry"].get("predicates").and_then(|p| p.as_str());
    assert_eq!(
        toml_predicates,
        e.monitor.then_some("predicates.json"),
        "audita.toml names the predicate file exactly when detection is on"
    );
    let mut log_key_mounts = Vec::new();
    for v in &w {
        let comp = component(v);
        let spec = &v["spec"];
        assert!(
            selects(
                &spec["selector"]["matchLabels"],
                &spec["template"]["metadata"]["labels"]
            ),
            "{comp}: selector matches its pods"
        );
        let pod = &spec["template"]["spec"];
        assert_eq!(
            pod["securityContext"]["runAsNonRoot"], true,
            "{comp}: pod runAsNonRoot"
        );
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        assert_eq!(
            pod["automountServiceAccountToken"], false,
            "{comp}: no API token"
        );
        assert_eq!(
            pod["terminationGracePeriodSeconds"], e.grace,
            "{comp}: grace period"
        );
        let volumes = pod["volumes"].as_array().unwrap();
        let secret_of = |vol: &str| -> Option<String> {
            volumes
                .iter()
                .find(|x| x["name"] == vol)
                .and_then(|x| x["secret"]["secretName"].as_str().map(String::from))
        };
        for x in volumes {
            assert!(x["projected"].is_null(), "{comp}: no projected volume");
        }
        let inits = pod["initContainers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{comp}: one stage container");
        for (init, c) in inits
            .iter()
            .map(|c| (true, c))
            .chain(containers.iter().map(|c| (false, c)))
        {
            let cname = c["name"].as_str().unwrap();
            check_security(&format!("{comp}/{cname}"), c);
            for env in c["env"].as_array().into_iter().flatten() {
                assert!(
                    env["valueFrom"].is_null(),
                    "{comp}/{cname}: env from a Secret"
                );
            }
            assert!(c["envFrom"].is_null(), "{comp}/{cname}: envFrom");
            for m in c["volumeMounts"].as_array().into_iter().flatten() {
                let Some(secret) = secret_of(m["name"].as_str().unwrap()) else {
                    continue;
                };
                if secret == e.log_key_secret {
                    log_key_mounts.push(format!("{comp}/{cname}"));
                }
                if Some(secret.as_str()) == e.sasl_secret {
                    assert!(
                        init,
                        "{comp}/{cname}: the SASL password mounted outside init"
                    );
                }
            }
            if init {
                continue;
            }
            // The stage container: `audita stage COMP --config ... --metrics ADDR:PORT`.
            let args: Vec<&str> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            assert_eq!(&args[..2], &["stage", comp], "{comp}: runs its stage");
            let at = |flag: &str| args.iter().position(|a| *a == flag).map(|i| args[i + 1]);
            assert_eq!(at("--config"), Some("/etc/audita/audita.toml"));
            let metrics = at("--metrics").expect("--metrics");
            let addr: std::net::SocketAddr = metrics.parse().expect("--metrics is an address");
            assert_eq!(u64::from(addr.port()), e.port, "{comp}: --metrics port");
            assert_eq!(c["ports"][0]["name"], "metrics");
            assert_eq!(c["ports"][0]["containerPort"], e.port);
            for (probe, path) in [
                ("livenessProbe", "/healthz"),
                ("readinessProbe", "/readyz"),
                ("startupProbe", "/healthz"),
            ] {
                assert_eq!(c[probe]["httpGet"]["path"], path, "{comp}: {probe}");
                assert_eq!(
                    c[probe]["httpGet"]["port"], "metrics",
                    "{comp}: {probe} port"
                );
            }
            let dir = at("--dir");
            match comp {
                "sealer" | "sink" => assert!(
                    dir.is_some_and(|d| d.starts_with("/data")),
                    "{comp}: --dir on its PVC"
                ),
                _ => assert_eq!(dir, None, "{comp}: no --dir"),
            }
        }
    }
    assert_eq!(
        log_key_mounts,
        vec!["sealer/render-config".to_string()],
        "the log key is mounted into the sealer's init container only"
    );

    // Single writers and scaled stages.
    let sealer = workload(all, "sealer");
    assert_eq!(kind(sealer), "StatefulSet");
    assert_eq!(sealer["spec"]["replicas"], 1, "sealer replicas");
    assert_eq!(
        sealer["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
        "data"
    );
    let sink = workload(all, "sink");
    assert_eq!(kind(sink), "StatefulSet");
    assert_eq!(sink["spec"]["replicas"], 1, "sink replicas");
    let slicer = workload(all, "slicer");
    check_slicer(all, slicer, e.slicer_processes);
    assert_eq!(
        workload(all, "ingest")["spec"]["replicas"],
        e.ingest_replicas
    );
    let engine = workload(all, "engine");
    let hpas: Vec<&Value> = all
        .iter()
        .filter(|v| kind(v) == "HorizontalPodAutoscaler")
        .collect();
    if e.hpa {
        assert_eq!(hpas.len(), 1);
        assert_eq!(hpas[0]["apiVersion"], "autoscaling/v2");
        assert_eq!(hpas[0]["spec"]["scaleTargetRef"]["kind"], "Deployment");
        assert_eq!(hpas[0]["spec"]["scaleTargetRef"]["name"], name(engine));
        assert!(
            engine["spec"]["replicas"].is_null(),
            "the HPA owns the engine's replicas"
        );
    } else {
        assert!(hpas.is_empty());
        assert!(engine["spec"]["replicas"].is_u64());
    }

    // Services: headless for each StatefulSet, one metrics Service over every pod.
    for s in [sealer, sink, slicer] {
        let svc = find(all, "Service", s["spec"]["serviceName"].as_str().unwrap());
        assert_eq!(svc["spec"]["clusterIP"], "None", "{} headless", name(s));
        assert!(selects(
            &svc["spec"]["selector"],
            &s["spec"]["template"]["metadata"]["labels"]
        ));
    }
    let metrics: Vec<&Value> = all
        .iter()
        .filter(|v| kind(v) == "Service" && component(v) == "metrics")
        .collect();
    assert_eq!(metrics.len(), 1, "one metrics Service");
    let msvc = metrics[0];
    assert_eq!(msvc["spec"]["ports"][0]["port"], e.port);
    assert_eq!(msvc["spec"]["ports"][0]["targetPort"], "metrics");
    for v in workloads(all) {
        assert!(
            selects(
                &msvc["spec"]["selector"],
                &v["spec"]["template"]["metadata"]["labels"]
            ),
            "the metrics Service selects {}",
            name(v)
        );
    }
    let monitors: Vec<&Value> = all.iter().filter(|v| kind(v) == "ServiceMonitor").collect();
    if e.service_monitor {
        assert_eq!(monitors.len(), 1);
        let m = monitors[0];
        assert_eq!(m["apiVersion"], "monitoring.coreos.com/v1");
        assert!(selects(
            &m["spec"]["selector"]["matchLabels"],
            &msvc["metadata"]["labels"]
        ));
        for sv in all.iter().filter(|v| kind(v) == "Service" && v != &msvc) {
            assert!(
                !selects(
                    &m["spec"]["selector"]["matchLabels"],
                    &sv["metadata"]["labels"]
                ),
                "the ServiceMonitor also selects {} (pods scraped twice)",
                name(sv)
            );
        }
        let ep = &m["spec"]["endpoints"][0];
        assert_eq!(ep["port"], "metrics");
        assert_eq!(ep["path"], "/metrics");
        let spec_keys: BTreeSet<&str> = m["spec"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert!(spec_keys.is_subset(&BTreeSet::from([
            "selector",
            "namespaceSelector",
            "endpoints"
        ])));
    } else {
        assert!(monitors.is_empty(), "ServiceMonitor off by default");
    }

    // PodDisruptionBudgets select their stage's pods.
    let pdbs: Vec<&Value> = all
        .iter()
        .filter(|v| kind(v) == "PodDisruptionBudget")
        .collect();
    let mut covered: Vec<&str> = Vec::new();
    for p in &pdbs {
        let targets: Vec<&Value> = workloads(all)
            .into_iter()
            .filter(|w| {
                selects(
                    &p["spec"]["selector"]["matchLabels"],
                    &w["spec"]["template"]["metadata"]["labels"],
                )
            })
            .collect();
        assert_eq!(targets.len(), 1, "{} selects one workload", name(p));
        covered.push(component(targets[0]));
    }
    covered.sort();
    let want: Vec<&str> = if e.singleton_pdbs {
        vec!["engine", "ingest", "sealer", "sink", "slicer"]
    } else {
        vec!["engine", "ingest"]
    };
    assert_eq!(covered, want, "PDBs");
}

/// The slicer: a StatefulSet of `processes` members started in parallel; a cluster's
/// members name each other by their stable names on the headless Service and listen
/// on the cluster port, which a NetworkPolicy opens to slicer pods only.
fn check_slicer(all: &[Value], slicer: &Value, processes: u64) {
    assert_eq!(kind(slicer), "StatefulSet", "the slicer is a StatefulSet");
    assert_eq!(
        slicer["spec"]["replicas"], processes,
        "slicer.processes members"
    );
    assert_eq!(slicer["spec"]["podManagementPolicy"], "Parallel");
    let service = slicer["spec"]["serviceName"].as_str().unwrap();
    let c = &slicer["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(v_str).collect();
    let ports: Vec<&str> = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| v_str(&p["name"]))
        .collect();
    let policies: Vec<&Value> = all.iter().filter(|v| kind(v) == "NetworkPolicy").collect();
    if processes == 1 {
        assert!(!args.contains(&"--peers"), "one slicer process: {args:?}");
        assert_eq!(ports, vec!["metrics"]);
        assert!(policies.is_empty());
        return;
    }
    let at = args.iter().position(|a| *a == "--peers").expect("--peers");
    let peers: Vec<&str> = args[at + 1].split(',').collect();
    let want: Vec<String> = (0..processes)
        .map(|i| format!("{}-{i}.{service}:7300", name(slicer)))
        .collect();
    assert_eq!(peers, want, "every member by its stable name");
    assert!(args.contains(&"--index-from-hostname"));
    assert_eq!(ports, vec!["metrics", "cluster"]);
    let svc = find(all, "Service", service);
    assert!(
        svc["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "cluster" && p["port"] == 7300),
        "the headless Service carries the cluster port"
    );
    assert_eq!(policies.len(), 1, "one NetworkPolicy");
    let p = policies[0];
    let labels = &slicer["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&p["spec"]["podSelector"]["matchLabels"], labels));
    let rules = p["spec"]["ingress"].as_array().unwrap();
    let cluster_rule = rules
        .iter()
        .find(|r| r["ports"][0]["port"] == "cluster")
        .expect("a rule for the cluster port");
    assert!(
        selects(
            &cluster_rule["from"][0]["podSelector"]["matchLabels"],
            labels
        ),
        "only slicer pods reach the cluster port"
    );
    assert_eq!(cluster_rule["from"].as_array().unwrap().len(), 1);
}

fn v_str(v: &Value) -> &str {
    v.as_str().expect("a string")
}

fn lint(extra: &[&Path]) {
    let mut c = Command::new(helm());
    c.args(["lint", "--strict"]).arg(chart());
    for f in extra {
        c.arg("-f").arg(f);
    }
    let out = c.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "helm lint --strict {extra:?}:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{text}"
    );
}

#[test]
fn helm_lint_strict_passes() {
    lint(&[]);
    lint(&[&ci_values("minimal-values.yaml")]);
    lint(&[&ci_values("full-values.yaml")]);
}

#[test]
fn chart_defaults_alone_do_not_render_a_deployment() {
    let err = template(&[]).expect_err("no default identity");
    assert!(
        err.contains("required") || err.contains("registry:"),
        "{err}"
    );
    // Identity and registries but no log key Secret: refused, naming the value.
    let d = deployment();
    let mut args = identity_args(&d);
    args.extend(["--set".into(), "kafka.bootstrapServers=k:9092".into()]);
    let err = template(&args).expect_err("no log key Secret");
    assert!(err.contains("log.key.existingSecret is required"), "{err}");
}

#[test]
fn values_that_would_leak_a_secret_are_refused() {
    let min = ci_values("minimal-values.yaml").display().to_string();
    for (set, want) in [
        (
            "kafka.settings.sasl\\.password=hunter2",
            "kafka.settings.sasl.password: a secret",
        ),
        (
            "kafka.settings.ssl\\.key\\.password=x",
            "kafka.settings.ssl.key.password: a secret",
        ),
        ("kafka.settings.bootstrap\\.servers=x:1", "set by the chart"),
        (
            "kafka.settings.acks=1",
            "kafka.settings.acks: fixed by Audita",
        ),
        ("log.key.insecureValue=KEY", "not both"),
        (
            "kafka.securityProtocol=SASL_SSL",
            "kafka.sasl.mechanism is required",
        ),
        ("kafka.securityProtocol=plaintext", "want one of"),
        ("kafka.tls.existingSecret=t", "does not use TLS"),
    ] {
        let err = template(&["-f".into(), min.clone(), "--set".into(), set.into()]).expect_err(set);
        assert!(err.contains(want), "{set}: {err}");
    }
    let err = template(&[
        "-f".into(),
        min,
        "--set".into(),
        "kafka.securityProtocol=SASL_SSL,kafka.sasl.mechanism=PLAIN".into(),
    ])
    .expect_err("SASL without a password Secret");
    assert!(
        err.contains("kafka.sasl.existingSecret is required"),
        "{err}"
    );
}

#[test]
fn validator_rejects_an_unknown_field() {
    // The validator is strict for real: a typo'd field fails (so a pass means something).
    let bad = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replicas: 1\n  replicaz: 2\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec: {containers: [{name: c, image: i}]}\n";
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("bad.yaml");
    std::fs::write(&f, bad).unwrap();
    let out = validator().arg("--strict").arg(&f).output().unwrap();
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn minimal_values_render_validate_and_hold() {
    let text = template(&[
        "-f".into(),
        ci_values("minimal-values.yaml").display().to_string(),
    ])
    .unwrap();
    let all = docs(&text);
    validate(&text, &all);
    let vkey = all
        .iter()
        .find_map(|v| v["data"]["audita.toml"].as_str())
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t["log"]["vkey"].as_str().map(String::from))
        .unwrap();
    check_properties(
        &text,
        &all,
        &Expect {
            port: 9464,
            log_key_secret: "audita-log-key",
            sasl_secret: None,
            hpa: false,
            service_monitor: false,
            singleton_pdbs: false,
            ingest_replicas: 2,
            grace: 30,
            monitor: false,
            slicer_processes: 1,
            notifier: false,
        },
        &[&vkey],
    );
    // No registry ConfigMap is made when an existing one is named.
    assert!(!all
        .iter()
        .any(|v| kind(v) == "ConfigMap" && name(v).ends_with("-registry")));
}

/// Full values with the fixture deployment's identity; `chart_secrets`: the chart
/// creates the log key and SASL Secrets from values instead of naming existing ones.
fn full(d: &Deployment, chart_secrets: bool) -> (String, Vec<Value>) {
    let mut args = vec![
        "-f".into(),
        ci_values("full-values.yaml").display().to_string(),
    ];
    args.extend(identity_args(d));
    if chart_secrets {
        args.extend([
            "--set".into(),
            "log.key.existingSecret=,kafka.sasl.existingSecret=".into(),
            "--set-file".into(),
            format!(
                "log.key.insecureValue={}",
                d.dir.join("keys/log.key").display()
            ),
            // A file: `--set` would take the backslash as an escape.
            "--set-file".into(),
            format!(
                "kafka.sasl.insecurePassword={}",
                d.dir.join("sasl-password").display()
            ),
        ]);
    }
    let text = template(&args).unwrap();
    let all = docs(&text);
    (text, all)
}

fn full_expect<'a>(log_key_secret: &'a str, sasl: &'a str) -> Expect<'a> {
    Expect {
        port: 9500,
        log_key_secret,
        sasl_secret: Some(sasl),
        hpa: true,
        service_monitor: true,
        singleton_pdbs: true,
        ingest_replicas: 3,
        grace: 45,
        monitor: true,
        slicer_processes: 2,
        notifier: true,
    }
}

fn keeper_vkeys() -> Vec<String> {
    let text = std::fs::read_to_string(ci_values("full-values.yaml")).unwrap();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("vkey: "))
        .map(|v| v.trim_matches('"').to_string())
        .collect()
}

#[test]
fn full_values_render_validate_and_hold() {
    let d = deployment();
    let opaque = keeper_vkeys();
    for chart_secrets in [false, true] {
        let (text, all) = full(&d, chart_secrets);
        validate(&text, &all);
        let mut o: Vec<&str> = opaque.iter().map(String::as_str).collect();
        o.push(&d.vkey);
        let (log, sasl) = if chart_secrets {
            ("rel-auditor-log-key", "rel-auditor-kafka-sasl")
        } else {
            ("audita-log-key", "audita-kafka-sasl")
        };
        check_properties(&text, &all, &full_expect(log, sasl), &o);
        let secrets: Vec<&str> = all
            .iter()
            .filter(|v| kind(v) == "Secret")
            .map(name)
            .collect();
        if chart_secrets {
            assert_eq!(secrets, vec![log, sasl]);
        } else {
            assert!(
                secrets.is_empty(),
                "existing Secrets named, none created: {secrets:?}"
            );
        }
    }
}

/// The alerting rules the chart renders pass `promtool check rules` (Prometheus's own
/// parser: PromQL, durations, labels), and the monitor's rules are among them.
#[test]
fn the_prometheus_rule_passes_promtool() {
    let d = deployment();
    let (_, all) = full(&d, false);
    let rule = all
        .iter()
        .find(|v| kind(v) == "PrometheusRule")
        .expect("full values enable the PrometheusRule");
    let groups = &rule["spec"]["groups"];
    let alerts: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str())
        .collect();
    for want in ["AuditaAbstained", "AuditaVerdictsBehind"] {
        assert!(alerts.contains(&want), "{want} in {alerts:?}");
    }
    let file = d.dir.join("rules.json");
    // JSON is YAML: promtool reads the rule file format directly.
    std::fs::write(&file, serde_json::json!({ "groups": groups }).to_string()).unwrap();
    let out = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .expect("promtool on PATH (.ci/run installs Debian's prometheus package)");
    assert!(
        out.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every alert of the chart's PrometheusRule, rendered as a cluster gets it, passes
/// the promtool unit tests of `ci/alerts-test.yaml`, which give each alert a case where
/// it fires (with its labels and annotations) and one where it stays silent.
#[test]
fn every_alert_fires_when_it_should_and_stays_silent_when_it_should_not() {
    let d = deployment();
    let (_, all) = full(&d, false);
    let rule = all
        .iter()
        .find(|v| kind(v) == "PrometheusRule")
        .expect("full values enable the PrometheusRule");
    let groups = &rule["spec"]["groups"];
    let alerts: BTreeSet<String> = groups
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    let tests_file = chart().join("ci/alerts-test.yaml");
    let text = std::fs::read_to_string(&tests_file).unwrap();
    let tests: Value = serde_yaml_ng::from_str(&text).unwrap();
    // (alert, fires) for every evaluation of every case.
    let mut cases: BTreeSet<(String, bool)> = BTreeSet::new();
    for t in tests["tests"].as_array().unwrap() {
        for a in t["alert_rule_test"].as_array().into_iter().flatten() {
            let fires = a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty());
            cases.insert((a["alertname"].as_str().unwrap().to_string(), fires));
        }
    }
    for alert in &alerts {
        for fires in [true, false] {
            assert!(
                cases.contains(&(alert.clone(), fires)),
                "{alert} has no case where it {} in {}",
                if fires { "fires" } else { "stays silent" },
                tests_file.display()
            );
        }
    }
    let tested: BTreeSet<String> = cases.into_iter().map(|(a, _)| a).collect();
    assert_eq!(tested, alerts, "cases for alerts the rule does not have");
    std::fs::write(
        d.dir.join("rules.json"),
        serde_json::json!({ "groups": groups }).to_string(),
    )
    .unwrap();
    std::fs::write(d.dir.join("alerts-test.yaml"), &text).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules", "alerts-test.yaml"])
        .current_dir(&d.dir)
        .output()
        .expect("promtool on PATH (.ci/run installs Debian's prometheus package)");
    assert!(
        out.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Bytes of the files of a volume source Kubernetes would mount.
fn volume_files(
    all: &[Value],
    external: &BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    kind_: &str,
    obj: &str,
) -> BTreeMap<String, Vec<u8>> {
    if let Some(files) = external.get(&(kind_.to_string(), obj.to_string())) {
        return files.clone();
    }
    let v = find(all, kind_, obj);
    v["data"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, d)| {
            let bytes = if kind_ == "Secret" {
                base64::engine::general_purpose::STANDARD
                    .decode(v_str(d))
                    .unwrap()
            } else {
                v_str(d).as_bytes().to_vec()
            };
            (k.clone(), bytes)
        })
        .collect()
}

/// Lays out the pod of `w` under `root` (each volume at `root/vol/NAME`), runs its init
/// container's script with its environment, and returns the host path of the stage's
/// `--config` file.
fn run_pod(
    all: &[Value],
    w: &Value,
    external: &BTreeMap<(String, String), BTreeMap<String, Vec<u8>>>,
    root: &Path,
) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let pod = &w["spec"]["template"]["spec"];
    for vol in pod["volumes"].as_array().unwrap() {
        let vname = v_str(&vol["name"]);
        let dir = root.join("vol").join(vname);
        std::fs::create_dir_all(&dir).unwrap();
        let (src_kind, obj, src) = if vol["configMap"].is_object() {
            (
                "ConfigMap",
                v_str(&vol["configMap"]["name"]),
                &vol["configMap"],
            )
        } else if vol["secret"].is_object() {
            (
                "Secret",
                v_str(&vol["secret"]["secretName"]),
                &vol["secret"],
            )
        } else {
            continue;
        };
        let files = volume_files(all, external, src_kind, obj);
        let items: Vec<(String, String)> = match src["items"].as_array() {
            Some(items) => items
                .iter()
                .map(|i| (v_str(&i["key"]).to_string(), v_str(&i["path"]).to_string()))
                .collect(),
            None => files.keys().map(|k| (k.clone(), k.clone())).collect(),
        };
        // Under fsGroup, Kubernetes makes mounted files group-readable.
        let mode = src["defaultMode"].as_u64().unwrap_or(0o644) as u32 | 0o440;
        for (key, path) in items {
            let bytes = files
                .get(&key)
                .unwrap_or_else(|| panic!("{src_kind} {obj} has no key {key}"));
            let p = dir.join(path);
            std::fs::write(&p, bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    let host = |c: &Value, path: &str| -> PathBuf {
        let m = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| path.starts_with(v_str(&m["mountPath"])))
            .max_by_key(|m| v_str(&m["mountPath"]).len())
            .unwrap_or_else(|| panic!("{path} is on no volume of {}", c["name"]));
        let rest = path[v_str(&m["mountPath"]).len()..].trim_start_matches('/');
        root.join("vol").join(v_str(&m["name"])).join(rest)
    };
    let init = &pod["initContainers"][0];
    let command: Vec<&str> = init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(v_str)
        .collect();
    assert_eq!(command[0], "/bin/sh");
    let mut run = Command::new("/bin/sh");
    run.arg(host(init, command[1]))
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    for env in init["env"].as_array().unwrap() {
        let value = v_str(&env["value"]);
        let value = if value.starts_with('/') {
            host(init, value)
        } else {
            PathBuf::from(value)
        };
        run.env(v_str(&env["name"]), value);
    }
    let out = run.output().unwrap();
    assert!(
        out.status.success(),
        "{} render-config failed: {}",
        name(w),
        String::from_utf8_lossy(&out.stderr)
    );
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"].as_array().unwrap().iter().map(v_str).collect();
    let config = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
    host(c, config)
}

#[test]
fn every_stage_loads_the_configuration_the_chart_renders() {
    use std::os::unix::fs::PermissionsExt as _;
    let d = deployment();
    let key_file = std::fs::read(d.dir.join("keys/log.key")).unwrap();
    let registry = |f: &str| std::fs::read(d.dir.join(f)).unwrap();
    for chart_secrets in [false, true] {
        let (_, all) = full(&d, chart_secrets);
        // What the operator created before installing (existing Secrets).
        let mut external = BTreeMap::new();
        if !chart_secrets {
            external.insert(
                ("Secret".to_string(), "audita-log-key".to_string()),
                BTreeMap::from([("log.key".to_string(), key_file.clone())]),
            );
            // As `kubectl create secret --from-file` keeps a trailing newline.
            external.insert(
                ("Secret".to_string(), "audita-kafka-sasl".to_string()),
                BTreeMap::from([("password".to_string(), format!("{PASSWORD}\n").into_bytes())]),
            );
            external.insert(
                ("Secret".to_string(), "audita-kafka-tls".to_string()),
                BTreeMap::from([
                    ("ca.crt".to_string(), b"CA".to_vec()),
                    ("tls.crt".to_string(), b"CERT".to_vec()),
                    ("tls.key".to_string(), b"KEY".to_vec()),
                ]),
            );
        } else {
            external.insert(
                ("Secret".to_string(), "audita-kafka-tls".to_string()),
                BTreeMap::from([
                    ("ca.crt".to_string(), b"CA".to_vec()),
                    ("tls.crt".to_string(), b"CERT".to_vec()),
                    ("tls.key".to_string(), b"KEY".to_vec()),
                ]),
            );
        }
        // Alertmanager's CA bundle and basic-auth password (the notifier's).
        external.insert(
            ("Secret".to_string(), "audita-alertmanager-tls".to_string()),
            BTreeMap::from([("ca.crt".to_string(), b"AM-CA".to_vec())]),
        );
        external.insert(
            ("Secret".to_string(), "audita-alertmanager-auth".to_string()),
            BTreeMap::from([("password".to_string(), b"am-secret\n".to_vec())]),
        );
        for w in workloads(&all) {
            let comp = component(w);
            let tmp = tempfile::tempdir().unwrap();
            let file = run_pod(&all, w, &external, tmp.path());
            let cfg = Config::load(&file).unwrap_or_else(|e| panic!("{comp}: {e}"));
            assert_eq!(cfg.origin, d.origin);
            assert_eq!(cfg.topic_prefix, "site7.");
            assert_eq!(cfg.epoch_messages, 512);
            assert_eq!(cfg.epoch_age_ms, 250);
            assert_eq!(cfg.dedupe_horizon_ms, 900_000);
            assert_eq!(cfg.slicer_horizon_ms, 180_000);
            assert_eq!(cfg.slicer_hold_ms, 90_000);
            assert_eq!(cfg.engine_workers, 4);
            assert_eq!(cfg.quorum, 1);
            assert_eq!(cfg.keepers.len(), 2);
            assert_eq!(
                cfg.keepers[1].url.as_deref(),
                Some("https://keeper-b.example/")
            );
            assert!(
                cfg.principals.get("planner-1").is_some(),
                "{comp}: the registry"
            );
            assert!(cfg.insecure_demo_seed.is_none());
            let k = &cfg.kafka;
            assert_eq!(
                k["bootstrap.servers"],
                "kafka-0.kafka:9093,kafka-1.kafka:9093"
            );
            assert_eq!(k["security.protocol"], "SASL_SSL");
            assert_eq!(k["sasl.mechanisms"], "SCRAM-SHA-512");
            assert_eq!(k["sasl.username"], "audita");
            assert_eq!(
                k["sasl.password"], PASSWORD,
                "{comp}: the SASL password, exactly"
            );
            assert_eq!(
                k["ssl.ca.location"],
                "/var/run/secrets/audita/kafka-tls/ca.crt"
            );
            assert_eq!(
                k["ssl.key.location"],
                "/var/run/secrets/audita/kafka-tls/tls.key"
            );
            assert_eq!(k["message.max.bytes"], "2000000");
            assert_eq!(k["socket.keepalive.enable"], "true");
            assert_eq!(k["client.id"], "audita");
            let log_key = cfg.log_key();
            if comp == "sealer" {
                let key = log_key.unwrap_or_else(|e| panic!("sealer: {e}"));
                assert_eq!(key.verifying_key(), cfg.log_vkey);
                let mode = std::fs::metadata(file.parent().unwrap().join("keys/log.key"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o777, 0o600, "the copied key is 0600");
            } else {
                assert!(log_key.is_err(), "{comp} can read the log key");
            }
            assert_eq!(
                std::fs::read(file.parent().unwrap().join("principals.json")).unwrap(),
                registry("principals.json")
            );
            let n = cfg.notifier.as_ref().expect("[notifier]");
            assert_eq!(n.url, "https://alertmanager.monitoring:9093");
            assert_eq!(n.username.as_deref(), Some("audita"));
            assert_eq!(
                n.ca_file.as_deref(),
                Some(Path::new("/var/run/secrets/audita/alertmanager-tls/ca.crt"))
            );
            let mounted =
                |vol: &str, f: &str| std::fs::read(tmp.path().join("vol").join(vol).join(f));
            if comp == "notifier" {
                assert_eq!(mounted("alertmanager-tls", "ca.crt").unwrap(), b"AM-CA");
                assert_eq!(
                    mounted("alertmanager-auth", "password").unwrap(),
                    b"am-secret\n"
                );
            } else {
                assert!(
                    mounted("alertmanager-auth", "password").is_err(),
                    "{comp} has the password"
                );
            }
        }
    }
}

#[test]
fn render_script_refuses_a_password_with_a_control_character() {
    let d = deployment();
    let (_, all) = full(&d, false);
    let w = workload(&all, "ingest");
    for bad in ["line\nbreak", "tab\there", ""] {
        let mut external = BTreeMap::new();
        external.insert(
            ("Secret".to_string(), "audita-kafka-sasl".to_string()),
            BTreeMap::from([("password".to_string(), bad.as_bytes().to_vec())]),
        );
        external.insert(
            ("Secret".to_string(), "audita-kafka-tls".to_string()),
            BTreeMap::from([
                ("ca.crt".to_string(), b"CA".to_vec()),
                ("tls.crt".to_string(), b"CERT".to_vec()),
                ("tls.key".to_string(), b"KEY".to_vec()),
            ]),
        );
        let tmp = tempfile::tempdir().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_pod(&all, w, &external, tmp.path())
        }));
        let msg = r.expect_err(&format!("{bad:?} accepted"));
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("render-config: the Kafka SASL password"),
            "{bad:?}: {msg}"
        );
        assert!(
            !tmp.path().join("vol/config/audita.toml").exists(),
            "no config written"
        );
    }
}
