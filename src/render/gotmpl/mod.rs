//! Go `text/template` with the Sprig library and Helm's functions, in Rust:
//! the engine that renders Helm charts as `helm template` does.
//!
//! - `value`: Go values as templates see them (`Value`, `Object`).
//! - `func`: the function interface (`Func`, `Signature`, `Host`, `FuncMap`).
//! - `lex`, `parse`: Go's template lexer and parser (`Templates`, a parsed set).
//! - `exec`: execution (`execute`, Go's builtins, the `Host` for `include`/`tpl`).
//! - `fmt`: Go's `fmt` verbs for values (`sprint`, `sprintf`, `%v`).
//! - `sprig`, `helmfuncs`: the function library (Sprig and Helm's own).
//! - `goyaml`: YAML as Helm reads and writes it (`toYaml`, values files).

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
pub mod goyaml;
pub mod helmfuncs;
pub mod sprig;

pub use goyaml::{value_to_yaml, yaml_to_value};
pub use helmfuncs::helm_func_map;
