//! Sprig's numbers and conversions (numeric.go, the cast wrappers, and the
//! arithmetic of functions.go).

use super::{err, gofmt, i, reg, regv, s, to_float64, to_int64};
use crate::env::HostExt as _;
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Any, Float64, Int, String as Str};

fn div_zero() -> FuncError {
    err("runtime error: integer divide by zero")
}

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "atoi", &[Str], |_, a| Ok(Value::Int(atoi(&s(&a[0])))));
    reg(m, "int", &[Any], |_, a| Ok(Value::Int(to_int64(&a[0]))));
    reg(m, "int64", &[Any], |_, a| Ok(Value::Int64(to_int64(&a[0]))));
    reg(m, "float64", &[Any], |_, a| Ok(Value::Float(to_float64(&a[0]))));
    reg(m, "toDecimal", &[Any], |_, a| {
        let text = super::gofmt::format_value(&a[0]);
        Ok(Value::Int64(parse_radix_signed(&text, 8).unwrap_or(0)))
    });
    regv(m, "seq", &[], Int, |h, a| Ok(seq(h, &a.iter().map(i).collect::<Vec<_>>())?.into()));
    reg(m, "until", &[Int], |h, a| {
        let n = i(&a[0]);
        Ok(ints(until_in(h, "until", 0, n, if n < 0 { -1 } else { 1 })?))
    });
    reg(m, "untilStep", &[Int, Int, Int], |h, a| Ok(ints(until_in(h, "untilStep", i(&a[0]), i(&a[1]), i(&a[2]))?)));
    reg(m, "add1", &[Any], |_, a| Ok(Value::Int64(to_int64(&a[0]).wrapping_add(1))));
    regv(m, "add", &[], Any, |_, a| Ok(Value::Int64(a.iter().fold(0i64, |x, y| x.wrapping_add(to_int64(y))))));
    reg(m, "sub", &[Any, Any], |_, a| Ok(Value::Int64(to_int64(&a[0]).wrapping_sub(to_int64(&a[1])))));
    reg(m, "div", &[Any, Any], |_, a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err(div_zero());
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_div(d)))
    });
    reg(m, "mod", &[Any, Any], |_, a| {
        let d = to_int64(&a[1]);
        if d == 0 {
            return Err(div_zero());
        }
        Ok(Value::Int64(to_int64(&a[0]).wrapping_rem(d)))
    });
    regv(m, "mul", &[Any], Any, |_, a| {
        Ok(Value::Int64(a[1..].iter().fold(to_int64(&a[0]), |x, y| x.wrapping_mul(to_int64(y)))))
    });
    reg(m, "randInt", &[Int, Int], |h, a| {
        let (lo, hi) = (i(&a[0]), i(&a[1]));
        if hi <= lo {
            return Err(err("invalid argument to Intn"));
        }
        use rand::Rng;
        Ok(Value::Int(h.rng().random_range(lo..hi)))
    });
    reg(m, "add1f", &[Any], |_, a| Ok(Value::Float(dec_op(to_float64(&a[0]), &[1.0], Op::Add))));
    regv(m, "addf", &[], Any, |_, a| {
        let xs: Vec<f64> = a.iter().map(to_float64).collect();
        Ok(Value::Float(dec_op(0.0, &xs, Op::Add)))
    });
    for (name, op) in [("subf", Op::Sub), ("mulf", Op::Mul), ("divf", Op::Div)] {
        regv(m, name, &[Any], Any, move |_, a| {
            let xs: Vec<f64> = a[1..].iter().map(to_float64).collect();
            Ok(Value::Float(dec_op(to_float64(&a[0]), &xs, op)))
        });
    }
    for name in ["max", "biggest"] {
        regv(m, name, &[Any], Any, |_, a| {
            Ok(Value::Int64(a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::max)))
        });
    }
    regv(m, "min", &[Any], Any, |_, a| Ok(Value::Int64(a[1..].iter().map(to_int64).fold(to_int64(&a[0]), i64::min))));
    regv(m, "maxf", &[Any], Any, |_, a| {
        Ok(Value::Float(a[1..].iter().map(to_float64).fold(to_float64(&a[0]), go_max)))
    });
    regv(m, "minf", &[Any], Any, |_, a| {
        Ok(Value::Float(a[1..].iter().map(to_float64).fold(to_float64(&a[0]), go_min)))
    });
    reg(m, "floor", &[Any], |_, a| Ok(Value::Float(to_float64(&a[0]).floor())));
    reg(m, "ceil", &[Any], |_, a| Ok(Value::Float(to_float64(&a[0]).ceil())));
    regv(m, "round", &[Any, Int], Float64, |_, a| {
        let round_on = a.get(2).map(to_float64).unwrap_or(0.5);
        let val = to_float64(&a[0]);
        let pow = 10f64.powf(to_int64(&a[1]) as f64);
        let digit = pow * val;
        let frac = digit.fract();
        let r = if frac >= round_on { digit.ceil() } else { digit.floor() };
        Ok(Value::Float(r / pow))
    });
}

fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }
}

fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }
}

fn ints(v: Vec<i64>) -> Value {
    Value::list(v.into_iter().map(Value::Int).collect())
}

/// `strconv.Atoi`, 0 on error.
fn atoi(s: &str) -> i64 {
    let b = s.strip_prefix(['+', '-']).unwrap_or(s);
    if b.is_empty() || !b.bytes().all(|c| c.is_ascii_digit()) {
        return 0;
    }
    s.parse().unwrap_or(0)
}

fn parse_radix_signed(s: &str, radix: u32) -> Option<i64> {
    let (neg, b) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if b.is_empty() || b.contains(['+', '-']) {
        return None;
    }
    let v = i64::from_str_radix(b, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// Sprig's `untilStep`: the integers from `start` towards `stop` by `step`.
/// The length is computed first and refused past `max` items (`Err` holds
/// it), so `until 2000000000` is an error, not gigabytes of list.
fn until_step(start: i64, stop: i64, step: i64, max: usize) -> Result<Vec<i64>, u128> {
    let (span, by) = match (stop < start, step) {
        (true, s) if s < 0 => (start as i128 - stop as i128, -(s as i128)),
        (false, s) if s > 0 => (stop as i128 - start as i128, s as i128),
        _ => return Ok(Vec::new()),
    };
    let count = ((span + by - 1) / by) as u128;
    if count > max as u128 {
        return Err(count);
    }
    let mut v = Vec::with_capacity(count as usize);
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        v.push(i);
        match i.checked_add(step) {
            Some(n) => i = n,
            None => break,
        }
    }
    Ok(v)
}

/// `until_step` for a function of the host: too long a list is a size-limit error.
pub(crate) fn until_in(h: &mut dyn Host, what: &str, start: i64, stop: i64, step: i64) -> Result<Vec<i64>, FuncError> {
    let v = until_step(start, stop, step, h.max_size()).map_err(|n| {
        FuncError::Limit(format!("{what}: a list of {n} items is over the size limit ({})", h.max_size()))
    })?;
    gotmpl::room(h, what, v.len() as u128 * 8)?;
    Ok(v)
}

fn seq(h: &mut dyn Host, p: &[i64]) -> Result<String, FuncError> {
    let list = match p.len() {
        1 => {
            let (start, end) = (1, p[0]);
            let inc = if end < start { -1 } else { 1 };
            until_in(h, "seq", start, end.saturating_add(inc), inc)?
        }
        2 => {
            let (start, end) = (p[0], p[1]);
            let step = if end < start { -1 } else { 1 };
            until_in(h, "seq", start, end.saturating_add(step), step)?
        }
        3 => {
            let (start, step, end) = (p[0], p[1], p[2]);
            let mut inc = 1;
            if end < start {
                inc = -1;
                if step > 0 {
                    return Ok(String::new());
                }
            }
            until_in(h, "seq", start, end.saturating_add(inc), step)?
        }
        _ => return Ok(String::new()),
    };
    Ok(list.iter().map(i64::to_string).collect::<Vec<_>>().join(" "))
}

#[derive(Clone, Copy)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
}

/// shopspring/decimal arithmetic on the floats' shortest decimal forms,
/// back to float64: exact for add/sub/mul, 16 decimals for div.
fn dec_op(first: f64, rest: &[f64], op: Op) -> f64 {
    let decimals = |f: f64| -> i32 {
        if f == 0.0 || !f.is_finite() {
            return 0;
        }
        let (_, digits, exp) = gofmt::shortest_digits(f);
        (digits.len() as i32 - 1 - exp).max(0)
    };
    let mut acc = first;
    let mut places = decimals(first);
    for &x in rest {
        let (r, p) = match op {
            Op::Add => (acc + x, places.max(decimals(x))),
            Op::Sub => (acc - x, places.max(decimals(x))),
            Op::Mul => (acc * x, places + decimals(x)),
            Op::Div => {
                if x == 0.0 {
                    return f64::NAN;
                }
                (acc / x, 16)
            }
        };
        places = p;
        acc = if places <= 17 { format!("{:.*}", places as usize, r).parse().unwrap_or(r) } else { r };
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn conversions_as_cast() {
        assert_eq!(callv("int", &[Value::Float(1.5)]), "1");
        assert_eq!(callv("int", &[st("42")]), "42");
        assert_eq!(callv("int", &[st("4.0")]), "4");
        assert_eq!(callv("int", &[st("0x1F")]), "31");
        assert_eq!(callv("int", &[st("nope")]), "0");
        assert_eq!(callv("int64", &[Value::Bool(true)]), "1");
        assert_eq!(callv("float64", &[st("1.25")]), "1.25");
        assert_eq!(callv("atoi", &[st("12x")]), "0");
        assert_eq!(callv("atoi", &[st("-12")]), "-12");
        assert_eq!(callv("toDecimal", &[st("0777")]), "511");
        assert!(matches!(call("int", &[Value::Float(3.0)]), Ok(Value::Int(3))));
        assert!(matches!(call("add", &[Value::Int(1), Value::Float(2.0)]), Ok(Value::Int64(3))));
    }

    #[test]
    fn arithmetic_as_sprig() {
        assert_eq!(callv("add", &[Value::Int(1), st("2"), Value::Float(3.9)]), "6");
        assert_eq!(callv("add1", &[Value::Int(1)]), "2");
        assert_eq!(callv("sub", &[Value::Int(5), Value::Int(7)]), "-2");
        assert_eq!(callv("div", &[Value::Int(7), Value::Int(2)]), "3");
        assert_eq!(callv("div", &[Value::Int(7), Value::Int(0)]), "ERR runtime error: integer divide by zero");
        assert_eq!(callv("mod", &[Value::Int(7), Value::Int(2)]), "1");
        assert_eq!(callv("mul", &[Value::Int(2), Value::Int(3), Value::Int(4)]), "24");
        assert_eq!(callv("max", &[Value::Int(2), Value::Int(9), Value::Int(4)]), "9");
        assert_eq!(callv("min", &[Value::Int(2), Value::Int(-9)]), "-9");
        assert_eq!(callv("addf", &[Value::Float(0.1), Value::Float(0.2)]), "0.3");
        assert_eq!(callv("mulf", &[Value::Float(1.1), Value::Float(3.0)]), "3.3");
        assert_eq!(callv("divf", &[Value::Float(10.0), Value::Float(3.0)]), "3.3333333333333335");
        assert_eq!(callv("subf", &[Value::Float(1.0), Value::Float(0.9)]), "0.1");
        assert_eq!(callv("floor", &[Value::Float(1.7)]), "1");
        assert_eq!(callv("ceil", &[st("1.2")]), "2");
        assert_eq!(callv("round", &[Value::Float(123.5555), Value::Int(3)]), "123.556");
        assert_eq!(callv("round", &[Value::Float(123.55), Value::Int(1), Value::Float(0.6)]), "123.5");
        assert_eq!(callv("maxf", &[Value::Float(1.5), Value::Int(2)]), "2");
    }

    #[test]
    fn sequences() {
        assert_eq!(callv("until", &[Value::Int(3)]), "[0 1 2]");
        assert_eq!(callv("until", &[Value::Int(-2)]), "[0 -1]");
        assert_eq!(callv("untilStep", &[Value::Int(0), Value::Int(10), Value::Int(3)]), "[0 3 6 9]");
        assert_eq!(callv("seq", &[Value::Int(3)]), "1 2 3");
        assert_eq!(callv("seq", &[Value::Int(2), Value::Int(-2)]), "2 1 0 -1 -2");
        assert_eq!(callv("seq", &[Value::Int(0), Value::Int(2), Value::Int(6)]), "0 2 4 6");
        assert_eq!(callv("seq", &[]), "");
    }
}
