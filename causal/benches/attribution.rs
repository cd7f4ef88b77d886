//! Wall-clock per attribution query against the number of interacting candidates `k`.
//!
//! `cargo bench -p audita-causal` prints a markdown table (the `## Causal engine`
//! section of BENCHMARKS.md) and, with `AUDITA_BENCH_SVG=path`, writes an SVG plot.
//! Workloads:
//! - `sp`: random series-parallel incidents in the SPEC §5 generator style (planner
//!   proposals, dispatcher disjunctions of width ≤ w, checker conjunctions, relay
//!   chains, supervisor absences conditioned on a duty), grown to `k` candidates;
//!   monotone, so the engine takes the cut-set path.
//! - `conj-disj`: a conjunction of k/4 disjunctions of width 4 (4^(k/4) prime
//!   implicants, k/4 minimal causes).
//! - `nonmono`: random DAG models with negation over candidate-dependent variables;
//!   the general exact path.
//!
//! - `opt`: random non-monotone models of 10–200 variables (`nonmono-dense` shape)
//!   through the automatic choice, the optimisation path and the general path (cut off
//!   at 10 s), next to brute force where it finishes; all ρ profiles must agree.
//! - `hp2sat`: the HP2SAT benchmark models and queries (`benchmarks/hp2sat/`, translated
//!   by `translate.py`): ρ for every principal of every model, cross-checked (brute
//!   force, the whole-model solver, the closed form of the trees, `check_cause` on a
//!   sample of principals), and every cause check of HP2SAT's suite, each timed.
//!   `AUDITA_BENCH_ONLY=hp2sat` runs only these tables.
//!
//! Every query of the same run is also answered by the independent brute-force oracle
//! where that is feasible (≤ 14 variables), and the two ρ profiles must agree.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use audita_causal::{
    attribute_until, attribute_with, check_cause, AttributeOptions, Attribution, Model,
    ModelBuilder, NoDeadline, Path,
};
use audita_oracle::{brute, OracleModel};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Builds a random series-parallel incident with exactly `k` candidate variables.
struct Sp {
    rng: ChaCha8Rng,
    b: Option<ModelBuilder>,
    n: usize,
}

impl Sp {
    fn fresh(&mut self, prefix: &str) -> String {
        self.n += 1;
        format!("{prefix}{}", self.n)
    }

    fn exo(&mut self, name: &str, principal: &str, value: bool) {
        let b = self.b.take().unwrap_or_default();
        self.b = Some(b.exogenous(name, Some(principal), value, true));
    }

    fn endo(&mut self, name: &str, principal: &str, eq: String) {
        let b = self.b.take().unwrap_or_default();
        self.b = Some(b.endogenous(name, Some(principal), eq, true));
    }

    /// Realises a gadget with exactly `budget` candidate variables; returns the name of
    /// the variable carrying its output.
    fn gadget(&mut self, budget: usize) -> String {
        if budget == 1 {
            let name = self.fresh("m_plan");
            let p = format!("planner-{}", self.n % 7);
            let issued = self.rng.gen_bool(0.9);
            self.exo(&name, &p, issued);
            return name;
        }
        let kind = if budget == 2 {
            2
        } else {
            self.rng.gen_range(0..10)
        };
        match kind {
            0..=6 if budget >= 3 => {
                let w = self.rng.gen_range(2..=3).min(budget - 1);
                let shares = split(&mut self.rng, budget - 1, w);
                let kids: Vec<String> = shares.into_iter().map(|b| self.gadget(b)).collect();
                let (prefix, p, op) = if kind <= 3 {
                    ("m_disp", "dispatcher", " | ")
                } else {
                    ("m_check", "checker", " & ")
                };
                let name = self.fresh(prefix);
                self.endo(
                    &name,
                    &format!("{p}-{}", self.n % 3),
                    format!("({})", kids.join(op)),
                );
                name
            }
            7..=8 | 2 => {
                let d = self.rng.gen_range(1..=3).min(budget - 1);
                let mut prev = self.gadget(budget - d);
                for _ in 0..d {
                    let name = self.fresh("m_relay");
                    self.endo(&name, &format!("relay-{}", self.n % 5), prev);
                    prev = name;
                }
                prev
            }
            _ => {
                let child = self.gadget(budget - 2);
                let abs = self.fresh("absent_halt");
                let unfulfilled = self.rng.gen_bool(0.8);
                self.exo(&abs, "supervisor", unfulfilled);
                let name = self.fresh("m_exec");
                self.endo(&name, "controller", format!("{child} & {abs}"));
                name
            }
        }
    }
}

/// Splits `total` into `parts` positive shares.
fn split(rng: &mut ChaCha8Rng, total: usize, parts: usize) -> Vec<usize> {
    let mut shares = vec![1; parts];
    for _ in 0..total - parts {
        let i = rng.gen_range(0..parts);
        shares[i] += 1;
    }
    shares
}

fn sp_incident(k: usize, seed: u64) -> Model {
    let mut sp = Sp {
        rng: ChaCha8Rng::seed_from_u64(seed),
        b: Some(ModelBuilder::new()),
        n: 0,
    };
    let root = sp.gadget(k);
    let b = sp.b.take().unwrap_or_default();
    b.exogenous("human_near", None, true, false)
        .outcome(format!("human_near & {root}"))
        .build()
        .expect("generated model is valid")
}

fn conj_disj(k: usize) -> Model {
    let mut b = ModelBuilder::new();
    let mut clauses = Vec::new();
    for i in 0..k.div_ceil(4) {
        let mut lits = Vec::new();
        for j in 0..4.min(k - 4 * i) {
            let name = format!("m{i}_{j}");
            b = b.exogenous(name.clone(), Some(&format!("p{j}")), true, true);
            lits.push(name);
        }
        clauses.push(format!("({})", lits.join(" | ")));
    }
    b.outcome(clauses.join(" & ")).build().expect("valid")
}

/// Random non-monotone model: `k` candidates (half exogenous messages, half endogenous
/// relays) plus a few non-candidate environment variables.
fn nonmono(k: usize, seed: u64) -> Model {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = ModelBuilder::new();
    let mut names: Vec<String> = Vec::new();
    let n_exo = k.div_ceil(2);
    for i in 0..n_exo {
        let name = format!("m{i}");
        b = b.exogenous(
            name.clone(),
            Some(&format!("p{}", i % 4)),
            rng.gen_bool(0.7),
            true,
        );
        names.push(name);
    }
    for i in 0..(k - n_exo) {
        let pick = |rng: &mut ChaCha8Rng, names: &[String]| {
            let v = names[rng.gen_range(names.len().saturating_sub(6)..names.len())].clone();
            if rng.gen_bool(0.3) {
                format!("!{v}")
            } else {
                v
            }
        };
        let a = pick(&mut rng, &names);
        let c = pick(&mut rng, &names);
        let op = if rng.gen_bool(0.5) { "&" } else { "|" };
        let name = format!("r{i}");
        b = b.endogenous(
            name.clone(),
            Some(&format!("p{}", i % 4)),
            format!("{a} {op} {c}"),
            true,
        );
        names.push(name);
    }
    let tail: Vec<String> = names.iter().rev().take(4).cloned().collect();
    let outcome = format!(
        "({} | !{}) & ({} | {})",
        tail[0],
        tail[1 % tail.len()],
        tail[2 % tail.len()],
        tail[3 % tail.len()]
    );
    b.outcome(outcome).build().expect("valid")
}

/// Dense non-monotone model: every relay reads 2–3 variables drawn from the whole
/// prefix (negated with probability 0.3) and the outcome reads six relays, so most
/// candidates interact with the outcome.
fn nonmono_dense(k: usize, seed: u64) -> Model {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut b = ModelBuilder::new();
    let mut names: Vec<String> = Vec::new();
    let n_exo = k.div_ceil(2);
    for i in 0..n_exo {
        let name = format!("m{i}");
        b = b.exogenous(
            name.clone(),
            Some(&format!("p{}", i % 5)),
            rng.gen_bool(0.7),
            true,
        );
        names.push(name);
    }
    let lit = |rng: &mut ChaCha8Rng, v: &str| {
        if rng.gen_bool(0.3) {
            format!("!{v}")
        } else {
            v.to_string()
        }
    };
    for i in 0..(k - n_exo) {
        let w = rng.gen_range(2..=3);
        let ops: Vec<String> = (0..w)
            .map(|_| {
                let v = names[rng.gen_range(0..names.len())].clone();
                lit(&mut rng, &v)
            })
            .collect();
        let op = if rng.gen_bool(0.5) { " & " } else { " | " };
        let name = format!("r{i}");
        b = b.endogenous(
            name.clone(),
            Some(&format!("p{}", i % 5)),
            ops.join(op),
            true,
        );
        names.push(name);
    }
    let picks: Vec<String> = (0..6)
        .map(|_| {
            let v = names[rng.gen_range(names.len() / 2..names.len())].clone();
            lit(&mut rng, &v)
        })
        .collect();
    let outcome = format!(
        "({} | {}) & ({} | {}) & ({} | {})",
        picks[0], picks[1], picks[2], picks[3], picks[4], picks[5]
    );
    b.outcome(outcome).build().expect("valid")
}

fn to_json(m: &Model) -> String {
    let mut vars = Vec::new();
    for v in m.variables() {
        let p = v
            .principal
            .map_or("null".to_string(), |p| format!("\"{p}\""));
        let mech = match v.mechanism {
            audita_causal::Mechanism::Value(b) => format!("\"value\": {b}"),
            audita_causal::Mechanism::Eq(e) => format!("\"eq\": \"{e}\""),
        };
        vars.push(format!(
            "\"{}\": {{\"principal\": {p}, {mech}, \"candidate\": {}}}",
            v.name, v.candidate
        ));
    }
    format!(
        "{{\"variables\": {{{}}}, \"outcome\": \"{}\"}}",
        vars.join(", "),
        m.outcome()
    )
}

/// Median seconds per call of `f`, repeating for at least `min_time`.
fn time<T>(min_time: Duration, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut last;
    loop {
        let t = Instant::now();
        last = f();
        samples.push(t.elapsed().as_secs_f64());
        if start.elapsed() >= min_time && samples.len() >= 3
            || samples.len() >= 10_000
            || start.elapsed() > min_time * 20
        {
            break;
        }
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    (samples[samples.len() / 2], last)
}

fn fmt_s(s: f64) -> String {
    if !s.is_finite() {
        "> 10^8 evaluations".to_string()
    } else if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

struct Row {
    workload: &'static str,
    k: usize,
    vars: usize,
    path: &'static str,
    causes: f64,
    engine: f64,
    engine_max: f64,
    brute: Option<f64>,
}

/// Mean over `models` of the median wall-clock per query.
fn measure(workload: &'static str, k: usize, models: &[Model], min_time: Duration) -> Row {
    measure_on(workload, k, models, min_time, Path::Auto)
}

fn measure_on(
    workload: &'static str,
    k: usize,
    models: &[Model],
    min_time: Duration,
    path: Path,
) -> Row {
    let opts = AttributeOptions {
        path,
        max_evaluations: 100_000_000,
        ..AttributeOptions::default()
    };
    let (mut engine, mut brute_sum, mut causes, mut vars) = (0.0, 0.0, 0, 0);
    let mut engine_max = 0.0f64;
    let mut brute_all = true;
    let mut path = "monotone";
    for model in models {
        let (t, att) = time(min_time, || attribute_with(model, &[], &opts));
        let att = match att {
            Ok(att) => att,
            Err(audita_causal::AttributeError::BudgetExhausted(_)) => {
                engine = f64::INFINITY;
                engine_max = f64::INFINITY;
                path = "general";
                brute_all = false;
                break;
            }
            Err(e) => panic!("{workload} k={k}: {e}"),
        };
        engine += t;
        engine_max = engine_max.max(t);
        causes += att.causes.len();
        vars += model.len();
        if att.path != Path::Monotone {
            path = "general";
        }
        if model.len() <= BRUTE_MAX_VARS {
            let json = to_json(model);
            let om = OracleModel::from_json(&json).expect("oracle reads the model");
            let (t, rep) = time(Duration::from_millis(1), || {
                brute::attribute(&om).expect("brute")
            });
            // Cross-check without contraction (the oracle does not contract).
            let plain = attribute_with(
                model,
                &[],
                &AttributeOptions {
                    contract: false,
                    ..opts
                },
            )
            .expect("plain");
            assert_eq!(
                plain.responsibility, rep.responsibility,
                "{workload} k={k}: engine and brute force disagree"
            );
            brute_sum += t;
        } else {
            brute_all = false;
        }
    }
    let n = models.len() as f64;
    Row {
        workload,
        k,
        vars: (vars as f64 / n).round() as usize,
        path,
        causes: causes as f64 / n,
        engine: engine / n,
        engine_max,
        brute: brute_all.then_some(brute_sum / n),
    }
}

const BRUTE_MAX_VARS: usize = 14;
const SEEDS: u64 = 5;

fn prototype(k: usize) -> Option<&'static str> {
    match k {
        2 => Some("0.02 s"),
        8 => Some("0.92 s"),
        12 => Some("15 s"),
        14 => Some("62 s"),
        _ => None,
    }
}

/// (label, colour, value of a row).
type Series = (&'static str, &'static str, Box<dyn Fn(&Row) -> Option<f64>>);

fn svg(rows: &[Row]) -> String {
    let (w, h, ml, mb) = (720.0, 420.0, 70.0, 50.0);
    let (x_max, y_min, y_max) = (64.0f64, -7.0f64, 2.0f64); // log10 seconds
    let x = |k: f64| ml + k / x_max * (w - ml - 20.0);
    let y = |s: f64| {
        let l = s.max(1e-7).log10().clamp(y_min, y_max);
        (h - mb) - (l - y_min) / (y_max - y_min) * (h - mb - 20.0)
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for e in (y_min as i32)..=(y_max as i32) {
        let yy = y(10f64.powi(e));
        let _ = write!(
            out,
            r##"<line x1="{ml}" x2="{}" y1="{yy}" y2="{yy}" stroke="#ddd"/><text x="5" y="{}">1e{e} s</text>"##,
            w - 20.0,
            yy + 4.0
        );
    }
    for k in (0..=64).step_by(8) {
        let xx = x(k as f64);
        let _ = write!(
            out,
            r#"<text x="{}" y="{}">{k}</text>"#,
            xx - 6.0,
            h - mb + 18.0
        );
    }
    let _ = write!(
        out,
        r#"<text x="{}" y="{}">interacting candidates k</text>"#,
        w / 2.0 - 60.0,
        h - 10.0
    );
    let series: [Series; 7] = [
        (
            "sp",
            "#1f77b4",
            Box::new(|r: &Row| (r.workload == "sp").then_some(r.engine)),
        ),
        (
            "conj-disj",
            "#2ca02c",
            Box::new(|r: &Row| (r.workload == "conj-disj").then_some(r.engine)),
        ),
        (
            "nonmono",
            "#d62728",
            Box::new(|r: &Row| (r.workload == "nonmono").then_some(r.engine)),
        ),
        (
            "nonmono-dense",
            "#9467bd",
            Box::new(|r: &Row| (r.workload == "nonmono-dense").then_some(r.engine)),
        ),
        (
            "sp, general path forced",
            "#8c564b",
            Box::new(|r: &Row| (r.workload == "sp (general path forced)").then_some(r.engine)),
        ),
        (
            "brute force (sp)",
            "#7f7f7f",
            Box::new(|r: &Row| if r.workload == "sp" { r.brute } else { None }),
        ),
        ("prototype", "#ff7f0e", Box::new(|_r: &Row| None)),
    ];
    for (i, (name, colour, f)) in series.iter().enumerate() {
        let mut pts: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|r| {
                f(r).filter(|s| s.is_finite())
                    .map(|s| (x(r.k as f64), y(s)))
            })
            .collect();
        if *name == "prototype" {
            pts = [(2, 0.02), (8, 0.92), (12, 15.0), (14, 62.0)]
                .iter()
                .map(|&(k, s)| (x(k as f64), y(s)))
                .collect();
        }
        let path: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let _ = write!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for (a, b) in &pts {
            let _ = write!(
                out,
                r#"<circle cx="{a:.1}" cy="{b:.1}" r="3" fill="{colour}"/>"#
            );
        }
        let ly = 30.0 + 16.0 * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{}" y="{}" width="12" height="4" fill="{colour}"/><text x="{}" y="{}">{name}</text>"#,
            w - 190.0,
            ly - 6.0,
            w - 172.0,
            ly
        );
    }
    out.push_str("</svg>\n");
    out
}

/// Median and worst wall-clock of `f` over `reps` runs.
fn median_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut samples = Vec::new();
    let mut last = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        last = Some(f());
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    (samples[samples.len() / 2], last.expect("one run"))
}

fn stats(xs: &[f64]) -> (f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[v.len() - 1])
}

/// The optimisation path on random non-monotone models, side by side with the general
/// path (cut off at `cutoff`) and brute force.
fn optimisation_table(quick: bool) -> String {
    let cutoff = Duration::from_secs(if quick { 5 } else { 10 });
    let models_per_k = if quick { 5 } else { 10 };
    let mut t = String::new();
    let _ = writeln!(t, "| k (variables) | models | principals | auto: median | auto: worst | optimisation path: median | optimisation path: worst | general path: median | general path: worst | brute force: median | causes listed (mean) | complete lists |");
    let _ = writeln!(
        t,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for k in [10, 14, 20, 30, 40, 64, 100, 200] {
        let models: Vec<Model> = (0..models_per_k)
            .map(|s| nonmono_dense(k, 90_000 + 1000 * k as u64 + s))
            .collect();
        let (mut auto, mut opt, mut gen, mut brute_t) = (vec![], vec![], vec![], vec![]);
        let (mut gen_failed, mut listed, mut complete) = (0, 0, 0);
        for m in &models {
            let reps = if k <= 40 { 5 } else { 3 };
            let (ta, a) = median_of(reps, || {
                attribute_with(m, &[], &AttributeOptions::default())
            });
            let a = a.unwrap_or_else(|e| panic!("auto k={k}: {e}"));
            let o_opts = AttributeOptions {
                path: Path::Optimisation,
                ..Default::default()
            };
            let (to, o) = median_of(reps, || attribute_with(m, &[], &o_opts));
            let o = o.unwrap_or_else(|e| panic!("optimisation k={k}: {e}"));
            assert_eq!(
                a.responsibility, o.responsibility,
                "auto vs optimisation k={k}"
            );
            auto.push(ta);
            opt.push(to);
            listed += o.causes.len();
            complete += usize::from(o.causes_complete);
            let g_opts = AttributeOptions {
                path: Path::General,
                max_evaluations: u64::MAX,
                ..Default::default()
            };
            let start = Instant::now();
            let dl = move || start.elapsed() >= cutoff;
            let g = attribute_until(m, &[], &g_opts, &dl);
            let tg = start.elapsed().as_secs_f64();
            match g {
                Ok(g) => {
                    assert_eq!(
                        g.responsibility, o.responsibility,
                        "general vs optimisation k={k}"
                    );
                    gen.push(tg);
                }
                Err(_) => {
                    gen_failed += 1;
                    gen.push(f64::INFINITY);
                }
            }
            if m.len() <= BRUTE_MAX_VARS {
                let om = OracleModel::from_json(&to_json(m)).expect("oracle reads the model");
                let (tb, rep) = median_of(1, || brute::attribute(&om).expect("brute"));
                let plain = attribute_with(
                    m,
                    &[],
                    &AttributeOptions {
                        contract: false,
                        path: Path::Optimisation,
                        ..Default::default()
                    },
                )
                .expect("plain");
                assert_eq!(
                    plain.responsibility, rep.responsibility,
                    "brute vs optimisation k={k}"
                );
                brute_t.push(tb);
            }
        }
        let (am, aw) = stats(&auto);
        let (om, ow) = stats(&opt);
        let (gm, gw) = stats(&gen);
        let gfmt = |s: f64| {
            if s.is_finite() {
                fmt_s(s)
            } else {
                format!("> {} s", cutoff.as_secs())
            }
        };
        let _ = writeln!(
            t,
            "| {k} | {} | 5 | {} | {} | {} | {} | {} | {}{} | {} | {:.1} | {}/{} |",
            models.len(),
            fmt_s(am),
            fmt_s(aw),
            fmt_s(om),
            fmt_s(ow),
            gfmt(gm),
            gfmt(gw),
            if gen_failed > 0 {
                format!(" ({gen_failed} cut off)")
            } else {
                String::new()
            },
            if brute_t.is_empty() {
                "—".to_string()
            } else {
                fmt_s(stats(&brute_t).0)
            },
            listed as f64 / models.len() as f64,
            complete,
            models.len()
        );
    }
    t
}

/// ρ for all principals of each HP2SAT model before issue 49 (the table of BENCHMARKS.md
/// at that time: monotone cut sets, general search, else the optimisation path with a
/// linear search over the cost bound).
const HP2SAT_BEFORE: &[(&str, &str)] = &[
    ("assassin_first", "12.5 µs"),
    ("forest_fire_conjunctive", "3.2 µs"),
    ("forest_fire_disjunctive", "2.6 µs"),
    ("assassin_second", "6.8 µs"),
    ("binary_tree_1", "1.9 µs"),
    ("dummy_xnor", "2.7 µs"),
    ("dummy_xor", "0.8 µs"),
    ("billy_suzy", "6.7 µs"),
    ("prisoners", "2.9 µs"),
    ("railroad", "1.2 µs"),
    ("billy_suzy_extended", "1.4 µs"),
    ("dummy", "21.7 µs"),
    ("binary_tree_2", "6.1 µs"),
    ("dummy2", "16.3 µs"),
    ("binary_tree_3", "17.9 µs"),
    ("benchmark_model", "87.6 µs"),
    ("binary_tree_4", "257.9 µs"),
    ("steal_master_key", "18.11 ms"),
    ("leakage", "10.48 ms"),
    ("leakage_preemption", "12.28 ms"),
    ("binary_tree_5", "495.68 ms"),
    ("steal_master_key_8", "4.43 s"),
    ("binary_tree_6", "168.69 ms"),
    ("binary_tree_7", "1.26 s"),
    ("steal_master_key_20", "> 10 s (> 120 s)"),
    ("binary_tree_8", "> 10 s (10.6 s)"),
    ("steal_master_key_50", "> 10 s"),
    ("binary_tree_9", "> 10 s (> 85 s)"),
    ("binary_tree_10", "> 10 s"),
    ("binary_tree_11", "> 10 s"),
    ("dummy_combined_with_binary_tree", "> 10 s"),
];

/// Cross-checks one model's ρ for all: brute force (uncontracted) where it runs, the
/// optimisation path on the whole model (no decomposition) where it answers within
/// 10 s, the closed forms (ρ = 1/(depth+1) on the binary trees, 1/(depth+5) on the tree
/// under the dummy model), and `check_cause` on the
/// listed best cause of a sample of principals (a principal with ρ = 0: none of its
/// variables is a cause alone). Panics on any disagreement; returns the median time of
/// one check, the time of the whole-model solver (one run) and what was checked.
fn hp2sat_cross_check(
    name: &str,
    m: &Model,
    a: &Attribution,
    quick: bool,
) -> (Option<f64>, String, String) {
    let mut against = Vec::new();
    if m.len() <= BRUTE_MAX_VARS {
        let om = OracleModel::from_json(&to_json(m)).expect("oracle reads the model");
        let rep = brute::attribute(&om).expect("brute");
        let plain = attribute_with(
            m,
            &[],
            &AttributeOptions {
                contract: false,
                ..AttributeOptions::default()
            },
        )
        .expect("plain");
        assert_eq!(
            plain.responsibility, rep.responsibility,
            "{name}: brute force"
        );
        against.push("oracle".to_string());
    }
    let start = Instant::now();
    let limit = Duration::from_secs(10);
    let dl = move || start.elapsed() >= limit;
    let solver = AttributeOptions {
        path: Path::Optimisation,
        ..AttributeOptions::default()
    };
    let whole = attribute_until(m, &[], &solver, &dl);
    let whole_time = start.elapsed().as_secs_f64();
    let whole_time = match whole {
        Ok(whole) => {
            assert_eq!(
                whole.responsibility, a.responsibility,
                "{name}: whole-model solver"
            );
            against.push("whole-model solver".to_string());
            fmt_s(whole_time)
        }
        Err(_) => "> 10 s".to_string(),
    };
    if let Some(depth) = name.strip_prefix("binary_tree_") {
        let _: u32 = depth.parse().expect("tree depth");
        for (p, &rho) in &a.responsibility {
            let i: u64 = p.trim_start_matches('n').parse().expect("node");
            let d = 63 - (i + 1).leading_zeros() as u64;
            assert_eq!(rho, 1.0 / (d + 1) as f64, "{name}: {p}");
        }
        against.push("closed form".to_string());
    }
    if name == "dummy_combined_with_binary_tree" {
        // Tree nodes at depth d: 1/(d + 1 + |{B, E, G, H}|); see the closed form in
        // causal/tests/it/hp2sat.rs.
        for (p, &rho) in &a.responsibility {
            let want = match p.as_str() {
                "F" => 1.0,
                "C" | "D" => 0.25,
                "A" => 0.2,
                "B" | "E" | "G" | "H" => 0.0,
                node => {
                    let i: u64 = node.trim_start_matches('n').parse().expect("node");
                    1.0 / (63 - (i + 1).leading_zeros() as u64 + 5) as f64
                }
            };
            assert_eq!(rho, want, "{name}: {p}");
        }
        against.push("closed form".to_string());
    }
    let actual = m.evaluate(&[]);
    let principals = m.principals();
    let sample = if quick { 8 } else { 32 };
    let step = (principals.len() / sample).max(1);
    let opts = AttributeOptions::default();
    let mut times = Vec::new();
    let mut checks = 0;
    for p in principals.iter().step_by(step) {
        let rho = a.responsibility_of(p);
        let sets: Vec<Vec<(audita_causal::VarId, bool)>> = match a.best_cause_of(p) {
            Some(c) => vec![c
                .vars
                .iter()
                .map(|v| {
                    let id = m.var(v).expect("cause var");
                    (id, actual[id.index()])
                })
                .collect()],
            None => m
                .variables()
                .filter(|v| v.principal.as_deref() == Some(p.as_str()))
                .map(|v| {
                    let id = m.var(&v.name).expect("var");
                    vec![(id, actual[id.index()])]
                })
                .collect(),
        };
        for x in sets {
            let t = Instant::now();
            let chk = check_cause(m, &x, None, &opts, &NoDeadline).expect("check");
            times.push(t.elapsed().as_secs_f64());
            checks += 1;
            if rho > 0.0 {
                assert!(chk.is_cause, "{name}: best cause of {p}: {chk:?}");
                assert_eq!(chk.grade, Some(rho), "{name}: {p}");
            } else {
                assert!(!chk.is_cause, "{name}: {p} has ρ = 0: {chk:?}");
            }
        }
    }
    against.push(format!("{checks} checks"));
    let check = (!times.is_empty()).then(|| stats(&times).0);
    (check, whole_time, against.join(", "))
}

/// HP2SAT's benchmark models and queries.
fn hp2sat_tables(quick: bool) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/hp2sat");
    let queries: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("queries.json")).expect("queries.json"),
    )
    .expect("queries parse");
    let mut names: Vec<String> = std::fs::read_dir(root.join("models"))
        .expect("models dir")
        .filter_map(|e| e.ok())
        .map(|e| {
            e.file_name()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string()
        })
        .collect();
    names.sort_by_key(|n| {
        let text =
            std::fs::read_to_string(root.join(format!("models/{n}.json"))).unwrap_or_default();
        (text.len(), n.clone())
    });
    let mut t = String::new();
    let _ = writeln!(t, "ρ for every principal (one principal per endogenous variable; context: every exogenous variable true), the default options and the CLI's 10 s deadline, median of {} runs; a single `--check` is the median over the sampled principals of checking that principal's listed best cause; \"before\" is this table before issue 49 (optimisation path with a linear cost search, no modules); \"core-guided search alone\" is the optimisation path forced on the whole model (no decomposition), one run:\n", if quick { 1 } else { 3 });
    let _ = writeln!(t, "| model | variables | principals | path | causes listed | complete | ρ for all: before | core-guided search alone | ρ for all | per principal | single `--check` | ratio | checked against |");
    let _ = writeln!(
        t,
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---|"
    );
    for n in &names {
        let text = std::fs::read_to_string(root.join(format!("models/{n}.json"))).expect("model");
        let m = Model::from_json(&text).expect("model parses");
        let reps = if quick { 1 } else { 3 };
        let cutoff = Duration::from_secs(10);
        let (tt, a): (f64, Result<Attribution, _>) = median_of(reps, || {
            let start = Instant::now();
            let dl = move || start.elapsed() >= cutoff;
            attribute_until(&m, &[], &AttributeOptions::default(), &dl)
        });
        let np = m.principals().len();
        let before = HP2SAT_BEFORE
            .iter()
            .find(|(name, _)| name == n)
            .map_or("—", |(_, b)| b);
        match a {
            Ok(a) => {
                let (check, whole, checked) = hp2sat_cross_check(n, &m, &a, quick);
                let _ = writeln!(
                    t,
                    "| {n} | {} | {np} | {:?} | {} | {} | {before} | {whole} | {} | {} | {} | {} | {checked} |",
                    m.len(),
                    a.path,
                    a.causes.len(),
                    a.causes_complete,
                    fmt_s(tt),
                    fmt_s(tt / np.max(1) as f64),
                    check.map_or("—".into(), fmt_s),
                    check.map_or("—".into(), |c| format!("{:.1}×", tt / c)),
                );
            }
            Err(e) => {
                let _ = writeln!(
                    t,
                    "| {n} | {} | {np} | — | — | — | {before} | — | not answered within the default bounds and 10 s: {e} | — | — | — | — |",
                    m.len()
                );
            }
        }
    }
    let _ = writeln!(t, "\nHP2SAT's own queries (`--check X`: AC1–AC3 and a smallest witness), every single-cause test of its suite:\n");
    let _ = writeln!(
        t,
        "| model | variables | queries | agree with HP2SAT | check: median | check: worst |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|---:|---:|");
    let mut by_model: std::collections::BTreeMap<String, Vec<&serde_json::Value>> =
        Default::default();
    for q in queries["queries"].as_array().expect("queries") {
        by_model
            .entry(q["model"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(q);
    }
    let opts = AttributeOptions {
        contract: false,
        ..Default::default()
    };
    for (name, qs) in &by_model {
        let text =
            std::fs::read_to_string(root.join(format!("models/{name}.json"))).expect("model");
        let mut times = Vec::new();
        let mut agree = 0;
        let mut vars = 0;
        for q in qs {
            let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
            for (k, v) in q["context"].as_object().expect("context") {
                doc["variables"][k]["value"] = v.clone();
            }
            doc["outcome"] = q["phi"].clone();
            let m = Model::from_json(&doc.to_string()).expect("query model");
            vars = m.len();
            let cause: Vec<_> = q["cause"]
                .as_object()
                .expect("cause")
                .iter()
                .map(|(k, v)| (m.var(k).expect("cause var"), v.as_bool().unwrap_or(true)))
                .collect();
            let (tc, chk) = median_of(if quick { 1 } else { 3 }, || {
                check_cause(&m, &cause, None, &opts, &NoDeadline)
            });
            let Ok(chk) = chk else {
                times.push(tc);
                continue;
            };
            let e = &q["expected"];
            if (chk.ac1, chk.ac2, chk.ac3)
                == (
                    e["ac1"].as_bool().unwrap_or(false),
                    e["ac2"].as_bool().unwrap_or(false),
                    e["ac3"].as_bool().unwrap_or(false),
                )
            {
                agree += 1;
            }
            times.push(tc);
        }
        let (med, worst) = stats(&times);
        let _ = writeln!(
            t,
            "| {name} | {vars} | {} | {agree}/{} | {} | {} |",
            qs.len(),
            qs.len(),
            fmt_s(med),
            fmt_s(worst)
        );
    }
    t
}

fn main() {
    // `cargo bench` passes `--bench`; ignore arguments.
    let quick = std::env::var_os("AUDITA_BENCH_QUICK").is_some();
    if std::env::var("AUDITA_BENCH_ONLY").as_deref() == Ok("hp2sat") {
        print!("{}", hp2sat_tables(quick));
        return;
    }
    let min_time = if quick {
        Duration::from_millis(20)
    } else {
        Duration::from_millis(300)
    };
    let mut rows = Vec::new();
    for k in [2, 4, 6, 8, 10, 12, 13, 14, 16, 24, 32, 48, 64] {
        let models: Vec<Model> = (0..SEEDS)
            .map(|s| sp_incident(k, 1000 * k as u64 + s))
            .collect();
        rows.push(measure("sp", k, &models, min_time));
    }
    for k in [2, 4, 6, 8, 10, 12, 14, 16, 20, 24] {
        let models: Vec<Model> = (0..SEEDS)
            .map(|s| sp_incident(k, 1000 * k as u64 + s))
            .collect();
        let row = measure_on(
            "sp (general path forced)",
            k,
            &models,
            min_time,
            Path::General,
        );
        let slow = row.engine > 1.0;
        rows.push(row);
        if slow {
            break;
        }
    }
    for k in [8, 16, 32, 64] {
        rows.push(measure("conj-disj", k, &[conj_disj(k)], min_time));
    }
    for k in [
        2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40,
    ] {
        let models: Vec<Model> = (0..SEEDS)
            .map(|s| nonmono(k, 1000 * k as u64 + s))
            .collect();
        let row = measure("nonmono", k, &models, min_time);
        let slow = row.engine > 1.0;
        rows.push(row);
        if slow {
            break;
        }
    }
    for k in [
        2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38, 40,
    ] {
        let models: Vec<Model> = (0..SEEDS)
            .map(|s| nonmono_dense(k, 7000 * k as u64 + s))
            .collect();
        let row = measure("nonmono-dense", k, &models, min_time);
        let slow = row.engine > 1.0;
        rows.push(row);
        if slow {
            break;
        }
    }
    let mut t = String::new();
    let _ = writeln!(t, "| workload | k | variables | path | minimal causes (mean) | engine / query (mean) | engine (slowest model) | brute force / query (mean) | prototype |");
    let _ = writeln!(t, "|---|---:|---:|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
            r.workload,
            r.k,
            r.vars,
            r.path,
            r.causes,
            fmt_s(r.engine),
            fmt_s(r.engine_max),
            r.brute.map_or("—".into(), fmt_s),
            if r.workload.starts_with("sp") {
                prototype(r.k).unwrap_or("—")
            } else {
                "—"
            }
        );
    }
    print!("{t}");
    println!("\n### The optimisation path on random non-monotone models\n");
    print!("{}", optimisation_table(quick));
    println!("\n### HP2SAT benchmark models\n");
    print!("{}", hp2sat_tables(quick));
    if let Some(path) = std::env::var_os("AUDITA_BENCH_SVG") {
        std::fs::write(path, svg(&rows)).expect("write svg");
    }
}
