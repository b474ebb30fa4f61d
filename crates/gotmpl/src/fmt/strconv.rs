//! Go's `strconv` as `fmt` uses it: `FormatFloat` (decimal and hex forms)
//! and `Quote` with `IsPrint`.

use super::*;

/// Decimal digits and the decimal point position of `|f|` (value =
/// 0.DIGITS × 10^dp), shortest round-trip or rounded to `sig` significant digits.
fn float_digits(f: f64, sig: Option<usize>) -> (String, i32) {
    let s = match sig {
        None => format!("{:e}", f.abs()),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f.abs()),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if digits == "0" {
        return ("0".into(), 1);
    }
    (digits, exp + 1)
}

/// strconv.FormatFloat(f, verb, prec, 64) for e, E, f, F, g, G.
pub(crate) fn format_float(f: f64, verb: char, prec: Option<usize>) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    let neg = f.is_sign_negative();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    match verb {
        'x' | 'X' => out.push_str(&hex_float(f.abs(), prec, verb == 'X')),
        'f' | 'F' => {
            let p = prec.unwrap_or(6);
            let _ = write!(out, "{:.*}", p, f.abs());
        }
        'e' | 'E' => {
            let p = prec.unwrap_or(6);
            let s = format!("{:.*e}", p, f.abs());
            out.push_str(&go_exp(&s, verb == 'E'));
        }
        _ => {
            // 'g' / 'G'
            let shortest = prec.is_none();
            let sig = prec.map(|p| p.max(1));
            let (digits, dp) = float_digits(f, sig);
            let nd = digits.len() as i32;
            let mut eprec = match sig {
                None => nd,
                Some(p) => p as i32,
            };
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            let upper = verb == 'G';
            if exp < -4 || exp >= eprec {
                // %e with nd-1 digits after the point.
                out.push_str(&digits[..1]);
                if nd > 1 {
                    out.push('.');
                    out.push_str(&digits[1..]);
                }
                out.push(if upper { 'E' } else { 'e' });
                let _ = write!(out, "{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
            } else if dp <= 0 {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-dp) as usize));
                out.push_str(&digits);
            } else if dp >= nd {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', (dp - nd) as usize));
            } else {
                out.push_str(&digits[..dp as usize]);
                out.push('.');
                out.push_str(&digits[dp as usize..]);
            }
        }
    }
    out
}

/// strconv's `%x` of a non-negative float: `0x1.f4p+09` (shortest, or
/// `prec` hex digits rounded half to even).
fn hex_float(a: f64, prec: Option<usize>, upper: bool) -> String {
    const ONE: u64 = 1 << 60;
    let (mut mant, mut exp) = if a == 0.0 {
        (0u64, 0i32)
    } else {
        let bits = a.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i32;
        let m = bits & ((1u64 << 52) - 1);
        let (mut mant, mut exp) = if e == 0 { (m, -1074) } else { (m | (1u64 << 52), e - 1075) };
        while mant < ONE {
            mant <<= 1;
            exp -= 1;
        }
        (mant, exp + 60)
    };
    let mut digits = String::new();
    match prec {
        Some(p) if p < 15 => {
            let shift = 60 - 4 * p as u32;
            let extra = mant & ((1u64 << shift) - 1);
            let half = 1u64 << (shift - 1);
            let mut m = mant >> shift;
            if extra > half || (extra == half && m & 1 == 1) {
                m += 1;
            }
            if m >> (4 * p) >= 2 {
                m >>= 1;
                exp += 1;
            }
            mant = m << shift;
            let frac = mant & (ONE - 1);
            for i in 0..p {
                let d = (frac >> (56 - 4 * i as u32)) & 0xf;
                digits.push(char::from_digit(d as u32, 16).unwrap_or('0'));
            }
        }
        _ => {
            let frac = mant & (ONE - 1);
            for i in 0..15 {
                let d = (frac >> (56 - 4 * i as u32)) & 0xf;
                digits.push(char::from_digit(d as u32, 16).unwrap_or('0'));
            }
            match prec {
                None => {
                    while digits.ends_with('0') {
                        digits.pop();
                    }
                }
                Some(p) => digits.extend(std::iter::repeat_n('0', p - 15)),
            }
        }
    }
    let lead = if mant >= ONE { '1' } else { '0' };
    let mut out = format!("0x{lead}");
    if !digits.is_empty() {
        out.push('.');
        out.push_str(&digits);
    }
    let _ = write!(out, "p{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    if upper { out.to_uppercase() } else { out }
}

/// Rust's `1.5e6` → Go's `1.5e+06`.
fn go_exp(s: &str, upper: bool) -> String {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{mant}{}{}{:02}", if upper { 'E' } else { 'e' }, if exp < 0 { '-' } else { '+' }, exp.abs())
}

pub(super) fn can_backquote(s: &str) -> bool {
    s.chars().all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !c.is_control()))
}

/// strconv.Quote (or QuoteToASCII with `ascii`).
pub fn quote(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"', ascii);
    }
    out.push('"');
    out
}

pub(super) fn quote_rune(c: char, ascii: bool) -> String {
    let mut out = String::from("'");
    push_escaped(&mut out, c, '\'', ascii);
    out.push('\'');
    out
}

fn push_escaped(out: &mut String, c: char, q: char, ascii: bool) {
    if c == q || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii {
        if (c as u32) < 0x80 && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation and symbols
/// (Unicode categories L, M, N, P, S) and the ASCII space. Every quoting
/// (`%q`, `quote`, error messages) goes through this one table.
pub fn is_print(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if (c as u32) < 0x80 {
        return (' '..='~').contains(&c);
    }
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    )
}
