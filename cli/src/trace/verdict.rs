//! `audita trace verdict RECORD_DIR --action SPAN --injection SPAN`: the verdict of a
//! declared adverse outcome in an agent trace, re-checkable from sealed evidence.
//!
//! The record is one `audita trace seal` wrote (or the pipeline sealed from the same
//! messages). It is verified offline (public keys only; `--trust` as for `audita
//! verify`); the trace is rebuilt from the payloads of **certified** messages alone
//! (`audita_traces::sealed`), so a forged or altered step changes nothing; then:
//! - **verdict**: the suspect action's message is the anchor of the adverse outcome
//!   (`--outcome`, `t*` = its time), judged by `audita_verdict::verdict` under the
//!   duty registry `--duties`, exactly as `audita verdict` judges a fleet record:
//!   duty, breach, `[ρ_lo, ρ_hi]`, flags, per-principal claim (the per-citation
//!   grade pins make a folded or similarity edge a hypothesis edge there);
//! - **witness**: the memo's decision procedure (`audita_traces::witness`) on the
//!   rebuilt trace, the same JSON as `audita trace witness`;
//! - **claim**: the weaker of the witness level and the claim of the principal who
//!   signed the injection step, so a causal claim is refused whenever the closure
//!   holds a non-witness edge, on either reading;
//! - **action** and **injection**: each step's span id, `step` (its position in
//!   start-time order, 0-based, as Who&When counts steps), name, agent, message id,
//!   signer and whether the signer was a conduit (a collector signing for the agent);
//!   `injected_principal`: the injection signer's ρ interval, claim, status and
//!   culpability from the verdict.
//!
//! Without `--injection` the `witness`, `injection` and `injected_principal` fields
//! give way to `inputs` (the JSON of `trace witness` without `--injection`, on the
//! sealed closure) and `candidate` (its first-ranked input's step); `claim` is the
//! weaker of the candidate's level and the claim of its signer (`null` when no input
//! holds a value of the action's arguments). The sealed payloads hold hashes only, so
//! the values are traced from `--export FILE` (the export the record was sealed
//! from), whose content counts only behind hashes the record holds.
//!
//! Exit 0 for a causal claim over a clean record with a graded verdict, 1 otherwise
//! (a weaker claim, an abstaining verdict, suspect or missing evidence, trust
//! problems), 2 with one line on stderr for bad input.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use audita_evidence::{verify_record_with, MessageId, Partition, Payload, Policy, SignedEnvelope};
use audita_traces::sealed::{node_from_payload, PayloadError};
use audita_traces::{
    parse_otlp_json_with_contents, provenance, witness, Contents, Graph, Level, SpanId, Trace,
};
use audita_verdict::{
    id_string, verdict, Adverse, AdverseDecl, ClaimLevel, Combine, DutyRegistry, Status, Verdict,
};
use serde_json::{json, Value};

use crate::inputs::{load_trust, read_text, LimitArgs};

#[derive(clap::Args, Debug)]
pub(super) struct VerdictArgs {
    /// Record directory (written by `audita trace seal`).
    dir: PathBuf,
    /// Span id of the suspect action (the anchor of the adverse outcome).
    #[arg(long, value_name = "SPAN_ID")]
    action: String,
    /// Span id of the injection node; without it, the inputs of the action's sealed
    /// closure are listed and ranked instead (`inputs`).
    #[arg(long, value_name = "SPAN_ID")]
    injection: Option<String>,
    /// The OTLP/JSON export the record was sealed from, read only for the content
    /// behind the sealed hashes (value provenance without `--injection`; content whose
    /// hash is not an artifact of the record is ignored).
    #[arg(long, value_name = "FILE")]
    export: Option<PathBuf>,
    /// Duty registry of the agents (JSON, verdict/SCHEMA.md); default: no duties.
    #[arg(long, value_name = "FILE")]
    duties: Option<PathBuf>,
    /// Name of the declared adverse outcome.
    #[arg(long, default_value = "harmful_agent_action")]
    outcome: String,
    /// Incident name (default: `trace-<action span id>`).
    #[arg(long)]
    incident: Option<String>,
    /// Trust file pinning the log and keeper keys (as for `audita verify --trust`).
    #[arg(long, value_name = "FILE")]
    trust: Option<PathBuf>,
    #[command(flatten)]
    limits: LimitArgs,
    /// Pretty-print the output.
    #[arg(long)]
    pretty: bool,
}

/// A sealed step: its message and who signed it.
struct Sealed<'r> {
    id: MessageId,
    env: &'r SignedEnvelope,
}

impl Sealed<'_> {
    /// The agent a conduit signed for (`conduit@<agent>` pin), if any.
    fn conduit_for(&self) -> Option<&str> {
        self.env
            .envelope()
            .pins
            .tools
            .iter()
            .find(|t| t.name == "conduit")
            .map(|t| t.version.as_str())
    }
}

fn level_of(c: ClaimLevel) -> Level {
    match c {
        ClaimLevel::Causal => Level::Causal,
        ClaimLevel::Temporal => Level::Temporal,
        ClaimLevel::Indeterminate => Level::Indeterminate,
    }
}

pub(super) fn run(a: &VerdictArgs) -> Result<i32, String> {
    let action = super::span_id(&a.action, "--action")?;
    let injection = a
        .injection
        .as_deref()
        .map(|i| super::span_id(i, "--injection"))
        .transpose()?;
    let max_input = a.limits.max_input_bytes;
    let duties = match &a.duties {
        None => DutyRegistry::default(),
        Some(path) => DutyRegistry::from_json(&read_text(path, max_input)?)
            .map_err(|e| format!("{}: {e}", path.display()))?,
    };
    let dir = audita_record::read_dir(&a.dir, &a.limits.record()).map_err(|e| e.to_string())?;
    let mut policy = Policy::default();
    let (keys, trust) = load_trust(a.trust.as_deref(), dir.keys, &mut policy, max_input)?;
    let record = dir.record;
    let partition = verify_record_with(&record, &keys, &policy, dir.payloads.as_ref());

    // The trace, from certified messages only, in log order.
    let (trace, sealed) = rebuild_trace(&a.dir, &partition)?;
    let absent = |role: &str, s: &str| {
        format!(
            "{role} span {s} is not a certified step of {}",
            a.dir.display()
        )
    };
    let act = sealed
        .get(action.as_str())
        .ok_or_else(|| absent("action", action.as_str()))?;
    let graph = Graph::new(&trace);

    // The adverse outcome: the action's message, at its time.
    let adverse = action_adverse(a, &action, act)?;
    let v = match verdict(&record, &partition, &duties, &adverse) {
        Ok(v) => v,
        Err(e) if e.abstains() => {
            eprintln!("audita trace verdict: abstaining: {e}");
            Verdict::abstained(&partition, &duties, &adverse, &e)
        }
        Err(e) => return Err(e.to_string()),
    };
    if let Some(line) = trust.failure_line() {
        eprintln!("audita trace verdict: {line}");
    }
    let clean = partition.is_clean() && trust.problems().is_empty() && v.status == Status::Graded;
    let mut order: Vec<(u64, &str)> = trace
        .nodes()
        .map(|n| (n.start_ns, n.span_id.as_str()))
        .collect();
    order.sort();
    let who = |s: &Sealed<'_>, span: &str| step_json(&trace, &order, s, span);
    let Some(injection) = injection else {
        let contents = match &a.export {
            Some(f) => sealed_contents(f, &trace, max_input)?,
            None => Contents::new(),
        };
        let p = provenance(&graph, &action, &contents).map_err(|e| e.to_string())?;
        // The claim: the weaker of the candidate's level and the claim of the
        // principal who signed the candidate's step.
        let cand = p.candidate();
        let signer = cand.and_then(|c| sealed.get(c.span.as_str()));
        let finding = signer.and_then(|s| v.principals.get(s.id.author.as_str()));
        let claim = match (cand, finding) {
            (Some(c), Some(f)) => Some(c.level.min(level_of(f.claim.level))),
            (Some(c), None) => Some(c.level),
            (None, _) => None,
        };
        let out = json!({
            "schema": "audita.trace-verdict/v1",
            "claim": claim.map(Level::as_str),
            "action": who(act, action.as_str()),
            "candidate": cand.zip(signer).map(|(c, s)| who(s, c.span.as_str())),
            "inputs": super::inputs::provenance_json(&p, &trace),
            "verdict": serde_json::to_value(&v).map_err(|e| e.to_string())?,
        });
        super::print(&out, a.pretty);
        return Ok(if claim == Some(Level::Causal) && clean {
            0
        } else {
            1
        });
    };
    let inj = sealed
        .get(injection.as_str())
        .ok_or_else(|| absent("injection", injection.as_str()))?;
    let w = witness(&graph, &action, &injection).map_err(|e| e.to_string())?;

    // The claim: the weaker of the memo's witness level and the injection signer's.
    let signer = inj.id.author.as_str();
    let finding = v.principals.get(signer);
    let claim = match finding {
        Some(f) => w.level.min(level_of(f.claim.level)),
        None => w.level,
    };
    let out = json!({
        "schema": "audita.trace-verdict/v1",
        "claim": claim.as_str(),
        "action": who(act, action.as_str()),
        "injection": who(inj, injection.as_str()),
        "injected_principal": {
            "name": signer,
            "culpable": finding.map(|f| f.culpable),
            "rho_lo": finding.map(|f| f.rho_lo),
            "rho_hi": finding.map(|f| f.rho_hi),
            "claim": finding.map(|f| f.claim.level.name()),
            "status": finding.map(|f| serde_json::to_value(f.status).unwrap_or(Value::Null)),
        },
        "witness": super::witness_json(&w),
        "verdict": serde_json::to_value(&v).map_err(|e| e.to_string())?,
    });
    super::print(&out, a.pretty);
    Ok(if claim == Level::Causal && clean {
        0
    } else {
        1
    })
}

/// The content of `export` behind the artifacts of the sealed `trace` only: the
/// sealed hashes decide what the content stands for (every entry is hash-checked).
fn sealed_contents(export: &Path, trace: &Trace, max_input: u64) -> Result<Contents, String> {
    let bytes = crate::inputs::read_input(export, max_input)?;
    let limits = audita_traces::Limits {
        max_bytes: usize::try_from(max_input).unwrap_or(usize::MAX),
        ..audita_traces::Limits::default()
    };
    let (_, all) = parse_otlp_json_with_contents(&bytes, &limits)
        .map_err(|e| format!("{}: {e}", export.display()))?;
    let mut out = Contents::new();
    for n in trace.nodes() {
        for h in n
            .input_parts
            .iter()
            .chain(&n.output_parts)
            .chain(&n.output_hash)
            .chain(
                n.stored
                    .iter()
                    .chain(&n.returned)
                    .filter_map(|s| s.hash.as_ref()),
            )
        {
            if let Some(t) = all.get(h) {
                out.insert(t);
            }
        }
    }
    Ok(out)
}

/// The trace the record's certified messages hold (sealed steps only, in log order),
/// and the sealed message of each span.
fn rebuild_trace<'p>(
    dir: &Path,
    partition: &'p Partition,
) -> Result<(Trace, BTreeMap<String, Sealed<'p>>), String> {
    let mut certified: Vec<_> = partition.certified.iter().collect();
    certified.sort_by_key(|(_, c)| c.leaf_index);
    let mut trace = Trace::new();
    let mut sealed: BTreeMap<String, Sealed<'p>> = BTreeMap::new();
    for (id, c) in certified {
        let text = match &c.envelope.envelope().payload {
            Payload::AgentText { text } | Payload::ExternalInput { text, .. } => text,
            _ => continue,
        };
        let node = match node_from_payload(text) {
            Ok(n) => n,
            Err(PayloadError::NotAStep) => continue,
            Err(e) => return Err(format!("{}: message {}: {e}", dir.display(), id_string(id))),
        };
        let span = node.span_id.to_string();
        trace
            .insert(node)
            .map_err(|n| format!("{}: span {} is sealed twice", dir.display(), n.span_id))?;
        sealed.insert(
            span,
            Sealed {
                id: id.clone(),
                env: &c.envelope,
            },
        );
    }
    if trace.is_empty() {
        return Err(format!(
            "{}: no certified message is a sealed trace step",
            dir.display()
        ));
    }
    Ok((trace, sealed))
}

/// The adverse outcome a trace verdict judges: the action's message, at its time.
fn action_adverse(a: &VerdictArgs, action: &SpanId, act: &Sealed<'_>) -> Result<Adverse, String> {
    let t_star = act.env.envelope().timestamp;
    Adverse::new(AdverseDecl {
        incident: a
            .incident
            .clone()
            .unwrap_or_else(|| format!("trace-{action}")),
        outcome: a.outcome.clone(),
        t_star_ms: t_star,
        severity: None,
        anchors: vec![id_string(&act.id)],
        combine: Combine::Any,
        targets: Vec::new(),
        unrealised: Vec::new(),
        window_start_ms: 0,
        window_end_ms: None,
        delta: 1.0,
        declarer: None,
        facts: Vec::new(),
    })
    .map_err(|e| e.to_string())
}

/// A step of the trace as the verdict names it: span, step number (its place in
/// `order`, the spans by start time), name, agent, its message and signer.
fn step_json(trace: &Trace, order: &[(u64, &str)], s: &Sealed<'_>, span: &str) -> Value {
    let node = trace.nodes().find(|n| n.span_id.as_str() == span);
    json!({
        "span_id": span,
        "step": order.iter().position(|(_, s)| *s == span),
        "name": node.map(|n| n.name.clone()),
        "agent": node.and_then(|n| n.agent.clone()).or_else(|| s.conduit_for().map(str::to_string)),
        "message": id_string(&s.id),
        "signer": s.id.author.as_str(),
        "conduit": s.conduit_for().is_some(),
    })
}
