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

pub use exec::{ExecLimits, ExecOptions, MissingKey, TemplateError, TemplateErrorKind, execute};
pub use fmt::{format_value, sprint, sprintf, sprintln};
pub use func::{Func, FuncMap, Host, Param, Signature};
pub use parse::Templates;
pub use value::{FuncError, Map, Object, Value};
