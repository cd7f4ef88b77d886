//! `audita-load bench attribution`: the attribution-accuracy evaluation of issue 4.
//!
//! Runs every scenario family of the facility register and the parameterised
//! generator with every method, and prints (with `--json`) one object
//!
//! ```text
//! {"families": {FAMILY: {METHOD: {"error": e, "error_causal": c, "exact": x, "n": n, "sd": s}}},
//!  "no_cause": {METHOD: {"manufactured_rate": r, "n": n}},
//!  "record_attacks": {ATTACK: {"detected_rate": r, "certified_invariant_rate": r, "n": n}},
//!  "conduct_attacks": {FAMILY: {"involvement_raised_rate", "victim_culpability_zero_rate",
//!                               "certificate_names_attacker_rate", "n"}},
//!  "duty_sensitivity": {STANDARD: {"culpable_changed_rate", "mean_shift", "causal_invariant_rate", "n"}},
//!  "wallclock_us": {K: {"engine": us, "oracle": us, "n": n}},
//!  "hosted_replay": {NOISE: {"certified_rate", "mean_action_match", "profile_exact_rate", "n"}},
//!  "generator": {"draws": n, "adverse_rate": r}, "oracle_agreement": r, "judges": STATUS,
//!  "perimeter": {...}, "repair": {...}}
//! ```
//!
//! `--sections` picks what runs: `accuracy` (everything above), `perimeter` and
//! `repair` (issue 19; see `bench_perimeter`, which writes its own two sections of
//! BENCHMARKS.md).
//!
//! Families: `redundancy`, `inert_twin`, `preemption`, `omission`, `chain`,
//! `unexpected_startup`, `no_cause`, `trivial`, `conditioning`, `inevitability_rigging`,
//! `scapegoat`, `generator`. Methods: `audita` (the full pipeline: the scenario's
//! signed, sealed record is verified and `audita-verdict` computes the verdict under the
//! reasonable-agent standard, certifying causes by replay on the pinned world;
//! culpable profile = ρ_lo where the finding is culpable), `audita_causal_only` (the
//! same verdict's ρ_lo, duty layer ablated), `single_site`, `shapley`, `anomaly`,
//! `judge_all_at_once`, `judge_step_wise`, `judge_binary_search` (run only with
//! `AUDITA_JUDGE_ENDPOINT`).
//!
//! Responsibility error (see `audita_baselines::metrics`): total-variation distance
//! between unit-mass normalised profiles over the principals, i.e. ½·ℓ1. `error` is
//! against the **culpable** profile (causal ρ restricted to principals in breach; a
//! conduit is never in breach, so conduits enter with 0); `error_causal` is against the
//! **causal** profile with conduit-flagged principals set to 0 (originating
//! responsibility). Truth comes from exact re-execution of the world by the facility's
//! analytic oracle; `oracle_agreement` is the fraction of draws where it equals the
//! family's planted truth.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use audita_baselines::{anomaly, judge, metrics, shapley, single_site, FacilityIncident, Profile};
use audita_causal::certify::{attribute_certified, CertifyMode};
use audita_causal::{CertifyConfig, Model};
use audita_evidence::verify_record;
use audita_facility::conduct::certificate;
use audita_facility::generator::{self, Params};
use audita_facility::model::model_json;
use audita_facility::oracle::{truth, Truth};
use audita_facility::record::{adverse_json, attack, registry_json, sign_record, Attack};
use audita_facility::replay::WorldReplayer;
use audita_facility::scenario::{generate, Family, Scenario};
use audita_verdict::{Adverse, DutyRegistry};
use indicatif::{ProgressBar, ProgressStyle};

use crate::hosted::hosted_verdict;
use serde_json::{json, Map, Value};

/// Arguments of `audita-load bench attribution`.
#[derive(clap::Args, Debug)]
pub struct AttributionArgs {
    /// Draws per family per generation seed.
    #[arg(long, default_value_t = 100)]
    pub draws: u64,
    /// Generation seeds (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    pub seeds: Vec<u64>,
    /// Print the result object as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Generator draws in total (split over the seeds).
    #[arg(long, default_value_t = 1002)]
    pub generator_draws: u64,
    /// No-cause control draws in total (split over the seeds).
    #[arg(long, default_value_t = 300)]
    pub no_cause_draws: u64,
    /// Markdown file whose sections `--write` rewrites.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    /// Rewrite the sections run in `--out` and their plots and JSON under
    /// `benchmarks/` beside it. Without it nothing is written: a smaller run
    /// (`--draws 10 --seeds 0`) never replaces the published figures by accident.
    #[arg(long)]
    pub write: bool,
    /// (The default since `--write` became opt-in; still accepted.)
    #[arg(long, hide = true, conflicts_with = "write")]
    pub no_write: bool,
    /// Sections to run (comma-separated): `accuracy` (the tables above), `perimeter`
    /// (off-bus coordination sweep) and `repair` (verdict-guided vs random repair).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "accuracy,perimeter,repair"
    )]
    pub sections: Vec<String>,
    /// Perimeter: incidents in total, each audited at every off-bus fraction.
    #[arg(long, default_value_t = 200)]
    pub perimeter_incidents: u64,
    /// Perimeter: off-bus fractions of the principal-to-principal links.
    #[arg(long, value_delimiter = ',', default_value = "0,0.1,0.2,0.3,0.4,0.5")]
    pub fractions: Vec<f64>,
    /// Repair: draws per population (named family or generator) per seed.
    #[arg(long, default_value_t = 25)]
    pub repair_draws: u64,
}

const METHODS: [&str; 8] = [
    "audita",
    "audita_causal_only",
    "single_site",
    "shapley",
    "anomaly",
    "judge_all_at_once",
    "judge_step_wise",
    "judge_binary_search",
];

#[derive(Default, Clone)]
struct Acc {
    err: f64,
    err_causal: f64,
    exact: u64,
    n: u64,
}

impl Acc {
    fn add(&mut self, e: f64, ec: f64) {
        self.err += e;
        self.err_causal += ec;
        self.exact += u64::from(e < 1e-9);
        self.n += 1;
    }
}

/// Per-(family, method, seed) accumulators.
type Cells = BTreeMap<String, BTreeMap<String, BTreeMap<u64, Acc>>>;

struct Outcome {
    profiles: BTreeMap<&'static str, Option<Profile>>,
    truth: Truth,
    agrees: bool,
    engine_us: f64,
    verdict_us: f64,
    oracle_us: f64,
    k: usize,
}

fn zero(sc: &Scenario) -> Profile {
    sc.principals().into_iter().map(|p| (p, 0.0)).collect()
}

/// The engine's certified causal profile on the pinned world.
fn audita_causal(sc: &Scenario) -> anyhow::Result<Profile> {
    let model = Model::from_json(&model_json(&sc.spec)?)?;
    let mut rep = WorldReplayer::pinned(&sc.spec);
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Exact,
        tolerance: 0.0,
    };
    let cert = attribute_certified(&model, &[], &mut rep, &cfg)?;
    Ok(sc
        .principals()
        .into_iter()
        .map(|p| {
            let r = cert.attribution.responsibility_of(&p);
            (p, r)
        })
        .collect())
}

/// Audita's verdict on the signed record of a scenario ([`hosted_verdict`]) as
/// (culpable profile = ρ_lo where culpable, involvement profile = ρ_lo, verdict
/// JSON); all-zero profiles and no JSON when the run is not adverse.
fn audita_verdict_on(
    sc: &Scenario,
    record: &audita_evidence::Record,
    sr: &audita_facility::record::SignedRecord,
    standard: &str,
) -> anyhow::Result<(Profile, Profile, Option<String>)> {
    let Some(v) = hosted_verdict(sc, record, sr, standard)? else {
        return Ok((zero(sc), zero(sc), None));
    };
    let rows = v.rows();
    let mut culp = zero(sc);
    let mut inv = zero(sc);
    for r in rows {
        if let Some(e) = inv.get_mut(&r.principal) {
            *e = r.rho_lo;
        }
        if let Some(e) = culp.get_mut(&r.principal) {
            *e = if r.culpable { r.rho_lo } else { 0.0 };
        }
    }
    Ok((culp, inv, Some(v.to_json())))
}

/// The verdict layer's blame-shift certificate for `victim` on the scenario's signed
/// record: framer → ρ_frame (`None` when it finds none).
fn verdict_certificate(
    sc: &Scenario,
    victim: &str,
) -> anyhow::Result<Option<BTreeMap<String, f64>>> {
    let sr = sign_record(sc)?;
    let part = verify_record(&sr.record, &sr.keys);
    let Some(adv) = adverse_json(sc, &sr)? else {
        return Ok(None);
    };
    let reg = DutyRegistry::from_json(&registry_json(sc, "reasonable_agent"))?;
    let adv = Adverse::from_json(&adv)?;
    let cert = audita_verdict::certificate(&sr.record, &part, &reg, &adv, &[victim])?;
    Ok(cert.map(|c| {
        c.framers
            .into_iter()
            .map(|(k, f)| (k, f.rho_frame))
            .collect()
    }))
}

fn audita_verdict(
    sc: &Scenario,
    standard: &str,
) -> anyhow::Result<(Profile, Profile, Option<String>)> {
    let sr = sign_record(sc)?;
    audita_verdict_on(sc, &sr.record, &sr, standard)
}

fn evaluate(
    sc: &Scenario,
    judges: &mut Option<judge::Judge<judge::HttpTransport>>,
) -> anyhow::Result<Outcome> {
    let t0 = Instant::now();
    let t = truth(&sc.spec)?;
    let oracle_us = t0.elapsed().as_secs_f64() * 1e6;
    let names = sc.principals();
    let agrees =
        t.causal == sc.planted.causal_over(&names) && t.culpable == sc.planted.culpable(&names);
    let t1 = Instant::now();
    let _engine = audita_causal(sc)?;
    let engine_us = t1.elapsed().as_secs_f64() * 1e6;
    let t2 = Instant::now();
    let (culpable, involvement, _) = audita_verdict(sc, "reasonable_agent")?;
    let verdict_us = t2.elapsed().as_secs_f64() * 1e6;
    let inc = FacilityIncident::new(sc);
    let mut profiles: BTreeMap<&'static str, Option<Profile>> = BTreeMap::new();
    profiles.insert("audita", Some(culpable));
    profiles.insert("audita_causal_only", Some(involvement));
    profiles.insert("single_site", Some(single_site::score(&inc)));
    profiles.insert("shapley", shapley::score(&inc).ok());
    profiles.insert("anomaly", Some(anomaly::score(&inc)));
    for f in judge::Format::ALL {
        let p = match judges.as_mut() {
            Some(j) => j.judge(&inc, f).ok(),
            None => None,
        };
        profiles.insert(f.name(), p);
    }
    let _ = zero(sc);
    Ok(Outcome {
        profiles,
        k: t.candidates.len(),
        truth: t,
        agrees,
        engine_us,
        verdict_us,
        oracle_us,
    })
}

/// The LLM judges, when `AUDITA_JUDGE_ENDPOINT` configures them.
type Judges = Option<judge::Judge<judge::HttpTransport>>;

/// The judges from the environment and the status the result reports for them.
fn judges_from_env() -> (Judges, String) {
    match judge::Judge::from_env() {
        None => (None, "not run (AUDITA_JUDGE_ENDPOINT unset)".to_string()),
        Some(Ok(j)) => (Some(j), "run".to_string()),
        Some(Err(e)) => (None, format!("not run ({e})")),
    }
}

/// What one evaluation draws: its generation seeds and, per seed, the draws of each
/// part.
struct Plan {
    seeds: Vec<u64>,
    /// Every family but `no_cause`, drawn `draws` times each.
    named: Vec<Family>,
    draws: u64,
    /// No-cause control draws.
    no_cause: u64,
    /// Generator draws.
    generator: u64,
    /// Draws per family of the hosted replay (core families) and the record attacks
    /// (every family).
    attacks: u64,
}

impl Plan {
    /// The draws `a` asks for; the generator and no-cause totals are split over the
    /// seeds (rounded up), and no seeds means seed 0.
    fn new(a: &AttributionArgs) -> Plan {
        let seeds = if a.seeds.is_empty() {
            vec![0]
        } else {
            a.seeds.clone()
        };
        let ns = seeds.len() as u64;
        Plan {
            named: Family::ALL
                .iter()
                .copied()
                .filter(|f| *f != Family::NoCause)
                .collect(),
            draws: a.draws,
            no_cause: a.no_cause_draws.div_ceil(ns),
            generator: a.generator_draws.div_ceil(ns),
            attacks: a.draws.div_ceil(4).max(1),
            seeds,
        }
    }

    /// The progress bar's length: every draw but the hosted replay's.
    fn total(&self) -> u64 {
        self.seeds.len() as u64
            * (self.named.len() as u64 * self.draws
                + self.generator
                + self.no_cause
                + Family::ALL.len() as u64 * self.attacks)
    }
}

/// The evaluation's accumulators, filled draw by draw.
#[derive(Default)]
struct Tally {
    cells: Cells,
    /// Draws where the oracle agrees with the planted truth, and draws.
    agree: (u64, u64),
    /// Per method: no-cause draws where it names someone, and draws.
    no_cause: BTreeMap<&'static str, (u64, u64)>,
    /// Per conduct-attack family, see [`conduct_attack`].
    conduct: BTreeMap<&'static str, [u64; 5]>,
    /// Per candidate count k: engine, oracle and verdict µs summed, and draws.
    wall: BTreeMap<usize, (f64, f64, f64, u64)>,
    /// Generator draws with an adverse outcome, and draws.
    gen_adverse: (u64, u64),
    /// Per duty standard, see [`duty_sensitivity`].
    duty: BTreeMap<&'static str, [f64; 4]>,
    /// Per record attack, see [`record_attacks`].
    attacks: BTreeMap<&'static str, [u64; 5]>,
    /// Per noise level, see [`hosted_certification`].
    hosted: BTreeMap<&'static str, [f64; 4]>,
}

impl Tally {
    /// Every draw of one generation seed, in order: the named families, the no-cause
    /// control, the generator, the hosted replay and the record attacks.
    fn run_seed(
        &mut self,
        plan: &Plan,
        seed: u64,
        judges: &mut Judges,
        pb: &ProgressBar,
    ) -> anyhow::Result<()> {
        for &family in &plan.named {
            pb.set_message(format!("seed {seed} {}", family.name()));
            for i in 0..plan.draws {
                self.named_draw(family, seed, i, judges)?;
                pb.inc(1);
            }
        }
        pb.set_message(format!("seed {seed} no_cause"));
        for i in 0..plan.no_cause {
            self.no_cause_draw(seed, i, judges)?;
            pb.inc(1);
        }
        pb.set_message(format!("seed {seed} generator"));
        let params = Params::default();
        for i in 0..plan.generator {
            self.generator_draw(seed, i, &params, judges)?;
            pb.inc(1);
        }
        pb.set_message(format!("seed {seed} hosted replay"));
        for &family in &Family::CORE {
            for i in 0..plan.attacks {
                let sc = generate(family, seed * 1_000_000 + i);
                hosted_certification(&sc, seed * 1_000_000 + i, &mut self.hosted)?;
            }
        }
        pb.set_message(format!("seed {seed} record attacks"));
        for &family in &Family::ALL {
            for i in 0..plan.attacks {
                let sc = generate(family, seed * 1_000_000 + i);
                record_attacks(&sc, i, &mut self.attacks)?;
                pb.inc(1);
            }
        }
        Ok(())
    }

    /// Adds every method's error on one draw of `family` against the culpable and the
    /// originating causal truth.
    fn record(&mut self, family: &str, seed: u64, out: &Outcome) {
        let culp = &out.truth.culpable;
        let caus = out.truth.causal_originating();
        for (m, p) in &out.profiles {
            if let Some(p) = p {
                self.cells
                    .entry(family.to_string())
                    .or_default()
                    .entry(m.to_string())
                    .or_default()
                    .entry(seed)
                    .or_default()
                    .add(metrics::error(p, culp), metrics::error(p, &caus));
            }
        }
    }

    /// Draw `i` of a named family: the methods' errors, plus the conduct-attack checks
    /// and the duty-standard sensitivity where the family calls for them.
    fn named_draw(
        &mut self,
        family: Family,
        seed: u64,
        i: u64,
        judges: &mut Judges,
    ) -> anyhow::Result<()> {
        let sc = generate(family, seed * 1_000_000 + i);
        let out = evaluate(&sc, judges)?;
        self.agree.0 += u64::from(out.agrees);
        self.agree.1 += 1;
        self.record(family.name(), seed, &out);
        if family.is_conduct_attack() {
            let c = self.conduct.entry(family.name()).or_insert([0; 5]);
            conduct_attack(&sc, &out, c)?;
        }
        if Family::CORE.contains(&family) {
            duty_sensitivity(&sc, &out, &mut self.duty)?;
        }
        Ok(())
    }

    /// Draw `i` of the no-cause control: the methods' errors and whether each names
    /// a culprit anyway.
    fn no_cause_draw(&mut self, seed: u64, i: u64, judges: &mut Judges) -> anyhow::Result<()> {
        let sc = generate(Family::NoCause, seed * 1_000_000 + i);
        let out = evaluate(&sc, judges)?;
        self.agree.0 += u64::from(out.agrees);
        self.agree.1 += 1;
        self.record("no_cause", seed, &out);
        for (m, p) in &out.profiles {
            if let Some(p) = p {
                let e = self.no_cause.entry(*m).or_insert((0, 0));
                e.0 += u64::from(metrics::names_someone(p));
                e.1 += 1;
            }
        }
        Ok(())
    }

    /// Draw `i` of the parameterised generator: the methods' errors, whether the run
    /// is adverse, and the wall-clock of the engine, the oracle and the verdict by k.
    fn generator_draw(
        &mut self,
        seed: u64,
        i: u64,
        params: &Params,
        judges: &mut Judges,
    ) -> anyhow::Result<()> {
        let sc = generator::generate(seed * 1_000_000 + i, params);
        let out = evaluate(&sc, judges)?;
        self.agree.0 += u64::from(out.agrees || out.truth.adverse.is_none() && !sc.planted.adverse);
        self.agree.1 += 1;
        self.gen_adverse.0 += u64::from(out.truth.adverse.is_some());
        self.gen_adverse.1 += 1;
        self.record("generator", seed, &out);
        let w = self.wall.entry(out.k).or_insert((0.0, 0.0, 0.0, 0));
        w.0 += out.engine_us;
        w.1 += out.oracle_us;
        w.2 += out.verdict_us;
        w.3 += 1;
        Ok(())
    }

    /// The `families` object: per family and method, the mean errors and exact-match
    /// rate over every seed and the s.d. of the per-seed mean error; judges that did
    /// not run carry their status.
    fn families(&self, judge_status: &str) -> Map<String, Value> {
        let mut families = Map::new();
        for (fam, methods) in &self.cells {
            let mut mm = Map::new();
            for m in METHODS {
                let Some(per_seed) = methods.get(m) else {
                    if m.starts_with("judge") {
                        mm.insert(
                            m.into(),
                            json!({"error": null, "exact": null, "n": 0, "status": judge_status}),
                        );
                    }
                    continue;
                };
                let mut tot = Acc::default();
                let mut means = Vec::new();
                for acc in per_seed.values() {
                    tot.err += acc.err;
                    tot.err_causal += acc.err_causal;
                    tot.exact += acc.exact;
                    tot.n += acc.n;
                    means.push(acc.err / acc.n.max(1) as f64);
                }
                let n = tot.n.max(1) as f64;
                mm.insert(
                    m.into(),
                    json!({"error": round(tot.err / n), "error_causal": round(tot.err_causal / n),
                           "exact": round(tot.exact as f64 / n), "n": tot.n, "sd": round(sd(&means))}),
                );
            }
            families.insert(fam.clone(), Value::Object(mm));
        }
        families
    }

    /// The result object (see the module documentation).
    fn result(&self, judge_status: &str, plan: &Plan) -> Value {
        let no_cause_v: Map<String, Value> = self
            .no_cause
            .iter()
            .map(|(m, (a, b))| {
                (
                    m.to_string(),
                    json!({"manufactured_rate": rate(*a, *b), "n": b}),
                )
            })
            .collect();
        let attacks_v: Map<String, Value> = self
            .attacks
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    json!({"detected_rate": rate(v[0], v[2]), "certified_invariant_rate": rate(v[1], v[2]),
                           "verdict_invariant_rate": rate(v[3], v[2]), "rho_lo_never_raised_rate": rate(v[4], v[2]),
                           "n": v[2]}),
                )
            })
            .collect();
        let conduct_v: Map<String, Value> = self
            .conduct
            .iter()
            .map(|(k, c)| {
                (
                    k.to_string(),
                    json!({"involvement_raised_rate": rate(c[0], c[3]), "victim_culpability_zero_rate": rate(c[1], c[3]),
                           "certificate_names_attacker_rate": rate(c[2], c[3]),
                           "verdict_certificate_names_attacker_rate": rate(c[4], c[3]), "n": c[3]}),
                )
            })
            .collect();
        let duty_v = means(
            &self.duty,
            [
                "culpable_changed_rate",
                "mean_shift",
                "causal_invariant_rate",
            ],
        );
        let wall_v: Map<String, Value> = self
            .wall
            .iter()
            .map(|(k, (e, o, v, n))| {
                let nn = (*n).max(1) as f64;
                (
                    k.to_string(),
                    json!({"engine": round(e / nn), "oracle": round(o / nn), "verdict": round(v / nn), "n": n}),
                )
            })
            .collect();
        let hosted_v = means(
            &self.hosted,
            ["certified_rate", "mean_action_match", "profile_exact_rate"],
        );
        json!({
            "hosted_replay": hosted_v,
            "families": self.families(judge_status),
            "no_cause": no_cause_v,
            "record_attacks": attacks_v,
            "conduct_attacks": conduct_v,
            "duty_sensitivity": duty_v,
            "wallclock_us": wall_v,
            "generator": {"draws": self.gen_adverse.1, "adverse_rate": rate(self.gen_adverse.0, self.gen_adverse.1)},
            "oracle_agreement": rate(self.agree.0, self.agree.1),
            "judges": judge_status,
            "seeds": plan.seeds,
            "draws_per_seed": plan.draws,
        })
    }
}

/// `a / b` rounded to three decimals (0 when there are no draws).
fn rate(a: u64, b: u64) -> f64 {
    round(a as f64 / b.max(1) as f64)
}

/// Conduct-attack checks on one draw, added to `c`: the oracle's blame-shift
/// certificate raises the victim's involvement (`c[0]`); Audita's verdict leaves the
/// victim's culpability at 0 (`c[1]`); the oracle certificate names exactly the
/// planted attackers (`c[2]`); draws (`c[3]`); the verdict layer's own certificate
/// names them at their planted ρ (`c[4]`).
fn conduct_attack(sc: &Scenario, out: &Outcome, c: &mut [u64; 5]) -> anyhow::Result<()> {
    let victim = sc.planted.victim.clone().unwrap_or_default();
    let cert = certificate(&sc.spec, &victim)?;
    let audita = out
        .profiles
        .get("audita")
        .cloned()
        .flatten()
        .unwrap_or_default();
    c[0] += u64::from(cert.is_some());
    c[1] += u64::from(audita.get(&victim).copied().unwrap_or(0.0) == 0.0);
    c[2] += u64::from(cert.as_ref().is_some_and(|c| {
        c.framers == sc.planted.framers
            && sc
                .planted
                .framers
                .iter()
                .filter(|(_, g)| **g > 0.0)
                .all(|(f, _)| c.framers[f] > 0.0)
    }));
    c[3] += 1;
    // The verdict layer's own blame-shift certificate on the record.
    let vc = verdict_certificate(sc, &victim)?;
    c[4] += u64::from(vc.as_ref().is_some_and(|f| {
        sc.planted
            .framers
            .iter()
            .all(|(p, g)| (f.get(p).copied().unwrap_or(0.0) - g).abs() < 1e-9)
            && f.iter()
                .all(|(p, g)| *g == 0.0 || sc.planted.framers.contains_key(p))
    }));
    Ok(())
}

/// Every record attack on the signed record of one draw (draw index `i` picks what
/// the attack edits), added per attack: detected by verification (`[0]`); certified
/// set unchanged (`[1]`); attacks (`[2]`); the verdict JSON bitwise unchanged
/// (`[3]`); no principal's ρ_lo raised (`[4]`).
fn record_attacks(
    sc: &Scenario,
    i: u64,
    acc: &mut BTreeMap<&'static str, [u64; 5]>,
) -> anyhow::Result<()> {
    let sr = sign_record(sc)?;
    let clean = verify_record(&sr.record, &sr.keys);
    let clean_verdict = audita_verdict_on(sc, &sr.record, &sr, "reasonable_agent")?;
    for which in Attack::ALL {
        let rep = attack(&sr, which, i);
        let part = verify_record(&rep.record, &sr.keys);
        let detected = match which {
            Attack::Forge => !part.suspect.is_empty(),
            Attack::Drop => rep
                .dropped
                .as_ref()
                .is_some_and(|d| part.missing.iter().any(|m| &m.id == d)),
            Attack::Reorder => part.epochs.iter().any(|e| !e.intact()),
            Attack::Equivocate => !part.equivocations.is_empty(),
        };
        let invariant = part.certified.keys().eq(clean.certified.keys());
        // Verdict level: bitwise-identical verdict JSON; for deletions, the
        // lost item's author is named (missing) and no ρ_lo of a principal
        // is raised.
        let (_, inv_attacked, json_attacked) =
            audita_verdict_on(sc, &rep.record, &sr, "reasonable_agent")?;
        let verdict_same = json_attacked == clean_verdict.2;
        let not_raised = inv_attacked
            .iter()
            .all(|(p, r)| *r <= clean_verdict.1.get(p).copied().unwrap_or(0.0) + 1e-12);
        let e = acc.entry(which.name()).or_insert([0; 5]);
        e[0] += u64::from(detected);
        e[1] += u64::from(invariant);
        e[2] += 1;
        e[3] += u64::from(verdict_same);
        e[4] += u64::from(not_raised);
    }
    Ok(())
}

/// Runs the evaluation and returns the result object.
fn compute(a: &AttributionArgs) -> anyhow::Result<Value> {
    let plan = Plan::new(a);
    let pb = ProgressBar::new(plan.total());
    pb.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut judges, judge_status) = judges_from_env();
    let mut tally = Tally::default();
    for &seed in &plan.seeds {
        tally.run_seed(&plan, seed, &mut judges, &pb)?;
    }
    pb.finish_and_clear();
    Ok(tally.result(&judge_status, &plan))
}

/// Runs `audita-load bench attribution`: the sections `a.sections` names, with a progress
/// bar on stderr; rewrites their sections of `a.out` with `a.write`. Returns
/// what the command prints: the result as JSON (`a.json`) or as Markdown tables.
pub fn attribution(a: &AttributionArgs) -> anyhow::Result<String> {
    let want = |s: &str| a.sections.iter().any(|x| x == s);
    if let Some(bad) = a
        .sections
        .iter()
        .find(|s| !["accuracy", "perimeter", "repair"].contains(&s.as_str()))
    {
        anyhow::bail!("unknown section {bad:?} (accuracy, perimeter, repair)");
    }
    let mut result = if want("accuracy") {
        compute(a)?
    } else {
        json!({"seeds": a.seeds})
    };
    if want("perimeter") || want("repair") {
        let seeds = if a.seeds.is_empty() {
            vec![0]
        } else {
            a.seeds.clone()
        };
        let total = if want("perimeter") {
            a.perimeter_incidents
        } else {
            0
        } + if want("repair") {
            a.repair_draws * seeds.len() as u64 * (Family::ALL.len() as u64 + 1)
        } else {
            0
        };
        let pb = ProgressBar::new(total);
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        let tick = || pb.inc(1);
        if want("perimeter") {
            pb.set_message("perimeter");
            result["perimeter"] = crate::bench_perimeter::perimeter(
                &seeds,
                a.perimeter_incidents,
                &a.fractions,
                &tick,
            )?;
        }
        if want("repair") {
            pb.set_message("repair");
            result["repair"] = crate::bench_perimeter::repair(&seeds, a.repair_draws, &tick)?;
        }
        pb.finish_and_clear();
    }
    let mut out = String::new();
    if a.json {
        out = serde_json::to_string_pretty(&result)? + "\n";
    } else {
        if want("accuracy") {
            out += &(markdown(&result) + "\n");
        }
        if want("perimeter") {
            out += &(crate::bench_perimeter::markdown_perimeter(&result) + "\n");
        }
        if want("repair") {
            out += &(crate::bench_perimeter::markdown_repair(&result) + "\n");
        }
    }
    if a.write {
        if want("accuracy") {
            write_section(&a.out, &result)?;
        }
        crate::bench_perimeter::write_sections(&a.out, &result)?;
    }
    Ok(out)
}

/// Replay certification on the hosted (stochastic) world: the engine's statistical
/// mode with n = 100 runs per arm, α = 0.05, δ = 0.5, at a mild and a severe actuation
/// noise level. Rates are per proposed cause; `profile_exact_rate` per incident.
fn hosted_certification(
    sc: &Scenario,
    seed: u64,
    acc: &mut BTreeMap<&'static str, [f64; 4]>,
) -> anyhow::Result<()> {
    use audita_facility::world::Hosted;
    let model = Model::from_json(&model_json(&sc.spec)?)?;
    let exact = audita_causal(sc)?;
    let cfg = CertifyConfig {
        delta: 0.5,
        mode: CertifyMode::Statistical {
            n: 100,
            alpha: 0.05,
        },
        tolerance: 0.0,
    };
    for (name, h) in [
        (
            "mild_jitter2_drop2pct",
            Hosted {
                seed,
                jitter: 2,
                drop_per_mille: 20,
            },
        ),
        (
            "severe_jitter5_drop50pct",
            Hosted {
                seed,
                jitter: 5,
                drop_per_mille: 500,
            },
        ),
    ] {
        let mut rep = WorldReplayer::hosted(&sc.spec, h);
        let cert = attribute_certified(&model, &[], &mut rep, &cfg)?;
        let e = acc.entry(name).or_insert([0.0; 4]);
        let n = cert.receipts.len().max(1) as f64;
        e[0] += cert.receipts.iter().filter(|r| r.certified).count() as f64 / n;
        e[1] += cert.receipts.first().map(|r| r.action_match).unwrap_or(1.0);
        let prof: Profile = exact
            .keys()
            .map(|p| (p.clone(), cert.attribution.responsibility_of(p)))
            .collect();
        e[2] += f64::from(u8::from(prof == exact));
        e[3] += 1.0;
    }
    Ok(())
}

/// Duty-standard sensitivity: Audita's culpable profile under the verdict layer's
/// literal specification standard, and under the aisle envelope registered at 0.8, 1.0
/// (the tables' registry) and 2.0 m/s (reasonable-agent standard), each against the
/// tables' profile; plus whether the causal profile stays put.
fn duty_sensitivity(
    sc: &Scenario,
    out: &Outcome,
    acc: &mut BTreeMap<&'static str, [f64; 4]>,
) -> anyhow::Result<()> {
    let base = out
        .profiles
        .get("audita")
        .cloned()
        .flatten()
        .unwrap_or_default();
    let causal = out
        .profiles
        .get("audita_causal_only")
        .cloned()
        .flatten()
        .unwrap_or_default();
    // The verdict layer's literal specification standard (relays holding the envelope
    // breach too) against the reasonable-agent standard the tables use.
    {
        let (culp, inv, _) = audita_verdict(sc, "specification")?;
        let e = acc
            .entry("verdict_specification_standard")
            .or_insert([0.0; 4]);
        e[0] += f64::from(u8::from(culp != base));
        e[1] += metrics::error(&culp, &base);
        e[2] += f64::from(u8::from(inv == causal));
        e[3] += 1.0;
    }
    for (name, limit) in [
        ("strict_0.8mps", 80),
        ("spec_1.0mps", 100),
        ("lenient_2.0mps", 200),
    ] {
        let mut alt = sc.clone();
        for z in &mut alt.spec.zones {
            z.speed_limit = limit;
        }
        let t = truth(&alt.spec)?;
        let (culp, _, _) = audita_verdict(&alt, "reasonable_agent")?;
        let e = acc.entry(name).or_insert([0.0; 4]);
        e[0] += f64::from(u8::from(culp != base));
        e[1] += metrics::error(&culp, &base);
        e[2] += f64::from(u8::from(t.causal == out.truth.causal));
        e[3] += 1.0;
    }
    Ok(())
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn sd(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64).sqrt()
}

/// The paper's Table 2 (responsibility error, mean over 300 draws per structure).
const PAPER_TABLE2: &[(&str, [f64; 6])] = &[
    ("audita", [0.000, 0.000, 0.000, 0.000, 0.000, 0.000]),
    (
        "audita_causal_only",
        [0.667, 0.667, 0.000, 0.500, 0.000, 0.367],
    ),
    (
        "judge_all_at_once",
        [0.500, 0.017, 0.000, 0.500, 0.500, 0.303],
    ),
    (
        "judge_step_wise",
        [0.500, 0.000, 0.017, 0.500, 0.500, 0.303],
    ),
    (
        "judge_binary_search",
        [0.567, 0.150, 0.000, 0.500, 0.500, 0.343],
    ),
    ("single_site", [1.000, 0.667, 0.000, 0.500, 0.000, 0.433]),
    ("shapley", [0.833, 0.667, 0.095, 0.667, 0.000, 0.452]),
    ("anomaly", [1.000, 1.000, 1.000, 1.000, 0.500, 0.900]),
];

fn cell(v: &Value, fam: &str, m: &str, key: &str) -> Option<f64> {
    v["families"][fam][m][key].as_f64()
}

/// The `## Attribution accuracy` section of BENCHMARKS.md for the result object `r`.
fn markdown(r: &Value) -> String {
    let mut s = String::new();
    s.push_str(&preamble(r));
    s.push_str(&core_tables(r));
    s.push_str(&other_families_table(r));
    s.push_str(&control_and_attack_tables(r));
    s.push_str(&sensitivity_and_cost_tables(r));
    s.push_str(
        "\n![Responsibility error on the core structures](benchmarks/attribution_error.svg)\n",
    );
    s.push_str("\n![Wall-clock vs k](benchmarks/attribution_wallclock.svg)\n");
    s
}

/// The section's heading, how to reproduce it, and what the run drew.
fn preamble(r: &Value) -> String {
    let mut s = String::new();
    s.push_str("## Attribution accuracy\n\n");
    s.push_str(
        "Reproduce: `cargo run --release -p audita-load-tests --bin audita-load -- bench attribution --write` (add `--json` for the \
         machine-readable object; `--draws`, `--seeds`, `--generator-draws`, \
         `--no-cause-draws` size the run; without `--write` it prints and writes nothing).\n\n",
    );
    s.push_str(&format!(
        "Generated by `audita-load bench attribution` (seeds {}, {} draws per family per seed; \
         generator {} draws, {:.1}% adverse; oracle agrees with planted truth on {:.1}% of draws). \
         Responsibility error is ½·ℓ1 between unit-mass profiles against the **culpable** profile \
         (conduits enter with 0); the causal-profile error (conduits zeroed) is in the JSON as \
         `error_causal`. The `audita` row is the full pipeline: the scenario's \
         signed, sealed record is verified, and `audita-verdict` grades it under the \
         reasonable-agent standard with replay certification on the pinned world (culpable = \
         ρ_lo of culpable findings); `audita_causal_only` is the same verdict's ρ_lo. LLM judges: {}.\n\n",
        r["seeds"],
        r["draws_per_seed"],
        r["generator"]["draws"],
        r["generator"]["adverse_rate"].as_f64().unwrap_or(0.0) * 100.0,
        r["oracle_agreement"].as_f64().unwrap_or(0.0) * 100.0,
        r["judges"].as_str().unwrap_or("")
    ));
    s
}

/// The core structures' errors in this run beside the paper's Table 2, and why
/// some cells differ.
fn core_tables(r: &Value) -> String {
    let core = [
        "redundancy",
        "inert_twin",
        "preemption",
        "omission",
        "chain",
    ];
    let mut s = String::new();
    s.push_str("### Core structures (this run; mean ± s.d. across seeds)\n\n");
    s.push_str("| Method | Redundancy | Inert twin | Preemption | Omission | Chain | Average | Exact (avg) |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for m in METHODS {
        let mut row = format!("| {m} |");
        let mut sum = 0.0;
        let mut ex = 0.0;
        let mut ok = true;
        for f in core {
            match (cell(r, f, m, "error"), cell(r, f, m, "sd")) {
                (Some(e), Some(d)) => {
                    sum += e;
                    ex += cell(r, f, m, "exact").unwrap_or(0.0);
                    row.push_str(&format!(" {e:.3} ± {d:.3} |"));
                }
                _ => {
                    ok = false;
                    row.push_str(" not run |");
                }
            }
        }
        if ok {
            row.push_str(&format!(" {:.3} | {:.3} |", sum / 5.0, ex / 5.0));
        } else {
            row.push_str(" not run | – |");
        }
        s.push_str(&row);
        s.push('\n');
    }
    s.push_str("\n### Paper, Table 2 (for comparison)\n\n");
    s.push_str("| Method | Redundancy | Inert twin | Preemption | Omission | Chain | Average |\n|---|---|---|---|---|---|---|\n");
    for (m, v) in PAPER_TABLE2 {
        s.push_str(&format!(
            "| {m} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |\n",
            v[0], v[1], v[2], v[3], v[4], v[5]
        ));
    }
    s.push_str(
        "\nReading the two tables side by side: in this register the proposals of redundancy, \
         inert twin, omission and chain reach the robot through a dispatcher and the robot's \
         controller, faithful relays that are but-for causes (causal ρ = 1, conduit-flagged) and \
         never in breach. Methods that cannot read duties (single-site, Shapley, causal-only) \
         name them; the culpable profile does not. That is why the omission and chain cells of \
         those rows sit above the paper's, whose chain and omission structures grade fewer \
         relays; the redundancy and inert-twin cells, where the topologies coincide, reproduce \
         the paper's values. Preemption's later command and the trivial control act on the \
         robot directly.\n",
    );
    s
}

/// The other families' and the generator's error and exact-match rate for the
/// non-judge methods.
fn other_families_table(r: &Value) -> String {
    let mut s = String::new();
    s.push_str("\n### Other families and the generator (error / exact-match rate)\n\n");
    let others = [
        "unexpected_startup",
        "trivial",
        "no_cause",
        "conditioning",
        "inevitability_rigging",
        "scapegoat",
        "generator",
    ];
    s.push_str("| Family | n |");
    for m in &METHODS[..5] {
        s.push_str(&format!(" {m} |"));
    }
    s.push_str("\n|---|---|---|---|---|---|---|\n");
    for f in others {
        let n = r["families"][f]["audita"]["n"].as_u64().unwrap_or(0);
        let mut row = format!("| {f} | {n} |");
        for m in &METHODS[..5] {
            match (cell(r, f, m, "error"), cell(r, f, m, "exact")) {
                (Some(e), Some(x)) => row.push_str(&format!(" {e:.3} / {x:.3} |")),
                _ => row.push_str(" – |"),
            }
        }
        s.push_str(&row);
        s.push('\n');
    }
    s
}

/// The no-cause control's manufactured-culprit rates, and the record and conduct
/// attacks' outcomes.
fn control_and_attack_tables(r: &Value) -> String {
    let mut s = String::new();
    rates_table(
        &mut s,
        "\n### Negative control: manufactured-culprit rate on no-cause draws\n\n| Method | rate | n |\n|---|---|---|\n",
        &r["no_cause"],
        &["manufactured_rate"],
    );
    rates_table(
        &mut s,
        "\n### Record attacks (every named family)\n\n| Attack | detected | certified set unchanged | verdict bitwise unchanged | no ρ_lo raised | n |\n|---|---|---|---|---|---|\n",
        &r["record_attacks"],
        &["detected_rate", "certified_invariant_rate", "verdict_invariant_rate", "rho_lo_never_raised_rate"],
    );
    rates_table(
        &mut s,
        "\n### Conduct attacks by valid-key insiders\n\n| Family | victim involvement raised | victim culpability 0 (verdict) | oracle certificate names the attackers | verdict certificate names the attackers | n |\n|---|---|---|---|---|---|\n",
        &r["conduct_attacks"],
        &["involvement_raised_rate", "victim_culpability_zero_rate", "certificate_names_attacker_rate", "verdict_certificate_names_attacker_rate"],
    );
    s
}

/// Appends `heading` and one Markdown row per entry of `section`: its name, each of
/// `rates` to three decimals, and its `n`.
fn rates_table(s: &mut String, heading: &str, section: &Value, rates: &[&str]) {
    s.push_str(heading);
    if let Some(o) = section.as_object() {
        for (m, v) in o {
            s.push_str(&format!("| {m} |"));
            for k in rates {
                s.push_str(&format!(" {:.3} |", v[*k].as_f64().unwrap_or(0.0)));
            }
            s.push_str(&format!(" {} |\n", v["n"]));
        }
    }
}

/// Each entry's three sums (`[a, b, c, n]`) averaged over its count `n`, rounded:
/// `{names[0]: a/n, names[1]: b/n, names[2]: c/n, "n": n}`.
fn means(sums: &BTreeMap<&'static str, [f64; 4]>, names: [&str; 3]) -> Map<String, Value> {
    sums.iter()
        .map(|(k, v)| {
            let n = v[3].max(1.0);
            let mut o = Map::new();
            for (i, name) in names.iter().enumerate() {
                o.insert(name.to_string(), json!(round(v[i] / n)));
            }
            o.insert("n".into(), json!(v[3] as u64));
            (k.to_string(), Value::Object(o))
        })
        .collect()
}

/// Duty-standard sensitivity, replay certification on the hosted world, and the
/// wall-clock per incident query by k.
fn sensitivity_and_cost_tables(r: &Value) -> String {
    let mut s = String::new();
    rates_table(
        &mut s,
        "\n### Duty-standard sensitivity (core families; aisle speed envelope)\n\n| Standard | culpable profile changed vs spec | mean shift (error) | causal profile invariant | n |\n|---|---|---|---|---|\n",
        &r["duty_sensitivity"],
        &["culpable_changed_rate", "mean_shift", "causal_invariant_rate"],
    );
    rates_table(
        &mut s,
        "\n### Replay certification on the hosted world (core families; n = 100 per arm, α = 0.05, δ = 0.5)\n\n| Noise | causes certified | action match (factual) | profile equals pinned | n |\n|---|---|---|---|---|\n",
        &r["hosted_replay"],
        &["certified_rate", "mean_action_match", "profile_exact_rate"],
    );
    s.push_str(&format!("\n### Wall-clock per incident query vs interacting candidates k (generator; µs; {} build)\n\n| k | verdict (sign + verify + slice + grade + certify) | engine alone (model + certify) | oracle (2^k re-executions) | n |\n|---|---|---|---|---|\n", if cfg!(debug_assertions) { "debug" } else { "release" }));
    if let Some(o) = r["wallclock_us"].as_object() {
        let mut rows: Vec<(u64, &Value)> =
            o.iter().map(|(k, v)| (k.parse().unwrap_or(0), v)).collect();
        rows.sort_by_key(|(k, _)| *k);
        for (k, v) in rows {
            s.push_str(&format!(
                "| {k} | {:.0} | {:.0} | {:.0} | {} |\n",
                v["verdict"].as_f64().unwrap_or(0.0),
                v["engine"].as_f64().unwrap_or(0.0),
                v["oracle"].as_f64().unwrap_or(0.0),
                v["n"]
            ));
        }
    }
    s
}

/// Rewrites (or appends) the `## Attribution accuracy` section and writes the SVGs
/// next to the Markdown file.
fn write_section(path: &Path, r: &Value) -> anyhow::Result<()> {
    let section = markdown(r);
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let head = "## Attribution accuracy";
    let new = match old.find(head) {
        Some(start) => {
            let rest = &old[start + head.len()..];
            let end = rest
                .find("\n## ")
                .map(|i| start + head.len() + i + 1)
                .unwrap_or(old.len());
            if end < old.len() {
                format!("{}{}\n{}", &old[..start], section, &old[end..])
            } else {
                format!("{}{}", &old[..start], section)
            }
        }
        None if old.is_empty() => format!("# Benchmarks\n\n{section}"),
        None => format!(
            "{}\n{}",
            old.trim_end_matches('\n').to_string() + "\n",
            section
        ),
    };
    std::fs::write(path, new)?;
    let dir = path
        .parent()
        .map(|p| p.join("benchmarks"))
        .unwrap_or_else(|| PathBuf::from("benchmarks"));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("attribution_error.svg"), error_svg(r))?;
    std::fs::write(dir.join("attribution_wallclock.svg"), wallclock_svg(r))?;
    Ok(())
}

fn error_svg(r: &Value) -> String {
    let core = [
        "redundancy",
        "inert_twin",
        "preemption",
        "omission",
        "chain",
    ];
    let methods = [
        "audita",
        "audita_causal_only",
        "single_site",
        "shapley",
        "anomaly",
    ];
    let colors = ["#1b7f79", "#7fb8b4", "#d08c2e", "#8a5fb0", "#b84a4a"];
    let (w, h, left, top, plot_h) = (760.0, 320.0, 50.0, 30.0, 220.0);
    let group_w = (w - left - 20.0) / core.len() as f64;
    let bar_w = group_w / (methods.len() as f64 + 1.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">Responsibility error (culpable profile), core structures</text>\n"
    );
    for i in 0..=4 {
        let v = i as f64 / 4.0;
        let y = top + plot_h * (1.0 - v);
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.2}</text>\n",
            w - 20.0,
            left - 4.0,
            y + 4.0
        ));
    }
    for (gi, f) in core.iter().enumerate() {
        let gx = left + gi as f64 * group_w;
        for (mi, m) in methods.iter().enumerate() {
            let e = cell(r, f, m, "error").unwrap_or(0.0);
            let bh = plot_h * e;
            let x = gx + (mi as f64 + 0.5) * bar_w;
            s.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{m} {f}: {e:.3}</title></rect>\n",
                top + plot_h - bh,
                bar_w * 0.9,
                colors[mi]
            ));
        }
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{f}</text>\n",
            gx + group_w / 2.0,
            top + plot_h + 16.0
        ));
    }
    for (mi, m) in methods.iter().enumerate() {
        let x = left + mi as f64 * 135.0;
        s.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{m}</text>\n",
            top + plot_h + 34.0,
            colors[mi],
            x + 14.0,
            top + plot_h + 43.0
        ));
    }
    s.push_str("</svg>\n");
    s
}

fn wallclock_svg(r: &Value) -> String {
    let mut pts: Vec<(f64, f64, f64)> = r["wallclock_us"]
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    (
                        k.parse().unwrap_or(0.0),
                        v["engine"].as_f64().unwrap_or(0.0),
                        v["oracle"].as_f64().unwrap_or(0.0),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (w, h, left, top, pw, ph) = (640.0, 320.0, 60.0, 30.0, 540.0, 230.0);
    let kmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
    let ymax = pts
        .iter()
        .map(|p| p.1.max(p.2))
        .fold(1.0, f64::max)
        .log10()
        .ceil()
        .max(1.0);
    let xy = |k: f64, us: f64| {
        (
            left + pw * k / kmax,
            top + ph * (1.0 - us.max(1.0).log10() / ymax),
        )
    };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"{left}\" y=\"18\" font-size=\"13\">Wall-clock per incident query (µs, log scale) vs candidates k</text>\n"
    );
    for d in 0..=(ymax as i32) {
        let y = top + ph * (1.0 - d as f64 / ymax);
        s.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">1e{d}</text>\n",
            left + pw,
            left - 4.0,
            y + 4.0
        ));
    }
    for (series, color) in [(1usize, "#1b7f79"), (2usize, "#b84a4a")] {
        let path: Vec<String> = pts
            .iter()
            .map(|p| {
                let (x, y) = xy(p.0, if series == 1 { p.1 } else { p.2 });
                format!("{x:.1},{y:.1}")
            })
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n",
            path.join(" ")
        ));
    }
    for p in &pts {
        let (x, _) = xy(p.0, 1.0);
        s.push_str(&format!(
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            top + ph + 15.0,
            p.0
        ));
    }
    s.push_str(&format!(
        "<text x=\"{left}\" y=\"{:.1}\" fill=\"#1b7f79\">engine (model + exact certification)</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" fill=\"#b84a4a\">oracle (2^k world re-executions)</text>\n</svg>\n",
        top + ph + 35.0,
        left + 260.0,
        top + ph + 35.0
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> AttributionArgs {
        AttributionArgs {
            draws: 2,
            seeds: vec![0, 1],
            json: true,
            generator_draws: 8,
            no_cause_draws: 4,
            out: PathBuf::from("unused.md"),
            write: false,
            no_write: false,
            sections: vec!["accuracy".into()],
            perimeter_incidents: 0,
            fractions: vec![0.0],
            repair_draws: 0,
        }
    }

    #[test]
    fn audita_is_exact_on_every_family_and_baselines_show_their_limits() {
        let r = compute(&small()).unwrap();
        for (fam, methods) in r["families"].as_object().unwrap() {
            assert_eq!(methods["audita"]["error"].as_f64(), Some(0.0), "{fam}");
            assert_eq!(methods["audita"]["exact"].as_f64(), Some(1.0), "{fam}");
            assert_eq!(
                methods["judge_all_at_once"]["n"].as_u64(),
                Some(0),
                "judges never run in tests"
            );
        }
        assert_eq!(
            r["families"]["redundancy"]["single_site"]["error"].as_f64(),
            Some(1.0)
        );
        assert_eq!(
            r["no_cause"]["anomaly"]["manufactured_rate"].as_f64(),
            Some(1.0)
        );
        assert_eq!(
            r["no_cause"]["audita"]["manufactured_rate"].as_f64(),
            Some(0.0)
        );
        assert_eq!(
            r["record_attacks"]["forge"]["certified_invariant_rate"].as_f64(),
            Some(1.0)
        );
        assert_eq!(
            r["record_attacks"]["drop"]["detected_rate"].as_f64(),
            Some(1.0)
        );
        for fam in ["conditioning", "inevitability_rigging", "scapegoat"] {
            let c = &r["conduct_attacks"][fam];
            assert_eq!(
                c["victim_culpability_zero_rate"].as_f64(),
                Some(1.0),
                "{fam}"
            );
            assert_eq!(
                c["certificate_names_attacker_rate"].as_f64(),
                Some(1.0),
                "{fam}"
            );
        }
        assert_eq!(r["oracle_agreement"].as_f64(), Some(1.0));
    }

    #[test]
    fn without_write_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("BENCHMARKS.md");
        std::fs::write(&path, "# Benchmarks\n\n## Attribution accuracy\n\nold\n").unwrap();
        let mut a = small();
        a.out = path.clone();
        a.json = false;
        let printed = attribution(&a).unwrap();
        assert!(
            printed.contains("## Attribution accuracy"),
            "the tables are printed"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# Benchmarks\n\n## Attribution accuracy\n\nold\n"
        );
        assert!(!dir.path().join("benchmarks").exists());
        a.write = true;
        attribution(&a).unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("\nold\n"));
        assert!(dir.path().join("benchmarks/attribution_error.svg").exists());
    }

    #[test]
    fn section_rewrite_leaves_other_sections_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("BENCHMARKS.md");
        std::fs::write(
            &path,
            "# Benchmarks\n\n## Attribution accuracy\n\nold\n\n## Evidence layer\n\nkeep me\n",
        )
        .unwrap();
        let r = compute(&small()).unwrap();
        write_section(&path, &r).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("## Evidence layer\n\nkeep me\n"));
        assert!(!text.contains("\nold\n"));
        assert_eq!(text.matches("## Attribution accuracy").count(), 1);
        assert!(dir.path().join("benchmarks/attribution_error.svg").exists());
    }
}
