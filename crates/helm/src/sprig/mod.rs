//! The Sprig function library (Masterminds/sprig v3) as Helm ships it:
//! every function of `sprig.TxtFuncMap()` but `env` and `expandenv`, each with
//! its Go signature so the engine converts arguments as Go does.
//!
//! Split by area; `funcs()` assembles them. Go panics inside a function
//! become [`FuncError`]s (the engine reports them as `error calling NAME: ...`).

mod certs;
mod crypto;
mod dates;
mod dicts;
#[cfg(test)]
mod difftest;
mod encoding;
pub(crate) mod gofmt;
mod lists;
mod math;
mod paths;
mod reflect;
mod regex;
mod rsa_keys;
pub mod semver;
mod strings;

use std::borrow::Cow;

use gotmpl::func::{Func, FuncMap, Host, Param, Signature};
use gotmpl::value::{FuncError, Value};

pub use dates::GoTime;
pub(crate) use encoding::json_float as encoding_json_float;
pub use encoding::{from_json, go_json};
pub use gofmt::format_value;
pub(crate) use parse_go_int as parse_int;

/// Sprig's functions, as `sprig.TxtFuncMap()` minus `env` and `expandenv`.
pub fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    strings::register(&mut m);
    regex::register(&mut m);
    lists::register(&mut m);
    dicts::register(&mut m);
    reflect::register(&mut m);
    math::register(&mut m);
    encoding::register(&mut m);
    crypto::register(&mut m);
    certs::register(&mut m);
    semver::register(&mut m);
    dates::register(&mut m);
    paths::register(&mut m);
    m
}

type Body = dyn Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync;

/// Registers a function with fixed parameters.
pub(crate) fn reg(
    m: &mut FuncMap,
    name: &'static str,
    params: &[Param],
    body: impl Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
) {
    m.insert(name, Func::new(Signature::fixed(params), body));
}

/// Registers a variadic function.
pub(crate) fn regv(
    m: &mut FuncMap,
    name: &'static str,
    params: &[Param],
    rest: Param,
    body: impl Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
) {
    m.insert(name, Func::new(Signature::variadic(params, rest), body));
}

#[allow(dead_code)]
pub(crate) type BoxedBody = Box<Body>;

/// The string of a `string` parameter (the engine has converted it; other
/// values are printed as `%v` would, for robustness).
pub(crate) fn s(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(strval(other)),
    }
}

/// An `int` parameter (already converted by the engine).
pub(crate) fn i(v: &Value) -> i64 {
    to_int64(v)
}

/// Sprig's `strval`: strings and bytes as they are, the rest as `%v`.
pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => gofmt::format_value(other),
    }
}

/// spf13/cast `ToInt64` (0 when it can't convert).
pub(crate) fn to_int64(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::String(s) => parse_go_int(&trim_zero_decimal(s)).unwrap_or(0),
        Value::Object(o) => o.field("__int64").map(|v| to_int64(&v)).unwrap_or(0),
        _ => 0,
    }
}

/// spf13/cast `ToFloat64` (0 when it can't convert).
pub(crate) fn to_float64(v: &Value) -> f64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::String(s) => parse_go_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// cast's trimZeroDecimal: "10.0" → "10".
fn trim_zero_decimal(s: &str) -> Cow<'_, str> {
    let b = s.as_bytes();
    let mut found_zero = false;
    for i in (0..b.len()).rev() {
        match b[i] {
            b'.' => {
                if found_zero {
                    return Cow::Owned(s[..i].to_string());
                }
            }
            b'0' => found_zero = true,
            _ => return Cow::Borrowed(s),
        }
    }
    Cow::Borrowed(s)
}

/// `strconv.ParseInt(s, 0, 64)`: sign, 0x/0o/0b/0 prefixes, underscores
/// between digits only with a prefix.
pub(crate) fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest.is_empty() {
        return None;
    }
    let lower = rest.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d.to_string(), true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d.to_string(), true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, lower[1..].to_string(), true)
    } else {
        (10, lower.clone(), false)
    };
    let digits = if prefixed {
        if digits.starts_with('_') && radix == 8 && !lower.starts_with("0o") {
            // "0_7" is fine in Go (underscore after the octal 0)
            digits[1..].to_string()
        } else {
            if digits.contains("__") || digits.ends_with('_') || digits.starts_with('_') {
                return None;
            }
            digits.replace('_', "")
        }
    } else {
        // base 0: underscores only between digits
        let b = digits.as_bytes();
        let ok = b.iter().enumerate().all(|(i, c)| {
            *c != b'_' || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        });
        if !ok {
            return None;
        }
        digits.replace('_', "")
    };
    if digits.is_empty() {
        return None;
    }
    let mag = u64::from_str_radix(&digits, radix).ok()?;
    if neg {
        if mag > i64::MAX as u64 + 1 { None } else { Some((mag as i64).wrapping_neg()) }
    } else {
        i64::try_from(mag).ok()
    }
}

/// `strconv.ParseFloat(s, 64)` for decimal forms (a hex mantissa needs a
/// `p` exponent in Go, which charts don't write: those fail, as `0x1F` does).
pub(crate) fn parse_go_float(s: &str) -> Option<f64> {
    let t = s.to_ascii_lowercase();
    let body = t.trim_start_matches(['+', '-']);
    match body {
        "inf" | "infinity" => return Some(if t.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY }),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if body.is_empty() || !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'+' | b'-' | b'_')) {
        return None;
    }
    if s.contains('_') {
        // underscores only between digits
        let b = body.as_bytes();
        let ok = b.iter().enumerate().all(|(i, c)| {
            *c != b'_' || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        });
        if !ok {
            return None;
        }
        return s.replace('_', "").parse::<f64>().ok();
    }
    s.parse::<f64>().ok()
}

/// The items of a slice value (`[]interface{}` or `[]byte`), `None` for other kinds.
pub(crate) fn items(v: &Value) -> Option<Vec<Value>> {
    match v {
        Value::List(l) => Some(l.as_ref().clone()),
        Value::Bytes(b) => Some(b.iter().map(|x| Value::Int(i64::from(*x))).collect()),
        // Helm's typed slices with methods (`.Capabilities.APIVersions`) are
        // slices to reflection, so every list function takes them
        Value::Object(o) => match o.elements() {
            Some(Value::List(l)) => Some(l.as_ref().clone()),
            _ => None,
        },
        _ => None,
    }
}

/// `reflect.DeepEqual` over values.
pub(crate) fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) | (Value::Int64(x), Value::Int64(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        // reflect.DeepEqual tells a nil slice from an empty one.
        (Value::List(_), Value::List(_)) if a.is_nil_list() != b.is_nil_list() => false,
        (Value::List(x), Value::List(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| deep_equal(p, q)),
        (Value::Map(x), Value::Map(y)) => {
            if std::rc::Rc::ptr_eq(x, y) {
                return true;
            }
            let (x, y) = (x.borrow(), y.borrow());
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        (Value::Object(x), Value::Object(y)) => x.type_name() == y.type_name() && x.go_string() == y.go_string(),
        _ => false,
    }
}

/// The Go kind name used in Sprig's "Cannot ... on type KIND" messages.
pub(crate) fn kind(v: &Value) -> &'static str {
    v.kind_name()
}

pub(crate) fn err(msg: impl Into<String>) -> FuncError {
    FuncError::msg(msg)
}

#[cfg(test)]
pub(crate) mod testhost {
    use super::*;

    /// A host for calling functions directly in tests: a seeded render
    /// environment at a fixed time; `include` and `tpl` echo their arguments.
    pub struct TestHost {
        pub env: crate::RenderEnv,
    }

    impl TestHost {
        pub fn new() -> Self {
            let now = "2024-03-05T14:07:09.5+01:00[Europe/Berlin]".parse().expect("test time");
            Self { env: crate::RenderEnv::new(Some(7), now) }
        }
    }

    impl Host for TestHost {
        fn execute_template(&mut self, name: &str, data: &Value) -> Result<String, FuncError> {
            Ok(format!("include({name},{})", format_value(data)))
        }
        fn execute_text(&mut self, text: &str, data: &Value) -> Result<String, gotmpl::TextError> {
            Ok(format!("tpl({text},{})", format_value(data)))
        }
        fn state(&mut self) -> &mut dyn std::any::Any {
            &mut self.env
        }
    }

    /// Calls `name` from `map` with `args`.
    pub fn call_in(map: &FuncMap, name: &str, args: &[Value]) -> Result<Value, FuncError> {
        let f = map.get(name).unwrap_or_else(|| panic!("no function {name}"));
        let mut host = TestHost::new();
        (f.body)(&mut host, args)
    }

    /// Calls Sprig's `name` with `args`.
    pub fn call(name: &str, args: &[Value]) -> Result<Value, FuncError> {
        call_in(&funcs(), name, args)
    }

    /// Calls Sprig's `name` and prints the result with `%v`.
    pub fn callv(name: &str, args: &[Value]) -> String {
        match call(name, args) {
            Ok(v) => format_value(&v),
            Err(e) => format!("ERR {e}"),
        }
    }

    pub fn st(x: &str) -> Value {
        Value::str(x)
    }

    pub fn li(xs: Vec<Value>) -> Value {
        Value::list(xs)
    }

    pub fn dict(pairs: &[(&str, Value)]) -> Value {
        Value::map(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }
}
