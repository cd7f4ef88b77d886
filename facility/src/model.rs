//! The structural model of an incident in the SPEC §7 interchange format, derived from
//! the record: the input the causal engine (`audita-causal`) grades.
//!
//! Design constraints:
//! - Variables are the production-gated commands (`m<index>`) and the omission
//!   variables (`absent.<duty>`), exactly the oracle's candidates, so the engine and the
//!   oracle grade the same variables.
//! - Mechanisms come from the citation structure: an origin command is exogenous
//!   (`value: true`); a relay is `|` (any-policy) or `&` (all-policy) over its cited
//!   inputs.
//! - The outcome comes from recorded actuation semantics: the world is tabulated over
//!   the actuating commands and absences only (everything upstream at actual values),
//!   and the minimal true sets are written as a disjunction of conjunctions. A
//!   non-monotone actuation layer is refused rather than approximated.
//! - Output is deterministic text (variables in index order).

use std::collections::BTreeSet;

use crate::oracle::{
    candidates, minimal_causes, owner, prime_implicants, tabulate, OracleError, Variable,
};
use crate::world::{Derivation, Destination, WorldSpec};

/// Identifier of a variable in the model.
pub fn var_name(v: Variable) -> String {
    match v {
        Variable::Command(c) => format!("m{}", c.0),
        Variable::Absence(d) => format!("absent.{}", d.0),
    }
}

fn quote(s: &str) -> String {
    serde_like_escape(s)
}

fn serde_like_escape(s: &str) -> String {
    let mut out = String::from("\"");
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Builds the SPEC §7 JSON model of the recorded incident.
pub fn model_json(spec: &WorldSpec) -> Result<String, OracleError> {
    let (adverse, vars) = candidates(spec);
    let gated: BTreeSet<Variable> = vars.iter().copied().collect();
    let mut entries = Vec::new();
    for v in &vars {
        let p = quote(spec.name(owner(spec, *v)));
        let body = match v {
            Variable::Command(c) => {
                let cmd = &spec.commands[c.0 as usize];
                match cmd.derivation {
                    Derivation::Origin => format!("{{\"principal\": {p}, \"value\": true}}"),
                    d => {
                        let op = if d == Derivation::RelayAll {
                            " & "
                        } else {
                            " | "
                        };
                        let ins: Vec<String> = cmd
                            .cites
                            .iter()
                            .filter(|x| gated.contains(&Variable::Command(**x)))
                            .map(|x| format!("m{}", x.0))
                            .collect();
                        let eq = if ins.is_empty() {
                            "false".to_string()
                        } else {
                            ins.join(op)
                        };
                        format!("{{\"principal\": {p}, \"eq\": {}}}", quote(&eq))
                    }
                }
            }
            Variable::Absence(_) => format!("{{\"principal\": {p}, \"value\": true}}"),
        };
        entries.push(format!("{}: {}", quote(&var_name(*v)), body));
    }
    let outcome = if adverse.is_none() {
        "false".to_string()
    } else {
        let act: Vec<Variable> = vars
            .iter()
            .copied()
            .filter(|v| match v {
                Variable::Command(c) => {
                    spec.commands[c.0 as usize].destination == Destination::Actuator
                }
                Variable::Absence(_) => true,
            })
            .collect();
        let table = tabulate(spec, &act, &BTreeSet::new())?;
        let n = act.len();
        // Minimal true sets of a monotone function = its prime implicants.
        minimal_causes(n, &table)?; // monotonicity check
        let implicants = prime_implicants(n, &table);
        if implicants.contains(&0) {
            "true".to_string()
        } else if implicants.is_empty() {
            "false".to_string()
        } else {
            implicants
                .iter()
                .map(|m| {
                    let c: Vec<String> = (0..n)
                        .filter(|i| m & (1 << i) != 0)
                        .map(|i| var_name(act[i]))
                        .collect();
                    format!("({})", c.join(" & "))
                })
                .collect::<Vec<_>>()
                .join(" | ")
        }
    };
    // Every non-sensor principal must appear in the engine's profile: principals with no
    // variable get a non-candidate placeholder.
    let mut named: BTreeSet<String> = vars
        .iter()
        .map(|v| spec.name(owner(spec, *v)).to_string())
        .collect();
    for (i, p) in spec.principals.iter().enumerate() {
        if p.role != crate::world::Role::Sensor && named.insert(p.name.clone()) {
            entries.push(format!(
                "{}: {{\"principal\": {}, \"value\": false, \"candidate\": false}}",
                quote(&format!("idle.{i}")),
                quote(&p.name)
            ));
        }
    }
    Ok(format!(
        "{{\"variables\": {{{}}}, \"outcome\": {}}}",
        entries.join(", "),
        quote(&outcome)
    ))
}
