//! Encodings, hashes and JSON (strings.go, crypto.go's hashes, defaults.go's JSON).

use base64::Engine as _;
use sha2::Digest as _;

use super::{gofmt, reg, s};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Any, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "b64enc", &[Str], |_, a| Ok(base64::engine::general_purpose::STANDARD.encode(s(&a[0]).as_bytes()).into()));
    reg(m, "b64dec", &[Str], |_, a| {
        Ok(match b64_decode(&s(&a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned().into(),
            Err(e) => e.into(),
        })
    });
    reg(m, "b32enc", &[Str], |_, a| Ok(b32_encode(s(&a[0]).as_bytes()).into()));
    reg(m, "b32dec", &[Str], |_, a| {
        Ok(match b32_decode(&s(&a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned().into(),
            Err(e) => e.into(),
        })
    });
    reg(m, "sha1sum", &[Str], |_, a| Ok(hex::encode(sha1::Sha1::digest(s(&a[0]).as_bytes())).into()));
    reg(m, "sha256sum", &[Str], |_, a| Ok(hex::encode(sha2::Sha256::digest(s(&a[0]).as_bytes())).into()));
    reg(m, "sha512sum", &[Str], |_, a| Ok(hex::encode(sha2::Sha512::digest(s(&a[0]).as_bytes())).into()));
    reg(m, "adler32sum", &[Str], |_, a| Ok(adler32(s(&a[0]).as_bytes()).to_string().into()));

    reg(m, "toJson", &[Any], |_, a| Ok(go_json(&a[0], true, None).unwrap_or_default().into()));
    reg(m, "mustToJson", &[Any], |_, a| Ok(go_json(&a[0], true, None)?.into()));
    reg(m, "toPrettyJson", &[Any], |_, a| Ok(go_json(&a[0], true, Some("  ")).unwrap_or_default().into()));
    reg(m, "mustToPrettyJson", &[Any], |_, a| Ok(go_json(&a[0], true, Some("  "))?.into()));
    reg(m, "toRawJson", &[Any], |_, a| Ok(go_json(&a[0], false, None)?.into()));
    reg(m, "mustToRawJson", &[Any], |_, a| Ok(go_json(&a[0], false, None)?.into()));
    reg(m, "fromJson", &[Str], |_, a| Ok(from_json(&s(&a[0])).unwrap_or(Value::Nil)));
    reg(m, "mustFromJson", &[Str], |_, a| from_json(&s(&a[0])));
}

/// Go's `base64.StdEncoding.DecodeString`, with its error text.
pub(crate) fn b64_decode(text: &str) -> Result<Vec<u8>, String> {
    let cleaned: String = text.chars().filter(|c| *c != '\n' && *c != '\r').collect();
    base64::engine::general_purpose::STANDARD.decode(cleaned.as_bytes()).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => at,
            _ => cleaned.len() - cleaned.len() % 4,
        };
        format!("illegal base64 data at input byte {at}")
    })
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn b32_encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let n = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < n {
                out.push(char::from(B32[((bits >> (35 - i * 5)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn b32_decode(text: &str) -> Result<Vec<u8>, String> {
    let t: Vec<u8> = text.bytes().filter(|c| *c != b'\n' && *c != b'\r').collect();
    if !t.len().is_multiple_of(8) {
        return Err(format!("illegal base32 data at input byte {}", t.len() - t.len() % 8));
    }
    let mut out = Vec::new();
    for (ci, chunk) in t.chunks(8).enumerate() {
        let mut bits = 0u64;
        let mut n = 0;
        for (i, c) in chunk.iter().enumerate() {
            if *c == b'=' {
                break;
            }
            let v = B32
                .iter()
                .position(|x| x == c)
                .ok_or_else(|| format!("illegal base32 data at input byte {}", ci * 8 + i))?;
            bits |= (v as u64) << (35 - i * 5);
            n += 1;
        }
        let bytes = n * 5 / 8;
        for i in 0..bytes {
            out.push((bits >> (32 - i * 8)) as u8);
        }
    }
    Ok(out)
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// Go's `json.Unmarshal` into `interface{}` (numbers as float64), with Go's
/// error wording for the common cases.
pub fn from_json(text: &str) -> Result<Value, FuncError> {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|j| Value::from_json(&j))
        .map_err(|e| FuncError::msg(json_error(text, &e)))
}

pub(crate) fn json_error(text: &str, e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "unexpected end of JSON input".into(),
        _ => {
            // find the offending character
            let line_start: usize = text.split_inclusive('\n').take(e.line().saturating_sub(1)).map(str::len).sum();
            let at = line_start + e.column().saturating_sub(1);
            match text[at.min(text.len())..].chars().next() {
                Some(c) => format!("invalid character {} looking for beginning of value", go_char_quote(c)),
                None => "unexpected end of JSON input".into(),
            }
        }
    }
}

fn go_char_quote(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        c => {
            let q = gofmt::quote(&c.to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    }
}

/// Go's `encoding/json` output for a value: sorted keys, HTML escaping of
/// `<>&` when `escape_html`, floats as Go writes them, `MarshalIndent` with
/// `indent`.
pub fn go_json(v: &Value, escape_html: bool, indent: Option<&str>) -> Result<String, FuncError> {
    if v.holds_itself() {
        // Go's encoder detects the cycle; Helm's `toJson` then prints "".
        return Err(FuncError::msg("json: unsupported value: encountered a cycle via map[string]interface {}"));
    }
    let mut out = String::new();
    write_json(&mut out, v, escape_html, indent, 0)?;
    Ok(out)
}

fn newline(out: &mut String, indent: Option<&str>, depth: usize) {
    if let Some(ind) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

fn write_json(out: &mut String, v: &Value, esc: bool, indent: Option<&str>, depth: usize) -> Result<(), FuncError> {
    match v {
        Value::Nil => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => out.push_str(&i.to_string()),
        Value::Float(f) => out.push_str(&json_float(*f)?),
        Value::String(s) => json_string(out, s, esc),
        Value::Bytes(b) => json_string(out, &base64::engine::general_purpose::STANDARD.encode(b), esc),
        Value::List(items) => {
            if v.is_nil_list() {
                out.push_str("null");
                return Ok(());
            }
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                write_json(out, x, esc, indent, depth + 1)?;
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Map(m) => write_object(out, m.borrow().iter(), esc, indent, depth)?,
        Value::Object(o) => match (o.to_data(), o.json_field_order()) {
            (Value::Map(m), order) if !order.is_empty() => {
                let m = m.borrow();
                // A struct's fields in their order, anything else after them, sorted.
                let first = order.iter().filter_map(|k| m.get_key_value(*k));
                let rest = m.iter().filter(|(k, _)| !order.contains(&k.as_str()));
                write_object(out, first.chain(rest), esc, indent, depth)?;
            }
            (data, _) => write_json(out, &data, esc, indent, depth)?,
        },
    }
    Ok(())
}

/// A JSON object of `entries`, in their order.
fn write_object<'a>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    esc: bool,
    indent: Option<&str>,
    depth: usize,
) -> Result<(), FuncError> {
    let mut empty = true;
    for (i, (k, x)) in entries.enumerate() {
        out.push(if i == 0 { '{' } else { ',' });
        empty = false;
        newline(out, indent, depth + 1);
        json_string(out, k, esc);
        out.push(':');
        if indent.is_some() {
            out.push(' ');
        }
        write_json(out, x, esc, indent, depth + 1)?;
    }
    if empty {
        out.push_str("{}");
        return Ok(());
    }
    newline(out, indent, depth);
    out.push('}');
    Ok(())
}

/// A float64 as `encoding/json` writes it.
pub(crate) fn json_float(f: f64) -> Result<String, FuncError> {
    if !f.is_finite() {
        return Err(FuncError::msg(format!("json: unsupported value: {}", gofmt::format_float_g(f))));
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (neg, digits, exp) = gofmt::shortest_digits(f);
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let sign = if exp < 0 { '-' } else { '+' };
        let exp_s = exp.abs().to_string();
        Ok(format!("{}{m}e{sign}{exp_s}", if neg { "-" } else { "" }))
    } else if f == 0.0 {
        Ok(if f.is_sign_negative() { "-0".into() } else { "0".into() })
    } else {
        let (neg, digits, exp) = gofmt::shortest_digits(f);
        Ok(format!("{}{}", if neg { "-" } else { "" }, gofmt::place_point(&digits, exp)))
    }
}

fn json_string(out: &mut String, s: &str, esc: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '<' | '>' | '&' if esc => out.push_str(&format!("\\u{:04x}", c as u32)),
            '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn encodings_and_hashes() {
        assert_eq!(callv("b64enc", &[st("hello")]), "aGVsbG8=");
        assert_eq!(callv("b64dec", &[st("aGVsbG8=")]), "hello");
        assert_eq!(callv("b64dec", &[st("a!")]), "illegal base64 data at input byte 1");
        assert_eq!(callv("b32enc", &[st("hello")]), "NBSWY3DP");
        assert_eq!(callv("b32dec", &[st("NBSWY3DP")]), "hello");
        assert_eq!(callv("b32enc", &[st("hi")]), "NBUQ====");
        assert_eq!(callv("b32dec", &[st("NBUQ====")]), "hi");
        assert_eq!(callv("sha1sum", &[st("abc")]), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(
            callv("sha256sum", &[st("abc")]),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(callv("adler32sum", &[st("Wikipedia")]), "300286872");
        assert_eq!(callv("sha512sum", &[st("")]).len(), 128);
    }

    #[test]
    fn json_as_go_writes_it() {
        let d = dict(&[("b", li(vec![Value::Float(1.0), Value::Float(1.5), Value::Nil])), ("a", st("<x&y>"))]);
        assert_eq!(callv("toJson", std::slice::from_ref(&d)), r#"{"a":"\u003cx\u0026y\u003e","b":[1,1.5,null]}"#);
        assert_eq!(callv("toRawJson", std::slice::from_ref(&d)), r#"{"a":"<x&y>","b":[1,1.5,null]}"#);
        assert_eq!(
            callv("toPrettyJson", &[d]),
            "{\n  \"a\": \"\\u003cx\\u0026y\\u003e\",\n  \"b\": [\n    1,\n    1.5,\n    null\n  ]\n}"
        );
        assert_eq!(callv("toJson", &[Value::Float(1e21)]), "1e+21");
        assert_eq!(callv("toJson", &[Value::Float(1e20)]), "100000000000000000000");
        assert_eq!(callv("toJson", &[Value::Float(0.0000001)]), "1e-7");
        assert_eq!(callv("toJson", &[Value::Float(f64::NAN)]), "");
        assert_eq!(callv("toJson", &[dict(&[])]), "{}");
        assert_eq!(callv("fromJson", &[st(r#"{"a":[1,"x"]}"#)]), "map[a:[1 x]]");
        assert_eq!(callv("fromJson", &[st("nope")]), "<nil>");
        assert_eq!(callv("mustFromJson", &[st("{")]), "ERR unexpected end of JSON input");
        assert_eq!(callv("mustFromJson", &[st("x")]), "ERR invalid character 'x' looking for beginning of value");
    }
}
