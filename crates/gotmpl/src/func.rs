//! The function interface between the template engine and its libraries
//! (Go's builtins live in the engine; Sprig and Helm's functions in
//! `sprig.rs` and `helm.rs`).
//!
//! A function declares its Go signature so the engine can convert and check
//! arguments exactly as `text/template` does with reflection: an untyped
//! number constant becomes an `int` or a `float64` as the parameter wants,
//! while a `float64` from the values passed to an `int` parameter is an
//! error ("wrong type for value; expected int; got float64"), as in Helm.

use std::collections::HashMap;
use std::sync::Arc;

use super::value::{FuncError, Value};

/// The Go type of one parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// `interface{}`: anything, nil included.
    Any,
    String,
    /// `int`
    Int,
    /// `int64`
    Int64,
    Float64,
    Bool,
    /// `[]interface{}` (a list; nil is accepted as an empty list, as Go does)
    List,
    /// `map[string]interface{}` (nil accepted as a nil map)
    Map,
}

/// A function's Go signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub params: Vec<Param>,
    /// The type of the trailing `...` parameter, if the function is variadic.
    pub variadic: Option<Param>,
}

impl Signature {
    pub fn fixed(params: &[Param]) -> Self {
        Self { params: params.to_vec(), variadic: None }
    }

    pub fn variadic(params: &[Param], rest: Param) -> Self {
        Self { params: params.to_vec(), variadic: Some(rest) }
    }
}

/// What a function may ask of the engine while it runs: the two things Go's
/// `text/template` lets a function closure do with the set it was bound to
/// (execute one of its templates; parse more text into a copy of it and run
/// that), and the caller's own state for this execution.
///
/// The engine knows nothing of the libraries built on these: Helm binds
/// `include` to [`Host::execute_template`] and `tpl` to
/// [`Host::execute_text`], and keeps its randomness and clock in the state it
/// passes to [`crate::execute_with`].
pub trait Host {
    /// Executes the named template of the set being executed with `data`
    /// and returns its output (Go's `Template.ExecuteTemplate` on the running
    /// set). Nesting is limited by [`crate::ExecLimits::max_depth`]; a failure
    /// inside keeps its innermost location for the outer error.
    fn execute_template(&mut self, name: &str, data: &Value) -> Result<String, FuncError>;
    /// Parses `text` with the set's functions as a template named like the
    /// set, its own `define`s visible only while it runs, and executes it
    /// with `data` (Go's `Clone`, `New(name).Parse(text)`, `ExecuteTemplate`).
    fn execute_text(&mut self, text: &str, data: &Value) -> Result<String, TextError>;
    /// The caller's state for this execution: whatever it passed to
    /// [`crate::execute_with`] (`()` through [`crate::execute`]).
    fn state(&mut self) -> &mut dyn std::any::Any;
    /// Charges `fuel` steps of work to the execution's step budget: a
    /// function whose cost is not one step (key generation, bcrypt, building
    /// a large string) says so here, so the step limit bounds CPU time, not
    /// just the number of actions.
    fn charge(&mut self, _fuel: u64) -> Result<(), FuncError> {
        Ok(())
    }
    /// The largest string (bytes) or list (items) a function may build:
    /// checked before allocating, so `repeat 100000000000 "x"` is an error,
    /// not an allocation failure that aborts the process.
    fn max_size(&self) -> usize {
        DEFAULT_MAX_SIZE
    }
}

/// [`Host::max_size`] when the host sets none: the default output limit.
pub const DEFAULT_MAX_SIZE: usize = 64 * 1024 * 1024;

/// Refuses a result of `size` bytes or items before it is built, and
/// charges one step per 64 bytes of it.
pub fn room(h: &mut dyn Host, what: &str, size: u128) -> Result<(), FuncError> {
    let max = h.max_size();
    if size > max as u128 {
        return Err(FuncError::Limit(format!(
            "{what}: a result of {size} bytes or items is over the size limit ({max})"
        )));
    }
    h.charge((size / 64) as u64)
}

/// Why [`Host::execute_text`] failed.
#[derive(Debug, Clone, PartialEq)]
pub enum TextError {
    /// The text is not a template (Go's parse error, as Go words it).
    Parse(String),
    /// Executing it failed.
    Exec(FuncError),
}

/// The body of a function: the host and the converted arguments (as many as
/// the signature says, variadic ones at the end).
pub type FuncBody = dyn Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync;

/// A named function.
#[derive(Clone)]
pub struct Func {
    pub signature: Signature,
    pub body: Arc<FuncBody>,
}

impl Func {
    pub fn new(
        signature: Signature,
        body: impl Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
    ) -> Self {
        Self { signature, body: Arc::new(body) }
    }
}

/// Functions by name, as a `template.FuncMap`.
#[derive(Clone, Default)]
pub struct FuncMap {
    funcs: HashMap<&'static str, Func>,
}

impl FuncMap {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces `name` (a later library overrides an earlier one, as in Helm).
    pub fn insert(&mut self, name: &'static str, func: Func) {
        self.funcs.insert(name, func);
    }

    pub fn get(&self, name: &str) -> Option<&Func> {
        self.funcs.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.funcs.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.funcs.keys().copied()
    }
}
