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
