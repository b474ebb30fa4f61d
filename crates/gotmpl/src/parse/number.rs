//! Go's literals in templates: numbers as `parse.NewNumber` reads them
//! (bases, `_` separators, hex floats, characters) and `strconv.Unquote`.

use super::*;

/// Go's `parse.NewNumber`: which of int and float the constant can be.
pub(super) fn parse_number(text: &str, is_char: bool) -> Result<Number, String> {
    let text_arc: Arc<str> = Arc::from(text);
    if is_char {
        let s = unquote(text)?;
        let mut chars = s.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return Err(format!("malformed character constant: {text}"));
        };
        return Ok(Number { text: text_arc, int: Some(c as i64), float: Some(c as u32 as f64), is_char: true });
    }
    if text.ends_with('i') {
        return Err(format!("complex constants are not supported: {text:?}"));
    }
    let int = parse_go_int(text);
    let uint_ok = int.is_none() && parse_go_uint(text).is_some();
    let mut n = Number { text: text_arc, int, float: None, is_char: false };
    if let Some(i) = int {
        n.float = Some(i as f64);
    } else if uint_ok {
        n.float = parse_go_uint(text).map(|u| u as f64);
    } else if let Some(f) = parse_go_float(text) {
        if !text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Err(format!("integer overflow: {text:?}"));
        }
        n.float = Some(f);
        if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
            n.int = Some(f as i64);
        }
    }
    if n.int.is_none() && n.float.is_none() {
        return Err(format!("illegal number syntax: {text:?}"));
    }
    Ok(n)
}

/// Removes `_` separators (Go allows them only between digits, after a base prefix).
fn strip_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'_' {
            let prev_ok = i > 0 && (b[i - 1].is_ascii_alphanumeric());
            let next_ok = i + 1 < b.len() && b[i + 1].is_ascii_alphanumeric();
            if !prev_ok || !next_ok {
                return None;
            }
        }
    }
    Some(s.replace('_', ""))
}

fn split_sign(s: &str) -> (bool, &str) {
    if let Some(r) = s.strip_prefix('-') {
        (true, r)
    } else if let Some(r) = s.strip_prefix('+') {
        (false, r)
    } else {
        (false, s)
    }
}

fn parse_go_uint(s: &str) -> Option<u64> {
    let (neg, body) = split_sign(s);
    if neg || s.starts_with('+') {
        return None;
    }
    let body = strip_underscores(body)?;
    let (radix, digits) = if let Some(r) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, r)
    } else if let Some(r) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (8, r)
    } else if let Some(r) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, r)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body.as_str())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = split_sign(s);
    let u = parse_go_uint(body)?;
    if neg {
        if u <= i64::MAX as u64 + 1 { Some((u as i128).wrapping_neg() as i64) } else { None }
    } else if u <= i64::MAX as u64 {
        Some(u as i64)
    } else {
        None
    }
}

fn parse_go_float(s: &str) -> Option<f64> {
    let (neg, body) = split_sign(s);
    let body = strip_underscores(body)?;
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let f = parse_hex_float(hex)?;
        return Some(if neg { -f } else { f });
    }
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let f: f64 = body.parse().ok()?;
    Some(if neg { -f } else { f })
}

/// A hexadecimal float's mantissa and `p` exponent (after `0x`).
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = exp.parse().ok()?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    Some(v * 2f64.powi(exp))
}

/// Go's `strconv.Unquote` for "…", `…` and '…'.
pub fn unquote(s: &str) -> Result<String, String> {
    let bad = || "invalid syntax".to_string();
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err(bad());
    }
    let q = b[0];
    if q != b[b.len() - 1] {
        return Err(bad());
    }
    let body = &s[1..s.len() - 1];
    if q == b'`' {
        if body.contains('`') {
            return Err(bad());
        }
        return Ok(body.replace('\r', ""));
    }
    if q != b'"' && q != b'\'' {
        return Err(bad());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == q as char || c == '\n' {
            return Err(bad());
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().ok_or_else(bad)?;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' if q == b'\'' => out.push('\''),
            '"' if q == b'"' => out.push('"'),
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v: u32 = 0;
                for _ in 0..n {
                    let d = chars.next().and_then(|c| c.to_digit(16)).ok_or_else(bad)?;
                    v = v * 16 + d;
                }
                if e == 'x' {
                    if q == b'\'' {
                        out.push(char::from_u32(v).ok_or_else(bad)?);
                    } else if v < 0x80 {
                        out.push(v as u8 as char);
                    } else {
                        // A raw byte: not representable in a Rust string; keep it as U+FFFD.
                        out.push('\u{FFFD}');
                    }
                } else {
                    out.push(char::from_u32(v).ok_or_else(bad)?);
                }
            }
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let d = chars.next().and_then(|c| c.to_digit(8)).ok_or_else(bad)?;
                    v = v * 8 + d;
                }
                if v > 255 {
                    return Err(bad());
                }
                if v < 0x80 {
                    out.push(v as u8 as char);
                } else {
                    out.push('\u{FFFD}');
                }
            }
            _ => return Err(bad()),
        }
    }
    if q == b'\'' && out.chars().count() != 1 {
        return Err(bad());
    }
    Ok(out)
}
