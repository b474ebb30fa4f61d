//! Go's `text/template` in Rust: the lexer, parser and executor with Go's
//! rules (missing keys, truthiness, comparison, argument conversion, error
//! wording) and Go's builtins. It knows nothing of Sprig or Helm: function
//! libraries are ordinary [`FuncMap`]s given when a set is parsed, as in Go.
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
mod tests_builtins;
#[cfg(test)]
mod tests_fmt;
#[cfg(test)]
mod tests_lead;
#[cfg(test)]
mod tests_objects;

pub use exec::{
    ExecLimits, ExecOptions, MapMethods, MissingKey, Origin, TemplateError, TemplateErrorKind, execute, execute_with,
};
pub use fmt::{format_value, sprint, sprintf, sprintln};
pub use func::{DEFAULT_MAX_SIZE, Func, FuncMap, Host, Param, Signature, TextError, room};
pub use parse::Templates;
pub use value::{FuncError, Map, Object, Value};
