//! The predicate expression language: typed boolean/comparison expressions over one
//! entity's telemetry fields.
//!
//! Design constraints:
//! - Grammar (`!` binds tightest, then comparisons, then `&&`, then `||`):
//!   ```text
//!   or   := and ("||" and)*
//!   and  := not ("&&" not)*
//!   not  := "!" not | cmp
//!   cmp  := atom (("<" | "<=" | ">" | ">=" | "==" | "!=") atom)?
//!   atom := NUMBER | "-" NUMBER | STRING | "true" | "false" | FIELD | "(" or ")"
//!   ```
//!   `FIELD` matches `[A-Za-z_][A-Za-z0-9_.]*`; `STRING` is double-quoted without
//!   escapes. Example: `speed_mm_per_s > 1200 && !halted && mode == "auto"`.
//! - Typed: numbers compare with numbers (integers and floats alike), booleans and
//!   strings with their own kind (`==`, `!=` only). A comparison of literals of
//!   different kinds, or ordering of booleans/strings, is refused at load. At
//!   evaluation a field that is absent, or of another kind than the comparison
//!   needs, makes the expression *undefined*, which never holds — a missing reading
//!   cannot fire a predicate.
//! - Bounded: at most [`MAX_LEN`] bytes and [`MAX_DEPTH`] nesting levels; parse
//!   errors are one line naming the byte offset.

use std::collections::BTreeMap;

use crate::telemetry::Value;

/// Longest expression (bytes).
pub const MAX_LEN: usize = 4096;
/// Deepest nesting.
pub const MAX_DEPTH: usize = 64;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

/// A parsed expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal.
    Lit(Value),
    /// A telemetry field of the entity.
    Field(String),
    /// Negation.
    Not(Box<Expr>),
    /// Conjunction.
    And(Vec<Expr>),
    /// Disjunction.
    Or(Vec<Expr>),
    /// Comparison.
    Cmp(Cmp, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Value),
    Str(String),
    Ident(String),
    Op(&'static str),
}

fn lex(text: &str) -> Result<Vec<(usize, Tok)>, String> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'e') {
                i += 1;
            }
            let s = &text[start..i];
            let v = if let Ok(n) = s.parse::<i64>() {
                Value::Int(n)
            } else {
                match s.parse::<f64>() {
                    Ok(f) if f.is_finite() => Value::Float(f),
                    _ => return Err(format!("bad number {s:?} at byte {start}")),
                }
            };
            out.push((start, Tok::Num(v)));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push((start, Tok::Ident(text[start..i].to_string())));
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += 1;
            }
            if i >= b.len() {
                return Err(format!("unterminated string at byte {start}"));
            }
            out.push((start, Tok::Str(text[start + 1..i].to_string())));
            i += 1;
        } else {
            let two = text.get(i..i + 2).unwrap_or("");
            let op: &'static str = match two {
                "&&" => "&&",
                "||" => "||",
                "<=" => "<=",
                ">=" => ">=",
                "==" => "==",
                "!=" => "!=",
                _ => match c {
                    b'<' => "<",
                    b'>' => ">",
                    b'!' => "!",
                    b'(' => "(",
                    b')' => ")",
                    b'-' => "-",
                    _ => {
                        return Err(format!(
                            "unexpected character {:?} at byte {start}",
                            text[start..].chars().next().unwrap_or('?')
                        ))
                    }
                },
            };
            i += op.len();
            out.push((start, Tok::Op(op)));
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    end: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.pos) {
            Some((_, Tok::Op(o))) => Some(o),
            _ => None,
        }
    }
    fn at(&self) -> usize {
        self.toks.get(self.pos).map(|t| t.0).unwrap_or(self.end)
    }
    fn or(&mut self, depth: usize) -> Result<Expr, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "nesting deeper than {MAX_DEPTH} at byte {}",
                self.at()
            ));
        }
        let mut items = vec![self.and(depth)?];
        while self.peek_op() == Some("||") {
            self.pos += 1;
            items.push(self.and(depth)?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::Or(items)
        })
    }
    fn and(&mut self, depth: usize) -> Result<Expr, String> {
        let mut items = vec![self.not(depth)?];
        while self.peek_op() == Some("&&") {
            self.pos += 1;
            items.push(self.not(depth)?);
        }
        Ok(if items.len() == 1 {
            items.remove(0)
        } else {
            Expr::And(items)
        })
    }
    fn not(&mut self, depth: usize) -> Result<Expr, String> {
        if self.peek_op() == Some("!") {
            if depth > MAX_DEPTH {
                return Err(format!(
                    "nesting deeper than {MAX_DEPTH} at byte {}",
                    self.at()
                ));
            }
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.not(depth + 1)?)));
        }
        self.cmp(depth)
    }
    fn cmp(&mut self, depth: usize) -> Result<Expr, String> {
        let at = self.at();
        let lhs = self.atom(depth)?;
        let op = match self.peek_op() {
            Some("<") => Cmp::Lt,
            Some("<=") => Cmp::Le,
            Some(">") => Cmp::Gt,
            Some(">=") => Cmp::Ge,
            Some("==") => Cmp::Eq,
            Some("!=") => Cmp::Ne,
            _ => return Ok(lhs),
        };
        self.pos += 1;
        let rhs = self.atom(depth)?;
        if let (Expr::Lit(a), Expr::Lit(b)) = (&lhs, &rhs) {
            if compare(op, a, b).is_none() {
                return Err(format!("comparison of incompatible literals at byte {at}"));
            }
        }
        for side in [&lhs, &rhs] {
            if let Expr::Lit(Value::Bool(_) | Value::Str(_)) = side {
                if !matches!(op, Cmp::Eq | Cmp::Ne) {
                    return Err(format!(
                        "booleans and strings compare with == and != only (byte {at})"
                    ));
                }
            }
            if matches!(
                side,
                Expr::Not(_) | Expr::And(_) | Expr::Or(_) | Expr::Cmp(..)
            ) {
                return Err(format!(
                    "a comparison operand must be a field or a literal (byte {at}); add parentheses around boolean operands with ==/!= only"
                ));
            }
        }
        Ok(Expr::Cmp(op, Box::new(lhs), Box::new(rhs)))
    }
    fn atom(&mut self, depth: usize) -> Result<Expr, String> {
        let at = self.at();
        let Some((_, t)) = self.toks.get(self.pos).cloned() else {
            return Err(format!("expression ends early at byte {at}"));
        };
        self.pos += 1;
        match t {
            Tok::Num(v) => Ok(Expr::Lit(v)),
            Tok::Str(s) => Ok(Expr::Lit(Value::Str(s))),
            Tok::Ident(s) if s == "true" => Ok(Expr::Lit(Value::Bool(true))),
            Tok::Ident(s) if s == "false" => Ok(Expr::Lit(Value::Bool(false))),
            Tok::Ident(s) => Ok(Expr::Field(s)),
            Tok::Op("-") => match self.toks.get(self.pos).cloned() {
                Some((_, Tok::Num(Value::Int(i)))) => {
                    self.pos += 1;
                    Ok(Expr::Lit(Value::Int(-i)))
                }
                Some((_, Tok::Num(Value::Float(f)))) => {
                    self.pos += 1;
                    Ok(Expr::Lit(Value::Float(-f)))
                }
                _ => Err(format!("'-' must precede a number (byte {at})")),
            },
            Tok::Op("(") => {
                let e = self.or(depth + 1)?;
                if self.peek_op() != Some(")") {
                    return Err(format!("missing ')' at byte {}", self.at()));
                }
                self.pos += 1;
                Ok(e)
            }
            Tok::Op(o) => Err(format!("unexpected {o:?} at byte {at}")),
        }
    }
}

impl Expr {
    /// Parses an expression.
    pub fn parse(text: &str) -> Result<Expr, String> {
        if text.len() > MAX_LEN {
            return Err(format!("expression longer than {MAX_LEN} bytes"));
        }
        let toks = lex(text)?;
        let mut p = Parser {
            toks,
            pos: 0,
            end: text.len(),
        };
        let e = p.or(0)?;
        if p.pos != p.toks.len() {
            return Err(format!("unexpected input at byte {}", p.at()));
        }
        Ok(e)
    }

    /// Whether the expression holds on these fields (undefined never holds).
    pub fn holds(&self, fields: &BTreeMap<String, Value>) -> bool {
        self.eval(fields) == Some(Value::Bool(true))
    }

    /// The fields the expression reads.
    pub fn fields(&self, out: &mut Vec<String>) {
        match self {
            Expr::Lit(_) => {}
            Expr::Field(f) => out.push(f.clone()),
            Expr::Not(e) => e.fields(out),
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|e| e.fields(out)),
            Expr::Cmp(_, a, b) => {
                a.fields(out);
                b.fields(out);
            }
        }
    }

    fn eval(&self, fields: &BTreeMap<String, Value>) -> Option<Value> {
        let boolean = |e: &Expr| match e.eval(fields) {
            Some(Value::Bool(b)) => Some(b),
            _ => None,
        };
        match self {
            Expr::Lit(v) => Some(v.clone()),
            Expr::Field(f) => fields.get(f).cloned(),
            Expr::Not(e) => boolean(e).map(|b| Value::Bool(!b)),
            // Undefined operands make the whole conjunction/disjunction undefined,
            // except where a defined operand already decides it.
            Expr::And(v) => {
                let vals: Vec<Option<bool>> = v.iter().map(boolean).collect();
                if vals.contains(&Some(false)) {
                    Some(Value::Bool(false))
                } else if vals.iter().all(|x| x.is_some()) {
                    Some(Value::Bool(true))
                } else {
                    None
                }
            }
            Expr::Or(v) => {
                let vals: Vec<Option<bool>> = v.iter().map(boolean).collect();
                if vals.contains(&Some(true)) {
                    Some(Value::Bool(true))
                } else if vals.iter().all(|x| x.is_some()) {
                    Some(Value::Bool(false))
                } else {
                    None
                }
            }
            Expr::Cmp(op, a, b) => {
                let (a, b) = (a.eval(fields)?, b.eval(fields)?);
                compare(*op, &a, &b).map(Value::Bool)
            }
        }
    }
}

fn compare(op: Cmp, a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => match op {
            Cmp::Eq => Some(x == y),
            Cmp::Ne => Some(x != y),
            _ => None,
        },
        (Value::Str(x), Value::Str(y)) => match op {
            Cmp::Eq => Some(x == y),
            Cmp::Ne => Some(x != y),
            _ => None,
        },
        _ => {
            let (x, y) = (a.as_f64()?, b.as_f64()?);
            Some(match op {
                Cmp::Lt => x < y,
                Cmp::Le => x <= y,
                Cmp::Gt => x > y,
                Cmp::Ge => x >= y,
                Cmp::Eq => x == y,
                Cmp::Ne => x != y,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn typed_comparisons_and_precedence() {
        let e = Expr::parse(r#"speed_mm_per_s > 1200 && !halted || mode == "manual""#).unwrap();
        let fast = f(&[
            ("speed_mm_per_s", Value::Int(1500)),
            ("halted", Value::Bool(false)),
            ("mode", Value::Str("auto".into())),
        ]);
        assert!(e.holds(&fast));
        let halted = f(&[
            ("speed_mm_per_s", Value::Int(1500)),
            ("halted", Value::Bool(true)),
            ("mode", Value::Str("auto".into())),
        ]);
        assert!(!e.holds(&halted));
        let manual = f(&[
            ("halted", Value::Bool(true)),
            ("mode", Value::Str("manual".into())),
        ]);
        assert!(e.holds(&manual), "a defined true disjunct decides the or");
        assert!(Expr::parse("x >= -2.5")
            .unwrap()
            .holds(&f(&[("x", Value::Float(-2.0))])));
    }

    #[test]
    fn a_missing_or_mistyped_field_never_fires() {
        let e = Expr::parse("temp > 80").unwrap();
        assert!(!e.holds(&f(&[])));
        assert!(!e.holds(&f(&[("temp", Value::Str("hot".into()))])));
        let n = Expr::parse("!(temp > 80)").unwrap();
        assert!(!n.holds(&f(&[])), "negating undefined stays undefined");
    }

    #[test]
    fn malformed_expressions_are_one_line_errors() {
        for bad in [
            "x >",
            "(x > 1",
            "x > 1 )",
            "x $ 1",
            "\"a\" < \"b\"",
            "1 == true",
            "\"open",
            "a < b < c",
            "- x",
        ] {
            let e = Expr::parse(bad).unwrap_err();
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        let deep = format!("{}x{}", "(".repeat(100), ")".repeat(100));
        assert!(Expr::parse(&deep).unwrap_err().contains("nesting"));
        let nots = format!("{}x", "!".repeat(100));
        assert!(Expr::parse(&nots).unwrap_err().contains("nesting"));
    }
}
