//! Go's `fmt` for template values: `%v` as templates print values, `Sprint`,
//! `Sprintln` and `Sprintf` with Go's verbs, flags and error notations
//! (`%!d(string=x)`, `%!v(MISSING)`, `%!(EXTRA ...)`).

use std::fmt::Write as _;

use super::value::Value;

/// `%v` of a value, as `fmt.Sprint` prints one operand.
pub fn format_value(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i) | Value::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => out.push_str(&format_float_g(*f, None)),
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => {
            out.push('[');
            for (i, byte) in b.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                let _ = write!(out, "{byte}");
            }
            out.push(']');
        }
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Map(m) => {
            out.push_str("map[");
            for (i, (k, item)) in m.borrow().iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(o) => out.push_str(&o.go_string()),
    }
}

/// `fmt.Sprint`: operands in `%v`, a space between two operands when neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    let mut prev_string = true;
    for (i, a) in args.iter().enumerate() {
        let is_string = matches!(a, Value::String(_));
        if i > 0 && !is_string && !prev_string {
            out.push(' ');
        }
        write_value(&mut out, a);
        prev_string = is_string;
    }
    out
}

/// `fmt.Sprintln`: operands in `%v` separated by spaces, then a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_value(&mut out, a);
    }
    out.push('\n');
    out
}

/// Shortest decimal digits and decimal point position of a finite `f > 0`:
/// `f = 0.DIGITS × 10^dp`.
fn shortest_digits(f: f64) -> (Vec<u8>, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    (digits, exp + 1)
}

/// Digits of `f` rounded to `n` significant digits (n ≥ 1).
fn rounded_digits(f: f64, n: usize) -> (Vec<u8>, i32) {
    let s = format!("{:.*e}", n.saturating_sub(1), f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    (mant.bytes().filter(u8::is_ascii_digit).collect(), exp + 1)
}

fn special_float(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".into())
    } else if f.is_infinite() {
        Some(if f > 0.0 { "+Inf".into() } else { "-Inf".into() })
    } else {
        None
    }
}

fn exp_form(neg: bool, digits: &[u8], dp: i32, upper: bool) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    s.push(digits.first().copied().unwrap_or(b'0') as char);
    if digits.len() > 1 {
        s.push('.');
        s.extend(digits[1..].iter().map(|d| *d as char));
    }
    let e = if digits.iter().all(|d| *d == b'0') { 0 } else { dp - 1 };
    s.push(if upper { 'E' } else { 'e' });
    s.push(if e < 0 { '-' } else { '+' });
    let _ = write!(s, "{:02}", e.abs());
    s
}

fn fixed_form(neg: bool, digits: &[u8], dp: i32, frac: usize) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    if dp <= 0 {
        s.push('0');
    } else {
        for i in 0..dp as usize {
            s.push(digits.get(i).map(|d| *d as char).unwrap_or('0'));
        }
    }
    if frac > 0 {
        s.push('.');
        for i in 0..frac {
            let idx = dp + i as i32;
            s.push(if idx < 0 { '0' } else { digits.get(idx as usize).map(|d| *d as char).unwrap_or('0') });
        }
    }
    s
}

/// Go's `%g` (`strconv.FormatFloat(f, 'g', prec, 64)`); `None` is the
/// shortest representation, which `%v` uses (`1e+06`, `3.5`, `100000`).
pub fn format_float_g(f: f64, prec: Option<usize>) -> String {
    format_float_g_case(f, prec, false)
}

fn format_float_g_case(f: f64, prec: Option<usize>, upper: bool) -> String {
    if let Some(s) = special_float(f) {
        return s;
    }
    let neg = f.is_sign_negative();
    if f == 0.0 {
        return if neg { "-0".into() } else { "0".into() };
    }
    let (digits, dp, eprec) = match prec {
        None => {
            let (d, dp) = shortest_digits(f);
            (d, dp, 6)
        }
        Some(p) => {
            let p = p.max(1);
            let (mut d, dp) = rounded_digits(f, p);
            // %g drops trailing zeros unless `#`.
            while d.len() > 1 && d.last() == Some(&b'0') {
                d.pop();
            }
            (d, dp, p as i32)
        }
    };
    let mut eprec = eprec;
    if prec.is_some() && eprec > digits.len() as i32 && digits.len() as i32 >= dp {
        eprec = digits.len() as i32;
    }
    let exp = dp - 1;
    if exp < -4 || exp >= eprec {
        exp_form(neg, &digits, dp, upper)
    } else {
        let frac = (digits.len() as i32 - dp).max(0) as usize;
        fixed_form(neg, &digits, dp, frac)
    }
}

fn format_float_f(f: f64, prec: usize) -> String {
    if let Some(s) = special_float(f) {
        return s;
    }
    format!("{:.*}", prec, f)
}

fn format_float_e(f: f64, prec: usize, upper: bool) -> String {
    if let Some(s) = special_float(f) {
        return s;
    }
    if f == 0.0 {
        let mut s = String::from(if f.is_sign_negative() { "-0" } else { "0" });
        if prec > 0 {
            s.push('.');
            s.extend(std::iter::repeat_n('0', prec));
        }
        s.push_str(if upper { "E+00" } else { "e+00" });
        return s;
    }
    let (digits, dp) = rounded_digits(f, prec + 1);
    exp_form(f.is_sign_negative(), &digits, dp, upper)
}

/// Go's `strconv.Quote`: a double-quoted string with Go escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
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
            c if c.is_control() => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[derive(Default, Clone, Copy)]
struct Flags {
    minus: bool,
    plus: bool,
    space: bool,
    zero: bool,
    sharp: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprintf` with Go's verbs.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut arg_i = 0;
    let mut chars = format.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = Flags::default();
        while let Some(&(_, f)) = chars.peek() {
            match f {
                '-' => flags.minus = true,
                '+' => flags.plus = true,
                ' ' => flags.space = true,
                '0' => flags.zero = true,
                '#' => flags.sharp = true,
                _ => break,
            }
            chars.next();
        }
        // Width: digits or `*`.
        if chars.peek().map(|(_, c)| *c) == Some('*') {
            chars.next();
            match args.get(arg_i) {
                Some(Value::Int(n)) | Some(Value::Int64(n)) => {
                    if *n < 0 {
                        flags.minus = true;
                    }
                    flags.width = Some(n.unsigned_abs() as usize);
                }
                _ => out.push_str("%!(BADWIDTH)"),
            }
            arg_i += 1;
        } else {
            let mut w = String::new();
            while let Some(&(_, d)) = chars.peek() {
                if !d.is_ascii_digit() {
                    break;
                }
                w.push(d);
                chars.next();
            }
            if !w.is_empty() {
                flags.width = w.parse().ok();
            }
        }
        if chars.peek().map(|(_, c)| *c) == Some('.') {
            chars.next();
            if chars.peek().map(|(_, c)| *c) == Some('*') {
                chars.next();
                match args.get(arg_i) {
                    Some(Value::Int(n)) | Some(Value::Int64(n)) if *n >= 0 => flags.prec = Some(*n as usize),
                    _ => out.push_str("%!(BADPREC)"),
                }
                arg_i += 1;
            } else {
                let mut p = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if !d.is_ascii_digit() {
                        break;
                    }
                    p.push(d);
                    chars.next();
                }
                flags.prec = Some(p.parse().unwrap_or(0));
            }
        }
        let Some((_, verb)) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(arg_i) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        arg_i += 1;
        let body = format_verb(verb, arg, &flags);
        out.push_str(&pad(&body, &flags, verb, arg));
    }
    if arg_i < args.len() {
        out.push_str("%!(EXTRA ");
        for (i, a) in args[arg_i..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}={}", a.type_name(), format_value(a));
        }
        out.push(')');
    }
    out
}

fn pad(body: &str, flags: &Flags, verb: char, arg: &Value) -> String {
    let Some(width) = flags.width else { return body.to_string() };
    let len = body.chars().count();
    if len >= width {
        return body.to_string();
    }
    let fill = width - len;
    if flags.minus {
        return format!("{body}{}", " ".repeat(fill));
    }
    let numeric = matches!(arg, Value::Int(_) | Value::Int64(_) | Value::Float(_))
        && matches!(verb, 'd' | 'v' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G' | 'x' | 'X' | 'o' | 'b');
    if flags.zero && numeric {
        // Zeros go after the sign.
        let (sign, rest) = match body.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), &body[1..]),
            _ => (String::new(), body),
        };
        return format!("{sign}{}{rest}", "0".repeat(fill));
    }
    if flags.zero && matches!(arg, Value::String(_)) {
        return format!("{}{body}", "0".repeat(fill));
    }
    format!("{}{body}", " ".repeat(fill))
}

fn bad_verb(verb: char, arg: &Value) -> String {
    match arg {
        Value::Nil => format!("%!{verb}(<nil>)"),
        _ => format!("%!{verb}({}={})", arg.type_name(), format_value(arg)),
    }
}

fn sign(s: String, flags: &Flags, negative: bool) -> String {
    if negative {
        s
    } else if flags.plus {
        format!("+{s}")
    } else if flags.space {
        format!(" {s}")
    } else {
        s
    }
}

fn format_int(verb: char, i: i64, flags: &Flags) -> Option<String> {
    let neg = i < 0;
    let a = i.unsigned_abs();
    let digits = match verb {
        'd' | 'v' => a.to_string(),
        'x' => format!("{a:x}"),
        'X' => format!("{a:X}"),
        'o' | 'O' => format!("{a:o}"),
        'b' => format!("{a:b}"),
        'c' => return char::from_u32(i as u32).map(|c| c.to_string()),
        'q' => return char::from_u32(i as u32).map(|c| format!("'{}'", c.escape_default())),
        'U' => {
            let s = format!("U+{a:04X}");
            return Some(if flags.sharp { format!("{s} '{}'", char::from_u32(i as u32).unwrap_or('?')) } else { s });
        }
        'e' | 'E' | 'f' | 'F' | 'g' | 'G' | 's' | 't' => return None,
        _ => return None,
    };
    let mut digits = match flags.prec {
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        Some(0) if a == 0 => String::new(),
        _ => digits,
    };
    if flags.sharp {
        match verb {
            'x' => digits = format!("0x{digits}"),
            'X' => digits = format!("0X{digits}"),
            'o' => digits = format!("0{digits}"),
            'b' => digits = format!("0b{digits}"),
            _ => {}
        }
    }
    if verb == 'O' {
        digits = format!("0o{digits}");
    }
    Some(sign(if neg { format!("-{digits}") } else { digits }, flags, neg))
}

fn format_float(verb: char, f: f64, flags: &Flags) -> Option<String> {
    let neg = f.is_sign_negative() && !f.is_nan();
    let s = match verb {
        'v' | 'g' => format_float_g(f, flags.prec),
        'G' => format_float_g_case(f, flags.prec, true),
        'f' | 'F' => format_float_f(f, flags.prec.unwrap_or(6)),
        'e' => format_float_e(f, flags.prec.unwrap_or(6), false),
        'E' => format_float_e(f, flags.prec.unwrap_or(6), true),
        _ => return None,
    };
    Some(sign(s, flags, neg))
}

fn format_string(verb: char, s: &str, flags: &Flags) -> Option<String> {
    let s = match flags.prec {
        Some(p) if matches!(verb, 's' | 'v' | 'q') => s.chars().take(p).collect::<String>(),
        _ => s.to_string(),
    };
    Some(match verb {
        's' | 'v' => s,
        'q' => {
            if flags.sharp && !s.contains('`') {
                format!("`{s}`")
            } else {
                go_quote(&s)
            }
        }
        'x' => s.bytes().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(if flags.space { " " } else { "" }),
        'X' => s.bytes().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(if flags.space { " " } else { "" }),
        _ => return None,
    })
}

fn format_verb(verb: char, arg: &Value, flags: &Flags) -> String {
    if verb == 'T' {
        return arg.type_name();
    }
    let inner = Flags { width: None, ..*flags };
    let formatted = match arg {
        Value::Nil => match verb {
            'v' => Some("<nil>".to_string()),
            _ => None,
        },
        Value::Bool(b) => match verb {
            't' | 'v' => Some(b.to_string()),
            _ => None,
        },
        Value::Int(i) | Value::Int64(i) => format_int(verb, *i, &inner),
        Value::Float(f) => format_float(verb, *f, &inner),
        Value::String(s) => format_string(verb, s, &inner),
        Value::Bytes(b) => match verb {
            's' => Some(String::from_utf8_lossy(b).into_owned()),
            'q' => Some(go_quote(&String::from_utf8_lossy(b))),
            'x' => Some(b.iter().map(|b| format!("{b:02x}")).collect()),
            'X' => Some(b.iter().map(|b| format!("{b:02X}")).collect()),
            'v' | 'd' => Some(format_value(arg)),
            _ => None,
        },
        Value::List(items) => {
            let parts: Vec<String> = items.iter().map(|i| format_verb(verb, i, &inner)).collect();
            Some(format!("[{}]", parts.join(" ")))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .borrow()
                .iter()
                .map(|(k, v)| {
                    format!("{}:{}", format_verb(verb, &Value::str(k.as_str()), &inner), format_verb(verb, v, &inner))
                })
                .collect();
            Some(format!("map[{}]", parts.join(" ")))
        }
        Value::Object(o) => match verb {
            'v' | 's' => Some(o.go_string()),
            _ => None,
        },
    };
    formatted.unwrap_or_else(|| bad_verb(verb, arg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn floats_print_as_go_prints_them() {
        let cases = [
            (1.0, "1"),
            (3.5, "3.5"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
            (0.1 + 0.2, "0.30000000000000004"),
        ];
        for (f, want) in cases {
            assert_eq!(format_value(&Value::Float(f)), want, "{f}");
        }
    }

    #[test]
    fn collections_print_with_v() {
        let m = Value::map(BTreeMap::from([("b".to_string(), Value::Int(2)), ("a".to_string(), Value::str("x"))]));
        assert_eq!(format_value(&m), "map[a:x b:2]");
        let l = Value::list(vec![Value::str("a"), Value::Nil, Value::Float(1.5)]);
        assert_eq!(format_value(&l), "[a <nil> 1.5]");
    }

    #[test]
    fn sprint_spaces_only_between_non_strings() {
        assert_eq!(sprint(&[Value::str("a"), Value::str("b")]), "ab");
        assert_eq!(sprint(&[Value::Int(1), Value::Int(2)]), "1 2");
        assert_eq!(sprint(&[Value::str("a"), Value::Int(1), Value::Int(2), Value::str("b")]), "a1 2b");
        assert_eq!(sprintln(&[Value::str("a"), Value::str("b")]), "a b\n");
    }

    #[test]
    fn printf_verbs_and_errors() {
        let s = |f: &str, args: &[Value]| sprintf(f, args);
        assert_eq!(s("%d", &[Value::Int(42)]), "42");
        assert_eq!(s("%d", &[Value::Float(80.0)]), "%!d(float64=80)");
        assert_eq!(s("%s", &[Value::Int(5)]), "%!s(int=5)");
        assert_eq!(
            s(
                "%05d|%-4d|%x|%X|%o|%b",
                &[Value::Int(42), Value::Int(7), Value::Int(255), Value::Int(255), Value::Int(8), Value::Int(5)]
            ),
            "00042|7   |ff|FF|10|101"
        );
        assert_eq!(s("%q", &[Value::str("a\"b\n")]), r#""a\"b\n""#);
        assert_eq!(
            s("%.2f|%8.3f|%e|%g", &[Value::Float(1.23456), Value::Float(2.5), Value::Float(1234.5), Value::Float(1e6)]),
            "1.23|   2.500|1.234500e+03|1e+06"
        );
        assert_eq!(s("%v %v", &[Value::Int(1)]), "1 %!v(MISSING)");
        assert_eq!(s("%v", &[Value::Int(1), Value::str("x")]), "1%!(EXTRA string=x)");
        assert_eq!(s("%s", &[Value::list(vec![Value::str("a"), Value::str("b")])]), "[a b]");
        assert_eq!(s("%t %v", &[Value::Bool(true), Value::Nil]), "true <nil>");
        assert_eq!(s("%s", &[Value::Nil]), "%!s(<nil>)");
        assert_eq!(s("%5s|%-5s|%.2s", &[Value::str("ab"), Value::str("ab"), Value::str("abc")]), "   ab|ab   |ab");
        assert_eq!(s("%T %T %T", &[Value::Float(1.0), Value::str("x"), Value::Int(1)]), "float64 string int");
        assert_eq!(s("%x", &[Value::str("hi")]), "6869");
        assert_eq!(s("%c|%U", &[Value::Int(65), Value::Int(65)]), "A|U+0041");
        assert_eq!(s("%+d|% d", &[Value::Int(5), Value::Int(5)]), "+5| 5");
        assert_eq!(s("100%%", &[]), "100%");
    }
}
