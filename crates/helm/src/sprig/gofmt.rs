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

/// `strconv.Quote` (`%q` of a string): the engine's, so Sprig's `quote`,
/// `printf "%q"` and every quoted error message agree.
pub fn quote(s: &str) -> String {
    gotmpl::fmt::quote(s, false)
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

    #[test]
    fn quote_follows_gos_printable_table_as_printf_q_does() {
        // Expected by Go's strconv.Quote: Zs other than ' ', Cf, Zl, Co, Cn escaped;
        // letters, marks and symbols (emoji included) kept.
        let cases = [
            ("\u{a0}", "\"\\u00a0\""),
            ("\u{ad}", "\"\\u00ad\""),
            ("\u{2028}", "\"\\u2028\""),
            ("\u{e000}", "\"\\ue000\""),
            ("\u{378}", "\"\\u0378\""),
            ("\u{200b}", "\"\\u200b\""),
            ("\u{1f600}", "\"\u{1f600}\""),
            ("e\u{301}", "\"e\u{301}\""),
            ("\u{7f}", "\"\\x7f\""),
        ];
        for (input, want) in cases {
            assert_eq!(quote(input), want, "quote({input:?})");
            let printf = gotmpl::sprintf("%q", &[Value::str(input)]);
            assert_eq!(printf, want, "printf %q of {input:?}");
        }
    }
}
