//! How go-yaml v2 resolves a plain scalar: YAML 1.1 booleans, integers in
//! every base, floats, base-60 numbers, timestamps.

// go-yaml's resolver is written with three regular expressions; they are matched here by hand,
// each a direct transcription (the tests check them against the expressions on every short
// string of their alphabet). Compiling them was a fifth of a small chart's render.

/// The digits at the start of `b`.
fn digits(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The run of digits and `_` at the start of `b`.
fn digits_or_underscores(b: &[u8]) -> usize {
    b.iter().take_while(|c| c.is_ascii_digit() || **c == b'_').count()
}

fn skip_sign(b: &[u8]) -> &[u8] {
    match b.first() {
        Some(b'+' | b'-') => &b[1..],
        _ => b,
    }
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
pub(super) fn is_yaml_float(s: &str) -> bool {
    let mut b = skip_sign(s.as_bytes());
    let whole = digits(b);
    b = &b[whole..];
    if let Some(rest) = b.strip_prefix(b".") {
        let fraction = digits(rest);
        if whole == 0 && fraction == 0 {
            return false;
        }
        b = &rest[fraction..];
    } else if whole == 0 {
        return false;
    }
    if let Some(rest) = b.strip_prefix(b"e").or_else(|| b.strip_prefix(b"E")) {
        let rest = skip_sign(rest);
        let exponent = digits(rest);
        if exponent == 0 {
            return false;
        }
        b = &rest[exponent..];
    }
    b.is_empty()
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
fn is_base60(s: &str) -> bool {
    let mut b = skip_sign(s.as_bytes());
    if !b.first().is_some_and(u8::is_ascii_digit) {
        return false;
    }
    b = &b[digits_or_underscores(b)..];
    let mut groups = 0;
    while let Some(rest) = b.strip_prefix(b":") {
        // `[0-5]?[0-9]`: two digits when the first is 0-5, else one (a second digit then fails
        // what follows, as the expression does).
        b = match rest {
            [a @ b'0'..=b'5', c, ..] if c.is_ascii_digit() && a.is_ascii_digit() => &rest[2..],
            [a, ..] if a.is_ascii_digit() => &rest[1..],
            _ => return false,
        };
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if let Some(rest) = b.strip_prefix(b".") {
        b = &rest[digits_or_underscores(rest)..];
    }
    b.is_empty()
}

/// The parts of a timestamp as go-yaml's expression reads it:
/// `^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ ])([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$`
#[derive(Debug, PartialEq)]
struct TimestampParts {
    date: [u32; 3],
    /// Hours, minutes, seconds; whether `T`/`t` separated them from the date; whether a zone
    /// followed.
    time: Option<([u32; 3], bool, bool)>,
}

fn timestamp_parts(s: &str) -> Option<TimestampParts> {
    // A number of `min..=max` digits, then what follows.
    fn number(b: &[u8], min: usize, max: usize) -> Option<(u32, &[u8])> {
        let n = digits(b).min(max);
        if n < min {
            return None;
        }
        let value = b[..n].iter().fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        Some((value, &b[n..]))
    }
    let b = s.as_bytes();
    let (year, b) = number(b, 4, 4)?;
    let (month, b) = number(b.strip_prefix(b"-")?, 1, 2)?;
    let (day, b) = number(b.strip_prefix(b"-")?, 1, 2)?;
    let date = [year, month, day];
    let Some((&sep, b)) = b.split_first() else { return Some(TimestampParts { date, time: None }) };
    if !matches!(sep, b'T' | b't' | b' ') {
        return None;
    }
    let (hour, b) = number(b, 1, 2)?;
    let (minute, b) = number(b.strip_prefix(b":")?, 1, 2)?;
    let (second, mut b) = number(b.strip_prefix(b":")?, 1, 2)?;
    if let Some(rest) = b.strip_prefix(b".") {
        let n = digits(rest);
        if n == 0 {
            return None;
        }
        b = &rest[n..];
    }
    let zone = match b {
        [] => false,
        [b'Z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) => true,
        _ => return None,
    };
    Some(TimestampParts { date, time: Some(([hour, minute, second], sep != b' ', zone)) })
}

pub(super) fn is_base60_float(s: &str) -> bool {
    let Some(c) = s.bytes().next() else { return false };
    if !(c == b'+' || c == b'-' || c.is_ascii_digit()) || !s.contains(':') {
        return false;
    }
    is_base60(s)
}

/// go-yaml v2's parseTimestamp (the formats it accepts, with range checks).
pub(super) fn is_timestamp(s: &str) -> bool {
    let Some(TimestampParts { date: [y, mo, d], time }) = timestamp_parts(s) else { return false };
    if !(1..=12).contains(&mo) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo as usize - 1];
    if d > days {
        return false;
    }
    if let Some(([h, mi, se], sep_t, zone)) = time {
        // "2006-1-2 15:4:5" has no zone; go's layout "2006-1-2T15:4:5.999999999Z07:00"
        // requires one.
        if sep_t != zone {
            return false;
        }
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
            if is_yaml_float(&plain)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// go-yaml's expressions, which the matchers above transcribe.
    fn expression(pattern: &str) -> regex::Regex {
        regex::Regex::new(pattern).expect("go-yaml's expression")
    }

    /// Every string of up to `max` characters of `alphabet`.
    fn all_strings(alphabet: &[u8], max: usize, mut check: impl FnMut(&str)) {
        let mut current: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..=max {
            let mut next = Vec::new();
            for s in &current {
                check(std::str::from_utf8(s).expect("ascii"));
                for c in alphabet {
                    let mut longer = s.clone();
                    longer.push(*c);
                    next.push(longer);
                }
            }
            current = next;
        }
    }

    #[test]
    fn the_float_matcher_is_go_yamls_expression() {
        let re = expression(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
        let mut matched = 0;
        all_strings(b"09.eE+-_x", 6, |s| {
            assert_eq!(is_yaml_float(s), re.is_match(s), "{s:?}");
            matched += usize::from(re.is_match(s));
        });
        // The alphabet reaches both answers often (not a table of "no").
        assert!(matched > 1_000, "{matched}");
    }

    #[test]
    fn the_base60_matcher_is_go_yamls_expression() {
        let re = expression(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$");
        let mut matched = 0;
        all_strings(b"0579:._+x", 6, |s| {
            assert_eq!(is_base60(s), re.is_match(s), "{s:?}");
            matched += usize::from(re.is_match(s));
        });
        assert!(matched > 1_000, "{matched}");
    }

    #[test]
    fn the_timestamp_matcher_is_go_yamls_expression() {
        let re = expression(
            r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ ])([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$",
        );
        // Timestamps are too long to list every string: pieces near each part's bounds, joined
        // at random (a fixed generator, so a failure repeats).
        // Valid pieces come first and are drawn most of the time.
        let pieces: [&[&str]; 12] = [
            &["2006", "9999", "206", "20060", "x006"],
            &["-", ":", ""],
            &["1", "01", "12", "123", "", "x"],
            &["-", "", "/"],
            &["2", "02", "31", "310", "", "y"],
            &["", "T", "t", " ", "  ", "X"],
            &["15", "5", "155", ""],
            &[":4", ":04", ":045", ":", "", ";4"],
            &[":5", ":05", ":055", ":", ""],
            &["", ".9", ".999999999", ".", ".x"],
            &["", "Z", "+07:00", "-07:00", "+7:00", "+07:0", "+0700", "z", "Z "],
            &["", "\n", "x"],
        ];
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut matched = 0;
        for _ in 0..200_000 {
            let mut s = String::new();
            for options in &pieces {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Three draws in four take the first piece (valid); the rest any.
                let i = if state & 3 != 0 { 0 } else { ((state >> 2) % options.len() as u64) as usize };
                s.push_str(options[i]);
            }
            let parts = timestamp_parts(&s);
            let captures = re.captures(&s);
            assert_eq!(parts.is_some(), captures.is_some(), "{s:?}");
            if let (Some(p), Some(c)) = (parts, captures) {
                matched += 1;
                let num = |i: usize| c.get(i).map(|m| m.as_str().parse::<u32>().expect("digits"));
                assert_eq!(p.date, [num(1), num(2), num(3)].map(|n| n.expect("date")), "{s:?}");
                let time = p.time;
                let want = num(4).map(|h| {
                    let sep = s.as_bytes()[c.get(3).expect("day").end()];
                    ([h, num(5).expect("min"), num(6).expect("sec")], sep != b' ', c.get(7).is_some())
                });
                assert_eq!(time, want, "{s:?}");
            }
        }
        assert!(matched > 2_000, "{matched}");
    }
}
