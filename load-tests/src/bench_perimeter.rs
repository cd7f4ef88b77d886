//! `audita-load bench attribution`, sections `perimeter` and `repair` (issue 19): the
//! paper's two measurements of what the verdict cannot see and what it is good for.
//!
//! - **Perimeter** (`"perimeter"` in the JSON): incidents drawn round-robin over the
//!   seeds and the populations (every named family, then the generator); each is
//!   audited at every off-bus fraction of the sweep, a *draw* being one (incident,
//!   fraction). The off-bus links of a draw come from
//!   `audita_facility::perimeter::off_bus` (nested in the fraction); the record is
//!   signed without them, verified, and `audita-verdict` grades it (reasonable-agent
//!   standard, replay certification on the world, which still runs the side channel).
//!   Reported per fraction against the oracle's causal profile of the unchanged world:
//!   invisible responsibility (share of the true ℓ1 mass not seen in ρ_lo; mean over
//!   incidents whose truth has mass, with a 95% normal CI), over-attribution (ρ_lo mass
//!   on principals whose true ρ is 0: summed, maximum and number of draws above 0 —
//!   the guarantee is exactly 0), grade raised on truly involved principals, the same
//!   two quantities for the culpable profile, and how often the verdict flags the
//!   hidden channel: on draws where responsibility is hidden, the share where a signal
//!   appears that the complete record of the same incident does not raise —
//!   `abstained` (replay refuted a cause the visible citations implied),
//!   `evidence_missing`, a window exit (a boundary artifact), an unexplained relay (a
//!   relay-pinned command consuming no recorded command), or any of them.
//! - **Repair** (`"repair"`): for every adverse draw of every population, the
//!   verdict's one-edit repair (`audita_facility::repair::guided`, and
//!   `guided_by_grade`, which also reads the grades) and two
//!   budget-matched random edits (one edit uniformly from every recorded message and
//!   omitted halt — `Space::AnyMessage` — or only from the edits that change conduct
//!   — `Space::Changing`; each an exact expectation over its space) are applied and the
//!   world re-run. Reported per population, over the named families and over
//!   everything: severity before (½·m·v², J), severity averted by each arm (mean with
//!   95% CI), the share of total severity averted, the adverse rate after each arm (95%
//!   CI), and the ratio of severity averted guided/random with a 95% paired-bootstrap
//!   CI over incidents.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use audita_facility::generator::{self, Params};
use audita_facility::oracle::truth;
use audita_facility::perimeter::{links, off_bus, unexplained_relays, visibility};
use audita_facility::record::{sign_record, sign_record_off_bus, SignedRecord};
use audita_facility::repair::{edits, guided, guided_by_grade, harm_after, Space};
use audita_facility::scenario::{generate, Family, Scenario};
use audita_verdict::Verdict;

use crate::hosted::{findings, hosted_verdict};
use serde_json::{json, Value};

/// The paper's perimeter point: off-bus share and invisible responsibility.
const PAPER_OFF_BUS: (f64, f64) = (0.31, 0.157);
/// The paper's guided/random harm-averted ratio at one edit.
const PAPER_REPAIR_RATIO: f64 = 2.4;

/// Population names: every named family, then the generator.
fn populations() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Family::ALL.iter().map(|f| f.name()).collect();
    v.push("generator");
    v
}

fn draw(pop: &str, seed: u64) -> Scenario {
    match Family::ALL.iter().find(|f| f.name() == pop) {
        Some(f) => generate(*f, seed),
        None => generator::generate(seed, &Params::default()),
    }
}

fn verdict_on(sc: &Scenario, sr: &SignedRecord) -> anyhow::Result<Option<Verdict>> {
    hosted_verdict(sc, &sr.record, sr, "reasonable_agent")
}

/// (ρ_lo profile, culpable profile) over the scenario's principals.
fn seen(sc: &Scenario, v: Option<&Verdict>) -> (BTreeMap<String, f64>, BTreeMap<String, f64>) {
    let zero: BTreeMap<String, f64> = sc.principals().into_iter().map(|p| (p, 0.0)).collect();
    let (mut inv, mut culp) = (zero.clone(), zero);
    if let Some(v) = v {
        for r in v.rows() {
            culp.insert(r.principal.clone(), if r.culpable { r.rho_lo } else { 0.0 });
            inv.insert(r.principal, r.rho_lo);
        }
    }
    (inv, culp)
}

const SIGNALS: [&str; 4] = [
    "abstained",
    "evidence_missing",
    "window_exit",
    "unexplained_relay",
];

/// The signals a verdict (and its record) raises.
fn signals(v: Option<&Verdict>, sr: &SignedRecord) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    if let Some(v) = v {
        for f in v.principals.values() {
            for flag in &f.flags {
                match flag.name() {
                    "abstained" => out.insert("abstained"),
                    "evidence_missing" => out.insert("evidence_missing"),
                    _ => false,
                };
            }
            if !f.claim.boundary.is_empty() {
                out.insert("window_exit");
            }
        }
        if !v.claim.boundary.is_empty() {
            out.insert("window_exit");
        }
    }
    if !unexplained_relays(&sr.envelopes).is_empty() {
        out.insert("unexplained_relay");
    }
    out
}

fn mean_ci(xs: &[f64]) -> (f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (m, m, m);
    }
    let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0);
    let h = 1.96 * (var / n).sqrt();
    (m, m - h, m + h)
}

fn r3(x: f64) -> f64 {
    // `+ 0.0` turns a rounded -0.0 into 0.0.
    (x * 1000.0).round() / 1000.0 + 0.0
}

#[derive(Default)]
struct FractionAcc {
    draws: u64,
    links: u64,
    off: u64,
    invisible: Vec<f64>,
    over_sum: f64,
    over_max: f64,
    over_draws: u64,
    raised: Vec<f64>,
    culp_invisible: Vec<f64>,
    culp_over_sum: f64,
    culp_over_draws: u64,
    hidden: u64,
    flagged: BTreeMap<&'static str, u64>,
    any: u64,
}

/// The off-bus sweep. `incidents` incidents, each audited at every fraction.
pub(crate) fn perimeter(
    seeds: &[u64],
    incidents: u64,
    fractions: &[f64],
    tick: &dyn Fn(),
) -> anyhow::Result<Value> {
    let pops = populations();
    let ns = seeds.len().max(1) as u64;
    let np = pops.len() as u64;
    let mut acc: Vec<FractionAcc> = fractions.iter().map(|_| FractionAcc::default()).collect();
    let mut offenders: Vec<Value> = Vec::new();
    for j in 0..incidents {
        let seed = seeds.get((j % ns) as usize).copied().unwrap_or(0);
        let pi = (j / ns) % np;
        let pop = pops[pi as usize];
        let idx = j / (ns * np);
        let sc = draw(pop, seed * 1_000_000 + idx);
        let t = truth(&sc.spec)?;
        let mass: f64 = t.causal.values().sum();
        let culp_mass: f64 = t.culpable.values().sum();
        let n_links = links(&sc.spec).len() as u64;
        let complete = sign_record(&sc)?;
        let base = signals(verdict_on(&sc, &complete)?.as_ref(), &complete);
        for (k, &f) in fractions.iter().enumerate() {
            let off = off_bus(&sc.spec, f, sc.seed ^ (pi << 40));
            let sr = sign_record_off_bus(&sc, &off)?;
            let v = verdict_on(&sc, &sr)?;
            let (inv, culp) = seen(&sc, v.as_ref());
            let vis = visibility(&t.causal, &inv);
            let cvis = visibility(&t.culpable, &culp);
            let a = &mut acc[k];
            a.draws += 1;
            a.links += n_links;
            a.off += off.len() as u64;
            if mass > 0.0 {
                a.invisible.push(vis.invisible);
                a.raised.push(vis.raised);
            }
            if culp_mass > 0.0 {
                a.culp_invisible.push(cvis.invisible);
            }
            a.over_sum += vis.over_attribution;
            a.over_max = a.over_max.max(vis.over_attribution);
            if vis.over_attribution != 0.0 {
                a.over_draws += 1;
                offenders.push(json!({"population": pop, "seed": sc.seed, "fraction": f,
                    "over_attribution": vis.over_attribution, "seen": &inv, "truth": &t.causal}));
            }
            a.culp_over_sum += cvis.over_attribution;
            a.culp_over_draws += u64::from(cvis.over_attribution != 0.0);
            if !off.is_empty() && vis.invisible > 0.0 {
                a.hidden += 1;
                let now = signals(v.as_ref(), &sr);
                let new: Vec<&'static str> = now.difference(&base).copied().collect();
                for s in &new {
                    *a.flagged.entry(*s).or_default() += 1;
                }
                a.any += u64::from(!new.is_empty());
            }
        }
        tick();
    }
    let rows: Vec<Value> = fractions
        .iter()
        .zip(&acc)
        .map(|(f, a)| {
            let (m, lo, hi) = mean_ci(&a.invisible);
            let (cm, clo, chi) = mean_ci(&a.culp_invisible);
            let rate = |x: u64| r3(x as f64 / a.hidden.max(1) as f64);
            let mut flagged: serde_json::Map<String, Value> = SIGNALS
                .iter()
                .map(|s| {
                    (
                        s.to_string(),
                        json!(rate(a.flagged.get(s).copied().unwrap_or(0))),
                    )
                })
                .collect();
            flagged.insert("any".into(), json!(rate(a.any)));
            json!({
                "fraction": f,
                "realised_fraction": r3(a.off as f64 / a.links.max(1) as f64),
                "draws": a.draws,
                "with_mass": a.invisible.len(),
                "invisible": r3(m), "invisible_ci": [r3(lo), r3(hi)],
                "over_attribution_sum": a.over_sum, "over_attribution_max": a.over_max,
                "over_attribution_draws": a.over_draws,
                "raised": r3(mean_ci(&a.raised).0),
                "culpable_invisible": r3(cm), "culpable_invisible_ci": [r3(clo), r3(chi)],
                "culpable_over_attribution": r3(a.culp_over_sum / a.draws.max(1) as f64),
                "culpable_over_attribution_draws": a.culp_over_draws,
                "hidden_draws": a.hidden,
                "flagged": flagged,
            })
        })
        .collect();
    let draws: u64 = acc.iter().map(|a| a.draws).sum();
    let over_draws: u64 = acc.iter().map(|a| a.over_draws).sum();
    Ok(json!({
        "incidents": incidents,
        "draws": draws,
        "over_attribution_draws": over_draws,
        "over_attribution_offenders": offenders,
        "fractions": rows,
        "paper": {"off_bus": PAPER_OFF_BUS.0, "invisible": PAPER_OFF_BUS.1, "over_attribution": 0.0, "draws": 1200},
    }))
}

/// The arms of the repair comparison: the verdict's edit (of its top culprit; with its
/// grades read), one edit uniformly from every recorded message (and omitted halt),
/// one edit uniformly from the edits that change conduct.
const ARMS: [&str; 4] = ["guided", "guided_by_grade", "random", "random_changing"];

/// One repaired incident: severity before (J); per arm, severity after (J; expected
/// over the edit space for the random arms) and adverse after (0/1; expected rate for
/// the random arms); whether the verdict implied an edit.
#[derive(Debug, Clone, Copy)]
struct Repaired {
    before: f64,
    after: [f64; 4],
    adverse: [f64; 4],
    implied: bool,
}

/// splitmix64: a small deterministic stream for the bootstrap.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Ratio of severity averted, arm `num` over arm `den`, with a 95% paired-bootstrap CI.
fn ratio_ci(rs: &[Repaired], num: usize, den: usize) -> (Option<f64>, Option<f64>, Option<f64>) {
    let ratio = |sel: &mut dyn Iterator<Item = usize>| {
        let (mut a, mut b) = (0.0, 0.0);
        for i in sel {
            a += rs[i].before - rs[i].after[num];
            b += rs[i].before - rs[i].after[den];
        }
        (b > 0.0).then(|| a / b)
    };
    let point = ratio(&mut (0..rs.len()));
    let mut boots: Vec<f64> = Vec::new();
    let mut st = 0x1995_u64 ^ rs.len() as u64;
    for _ in 0..if rs.is_empty() { 0 } else { 2000 } {
        let n = rs.len() as u64;
        let picks: Vec<usize> = (0..n).map(|_| (splitmix(&mut st) % n) as usize).collect();
        if let Some(r) = ratio(&mut picks.into_iter()) {
            boots.push(r);
        }
    }
    boots.sort_by(f64::total_cmp);
    let q = |p: f64| {
        boots
            .get(((boots.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .map(r3)
    };
    (point.map(r3), q(0.025), q(0.975))
}

fn summarise(rs: &[Repaired]) -> Value {
    let total: f64 = rs.iter().map(|r| r.before).sum();
    let mut out = serde_json::Map::new();
    out.insert("n".into(), json!(rs.len()));
    out.insert(
        "implied_edit_rate".into(),
        json!(r3(
            rs.iter().filter(|r| r.implied).count() as f64 / rs.len().max(1) as f64
        )),
    );
    out.insert(
        "severity_before_j".into(),
        json!(r3(total / rs.len().max(1) as f64)),
    );
    for (k, arm) in ARMS.iter().enumerate() {
        let averted: Vec<f64> = rs.iter().map(|r| r.before - r.after[k]).collect();
        let (m, lo, hi) = mean_ci(&averted);
        let (am, alo, ahi) = mean_ci(&rs.iter().map(|r| r.adverse[k]).collect::<Vec<_>>());
        let share = if total > 0.0 {
            r3(averted.iter().sum::<f64>() / total)
        } else {
            0.0
        };
        let mut v = json!({
            "averted_j": r3(m), "averted_ci": [r3(lo), r3(hi)], "share_averted": share,
            "adverse_after": r3(am), "adverse_after_ci": [r3(alo.max(0.0)), r3(ahi.min(1.0))],
        });
        if k >= 2 {
            for (num, key) in [(0, "guided"), (1, "guided_by_grade")] {
                let (p, lo, hi) = ratio_ci(rs, num, k);
                v[format!("{key}_ratio")] = json!(p);
                v[format!("{key}_ratio_ci")] = json!([lo, hi]);
            }
        }
        out.insert(arm.to_string(), v);
    }
    Value::Object(out)
}

/// Verdict-guided vs budget-matched random repair, `draws` per population per seed.
pub(crate) fn repair(seeds: &[u64], draws: u64, tick: &dyn Fn()) -> anyhow::Result<Value> {
    let mut per: BTreeMap<&'static str, Vec<Repaired>> = BTreeMap::new();
    for pop in populations() {
        for &seed in seeds {
            for i in 0..draws {
                let sc = draw(pop, seed * 1_000_000 + i);
                tick();
                let h0 = harm_after(&sc.spec, None);
                if !h0.adverse {
                    continue;
                }
                let sr = sign_record(&sc)?;
                let Some(v) = verdict_on(&sc, &sr)? else {
                    continue;
                };
                let before = h0.severity_mj as f64 / 1000.0;
                let culprits = findings(&v, true);
                let edit = guided(&sc.spec, &sr, &culprits);
                let hg = harm_after(&sc.spec, edit);
                let graded = guided_by_grade(&sc.spec, &sr, &culprits, &findings(&v, false));
                let hb = harm_after(&sc.spec, graded);
                let sev = |h: audita_facility::repair::Harm| h.severity_mj as f64 / 1000.0;
                let bad = |h: audita_facility::repair::Harm| f64::from(u8::from(h.adverse));
                let mut after = [sev(hg), sev(hb), before, before];
                let mut adverse = [bad(hg), bad(hb), 1.0, 1.0];
                for (k, space) in [(2, Space::AnyMessage), (3, Space::Changing)] {
                    let es = edits(&sc.spec, space);
                    if es.is_empty() {
                        continue;
                    }
                    let (mut sev, mut adv) = (0.0, 0.0);
                    for e in &es {
                        let h = harm_after(&sc.spec, Some(*e));
                        sev += h.severity_mj as f64 / 1000.0;
                        adv += f64::from(u8::from(h.adverse));
                    }
                    after[k] = sev / es.len() as f64;
                    adverse[k] = adv / es.len() as f64;
                }
                per.entry(pop).or_default().push(Repaired {
                    before,
                    after,
                    adverse,
                    implied: edit.is_some(),
                });
            }
        }
    }
    let mut out = serde_json::Map::new();
    let mut named = Vec::new();
    let mut all = Vec::new();
    for (pop, rs) in &per {
        out.insert(pop.to_string(), summarise(rs));
        if *pop != "generator" {
            named.extend_from_slice(rs);
        }
        all.extend_from_slice(rs);
    }
    Ok(json!({
        "draws_per_seed": draws,
        "populations": out,
        "named_families": summarise(&named),
        "all": summarise(&all),
        "paper": {"ratio": PAPER_REPAIR_RATIO},
    }))
}

/// Markdown heading of the attribution-accuracy section (`bench::write_section`).
const ACCURACY_HEAD: &str = "## Attribution accuracy";
/// Markdown heading of the perimeter section.
pub(crate) const PERIMETER_HEAD: &str = "## The record's perimeter: off-bus coordination";
/// Markdown heading of the repair section.
pub(crate) const REPAIR_HEAD: &str = "## Verdict-guided repair";

const REPRODUCE: &str =
    "cargo run --release -p audita-load-tests --bin audita-load -- bench attribution --write --sections perimeter,repair";

pub(crate) fn markdown_perimeter(r: &Value) -> String {
    let p = &r["perimeter"];
    let mut s = format!("{PERIMETER_HEAD}\n\n");
    s.push_str(&format!(
        "Reproduce: `{REPRODUCE}` (`--perimeter-incidents`, `--fractions`, `--seeds` size the \
         sweep; `--json` prints the object, whose `perimeter` key holds every number below). \
         Generated with {} incidents (round-robin over the seeds {} and the populations: every \
         named family, then the generator), each audited at every off-bus fraction: {} draws. \
         A link is a command addressed to another principal; an off-bus link still acts in the \
         world, but neither it nor any citation of it is on the bus. Truth is the oracle's causal \
         profile of the unchanged world; the verdict's profile is its ρ_lo. Invisible = share of \
         the true ℓ1 mass the verdict does not see (mean over incidents whose truth has mass, 95% \
         CI); over-attribution = ρ_lo mass on principals whose true ρ is 0, summed over draws \
         (maximum and number of draws above 0 in brackets); raised = ρ_lo above the truth on \
         truly involved principals. Signals count, among draws whose off-bus links hide \
         responsibility, those where the verdict raises a signal the complete record of the same \
         incident does not.\n\n",
        p["incidents"], r["seeds"], p["draws"]
    ));
    s.push_str("| Off-bus (target / realised) | draws | invisible (95% CI) | over-attribution Σ (max, draws > 0) | raised | culpable: invisible / over-attribution (draws > 0) | hidden draws | abstained | evidence_missing | window exit | unexplained relay | any signal |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in p["fractions"].as_array().into_iter().flatten() {
        let f = |k: &str| row[k].as_f64().unwrap_or(0.0);
        let g = |k: &str| row["flagged"][k].as_f64().unwrap_or(0.0);
        s.push_str(&format!(
            "| {:.2} / {:.3} | {} | {:.3} [{:.3}, {:.3}] | {:.3} ({:.3}, {}) | {:.3} | {:.3} / {:.3} ({}) | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            f("fraction"),
            f("realised_fraction"),
            row["draws"],
            f("invisible"),
            row["invisible_ci"][0].as_f64().unwrap_or(0.0),
            row["invisible_ci"][1].as_f64().unwrap_or(0.0),
            f("over_attribution_sum"),
            f("over_attribution_max"),
            row["over_attribution_draws"],
            f("raised"),
            f("culpable_invisible"),
            f("culpable_over_attribution"),
            row["culpable_over_attribution_draws"],
            row["hidden_draws"],
            g("abstained"),
            g("evidence_missing"),
            g("window_exit"),
            g("unexplained_relay"),
            g("any"),
        ));
    }
    s.push_str(
        "\nReading the table. Replay certification runs on the world, which still carries the \
         side channel, so a cause the shrunken citations would invent is refuted: a visible \
         co-cause whose partner went off-bus is proposed as but-for and not confirmed \
         (`abstained`), and ρ_lo never exceeds the truth (raised = 0, over-attribution = 0). What \
         the verdict loses is upstream: an off-bus link hides every principal above it, which in \
         this register (mostly delegation chains) is more than one principal per link. The \
         culpable profile moves rather than grows: the receiver of an off-bus demand issued, on \
         the record, an uncited demand outside the envelope, so it is culpable on its own \
         certified message (groundedness holds) where the truth names the sender — the \
         verdict's \"on the certified evidence\" clause in numbers; it never reaches a principal \
         whose true causal ρ is 0 (culpability needs ρ_lo > 0). Nothing on the bus names an \
         off-bus message (no seal, citation or receipt), so `evidence_missing` and window exits \
         stay at 0 by construction; the trace it leaves is a relay that consumes no recorded \
         command (unexplained relay: `audita_facility::perimeter::unexplained_relays`, read from \
         the signed envelopes alone) and replay refutations. An adversary of the guarantee \
         goes further than this sweep: a consumer that reads an *on-bus* message out of band \
         and does not cite it can make a non-minimal cause look minimal to the record's model \
         (`load-tests/tests/perimeter.rs`, \
         `hidden_citation_of_an_on_bus_message_never_credits_an_absorbed_principal`: an \
         absorbed principal, true ρ = 0, was credited ρ_lo = ½). Certification now re-checks \
         minimality by replay (`audita_causal::certify`), and that construction abstains.\n",
    );
    s.push_str(&format!(
        "\nPaper: with {:.0}% of coordination off-bus, {:.3} of responsibility is invisible; \
         over-attribution 0.000 over 1,200 draws.\n\n\
         ![Invisible responsibility vs off-bus fraction](benchmarks/attribution_perimeter.svg)\n",
        PAPER_OFF_BUS.0 * 100.0,
        PAPER_OFF_BUS.1
    ));
    s
}

pub(crate) fn markdown_repair(r: &Value) -> String {
    let p = &r["repair"];
    let mut s = format!("{REPAIR_HEAD}\n\n");
    s.push_str(&format!(
        "Reproduce: `{REPRODUCE}` (`--repair-draws` draws per population per seed; the \
         `repair` key of `--json`). Every adverse draw ({} per population per seed, seeds {}) is \
         repaired with one edit and the world re-run. **Guided**: the verdict's culpable finding \
         of highest ρ_lo gives the edit — its witnessing message replaced by the duty-compliant \
         counterpart (speed clamped to the envelope, parameter clamped into range; faithful \
         relays forward the new content), or the omitted halt inserted. **Guided, grades read**: \
         one edit can avert only a but-for cause, so a culprit with ρ_lo = 1 first; when every \
         culprit is overdetermined (ρ_lo < 1), an involved finding with ρ_lo = 1 whose own \
         message breaks the literal (specification) envelope — a relay on the trunk. **Random**: one edit \
         drawn uniformly from every recorded message of the incident and every omitted \
         triggered halt, with the same operators (an edit of an already compliant message is \
         wasted, as it is for a repairer without a verdict). **Random, changing edits only**: \
         one edit drawn uniformly from the edits that change conduct (commands whose \
         counterpart differs, omitted halts) — a control that already knows which messages \
         breach an envelope. Random arms are exact expectations over their space. Severity is \
         ½·m·v² at the violating tick (J; 0 for quality outcomes, which count in the adverse \
         rate only). CIs are 95% (normal over incidents; ratios of total severity averted by a \
         paired bootstrap over incidents, 2,000 resamples).\n\n",
        p["draws_per_seed"], r["seeds"]
    ));
    s.push_str("| Population | n | verdict implies an edit | severity before (J) | share averted: guided / grades read / random / random changing | averted J, guided (95% CI) | averted J, random (95% CI) | adverse after: guided / grades read / random / random changing | guided ÷ random (95% CI) | guided ÷ random changing | grades read ÷ random | grades read ÷ random changing |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut rows: Vec<(String, &Value)> = p["populations"]
        .as_object()
        .map(|o| o.iter().map(|(k, v)| (k.clone(), v)).collect())
        .unwrap_or_default();
    rows.push(("**named families**".into(), &p["named_families"]));
    rows.push(("**all**".into(), &p["all"]));
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let ratio = |v: &Value, key: &str| match v[format!("{key}_ratio")].as_f64() {
        Some(x) => {
            let ci = |i: usize| {
                v[format!("{key}_ratio_ci")][i]
                    .as_f64()
                    .map(|x| format!("{x:.2}"))
                    .unwrap_or_else(|| "–".into())
            };
            format!("{x:.2} [{}, {}]", ci(0), ci(1))
        }
        None => "– (averts nothing)".into(),
    };
    for (name, v) in rows {
        let arm = |a: &str, k: &str| num(&v[a][k]);
        let ci = |a: &str, i: usize| num(&v[a]["averted_ci"][i]);
        s.push_str(&format!(
            "| {name} | {} | {:.3} | {:.1} | {:.3} / {:.3} / {:.3} / {:.3} | {:.1} [{:.1}, {:.1}] | {:.1} [{:.1}, {:.1}] | {:.3} / {:.3} / {:.3} / {:.3} | {} | {} | {} | {} |\n",
            v["n"],
            num(&v["implied_edit_rate"]),
            num(&v["severity_before_j"]),
            arm("guided", "share_averted"),
            arm("guided_by_grade", "share_averted"),
            arm("random", "share_averted"),
            arm("random_changing", "share_averted"),
            arm("guided", "averted_j"),
            ci("guided", 0),
            ci("guided", 1),
            arm("random", "averted_j"),
            ci("random", 0),
            ci("random", 1),
            arm("guided", "adverse_after"),
            arm("guided_by_grade", "adverse_after"),
            arm("random", "adverse_after"),
            arm("random_changing", "adverse_after"),
            ratio(&v["random"], "guided"),
            ratio(&v["random_changing"], "guided"),
            ratio(&v["random"], "guided_by_grade"),
            ratio(&v["random_changing"], "guided_by_grade"),
        ));
    }
    s.push_str(
        "\nReading the table. Against the uninformed random fix the verdict's edit wins most \
         where an incident has many compliant messages to waste an edit on (omission, startup, \
         preemption, the conduct attacks) and ties on the trivial control. Against a random fix \
         that already knows which messages breach an envelope it is level, except where a \
         breaching message is off the production path (preemption's vetoed demand, the inert \
         twin): in this world a demand travels one relay trunk, and clamping any link of it \
         averts. Redundancy is where the plain rule fails: both culprits are overdetermined \
         (ρ = ½), so fixing either leaves the twin's demand on the trunk. The grades say so \
         (ρ = 1/|X|: |X| edits are needed), and reading them sends the one edit to a but-for \
         link, which averts every redundancy draw; the generator's disjunctions and \
         multi-hazard conjunctions fail the plain rule the same way.\n",
    );
    s.push_str(&format!(
        "\nPaper: verdict-guided repair averts {PAPER_REPAIR_RATIO}× the physical harm of a \
         budget-matched random fix at one edit.\n\n\
         ![Share of harm averted, guided vs random](benchmarks/attribution_repair.svg)\n"
    ));
    s
}

/// Replaces the `head` section of `doc` (up to the next `## `), or inserts it after
/// the first section of `after` that `doc` holds (at the end when it holds none).
pub(crate) fn replace_section(doc: &str, head: &str, after: &[&str], section: &str) -> String {
    let section = format!("{}\n", section.trim_end_matches('\n'));
    let end_of = |start: usize, skip: usize| {
        doc[start + skip..]
            .find("\n## ")
            .map(|i| start + skip + i + 1)
            .unwrap_or(doc.len())
    };
    if let Some(start) = doc.find(&format!("{head}\n")) {
        let end = end_of(start, head.len());
        let sep = if end < doc.len() { "\n" } else { "" };
        return format!("{}{section}{sep}{}", &doc[..start], &doc[end..]);
    }
    let at = match after.iter().find_map(|h| doc.find(&format!("{h}\n"))) {
        Some(start) => end_of(start, 3),
        None => doc.len(),
    };
    if at < doc.len() {
        format!("{}{section}\n{}", &doc[..at], &doc[at..])
    } else {
        let body = doc.trim_end_matches('\n');
        if body.is_empty() {
            format!("# Benchmarks\n\n{section}")
        } else {
            format!("{body}\n\n{section}")
        }
    }
}

/// Writes the sections present in `r` into `path`, with their SVGs and JSON next to it.
pub(crate) fn write_sections(path: &Path, r: &Value) -> anyhow::Result<()> {
    let mut doc = std::fs::read_to_string(path).unwrap_or_default();
    let dir = path
        .parent()
        .map(|p| p.join("benchmarks"))
        .unwrap_or_else(|| "benchmarks".into());
    std::fs::create_dir_all(&dir)?;
    if r.get("perimeter").is_some() {
        doc = replace_section(
            &doc,
            PERIMETER_HEAD,
            &[ACCURACY_HEAD],
            &markdown_perimeter(r),
        );
        std::fs::write(dir.join("attribution_perimeter.svg"), perimeter_svg(r))?;
        std::fs::write(
            dir.join("attribution_perimeter.json"),
            serde_json::to_string_pretty(&r["perimeter"])?,
        )?;
    }
    if r.get("repair").is_some() {
        doc = replace_section(
            &doc,
            REPAIR_HEAD,
            &[PERIMETER_HEAD, ACCURACY_HEAD],
            &markdown_repair(r),
        );
        std::fs::write(dir.join("attribution_repair.svg"), repair_svg(r))?;
        std::fs::write(
            dir.join("attribution_repair.json"),
            serde_json::to_string_pretty(&r["repair"])?,
        )?;
    }
    std::fs::write(path, doc)?;
    Ok(())
}

fn perimeter_svg(r: &Value) -> String {
    let rows: Vec<&Value> = r["perimeter"]["fractions"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let (w, h, left, top, pw, ph) = (660.0, 340.0, 60.0, 34.0, 560.0, 230.0);
    let xmax = rows
        .iter()
        .filter_map(|v| v["realised_fraction"].as_f64())
        .fold(0.5_f64, f64::max);
    let ymax = rows
        .iter()
        .filter_map(|v| v["invisible_ci"][1].as_f64())
        .fold(0.5_f64, f64::max);
    let xy = |x: f64, y: f64| (left + pw * x / xmax, top + ph * (1.0 - y / ymax));
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">Invisible responsibility and over-attribution vs off-bus share of links</text>\n"
    );
    for i in 0..=5 {
        let v = ymax * i as f64 / 5.0;
        let (_, y) = xy(0.0, v);
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>\n",
            left + pw,
            left - 4.0,
            y + 4.0
        ));
    }
    for i in 0..=5 {
        let v = xmax * i as f64 / 5.0;
        let (x, _) = xy(v, 0.0);
        s.push_str(&format!(
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{v:.2}</text>\n",
            top + ph + 15.0
        ));
    }
    let series = |key: &str| -> Vec<(f64, f64)> {
        rows.iter()
            .map(|v| {
                let y = if key == "any" {
                    v["flagged"]["any"].as_f64().unwrap_or(0.0)
                } else {
                    v[key].as_f64().unwrap_or(0.0)
                };
                (v["realised_fraction"].as_f64().unwrap_or(0.0), y)
            })
            .collect()
    };
    let line = |pts: &[(f64, f64)], color: &str, dash: &str| {
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| {
                let (a, b) = xy(*x, *y);
                format!("{a:.1},{b:.1}")
            })
            .collect();
        format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\" points=\"{}\"/>\n",
            p.join(" ")
        )
    };
    s.push_str(&line(&series("invisible"), "#1b7f79", "none"));
    for v in &rows {
        let x = v["realised_fraction"].as_f64().unwrap_or(0.0);
        let (a, b0) = xy(x, v["invisible_ci"][0].as_f64().unwrap_or(0.0));
        let (_, b1) = xy(x, v["invisible_ci"][1].as_f64().unwrap_or(0.0));
        s.push_str(&format!(
            "<line x1=\"{a:.1}\" x2=\"{a:.1}\" y1=\"{b0:.1}\" y2=\"{b1:.1}\" stroke=\"#1b7f79\"/>\n"
        ));
    }
    let over: Vec<(f64, f64)> = rows
        .iter()
        .map(|v| {
            let n = v["draws"].as_f64().unwrap_or(1.0).max(1.0);
            (
                v["realised_fraction"].as_f64().unwrap_or(0.0),
                v["over_attribution_sum"].as_f64().unwrap_or(0.0) / n,
            )
        })
        .collect();
    s.push_str(&line(&over, "#b84a4a", "none"));
    s.push_str(&line(&series("raised"), "#8a5fb0", "4 3"));
    let (px, py) = xy(PAPER_OFF_BUS.0, PAPER_OFF_BUS.1);
    s.push_str(&format!(
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"8\" height=\"8\" fill=\"#d08c2e\" transform=\"rotate(45 {px:.1} {py:.1})\"><title>paper: {} invisible at {} off-bus</title></rect>\n",
        px - 4.0,
        py - 4.0,
        PAPER_OFF_BUS.1,
        PAPER_OFF_BUS.0
    ));
    let ly = top + ph + 36.0;
    s.push_str(&format!(
        "<text x=\"{left}\" y=\"{ly:.1}\" fill=\"#1b7f79\">invisible responsibility (95% CI)</text>\
         <text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"#b84a4a\">over-attribution (mean per draw)</text>\
         <text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"#8a5fb0\">raised on involved</text>\
         <text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"#d08c2e\">◆ paper</text>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">realised off-bus share of principal-to-principal links</text>\n</svg>\n",
        left + 210.0,
        left + 400.0,
        left + 510.0,
        left + pw / 2.0,
        top + ph + 52.0
    ));
    s
}

fn repair_svg(r: &Value) -> String {
    let p = &r["repair"];
    let mut groups: Vec<(String, &Value)> = p["populations"]
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| v["severity_before_j"].as_f64().unwrap_or(0.0) > 0.0)
                .map(|(k, v)| (k.clone(), v))
                .collect()
        })
        .unwrap_or_default();
    groups.push(("all".into(), &p["all"]));
    let (w, h, left, top, ph) = (900.0, 370.0, 50.0, 30.0, 220.0);
    let gw = (w - left - 20.0) / groups.len().max(1) as f64;
    let bw = gw / 5.0;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"10\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">Share of harm (½·m·v²) averted by one edit: verdict-guided vs budget-matched random (95% CI)</text>\n"
    );
    let y = |v: f64| top + ph * (1.0 - v.clamp(0.0, 1.0));
    for i in 0..=4 {
        let v = i as f64 / 4.0;
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>\n",
            w - 20.0,
            y(v),
            y(v),
            left - 4.0,
            y(v) + 4.0
        ));
    }
    let colors = ["#1b7f79", "#7fb8b4", "#d08c2e", "#e8c48a"];
    for (gi, (name, v)) in groups.iter().enumerate() {
        let gx = left + gi as f64 * gw;
        let before = v["severity_before_j"].as_f64().unwrap_or(0.0).max(1e-9);
        for (bi, arm) in ARMS.iter().enumerate() {
            let m = v[*arm]["averted_j"].as_f64().unwrap_or(0.0) / before;
            let lo = v[*arm]["averted_ci"][0].as_f64().unwrap_or(0.0) / before;
            let hi = v[*arm]["averted_ci"][1].as_f64().unwrap_or(0.0) / before;
            let x = gx + (bi as f64 + 0.5) * bw;
            let (top_y, base) = (y(m), y(0.0));
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{top_y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{name} {arm}: {m:.3} [{lo:.3}, {hi:.3}]</title></rect>\n",
                bw * 0.9,
                (base - top_y).max(0.0),
                colors[bi]
            ));
            let cx = x + bw * 0.45;
            s.push_str(&format!(
                "<line x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\n",
                y(lo),
                y(hi)
            ));
        }
        let lx = gx + gw / 2.0;
        let ly = top + ph + 14.0;
        s.push_str(&format!(
            "<text x=\"{lx:.1}\" y=\"{ly:.1}\" text-anchor=\"end\" transform=\"rotate(-35 {lx:.1} {ly:.1})\">{name}</text>\n"
        ));
    }
    let ly = h - 12.0;
    let labels = [
        "verdict-guided",
        "guided, grades read",
        "random (any message)",
        "random (changing edits only)",
    ];
    for (i, l) in labels.iter().enumerate() {
        let x = left + i as f64 * 190.0;
        s.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{ly:.1}\">{l}</text>\n",
            ly - 9.0,
            colors[i],
            x + 14.0
        ));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_go_after_attribution_accuracy_and_are_replaced_in_place() {
        let doc = "# Benchmarks\n\n## Attribution accuracy\n\nacc\n\n## Evidence layer\n\nkeep\n";
        let after = [PERIMETER_HEAD, ACCURACY_HEAD];
        let once = replace_section(doc, REPAIR_HEAD, &after, &format!("{REPAIR_HEAD}\n\nv1\n"));
        assert!(once.contains("acc\n\n## Verdict-guided repair\n\nv1\n\n## Evidence layer"));
        let with_p = replace_section(
            &once,
            PERIMETER_HEAD,
            &[ACCURACY_HEAD],
            "## The record's perimeter: off-bus coordination\n\np\n",
        );
        assert!(with_p.contains("acc\n\n## The record's perimeter: off-bus coordination\n\np\n\n## Verdict-guided repair"));
        let twice = replace_section(
            &once,
            REPAIR_HEAD,
            &after,
            &format!("{REPAIR_HEAD}\n\nv2\n"),
        );
        assert_eq!(twice.matches(REPAIR_HEAD).count(), 1);
        assert!(twice.contains("v2") && !twice.contains("v1") && twice.contains("keep\n"));
    }

    #[test]
    fn small_sweep_and_repair_produce_their_tables() {
        let seeds = [0u64];
        let r = json!({
            "seeds": seeds,
            "perimeter": perimeter(&seeds, 12, &[0.0, 0.5], &|| {}).unwrap(),
            "repair": repair(&seeds, 1, &|| {}).unwrap(),
        });
        assert_eq!(r["perimeter"]["over_attribution_draws"].as_u64(), Some(0));
        assert!(markdown_perimeter(&r).contains("| 0.50 /"));
        assert!(markdown_repair(&r).contains("| trivial | 1 |"));
        assert!(perimeter_svg(&r).ends_with("</svg>\n"));
        assert!(repair_svg(&r).ends_with("</svg>\n"));
    }
}
