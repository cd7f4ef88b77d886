//! The oracle's own model type, JSON reader, expression reader and evaluator.
//!
//! Design constraints: written independently of the engine. Expressions are read by
//! precedence climbing over a character cursor; evaluation is recursive with memo,
//! without a precomputed topological order (a cycle is detected on the fly).

use serde_json::Value;

/// A boolean term over variable indices.
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// Constant.
    Lit(bool),
    /// Variable index.
    Ref(usize),
    /// Negation.
    Neg(Box<Term>),
    /// Binary conjunction.
    Both(Box<Term>, Box<Term>),
    /// Binary disjunction.
    Either(Box<Term>, Box<Term>),
}

/// A small structural model.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleModel {
    /// Variable names (in declaration order of the JSON object as read).
    pub names: Vec<String>,
    /// Owner per variable.
    pub principal: Vec<Option<String>>,
    /// Candidate flag per variable.
    pub candidate: Vec<bool>,
    /// `Some(v)` for exogenous variables.
    pub value: Vec<Option<bool>>,
    /// Equation for endogenous variables.
    pub eq: Vec<Option<Term>>,
    /// The outcome.
    pub outcome: Term,
}

impl OracleModel {
    /// Reads SPEC §7 JSON.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let obj = doc.as_object().ok_or("top level is not an object")?;
        let vars = obj
            .get("variables")
            .and_then(Value::as_object)
            .ok_or("no variables object")?;
        let outcome_src = obj
            .get("outcome")
            .and_then(Value::as_str)
            .ok_or("no outcome string")?;
        let names: Vec<String> = vars.keys().cloned().collect();
        let mut m = OracleModel {
            names: names.clone(),
            principal: Vec::new(),
            candidate: Vec::new(),
            value: Vec::new(),
            eq: Vec::new(),
            outcome: Term::Lit(false),
        };
        let mut eq_src = Vec::new();
        for n in &names {
            let d = vars[n].as_object().ok_or(format!("{n}: not an object"))?;
            m.principal
                .push(d.get("principal").and_then(Value::as_str).map(String::from));
            m.candidate
                .push(d.get("candidate").and_then(Value::as_bool).unwrap_or(true));
            m.value.push(d.get("value").and_then(Value::as_bool));
            eq_src.push(d.get("eq").and_then(Value::as_str).map(String::from));
        }
        for s in eq_src {
            let t = match s {
                Some(s) => Some(read_term(&s, &names)?),
                None => None,
            };
            m.eq.push(t);
        }
        m.outcome = read_term(outcome_src, &names)?;
        Ok(m)
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether there are no variables.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Index of a variable.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Values of all variables and of the outcome when the variables in `fixed` are
    /// held at the given values (others follow their mechanisms).
    pub fn solve(&self, fixed: &[Option<bool>]) -> Result<(Vec<bool>, bool), String> {
        let n = self.len();
        let mut memo: Vec<Option<bool>> = vec![None; n];
        let mut busy = vec![false; n];
        for i in 0..n {
            self.value_of(i, fixed, &mut memo, &mut busy)?;
        }
        let vals: Vec<bool> = memo.iter().map(|v| v.unwrap_or(false)).collect();
        let y = term_value(&self.outcome, &vals);
        Ok((vals, y))
    }

    fn value_of(
        &self,
        i: usize,
        fixed: &[Option<bool>],
        memo: &mut Vec<Option<bool>>,
        busy: &mut Vec<bool>,
    ) -> Result<bool, String> {
        if let Some(v) = memo[i] {
            return Ok(v);
        }
        if busy[i] {
            return Err(format!("cycle through {}", self.names[i]));
        }
        let v = if let Some(Some(f)) = fixed.get(i) {
            *f
        } else if let Some(v) = self.value[i] {
            v
        } else {
            busy[i] = true;
            let eq = self.eq[i]
                .as_ref()
                .ok_or(format!("{}: no mechanism", self.names[i]))?;
            let mut refs = Vec::new();
            refs_of(eq, &mut refs);
            let mut vals = vec![false; self.len()];
            for r in refs {
                vals[r] = self.value_of(r, fixed, memo, busy)?;
            }
            busy[i] = false;
            term_value(eq, &vals)
        };
        memo[i] = Some(v);
        Ok(v)
    }
}

fn refs_of(t: &Term, out: &mut Vec<usize>) {
    match t {
        Term::Lit(_) => {}
        Term::Ref(i) => out.push(*i),
        Term::Neg(a) => refs_of(a, out),
        Term::Both(a, b) | Term::Either(a, b) => {
            refs_of(a, out);
            refs_of(b, out);
        }
    }
}

/// Evaluates a term against a full assignment.
pub fn term_value(t: &Term, vals: &[bool]) -> bool {
    match t {
        Term::Lit(b) => *b,
        Term::Ref(i) => vals[*i],
        Term::Neg(a) => !term_value(a, vals),
        Term::Both(a, b) => term_value(a, vals) && term_value(b, vals),
        Term::Either(a, b) => term_value(a, vals) || term_value(b, vals),
    }
}

/// Reads an expression by precedence climbing (`|` = 1, `&` = 2, prefix `!`).
pub fn read_term(src: &str, names: &[String]) -> Result<Term, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut pos = 0;
    let t = climb(&chars, &mut pos, 1, names)?;
    skip_ws(&chars, &mut pos);
    if pos != chars.len() {
        return Err(format!("trailing input at char {pos}"));
    }
    Ok(t)
}

fn skip_ws(c: &[char], pos: &mut usize) {
    while *pos < c.len() && c[*pos].is_whitespace() {
        *pos += 1;
    }
}

fn climb(c: &[char], pos: &mut usize, min_prec: u8, names: &[String]) -> Result<Term, String> {
    let mut lhs = prefix(c, pos, names)?;
    loop {
        skip_ws(c, pos);
        let (prec, is_and) = match c.get(*pos) {
            Some('|') => (1, false),
            Some('&') => (2, true),
            _ => break,
        };
        if prec < min_prec {
            break;
        }
        *pos += 1;
        let rhs = climb(c, pos, prec + 1, names)?;
        lhs = if is_and {
            Term::Both(Box::new(lhs), Box::new(rhs))
        } else {
            Term::Either(Box::new(lhs), Box::new(rhs))
        };
    }
    Ok(lhs)
}

fn prefix(c: &[char], pos: &mut usize, names: &[String]) -> Result<Term, String> {
    skip_ws(c, pos);
    match c.get(*pos) {
        None => Err("unexpected end".into()),
        Some('!') => {
            *pos += 1;
            Ok(Term::Neg(Box::new(prefix(c, pos, names)?)))
        }
        Some('(') => {
            *pos += 1;
            let t = climb(c, pos, 1, names)?;
            skip_ws(c, pos);
            if c.get(*pos) != Some(&')') {
                return Err(format!("expected ) at char {pos}"));
            }
            *pos += 1;
            Ok(t)
        }
        Some(ch) if ch.is_ascii_alphabetic() || *ch == '_' => {
            let start = *pos;
            while *pos < c.len() && (c[*pos].is_ascii_alphanumeric() || "_.:-".contains(c[*pos])) {
                *pos += 1;
            }
            let word: String = c[start..*pos].iter().collect();
            match word.as_str() {
                "true" => Ok(Term::Lit(true)),
                "false" => Ok(Term::Lit(false)),
                w => names
                    .iter()
                    .position(|n| n == w)
                    .map(Term::Ref)
                    .ok_or(format!("unknown {w}")),
            }
        }
        Some(ch) => Err(format!("unexpected {ch:?} at char {pos}")),
    }
}
