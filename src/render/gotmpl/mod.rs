//! Go `text/template` with the Sprig library and Helm's functions, in Rust:
//! the engine that renders Helm charts as `helm template` does.
//!
//! - `value`: Go values as templates see them (`Value`, `Object`).
//! - `func`: the function interface (`Func`, `Signature`, `Host`, `FuncMap`).
//! - `lex`, `parse`: template text into trees; functions resolved at parse time.
//! - `exec`: Go's execution semantics, with limits on work, output and depth.
//! - `fmt`: Go's `fmt` verbs for values (`%v`, `printf`).
//! - `sprig`, `helmfuncs`: the function library (Sprig and Helm's own).
//! - `goyaml`: YAML as Helm reads and writes it (`toYaml`, values files).

mod exec;
pub mod fmt;
pub mod func;
mod lex;
mod parse;
pub mod value;

#[cfg(test)]
mod tests;

pub use exec::{
    ExecLimits, ExecOptions, MissingKey, TPL_NAME, TemplateError, TemplateErrorDetail, TemplateErrorKind, Templates,
    execute,
};
pub use func::{Func, FuncMap, Host, Param, Signature};
pub use value::{FuncError, Map, Object, Value};
pub mod goyaml;
pub mod helmfuncs;
pub mod sprig;

pub use goyaml::{value_to_yaml, yaml_to_value};
pub use helmfuncs::helm_func_map;
