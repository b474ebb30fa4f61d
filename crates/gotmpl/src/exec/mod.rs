//! Execution of parsed templates (text/template/exec.go): Go's truthiness,
//! variable scopes, field chains on maps and objects, function calls with
//! Go's argument conversion, the builtins, limits, and the [`Host`] that
//! lets functions execute templates of the running set and reach the
//! caller's state.

mod call;
mod eval;
mod walk;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::builtins::Builtin;
use super::fmt::write_value;
use super::func::{FuncMap, Host, Param, TextError};
use super::parse::{Arg, Callee, Cmd, Control, Node, Number, Pipe, Templates, Tree, parse};
use super::value::{FuncError, Map, Value};

/// What a missing map key yields (Go's `missingkey` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Go's default: the invalid value, printed as `<no value>`; fields of
    /// it are again missing.
    #[default]
    Default,
    /// `missingkey=zero` (Helm): the map's zero element, a nil interface,
    /// printed as `<no value>`; a field of it fails with
    /// `nil pointer evaluating interface {}.x`.
    Zero,
    /// `missingkey=error`: `map has no entry for key "x"`.
    Error,
}

/// Limits that stop a runaway template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Node evaluations (actions, commands, loop iterations) per `execute`.
    pub max_steps: u64,
    /// Largest output of one template execution (and of each `include`/`tpl`).
    pub max_output_bytes: usize,
    /// Deepest nesting of `template`, `include` and `tpl`.
    pub max_depth: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        // Depth: above Helm's own limit of 1000 nested `include`s of one name,
        // so a runaway recursion fails with Helm's message.
        Self { max_steps: 200_000_000, max_output_bytes: 64 * 1024 * 1024, max_depth: 1100 }
    }
}

/// How to execute.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    pub missing_key: MissingKey,
    pub limits: ExecLimits,
    /// Methods of Go map types (Helm's `common.Values`: `.Values.AsMap`, `.Values.Table "x"`).
    pub map_methods: Option<MapMethods>,
}

/// The methods of maps whose Go type has methods. Given a map, a method name and its arguments,
/// it answers `None` when that map has no such method (a plain `map[string]interface{}`, or
/// another name): then the name is a key, as in Go, where a method wins over a key.
#[derive(Clone)]
#[allow(clippy::type_complexity)]
pub struct MapMethods(pub std::rc::Rc<dyn Fn(&Map, &str, &[Value]) -> Option<Result<Value, FuncError>>>);

impl fmt::Debug for MapMethods {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MapMethods")
    }
}

/// What kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateErrorKind {
    Parse,
    Exec,
    /// `fail`/`required`: the author's message (in `detail`).
    Fail,
    Limit,
}

/// A parse or execution error, displayed as Go displays it:
/// `template: NAME:LINE:COL: executing "NAME" at <NODE>: MESSAGE`
/// (parse errors: `template: NAME:LINE: MESSAGE`).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError {
    /// The file the failing node is in (Go's ParseName).
    pub template: String,
    /// 1-based line; 0 when the error has no position.
    pub line: usize,
    /// 0-based byte column within the line, as Go counts it.
    pub column: usize,
    pub kind: TemplateErrorKind,
    /// Everything after the location: `executing "NAME" at <NODE>: MESSAGE`
    /// for execution errors, the message for parse errors.
    pub message: String,
    /// The innermost message: for `Fail`, the author's own text; otherwise
    /// the message without the `executing ... at <...>: ` part.
    pub detail: String,
    /// Where a failure inside `include`/`tpl` really happened: the innermost
    /// template file, line and message (`None`: here).
    pub origin: Option<Box<Origin>>,
}

/// The innermost location of a failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub template: String,
    pub line: usize,
    pub detail: String,
}

impl TemplateError {
    /// The innermost template, line and message of the failure.
    pub fn innermost(&self) -> (&str, usize, &str) {
        match &self.origin {
            Some(o) => (&o.template, o.line, &o.detail),
            None => (&self.template, self.line, &self.detail),
        }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "template: {}: {}", self.template, self.message)
        } else if self.kind == TemplateErrorKind::Parse {
            write!(f, "template: {}:{}: {}", self.template, self.line, self.message)
        } else {
            write!(f, "template: {}:{}:{}: {}", self.template, self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for TemplateError {}

/// Executes template `name` of the set with `data`.
///
/// ```
/// use gotmpl::{ExecOptions, FuncMap, Templates, Value, execute};
///
/// let funcs = FuncMap::new();
/// let mut set = Templates::new();
/// set.add("greeting", "Hello, {{ .name }}!{{ if .admin }} (admin){{ end }}", &funcs).unwrap();
/// let data = Value::from_json(&serde_json::json!({"name": "Ada", "admin": true}));
/// let out = execute(&set, "greeting", &data, &funcs, &ExecOptions::default()).unwrap();
/// assert_eq!(out, "Hello, Ada! (admin)");
/// ```
pub fn execute(
    set: &Templates,
    name: &str,
    data: &Value,
    funcs: &FuncMap,
    opts: &ExecOptions,
) -> Result<String, TemplateError> {
    execute_with(set, name, data, funcs, opts, &mut ())
}

/// Executes template `name` of the set with `data`, giving the functions
/// `state` through [`Host::state`] (a library's per-execution state: Helm's
/// randomness and clock, say).
///
/// ```
/// use gotmpl::{ExecOptions, Func, FuncMap, Signature, Templates, Value, execute_with};
///
/// // A function that counts its calls in the caller's state.
/// let mut funcs = FuncMap::new();
/// funcs.insert("tick", Func::new(Signature::fixed(&[]), |h, _| {
///     let n = h.state().downcast_mut::<i64>().ok_or_else(|| gotmpl::FuncError::msg("no counter"))?;
///     *n += 1;
///     Ok(Value::Int64(*n))
/// }));
/// let mut set = Templates::new();
/// set.add("t", "{{ tick }} {{ tick }}", &funcs).unwrap();
/// let mut counter = 0_i64;
/// let out = execute_with(&set, "t", &Value::Nil, &funcs, &ExecOptions::default(), &mut counter).unwrap();
/// assert_eq!((out.as_str(), counter), ("1 2", 2));
/// ```
pub fn execute_with(
    set: &Templates,
    name: &str,
    data: &Value,
    funcs: &FuncMap,
    opts: &ExecOptions,
    state: &mut dyn Any,
) -> Result<String, TemplateError> {
    let mut ex = Exec {
        set: set.clone(),
        funcs,
        opts,
        state,
        steps: 0,
        depth: 0,
        dot_kind: NilKind::Invalid,
        fail_detail: None,
        dollar: Arc::from("$"),
        inner: Default::default(),
    };
    ex.run_named(name, data)
}

/// Control flow and errors while walking.
enum Stop {
    Break,
    Continue,
    Err(Box<TemplateError>),
}

impl From<Box<TemplateError>> for Stop {
    fn from(e: Box<TemplateError>) -> Self {
        Stop::Err(e)
    }
}

type R<T> = Result<T, Box<TemplateError>>;

struct Exec<'a> {
    set: Templates,
    funcs: &'a FuncMap,
    opts: &'a ExecOptions,
    /// The caller's state, for [`Host::state`].
    state: &'a mut dyn Any,
    steps: u64,
    depth: usize,
    /// The static type of dot (a range element is `interface {}`).
    dot_kind: NilKind,
    /// The author's message of a `fail` inside `include`/`tpl`, carried out
    /// to the outermost error's `detail`.
    fail_detail: Option<String>,
    /// The name `$`, shared by every template invocation.
    dollar: Arc<str>,
    /// The innermost failure of an `include`/`tpl` on its way out.
    inner: std::cell::Cell<Option<Box<Origin>>>,
}

/// The template being executed.
struct Cx<'t> {
    tree: &'t Tree,
    name: &'t str,
}

type Vars = Vec<(Arc<str>, Value, NilKind)>;

/// The static type of a value while evaluating: Go tells a concrete value
/// (a pipeline's result; for nil: the invalid value of a missing key under
/// the default option) from one typed `interface {}` (a map's element, a
/// range's element), which matters for nil and for error messages.
#[derive(PartialEq, Eq, Clone, Copy)]
enum NilKind {
    Invalid,
    Interface,
}

fn param_name(p: Param) -> &'static str {
    match p {
        Param::Any => "interface {}",
        Param::String => "string",
        Param::Int => "int",
        Param::Int64 => "int64",
        Param::Float64 => "float64",
        Param::Bool => "bool",
        Param::List => "[]interface {}",
        Param::Map => "map[string]interface {}",
    }
}

fn can_be_nil(p: Param) -> bool {
    matches!(p, Param::Any | Param::List | Param::Map)
}

/// Runs `f` on a fresh stack segment when the current one runs low, so
/// recursion through `template`/`include`/`tpl` ends at `max_depth`, never
/// in a stack overflow.
pub(crate) fn grow<T>(f: impl FnOnce() -> T) -> T {
    stacker::maybe_grow(256 * 1024, 4 * 1024 * 1024, f)
}

/// The `{{template "x" .}}` form Go shows in errors.
struct TemplateCtx<'a>(&'a str, Option<&'a Pipe>);

impl fmt::Display for TemplateCtx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(p) => write!(f, "{{{{template {:?} {}}}}}", self.0, p),
            None => write!(f, "{{{{template {:?}}}}}", self.0),
        }
    }
}

impl Host for Exec<'_> {
    fn execute_template(&mut self, name: &str, data: &Value) -> Result<String, FuncError> {
        let Some(tree) = self.set.get(name).cloned() else {
            return Err(FuncError::Message(format!(
                "template: no template {:?} associated with template {:?}",
                name, &*self.set.name
            )));
        };
        self.nested(&tree, name, data)
    }

    fn execute_text(&mut self, text: &str, data: &Value) -> Result<String, TextError> {
        let set_name = self.set.name.clone();
        let parsed = parse(&set_name, &set_name, text, self.funcs).map_err(|e| TextError::Parse(e.to_string()))?;
        let saved = if parsed.len() > 1 {
            let mut set = self.set.clone();
            let trees = Arc::make_mut(&mut set.trees);
            for (n, t) in &parsed {
                trees.insert(n.clone(), t.clone());
            }
            Some(std::mem::replace(&mut self.set, set))
        } else {
            None
        };
        let main = parsed.iter().find(|(n, _)| *n == set_name).map(|(_, t)| t.clone());
        let r = match main {
            Some(tree) => self.nested(&tree, &set_name, data),
            None => Ok(String::new()),
        };
        if let Some(s) = saved {
            self.set = s;
        }
        r.map_err(TextError::Exec)
    }

    fn state(&mut self) -> &mut dyn Any {
        self.state
    }

    fn charge(&mut self, fuel: u64) -> Result<(), FuncError> {
        self.steps = self.steps.saturating_add(fuel);
        if self.steps > self.opts.limits.max_steps {
            return Err(FuncError::Limit(format!("step limit exceeded ({} steps)", self.opts.limits.max_steps)));
        }
        Ok(())
    }

    fn max_size(&self) -> usize {
        self.opts.limits.max_output_bytes
    }
}
