//! Shared helpers for the integration tests: a seeded random model generator.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Settings for random structural models.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub exogenous: usize,
    pub endogenous: usize,
    pub monotone: bool,
    pub max_depth: u32,
}

fn expr(rng: &mut ChaCha8Rng, names: &[String], depth: u32, monotone: bool) -> String {
    if names.is_empty() {
        return if rng.gen_bool(0.5) {
            "true".into()
        } else {
            "false".into()
        };
    }
    if depth == 0 || rng.gen_bool(0.3) {
        let v = names[rng.gen_range(0..names.len())].clone();
        if !monotone && rng.gen_bool(0.3) {
            return format!("!{v}");
        }
        return v;
    }
    let k = rng.gen_range(2..=3);
    let op = if rng.gen_bool(0.5) { " & " } else { " | " };
    let parts: Vec<String> = (0..k)
        .map(|_| expr(rng, names, depth - 1, monotone))
        .collect();
    let body = format!("({})", parts.join(op));
    if !monotone && rng.gen_bool(0.2) {
        format!("!{body}")
    } else {
        body
    }
}

/// A random model in SPEC §7 JSON (variables named so that name order is not
/// topological order).
pub fn random_model(seed: u64, shape: Shape) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let principals = ["\"p0\"", "\"p1\"", "\"p2\"", "null"];
    let mut decls = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for i in 0..shape.exogenous {
        let name = format!("z{}_x{i}", shape.exogenous + shape.endogenous - i);
        let p = principals[rng.gen_range(0..principals.len())];
        let cand = rng.gen_bool(0.85);
        let val = rng.gen_bool(0.75);
        decls.push(format!(
            r#""{name}": {{"principal": {p}, "value": {val}, "candidate": {cand}}}"#
        ));
        names.push(name);
    }
    for i in 0..shape.endogenous {
        let name = format!("y{}_e{i}", shape.endogenous - i);
        let p = principals[rng.gen_range(0..principals.len())];
        let cand = rng.gen_bool(0.6);
        let eq = expr(&mut rng, &names, shape.max_depth, shape.monotone);
        decls.push(format!(
            r#""{name}": {{"principal": {p}, "eq": "{eq}", "candidate": {cand}}}"#
        ));
        names.push(name);
    }
    // The outcome prefers later variables so that the structure is used.
    let tail: Vec<String> = names.iter().rev().take(4).cloned().collect();
    let outcome = expr(&mut rng, &tail, 2, shape.monotone);
    format!(
        "{{\"variables\": {{{}}}, \"outcome\": \"{outcome}\"}}",
        decls.join(", ")
    )
}

/// A random model built of modules in the HP2SAT style: nested gadgets (a few
/// endogenous variables with negation, preemption and shared reads inside), each read
/// by the rest of the model only through its root; leaves are exogenous messages or
/// relays of a shared context variable; now and then a cross read breaks a module.
/// At most `budget` variables.
pub fn random_modular_model(seed: u64, budget: usize) -> String {
    let mut g = Modular {
        rng: ChaCha8Rng::seed_from_u64(seed),
        decls: Vec::new(),
        budget,
        made: Vec::new(),
    };
    let ctx = g.fresh("ctx");
    g.decls.push(format!(
        r#""{ctx}": {{"principal": null, "value": true, "candidate": false}}"#
    ));
    let parts: Vec<String> = (0..g.rng.gen_range(1..=2))
        .map(|_| g.module(2, &ctx))
        .collect();
    let outcome = g.expr(&parts, 2);
    format!(
        "{{\"variables\": {{{}}}, \"outcome\": \"{outcome}\"}}",
        g.decls.join(", ")
    )
}

struct Modular {
    rng: ChaCha8Rng,
    decls: Vec<String>,
    budget: usize,
    /// Every variable made so far (for the occasional cross read).
    made: Vec<String>,
}

impl Modular {
    fn fresh(&mut self, stem: &str) -> String {
        let name = format!("{stem}{}", self.decls.len());
        self.budget = self.budget.saturating_sub(1);
        name
    }

    fn principal(&mut self) -> &'static str {
        ["\"p0\"", "\"p1\"", "\"p2\"", "null"][self.rng.gen_range(0..4)]
    }

    fn leaf(&mut self, ctx: &str) -> String {
        let p = self.principal();
        let cand = self.rng.gen_bool(0.85);
        let name = self.fresh("m");
        if self.rng.gen_bool(0.3) {
            let neg = if self.rng.gen_bool(0.3) { "!" } else { "" };
            self.decls.push(format!(
                r#""{name}": {{"principal": {p}, "eq": "{neg}{ctx}", "candidate": {cand}}}"#
            ));
        } else {
            let val = self.rng.gen_bool(0.75);
            self.decls.push(format!(
                r#""{name}": {{"principal": {p}, "value": {val}, "candidate": {cand}}}"#
            ));
        }
        self.made.push(name.clone());
        name
    }

    /// A random expression over `names` (negation 30 %).
    fn expr(&mut self, names: &[String], depth: u32) -> String {
        if names.len() == 1 || depth == 0 || self.rng.gen_bool(0.25) {
            let v = names[self.rng.gen_range(0..names.len())].clone();
            return if self.rng.gen_bool(0.3) {
                format!("!{v}")
            } else {
                v
            };
        }
        let k = self.rng.gen_range(2..=names.len().min(3));
        let op = if self.rng.gen_bool(0.5) { " & " } else { " | " };
        let parts: Vec<String> = (0..k).map(|_| self.expr(names, depth - 1)).collect();
        format!("({})", parts.join(op))
    }

    /// A module: inputs (leaves or modules), one or two inner variables, a root.
    fn module(&mut self, depth: u32, ctx: &str) -> String {
        if self.budget <= 2 {
            return self.leaf(ctx);
        }
        let k = self.rng.gen_range(1..=3);
        let mut inputs = Vec::new();
        for _ in 0..k {
            let sub = if depth > 0 && self.budget > 4 && self.rng.gen_bool(0.5) {
                self.module(depth - 1, ctx)
            } else {
                self.leaf(ctx)
            };
            inputs.push(sub);
        }
        if !self.made.is_empty() && self.rng.gen_bool(0.1) {
            // A cross read: some earlier variable, perhaps inside another module.
            let v = self.made[self.rng.gen_range(0..self.made.len())].clone();
            if !inputs.contains(&v) {
                inputs.push(v);
            }
        }
        let inner = if self.budget > 2 {
            self.rng.gen_range(0..=2)
        } else {
            0
        };
        let mut names = inputs.clone();
        for _ in 0..inner {
            let eq = self.expr(&names, 2);
            let p = self.principal();
            let cand = self.rng.gen_bool(0.7);
            let name = self.fresh("g");
            self.decls.push(format!(
                r#""{name}": {{"principal": {p}, "eq": "{eq}", "candidate": {cand}}}"#
            ));
            self.made.push(name.clone());
            names.push(name);
        }
        let eq = self.expr(&names, 2);
        let p = self.principal();
        let cand = self.rng.gen_bool(0.7);
        let root = self.fresh("r");
        self.decls.push(format!(
            r#""{root}": {{"principal": {p}, "eq": "{eq}", "candidate": {cand}}}"#
        ));
        self.made.push(root.clone());
        root
    }
}
