//! Go's `fmt` formatting of values as the Sprig functions need it (`%v`,
//! `%q`, `strconv.FormatFloat(f, 'g', -1, 64)`).

use gotmpl::value::Value;

/// `strconv.FormatFloat(f, 'g', -1, 64)` (also `%v` of a float64).
pub fn format_float_g(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let (neg, digits, exp) = shortest_digits(f);
    let sign = if neg { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let es = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    } else {
        format!("{sign}{}", place_point(&digits, exp))
    }
}

/// Digits of the shortest representation and the decimal exponent of the
/// first digit (`d.ddd × 10^exp`).
pub fn shortest_digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    (f < 0.0, digits, exp.parse().unwrap_or(0))
}

/// Digits with the decimal point placed for exponent `exp` (no exponent form).
pub fn place_point(digits: &str, exp: i32) -> String {
    if exp < 0 {
        format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
    } else {
        let int_len = exp as usize + 1;
        if digits.len() <= int_len {
            format!("{}{}", digits, "0".repeat(int_len - digits.len()))
        } else {
            format!("{}.{}", &digits[..int_len], &digits[int_len..])
        }
    }
}

/// `%v` of a value, as Go's fmt prints it (the engine's formatter).
pub fn format_value(v: &Value) -> String {
    gotmpl::fmt::format_value(v)
}

/// `strconv.Quote` (`%q` of a string).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if is_go_print(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the ASCII space.
fn is_go_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c as u32, 0xAD | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE000..=0xF8FF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_go_prints_them() {
        assert_eq!(format_float_g(1.0), "1");
        assert_eq!(format_float_g(1.5), "1.5");
        assert_eq!(format_float_g(1_000_000.0), "1e+06");
        assert_eq!(format_float_g(123_456.0), "123456");
        assert_eq!(format_float_g(1_234_567.5), "1.2345675e+06");
        assert_eq!(format_float_g(0.0001), "0.0001");
        assert_eq!(format_float_g(0.00001), "1e-05");
        assert_eq!(format_float_g(-2.5e-10), "-2.5e-10");
        assert_eq!(format_float_g(1e21), "1e+21");
    }

    #[test]
    fn values_and_quotes() {
        let m = Value::map([("a".to_string(), Value::Int(1)), ("b".to_string(), Value::Nil)].into_iter().collect());
        assert_eq!(format_value(&m), "map[a:1 b:<nil>]");
        assert_eq!(format_value(&Value::list(vec![Value::str("x"), Value::Float(2.0)])), "[x 2]");
        assert_eq!(quote("a\"b\n\u{1}é"), "\"a\\\"b\\n\\x01é\"");
    }
}
