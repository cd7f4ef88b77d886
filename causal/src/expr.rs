//! Boolean mechanism expressions and their parser (SPEC §7 grammar).
//!
//! Design constraints:
//! - Grammar: `or := and ('|' and)*`, `and := unary ('&' unary)*`,
//!   `unary := '!' unary | atom`, `atom := ident | 'true' | 'false' | '(' or ')'`.
//!   `!` binds tightest, then `&`, then `|`. ASCII whitespace is ignored between tokens.
//! - Identifiers match `[A-Za-z_][A-Za-z0-9_.:-]*`; `true` and `false` are keywords and
//!   never name a variable.
//! - The parser never panics: every failure is a [`ParseError`] carrying the byte offset
//!   of the offending token. Nesting deeper than [`MAX_DEPTH`] is rejected, so recursion
//!   over a parsed expression is bounded.
//! - Parsed `&`/`|` chains are flattened into n-ary nodes; [`Expr`]'s `Display` prints a
//!   fully parenthesised form that parses back to an equal expression.

use std::fmt;

/// Maximum nesting depth (parentheses plus negations) accepted by the parser.
pub const MAX_DEPTH: usize = 256;

/// A boolean expression over named variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// The constant `true` or `false`.
    Const(bool),
    /// A reference to a variable by name.
    Var(String),
    /// Negation.
    Not(Box<Expr>),
    /// Conjunction of the operands (true when empty).
    And(Vec<Expr>),
    /// Disjunction of the operands (false when empty).
    Or(Vec<Expr>),
}

/// Why an expression failed to parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    /// The input ended where an operand was expected.
    #[error("unexpected end of expression")]
    UnexpectedEnd,
    /// A character that cannot start or continue a token.
    #[error("unexpected character {0:?}")]
    UnexpectedChar(char),
    /// A complete expression was followed by more input.
    #[error("unexpected trailing input {0:?}")]
    Trailing(String),
    /// An operator appeared where an operand was expected.
    #[error("expected an operand, found {0:?}")]
    ExpectedOperand(String),
    /// An opening parenthesis was never closed.
    #[error("unclosed parenthesis")]
    Unclosed,
    /// Nesting exceeded [`MAX_DEPTH`].
    #[error("expression nested deeper than {MAX_DEPTH}")]
    TooDeep,
}

/// A parse failure with its byte offset into the expression text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at byte {offset}")]
pub struct ParseError {
    /// Byte offset of the offending token (the length of the input at end of input).
    pub offset: usize,
    /// What went wrong.
    pub kind: ParseErrorKind,
}

/// Whether `s` is a valid identifier (and not a keyword).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(is_ident_continue) && s != "true" && s != "false"
}

fn is_ident_continue(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    True,
    False,
    Not,
    And,
    Or,
    LParen,
    RParen,
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::True => "true".into(),
            Tok::False => "false".into(),
            Tok::Not => "!".into(),
            Tok::And => "&".into(),
            Tok::Or => "|".into(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
        }
    }
}

fn tokenize(src: &str) -> Result<Vec<(usize, Tok)>, ParseError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'!' => Tok::Not,
            b'&' => Tok::And,
            b'|' => Tok::Or,
            b'(' => Tok::LParen,
            b')' => Tok::RParen,
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && is_ident_continue(bytes[i] as char) {
                    i += 1;
                }
                let word = &src[start..i];
                let tok = match word {
                    "true" => Tok::True,
                    "false" => Tok::False,
                    w => Tok::Ident(w.to_string()),
                };
                out.push((start, tok));
                continue;
            }
            _ => {
                let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
                return Err(ParseError {
                    offset: i,
                    kind: ParseErrorKind::UnexpectedChar(ch),
                });
            }
        };
        out.push((i, tok));
        i += 1;
    }
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [(usize, Tok)],
    pos: usize,
    end: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }
    fn offset(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |(o, _)| *o)
    }
    fn err(&self, kind: ParseErrorKind) -> ParseError {
        ParseError {
            offset: self.offset(),
            kind,
        }
    }
    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(ParseErrorKind::TooDeep));
        }
        Ok(())
    }
    fn or(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            items.push(self.and()?);
        }
        Ok(flatten(items, false))
    }
    fn and(&mut self) -> Result<Expr, ParseError> {
        let mut items = vec![self.unary()?];
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            items.push(self.unary()?);
        }
        Ok(flatten(items, true))
    }
    fn unary(&mut self) -> Result<Expr, ParseError> {
        match self.peek() {
            Some(Tok::Not) => {
                self.pos += 1;
                self.enter()?;
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(inner)))
            }
            _ => self.atom(),
        }
    }
    fn atom(&mut self) -> Result<Expr, ParseError> {
        let Some(tok) = self.peek().cloned() else {
            return Err(self.err(ParseErrorKind::UnexpectedEnd));
        };
        match tok {
            Tok::Ident(name) => {
                self.pos += 1;
                Ok(Expr::Var(name))
            }
            Tok::True => {
                self.pos += 1;
                Ok(Expr::Const(true))
            }
            Tok::False => {
                self.pos += 1;
                Ok(Expr::Const(false))
            }
            Tok::LParen => {
                let open = self.offset();
                self.pos += 1;
                self.enter()?;
                let e = self.or()?;
                self.depth -= 1;
                if self.peek() != Some(&Tok::RParen) {
                    if self.peek().is_none() {
                        return Err(ParseError {
                            offset: open,
                            kind: ParseErrorKind::Unclosed,
                        });
                    }
                    let t = self.peek().map(Tok::show).unwrap_or_default();
                    return Err(self.err(ParseErrorKind::Trailing(t)));
                }
                self.pos += 1;
                Ok(e)
            }
            other => Err(self.err(ParseErrorKind::ExpectedOperand(other.show()))),
        }
    }
}

fn flatten(items: Vec<Expr>, is_and: bool) -> Expr {
    if items.len() == 1 {
        return items.into_iter().next().unwrap_or(Expr::Const(is_and));
    }
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        match (it, is_and) {
            (Expr::And(v), true) => out.extend(v),
            (Expr::Or(v), false) => out.extend(v),
            (e, _) => out.push(e),
        }
    }
    if is_and {
        Expr::And(out)
    } else {
        Expr::Or(out)
    }
}

impl Expr {
    /// Parses an expression in the SPEC §7 grammar.
    pub fn parse(src: &str) -> Result<Expr, ParseError> {
        let toks = tokenize(src)?;
        let mut p = Parser {
            toks: &toks,
            pos: 0,
            end: src.len(),
            depth: 0,
        };
        let e = p.or()?;
        if let Some(t) = p.peek() {
            let shown = t.show();
            return Err(p.err(ParseErrorKind::Trailing(shown)));
        }
        Ok(e)
    }

    /// A variable reference.
    pub fn var(name: impl Into<String>) -> Expr {
        Expr::Var(name.into())
    }

    /// Calls `f` on every variable name referenced, in order of appearance.
    pub fn for_each_var<'a>(&'a self, f: &mut impl FnMut(&'a str)) {
        match self {
            Expr::Const(_) => {}
            Expr::Var(v) => f(v),
            Expr::Not(e) => e.for_each_var(f),
            Expr::And(es) | Expr::Or(es) => es.iter().for_each(|e| e.for_each_var(f)),
        }
    }

    /// Evaluates the expression under an assignment (unknown names read `false`).
    pub fn eval(&self, value: &impl Fn(&str) -> bool) -> bool {
        match self {
            Expr::Const(b) => *b,
            Expr::Var(v) => value(v),
            Expr::Not(e) => !e.eval(value),
            Expr::And(es) => es.iter().all(|e| e.eval(value)),
            Expr::Or(es) => es.iter().any(|e| e.eval(value)),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Const(b) => write!(f, "{b}"),
            Expr::Var(v) => f.write_str(v),
            Expr::Not(e) => write!(f, "!{e}"),
            Expr::And(es) | Expr::Or(es) => {
                let (op, empty) = if matches!(self, Expr::And(_)) {
                    (" & ", "true")
                } else {
                    (" | ", "false")
                };
                if es.is_empty() {
                    return f.write_str(empty);
                }
                f.write_str("(")?;
                for (i, e) in es.iter().enumerate() {
                    if i > 0 {
                        f.write_str(op)?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
        }
    }
}

impl std::str::FromStr for Expr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Expr::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_not_and_or() {
        let e = Expr::parse("a | !b & c").unwrap();
        assert_eq!(
            e,
            Expr::Or(vec![
                Expr::var("a"),
                Expr::And(vec![Expr::Not(Box::new(Expr::var("b"))), Expr::var("c")])
            ])
        );
    }

    #[test]
    fn identifiers_with_punctuation() {
        let e = Expr::parse("m.a:1-x & _y").unwrap();
        assert_eq!(e, Expr::And(vec![Expr::var("m.a:1-x"), Expr::var("_y")]));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier("true"));
        assert!(is_identifier("a-b.c:d"));
    }

    #[test]
    fn errors_carry_offsets() {
        let e = Expr::parse("a & # b").unwrap_err();
        assert_eq!(e.offset, 4);
        assert_eq!(e.kind, ParseErrorKind::UnexpectedChar('#'));
        let e = Expr::parse("a &").unwrap_err();
        assert_eq!((e.offset, e.kind), (3, ParseErrorKind::UnexpectedEnd));
        let e = Expr::parse("(a | b").unwrap_err();
        assert_eq!((e.offset, e.kind), (0, ParseErrorKind::Unclosed));
        let e = Expr::parse("a b").unwrap_err();
        assert_eq!(e.offset, 2);
        let e = Expr::parse("").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::UnexpectedEnd);
        let e = Expr::parse("a & | b").unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::ExpectedOperand("|".into()));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!("{}a{}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(Expr::parse(&src).unwrap_err().kind, ParseErrorKind::TooDeep);
        let src = format!("{}a", "!".repeat(10_000));
        assert_eq!(Expr::parse(&src).unwrap_err().kind, ParseErrorKind::TooDeep);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "a | !b & c",
            "!(a | b) & (c | true)",
            "x",
            "false | (a & b & c)",
        ] {
            let e = Expr::parse(s).unwrap();
            assert_eq!(Expr::parse(&e.to_string()).unwrap(), e, "{s}");
        }
    }
}
