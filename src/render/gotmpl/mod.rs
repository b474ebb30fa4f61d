//! Go `text/template` with the Sprig library and Helm's functions, in Rust:
//! the engine that renders Helm charts as `helm template` does.
//!
//! - `value`: Go values as templates see them (`Value`, `Object`).
//! - `func`: the function interface (`Func`, `Signature`, `Host`, `FuncMap`).
//! - `lex`, `parse`: Go's template lexer and parser (`Templates`, a parsed set).
//! - `exec`: execution (`execute`, Go's builtins, the `Host` for `include`/`tpl`).
//! - `fmt`: Go's `fmt` verbs for values (`sprint`, `sprintf`, `%v`).

mod builtins;
mod exec;
pub mod fmt;
pub mod func;
mod lex;
mod parse;
pub mod value;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_fmt;
#[cfg(test)]
mod tests_lead;

pub use exec::{ExecLimits, ExecOptions, MissingKey, TemplateError, TemplateErrorKind, execute};
pub use fmt::{format_value, sprint, sprintf, sprintln};
pub use func::{Func, FuncMap, Host, Param, Signature};
pub use parse::Templates;
pub use value::{FuncError, Map, Object, Value};

/// Helm's own template functions (`include`, `tpl`, `required`, `fail`),
/// until the Sprig library lands with the full map.
pub fn helm_func_map() -> FuncMap {
    let mut f = FuncMap::new();
    f.insert(
        "include",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            h.include(a[0].as_str().unwrap_or_default(), &a[1]).map(Value::str)
        }),
    );
    f.insert(
        "tpl",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            h.tpl(a[0].as_str().unwrap_or_default(), &a[1]).map(|s| Value::str(s.replace("<no value>", "")))
        }),
    );
    f.insert(
        "required",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |_, a| match &a[1] {
            Value::Nil => Err(FuncError::Fail(a[0].as_str().unwrap_or_default().to_string())),
            Value::String(s) if s.is_empty() => Err(FuncError::Fail(a[0].as_str().unwrap_or_default().to_string())),
            v => Ok(v.clone()),
        }),
    );
    f.insert(
        "fail",
        Func::new(Signature::fixed(&[Param::String]), |_, a| {
            Err(FuncError::Fail(a[0].as_str().unwrap_or_default().to_string()))
        }),
    );
    f
}
