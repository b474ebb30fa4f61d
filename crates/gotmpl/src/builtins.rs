//! Go's builtin template functions (text/template/funcs.go) other than the
//! short-circuiting `and`/`or`, which the executor evaluates itself.

use std::fmt::Write as _;

use super::fmt::{sprint, sprintf, sprintln};
use super::value::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    And,
    Or,
    Not,
    Len,
    Index,
    Slice,
    Print,
    Printf,
    Println,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Call,
    Html,
    Js,
    Urlquery,
}

impl Builtin {
    pub fn from_name(name: &str) -> Option<Builtin> {
        Some(match name {
            "and" => Builtin::And,
            "or" => Builtin::Or,
            "not" => Builtin::Not,
            "len" => Builtin::Len,
            "index" => Builtin::Index,
            "slice" => Builtin::Slice,
            "print" => Builtin::Print,
            "printf" => Builtin::Printf,
            "println" => Builtin::Println,
            "eq" => Builtin::Eq,
            "ne" => Builtin::Ne,
            "lt" => Builtin::Lt,
            "le" => Builtin::Le,
            "gt" => Builtin::Gt,
            "ge" => Builtin::Ge,
            "call" => Builtin::Call,
            "html" => Builtin::Html,
            "js" => Builtin::Js,
            "urlquery" => Builtin::Urlquery,
            _ => return None,
        })
    }

    /// (fixed parameters, variadic)
    pub fn arity(self) -> (usize, bool) {
        match self {
            Builtin::And | Builtin::Or | Builtin::Index | Builtin::Slice | Builtin::Eq | Builtin::Call => (1, true),
            Builtin::Printf => (1, true),
            Builtin::Print | Builtin::Println | Builtin::Html | Builtin::Js | Builtin::Urlquery => (0, true),
            Builtin::Not | Builtin::Len => (1, false),
            Builtin::Ne | Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => (2, false),
        }
    }

    /// Calls a builtin other than and/or with evaluated arguments.
    pub fn call(self, args: &[Value]) -> Result<Value, String> {
        // len, index and slice see a Go map or slice type with methods
        // (Helm's Files, VersionSet) as its elements.
        if matches!(self, Builtin::Len | Builtin::Index | Builtin::Slice)
            && let Some(Value::Object(o)) = args.first()
            && let Some(e) = o.elements()
        {
            let mut args = args.to_vec();
            args[0] = e;
            return self.call_plain(&args);
        }
        self.call_plain(args)
    }

    fn call_plain(self, args: &[Value]) -> Result<Value, String> {
        match self {
            Builtin::And | Builtin::Or => unreachable_and_or(self, args),
            Builtin::Not => Ok(Value::Bool(!args[0].is_true())),
            Builtin::Len => length(&args[0]).map(Value::Int),
            Builtin::Index => index(&args[0], &args[1..]),
            Builtin::Slice => slice(&args[0], &args[1..]),
            Builtin::Print => Ok(Value::from(sprint(args))),
            Builtin::Println => Ok(Value::from(sprintln(args))),
            Builtin::Printf => {
                let f = args[0].as_str().unwrap_or_default();
                Ok(Value::from(sprintf(f, &args[1..])))
            }
            Builtin::Eq => eq(&args[0], &args[1..]).map(Value::Bool),
            Builtin::Ne => eq(&args[0], &args[1..2]).map(|b| Value::Bool(!b)),
            Builtin::Lt => lt(&args[0], &args[1]).map(Value::Bool),
            Builtin::Le => le(&args[0], &args[1]).map(Value::Bool),
            Builtin::Gt => le(&args[0], &args[1]).map(|b| Value::Bool(!b)),
            Builtin::Ge => lt(&args[0], &args[1]).map(|b| Value::Bool(!b)),
            Builtin::Call => match &args[0] {
                Value::Nil => Err("call of nil".into()),
                v => Err(format!("non-function of type {}", v.type_name())),
            },
            Builtin::Html => Ok(Value::from(html_escape(&eval_args(args)))),
            Builtin::Js => Ok(Value::from(js_escape(&eval_args(args)))),
            Builtin::Urlquery => Ok(Value::from(query_escape(&eval_args(args)))),
        }
    }
}

fn unreachable_and_or(b: Builtin, args: &[Value]) -> Result<Value, String> {
    // The executor short-circuits and/or; evaluate eagerly if called here.
    let want = b == Builtin::Or;
    for a in args {
        if a.is_true() == want {
            return Ok(a.clone());
        }
    }
    Ok(args.last().cloned().unwrap_or_default())
}

/// Go's `evalArgs` for html/js/urlquery: one string as is, else Sprint.
fn eval_args(args: &[Value]) -> String {
    if let [Value::String(s)] = args {
        return s.to_string();
    }
    // Go's printableValue: a nil argument is the string "<no value>".
    if args.iter().any(Value::is_nil) {
        let args: Vec<Value> =
            args.iter().map(|a| if a.is_nil() { Value::str("<no value>") } else { a.clone() }).collect();
        return sprint(&args);
    }
    sprint(args)
}

fn length(v: &Value) -> Result<i64, String> {
    match v {
        Value::Nil => Err("reflect: call of reflect.Value.Type on zero Value".into()),
        Value::String(s) => Ok(s.len() as i64),
        Value::Bytes(b) => Ok(b.len() as i64),
        Value::List(l) => Ok(l.len() as i64),
        Value::Map(m) => Ok(m.borrow().len() as i64),
        Value::Object(o) => match o.elements() {
            Some(e) => length(&e),
            None => Err(format!("len of type {}", o.type_name())),
        },
        other => Err(format!("len of type {}", other.type_name())),
    }
}

fn index_arg(i: &Value, cap: usize) -> Result<usize, String> {
    let x = match i {
        Value::Int(x) | Value::Int64(x) => *x,
        Value::Nil => return Err("cannot index slice/array with nil".into()),
        other => return Err(format!("cannot index slice/array with type {}", other.type_name())),
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

fn index(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    if item.is_nil() {
        return Err("index of untyped nil".into());
    }
    let mut item = match item {
        Value::Object(o) => o.elements().unwrap_or_else(|| item.clone()),
        _ => item.clone(),
    };
    for ix in indexes {
        let next = match &item {
            Value::Nil => return Err("index of nil pointer".into()),
            Value::List(l) => {
                let x = index_arg(ix, l.len())?;
                match l.get(x) {
                    Some(v) => v.clone(),
                    None => return Err("reflect: slice index out of range".into()),
                }
            }
            Value::String(s) => {
                let x = index_arg(ix, s.len())?;
                match s.as_bytes().get(x) {
                    Some(b) => Value::Int(*b as i64),
                    None => return Err("reflect: string index out of range".into()),
                }
            }
            Value::Bytes(b) => {
                let x = index_arg(ix, b.len())?;
                match b.get(x) {
                    Some(b) => Value::Int(*b as i64),
                    None => return Err("reflect: slice index out of range".into()),
                }
            }
            Value::Map(m) => match ix {
                Value::String(k) => m.borrow().get(&**k).cloned().unwrap_or(Value::Nil),
                Value::Nil => return Err("value is nil; should be of type string".into()),
                other => return Err(format!("value has type {}; should be string", other.type_name())),
            },
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
        item = next;
    }
    Ok(item)
}

fn slice(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    if item.is_nil() {
        return Err("slice of untyped nil".into());
    }
    if indexes.len() > 3 {
        return Err(format!("too many slice indexes: {}", indexes.len()));
    }
    let len = match item {
        Value::String(s) => {
            if indexes.len() == 3 {
                return Err("cannot 3-index slice a string".into());
            }
            s.len()
        }
        Value::List(l) => l.len(),
        Value::Bytes(b) => b.len(),
        other => return Err(format!("can't slice item of type {}", other.type_name())),
    };
    let mut idx = [0usize, len, len];
    for (i, ix) in indexes.iter().enumerate() {
        idx[i] = index_arg(ix, len)?;
    }
    if idx[0] > idx[1] {
        return Err(format!("invalid slice index: {} > {}", idx[0], idx[1]));
    }
    if indexes.len() == 3 && idx[1] > idx[2] {
        return Err(format!("invalid slice index: {} > {}", idx[1], idx[2]));
    }
    Ok(match item {
        Value::String(s) => match s.get(idx[0]..idx[1]) {
            Some(sub) => Value::str(sub),
            None => Value::str(String::from_utf8_lossy(&s.as_bytes()[idx[0]..idx[1]]).into_owned()),
        },
        Value::List(l) => Value::list(l[idx[0]..idx[1]].to_vec()),
        Value::Bytes(b) => Value::Bytes(b[idx[0]..idx[1]].into()),
        _ => Value::Nil,
    })
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Invalid,
    Bool,
    Int,
    Float,
    String,
    Other,
}

fn basic_kind(v: &Value) -> Kind {
    match v {
        Value::Nil => Kind::Invalid,
        Value::Bool(_) => Kind::Bool,
        Value::Int(_) | Value::Int64(_) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::String(_) => Kind::String,
        _ => Kind::Other,
    }
}

const BAD_COMPARISON: &str = "incompatible types for comparison";
const BAD_COMPARISON_TYPE: &str = "invalid type for comparison";

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) | Value::Int64(i) => *i,
        _ => 0,
    }
}

fn float_of(v: &Value) -> f64 {
    match v {
        Value::Float(f) => *f,
        _ => 0.0,
    }
}

fn comparable(v: &Value) -> bool {
    !matches!(v, Value::List(_) | Value::Map(_) | Value::Bytes(_))
}

/// Go's `eq`: true if arg1 equals any of the others.
pub fn eq(arg1: &Value, others: &[Value]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(arg1);
    for arg in others {
        let k2 = basic_kind(arg);
        let truth = if k1 != k2 {
            if !arg1.is_nil() && !arg.is_nil() {
                return Err(format!("{BAD_COMPARISON}: {} and {}", arg1.type_name(), arg.type_name()));
            }
            false
        } else {
            match k1 {
                Kind::Bool => matches!((arg1, arg), (Value::Bool(a), Value::Bool(b)) if a == b),
                Kind::Float => float_of(arg1) == float_of(arg),
                Kind::Int => int_of(arg1) == int_of(arg),
                Kind::String => arg1.as_str() == arg.as_str(),
                Kind::Invalid => true,
                Kind::Other => {
                    if arg1.type_name() != arg.type_name() && !(comparable(arg1) && comparable(arg)) {
                        return Err(format!(
                            "non-comparable types {}: {}, {}: {}",
                            super::fmt::format_value(arg1),
                            arg1.type_name(),
                            arg.type_name(),
                            super::fmt::format_value(arg)
                        ));
                    }
                    if !comparable(arg) {
                        return Err(format!(
                            "non-comparable type {}: {}",
                            super::fmt::format_value(arg),
                            arg.type_name()
                        ));
                    }
                    match (arg1, arg) {
                        (Value::Object(a), Value::Object(b)) => {
                            std::ptr::addr_eq(std::rc::Rc::as_ptr(a), std::rc::Rc::as_ptr(b))
                        }
                        _ => false,
                    }
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

pub fn lt(a: &Value, b: &Value) -> Result<bool, String> {
    let k1 = basic_kind(a);
    if matches!(k1, Kind::Invalid | Kind::Other) {
        return Err(BAD_COMPARISON_TYPE.into());
    }
    let k2 = basic_kind(b);
    if matches!(k2, Kind::Invalid | Kind::Other) {
        return Err(BAD_COMPARISON_TYPE.into());
    }
    if k1 != k2 {
        return Err(format!("{BAD_COMPARISON}: {} and {}", a.type_name(), b.type_name()));
    }
    Ok(match k1 {
        Kind::Bool => return Err(BAD_COMPARISON_TYPE.into()),
        Kind::Float => float_of(a) < float_of(b),
        Kind::Int => int_of(a) < int_of(b),
        Kind::String => a.as_str() < b.as_str(),
        _ => false,
    })
}

fn le(a: &Value, b: &Value) -> Result<bool, String> {
    if lt(a, b)? {
        return Ok(true);
    }
    eq(a, std::slice::from_ref(b))
}

/// template.HTMLEscapeString
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// template.JSEscapeString
pub fn js_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c if (c as u32) < 0x80 => out.push(c),
            c => {
                if super::fmt::is_print(c) {
                    out.push(c);
                } else {
                    let _ = write!(out, "\\u{:04X}", c as u32);
                }
            }
        }
    }
    out
}

/// url.QueryEscape
pub fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}
