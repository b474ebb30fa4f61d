//! How go-yaml v2 resolves a plain scalar: YAML 1.1 booleans, integers in
//! every base, floats, base-60 numbers, timestamps.

use std::sync::LazyLock;

pub(super) static BASE60: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$").expect("static regex"));
pub(super) static YAML_FLOAT: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("static regex")
});
pub(super) static TIMESTAMP: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ ])([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$",
    )
    .expect("static regex")
});

pub(super) fn is_base60_float(s: &str) -> bool {
    let Some(c) = s.bytes().next() else { return false };
    if !(c == b'+' || c == b'-' || c.is_ascii_digit()) || !s.contains(':') {
        return false;
    }
    BASE60.is_match(s)
}

/// go-yaml v2's parseTimestamp (the formats it accepts, with range checks).
pub(super) fn is_timestamp(s: &str) -> bool {
    let Some(c) = TIMESTAMP.captures(s) else { return false };
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let (Some(y), Some(mo), Some(d)) = (num(1), num(2), num(3)) else { return false };
    if !(1..=12).contains(&mo) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo as usize - 1];
    if d > days {
        return false;
    }
    if c.get(4).is_some() {
        // "2006-1-2 15:4:5" has no zone; the T forms need one ... except go's
        // layout "2006-1-2T15:4:5.999999999Z07:00" requires the zone
        let sep_t = s.as_bytes()[c.get(3).map(|m| m.end()).unwrap_or(0)] != b' ';
        if sep_t && c.get(7).is_none() {
            return false;
        }
        if !sep_t && c.get(7).is_some() {
            return false;
        }
        let (Some(h), Some(mi), Some(se)) = (num(4), num(5), num(6)) else { return false };
        if h > 23 || mi > 59 || se > 59 {
            return false;
        }
    }
    true
}

/// Whether go-yaml v2 would read `s`, unquoted, back as a string.
pub(crate) fn resolves_as_string(s: &str) -> bool {
    // "<<" (the merge key) is written plain, as go-yaml does
    matches!(resolve_plain(s), Plain::Str | Plain::Merge)
}

/// A plain scalar as go-yaml v2 resolves it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Timestamp,
    Merge,
    Str,
}

pub(super) fn resolve_plain(s: &str) -> Plain {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => return Plain::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Plain::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Plain::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        "<<" => return Plain::Merge,
        _ => {}
    }
    let first = s.as_bytes()[0];
    match first {
        b'.' => match go_parse_float(s) {
            Some(f) => Plain::Float(f),
            None => Plain::Str,
        },
        b'0'..=b'9' | b'+' | b'-' => {
            if is_timestamp(s) {
                return Plain::Timestamp;
            }
            let plain = s.replace('_', "");
            if let Some(i) = crate::sprig::parse_int(&plain) {
                return Plain::Int(i);
            }
            if let Some(u) = parse_go_uint(&plain) {
                return Plain::UInt(u);
            }
            if YAML_FLOAT.is_match(&plain)
                && let Some(f) = go_parse_float(&plain)
            {
                return Plain::Float(f);
            }
            if let Some(b) = plain.strip_prefix("0b") {
                if let Ok(i) = i64::from_str_radix(b, 2) {
                    return Plain::Int(i);
                }
                if let Ok(u) = u64::from_str_radix(b, 2) {
                    return Plain::UInt(u);
                }
            } else if let Some(b) = plain.strip_prefix("-0b")
                && let Ok(i) = i64::from_str_radix(&format!("-{b}"), 2)
            {
                return Plain::Int(i);
            }
            Plain::Str
        }
        _ => Plain::Str,
    }
}

pub(super) fn parse_go_uint(s: &str) -> Option<u64> {
    if s.starts_with(['+', '-']) {
        return None;
    }
    let l = s.to_ascii_lowercase();
    if let Some(h) = l.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Some(o) = l.strip_prefix("0o") {
        return u64::from_str_radix(o, 8).ok();
    }
    if let Some(b) = l.strip_prefix("0b") {
        return u64::from_str_radix(b, 2).ok();
    }
    if l.len() > 1 && l.starts_with('0') {
        return u64::from_str_radix(&l[1..], 8).ok();
    }
    if l.is_empty() || !l.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    l.parse().ok()
}

/// `strconv.ParseFloat(s, 64)` for decimal forms (what YAML scalars reach).
pub(super) fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.trim_start_matches(['+', '-']);
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(if s.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    if body.is_empty()
        || !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-' | b'_'))
    {
        return None;
    }
    let cleaned = if body.contains('_') {
        if !underscores_ok(body) {
            return None;
        }
        s.replace('_', "")
    } else {
        s.to_string()
    };
    cleaned.parse::<f64>().ok()
}

pub(super) fn underscores_ok(s: &str) -> bool {
    let mut saw = '^';
    for c in s.chars() {
        if c.is_ascii_digit() {
            saw = '0';
            continue;
        }
        if c == '_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
            continue;
        }
        if saw == '_' {
            return false;
        }
        saw = '!';
    }
    saw != '_'
}
