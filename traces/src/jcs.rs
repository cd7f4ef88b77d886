//! Canonical JSON (RFC 8785, the JSON Canonicalization Scheme): the byte form that
//! derived artifact hashes are taken over, so that two records of one value hash
//! alike whatever their key order and whitespace.
//!
//! Design constraints:
//! - Object members are sorted by the UTF-16 code units of their names (RFC 8785
//!   §3.2.3), independent of the map type `serde_json` was built with.
//! - Numbers are written as ECMAScript's `Number.prototype.toString` writes the
//!   IEEE-754 double they denote (§3.2.2.3): `1.0` is `1`, `1e21` is `1e+21`, an
//!   integer above 2^53 is rounded like any double. `-0` is `0`.
//! - Strings are escaped minimally: `"` and `\`, the two-character forms `\b \f \n
//!   \r \t`, every other control character as `\u00xx` (lower-case hex), nothing else.
//! - Total: every `serde_json::Value` has a canonical form (JSON has no NaN).

use serde_json::Value;

/// The canonical text of `v`.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out);
    out
}

fn write(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push('{');
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                write(x, out);
            }
            out.push('}');
        }
    }
}

fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// 2^53: integers up to this magnitude are exact doubles and print as themselves.
const EXACT: u64 = 1 << 53;

fn number(n: &serde_json::Number) -> String {
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        return u.to_string();
    }
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        return i.to_string();
    }
    es_double(n.as_f64().unwrap_or(0.0))
}

/// ECMAScript `Number::toString(x)` for a finite double.
fn es_double(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // Rust's `{:e}` prints the shortest digits that round-trip: "d[.ddd]e<exp>".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    let k = digits.len() as i64;
    let n = exp + 1; // the decimal point sits after n digits
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e >= 0 {
            format!("+{e}")
        } else {
            e.to_string()
        };
        if k == 1 {
            format!("{digits}e{e}")
        } else {
            format!("{}.{}e{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn c(text: &str) -> String {
        canonical(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn keys_sort_and_whitespace_goes() {
        assert_eq!(
            c(r#"{ "b": [1, 2], "a": {"y": null, "x": true} }"#),
            r#"{"a":{"x":true,"y":null},"b":[1,2]}"#
        );
        // UTF-16 order: U+E000 sorts after U+1F600's surrogates, unlike UTF-8.
        assert_eq!(
            canonical(&json!({"\u{e000}": 1, "\u{1f600}": 2})),
            "{\"\u{1f600}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn numbers_print_as_ecmascript_does() {
        // RFC 8785 Appendix B's sample values, and the usual suspects.
        let cases = [
            ("1.0", "1"),
            ("-0.0", "0"),
            ("5000", "5000"),
            ("1e21", "1e+21"),
            ("1e20", "100000000000000000000"),
            ("1.5e-7", "1.5e-7"),
            ("0.000001", "0.000001"),
            ("123.456", "123.456"),
            ("9007199254740993", "9007199254740992"),
            ("-1e-7", "-1e-7"),
            ("4.50", "4.5"),
            ("2e-3", "0.002"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("5e-324", "5e-324"),
        ];
        for (input, want) in cases {
            assert_eq!(c(input), want, "{input}");
        }
    }

    #[test]
    fn strings_escape_minimally() {
        assert_eq!(
            canonical(&json!("a\"b\\c\n\u{1}\u{7f}é€")),
            "\"a\\\"b\\\\c\\n\\u0001\u{7f}é€\""
        );
    }
}
