//! Execution of parsed templates (text/template/exec.go): Go's truthiness,
//! variable scopes, field chains on maps and objects, function calls with
//! Go's argument conversion, the builtins, limits, and the [`Host`] that
//! lets functions execute templates of the running set and reach the
//! caller's state.

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

impl Exec<'_> {
    fn run_named(&mut self, name: &str, data: &Value) -> Result<String, TemplateError> {
        let Some(tree) = self.set.get(name).cloned() else {
            return Err(TemplateError {
                template: name.to_string(),
                line: 0,
                column: 0,
                kind: TemplateErrorKind::Exec,
                message: format!("no template {:?} associated with template {:?}", name, &*self.set.name),
                detail: format!("no template {:?} associated with template {:?}", name, &*self.set.name),
                origin: None,
            });
        };
        self.run_tree(&tree, name, data).map_err(|e| *e)
    }

    fn run_tree(&mut self, tree: &Tree, name: &str, data: &Value) -> R<String> {
        let mut out = String::new();
        let cx = Cx { tree, name };
        let mut vars: Vars = vec![(self.dollar.clone(), data.clone(), NilKind::Invalid)];
        let saved_dot = std::mem::replace(&mut self.dot_kind, NilKind::Invalid);
        let r = self.walk_list(&cx, &mut vars, data, &tree.root, &mut out);
        self.dot_kind = saved_dot;
        match r {
            Ok(()) => Ok(out),
            Err(Stop::Err(e)) => Err(e),
            // The parser keeps break/continue inside range.
            Err(_) => Ok(out),
        }
    }

    fn error_at(
        &self,
        cx: &Cx,
        pos: u32,
        context: &dyn fmt::Display,
        kind: TemplateErrorKind,
        msg: String,
    ) -> Box<TemplateError> {
        let (line, column) = cx.tree.line_col(pos);
        Box::new(TemplateError {
            template: cx.tree.parse_name.to_string(),
            line,
            column,
            kind,
            message: format!("executing {:?} at <{}>: {}", cx.name, context, msg),
            detail: msg,
            origin: None,
        })
    }

    fn err(&self, cx: &Cx, pos: u32, context: &dyn fmt::Display, msg: String) -> Box<TemplateError> {
        self.error_at(cx, pos, context, TemplateErrorKind::Exec, msg)
    }

    fn step(&mut self, cx: &Cx, pos: u32, context: &dyn fmt::Display) -> R<()> {
        self.steps += 1;
        if self.steps > self.opts.limits.max_steps {
            return Err(self.error_at(
                cx,
                pos,
                context,
                TemplateErrorKind::Limit,
                format!("step limit exceeded ({} steps)", self.opts.limits.max_steps),
            ));
        }
        Ok(())
    }

    fn check_output(&self, cx: &Cx, pos: u32, context: &dyn fmt::Display, out: &str) -> R<()> {
        if out.len() > self.opts.limits.max_output_bytes {
            return Err(self.error_at(
                cx,
                pos,
                context,
                TemplateErrorKind::Limit,
                format!("output limit exceeded ({} bytes)", self.opts.limits.max_output_bytes),
            ));
        }
        Ok(())
    }

    fn walk_list(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        list: &[Node],
        out: &mut String,
    ) -> Result<(), Stop> {
        for node in list {
            self.walk(cx, vars, dot, node, out)?;
        }
        Ok(())
    }

    fn walk(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, node: &Node, out: &mut String) -> Result<(), Stop> {
        match node {
            Node::Text(t) => {
                out.push_str(t);
                self.check_output(cx, 0, &"text", out)?;
            }
            Node::Action(pipe) => {
                self.step(cx, pipe.pos, pipe)?;
                let v = self.eval_pipeline(cx, vars, dot, pipe)?;
                if pipe.decl.is_empty() {
                    match &v {
                        Value::Nil => out.push_str("<no value>"),
                        Value::Map(_) if v.holds_itself() => {
                            return Err(self.err(cx, pipe.pos, pipe, "the value holds itself".into()).into());
                        }
                        v => write_value(out, v),
                    }
                    self.check_output(cx, pipe.pos, pipe, out)?;
                }
            }
            Node::If(c) => grow(|| self.walk_if_with(cx, vars, dot, c, false, out))?,
            Node::With(c) => grow(|| self.walk_if_with(cx, vars, dot, c, true, out))?,
            Node::Range(c) => grow(|| self.walk_range(cx, vars, dot, c, out))?,
            Node::Break => return Err(Stop::Break),
            Node::Continue => return Err(Stop::Continue),
            Node::Template { pos, name, pipe } => {
                let ctx = TemplateCtx(name, pipe.as_ref());
                self.step(cx, *pos, &ctx)?;
                let Some(tree) = self.set.get(name).cloned() else {
                    return Err(self.err(cx, *pos, &ctx, format!("template {:?} not defined", &**name)).into());
                };
                if self.depth >= self.opts.limits.max_depth {
                    return Err(self
                        .error_at(
                            cx,
                            *pos,
                            &ctx,
                            TemplateErrorKind::Limit,
                            format!("exceeded maximum template depth ({})", self.opts.limits.max_depth),
                        )
                        .into());
                }
                let new_dot = match pipe {
                    Some(p) => self.eval_pipeline(cx, vars, dot, p)?,
                    None => Value::Nil,
                };
                self.depth += 1;
                let inner = Cx { tree: &tree, name };
                let mut inner_vars: Vars = vec![(self.dollar.clone(), new_dot.clone(), NilKind::Invalid)];
                let saved_dot = std::mem::replace(&mut self.dot_kind, NilKind::Invalid);
                let r = grow(|| self.walk_list(&inner, &mut inner_vars, &new_dot, &tree.root, out));
                self.dot_kind = saved_dot;
                self.depth -= 1;
                match r {
                    Err(Stop::Err(e)) => return Err(Stop::Err(e)),
                    _ => self.check_output(cx, *pos, &ctx, out)?,
                }
            }
        }
        Ok(())
    }

    fn walk_if_with(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        c: &Control,
        with: bool,
        out: &mut String,
    ) -> Result<(), Stop> {
        let mark = vars.len();
        self.step(cx, c.pos, &c.pipe)?;
        let r = (|| {
            let v = self.eval_pipeline(cx, vars, dot, &c.pipe)?;
            if v.is_true() {
                if with {
                    let saved_dot = std::mem::replace(&mut self.dot_kind, NilKind::Invalid);
                    let r = self.walk_list(cx, vars, &v, &c.list, out);
                    self.dot_kind = saved_dot;
                    r
                } else {
                    self.walk_list(cx, vars, dot, &c.list, out)
                }
            } else if let Some(e) = &c.else_list {
                self.walk_list(cx, vars, dot, e, out)
            } else {
                Ok(())
            }
        })();
        vars.truncate(mark);
        r
    }

    fn walk_range(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, c: &Control, out: &mut String) -> Result<(), Stop> {
        let mark = vars.len();
        self.step(cx, c.pos, &c.pipe)?;
        let r = self.range_inner(cx, vars, dot, c, out);
        vars.truncate(mark);
        r
    }

    fn range_inner(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        c: &Control,
        out: &mut String,
    ) -> Result<(), Stop> {
        let val = self.eval_pipeline(cx, vars, dot, &c.pipe)?;
        // A Go map or slice type with methods (Helm's Files, VersionSet)
        // ranges over its elements, which are typed, not interfaces.
        let (val, typed_elems) = match &val {
            Value::Object(o) => match o.elements() {
                Some(e) => (e, true),
                None => (val, false),
            },
            _ => (val, false),
        };
        let ndecl = c.pipe.decl.len();
        let mut ran = false;
        let elem_kind_of = match &val {
            Value::List(_) | Value::Map(_) if !typed_elems => NilKind::Interface,
            _ => NilKind::Invalid,
        };
        // One iteration: set the loop variables and walk the body.
        macro_rules! iterate {
            ($index:expr, $elem:expr) => {{
                ran = true;
                self.step(cx, c.pos, &c.pipe)?;
                let index: Value = $index;
                let elem: Value = $elem;
                let elem_kind: NilKind = elem_kind_of;
                if ndecl > 0 {
                    if c.pipe.is_assign {
                        let name = if ndecl > 1 { &c.pipe.decl[0] } else { &c.pipe.decl[0] };
                        let v = if ndecl > 1 { index.clone() } else { elem.clone() };
                        let k = if ndecl > 1 { NilKind::Invalid } else { NilKind::Interface };
                        self.set_var(cx, vars, c.pipe.pos, &c.pipe, name, v, k)?;
                        if ndecl > 1 {
                            self.set_var(
                                cx,
                                vars,
                                c.pipe.pos,
                                &c.pipe,
                                &c.pipe.decl[1],
                                elem.clone(),
                                NilKind::Interface,
                            )?;
                        }
                    } else {
                        let n = vars.len();
                        vars[n - 1].1 = elem.clone();
                        vars[n - 1].2 = NilKind::Interface;
                        if ndecl > 1 {
                            vars[n - 2].1 = index;
                            vars[n - 2].2 = NilKind::Invalid;
                        }
                    }
                }
                let mark = vars.len();
                let saved_dot = std::mem::replace(&mut self.dot_kind, elem_kind);
                let r = self.walk_list(cx, vars, &elem, &c.list, out);
                self.dot_kind = saved_dot;
                vars.truncate(mark);
                match r {
                    Ok(()) | Err(Stop::Continue) => {}
                    Err(Stop::Break) => break,
                    Err(e) => return Err(e),
                }
            }};
        }
        match &val {
            Value::List(items) => {
                let items = items.clone();
                for (i, elem) in items.iter().enumerate() {
                    iterate!(Value::Int(i as i64), elem.clone());
                }
            }
            Value::Bytes(b) => {
                let b = b.clone();
                for (i, x) in b.iter().enumerate() {
                    iterate!(Value::Int(i as i64), Value::Int(*x as i64));
                }
            }
            Value::Map(m) => {
                let entries: Vec<(String, Value)> = m.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                for (k, v) in entries {
                    iterate!(Value::from(k), v);
                }
            }
            Value::Int(n) | Value::Int64(n) => {
                if ndecl > 1 {
                    let last = c.pipe.cmds.last().map(|cmd| (cmd.pos, cmd as &dyn fmt::Display));
                    let (pos, ctx) = last.unwrap_or((c.pos, &c.pipe));
                    return Err(self
                        .err(cx, pos, ctx, format!("can't use {n} to iterate over more than one variable"))
                        .into());
                }
                let is64 = matches!(val, Value::Int64(_));
                for i in 0..*n {
                    let v = if is64 { Value::Int64(i) } else { Value::Int(i) };
                    iterate!(v.clone(), v);
                }
            }
            Value::Nil => {}
            other => {
                let last = c.pipe.cmds.last().map(|cmd| (cmd.pos, cmd as &dyn fmt::Display));
                let (pos, ctx) = last.unwrap_or((c.pos, &c.pipe));
                return Err(self
                    .err(cx, pos, ctx, format!("range can't iterate over {}", super::fmt::format_value(other)))
                    .into());
            }
        }
        if !ran && let Some(e) = &c.else_list {
            self.walk_list(cx, vars, dot, e, out)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn set_var(
        &self,
        cx: &Cx,
        vars: &mut Vars,
        pos: u32,
        ctx: &dyn fmt::Display,
        name: &str,
        v: Value,
        k: NilKind,
    ) -> R<()> {
        for slot in vars.iter_mut().rev() {
            if &*slot.0 == name {
                slot.1 = v;
                slot.2 = k;
                return Ok(());
            }
        }
        Err(self.err(cx, pos, ctx, format!("undefined variable: {name}")))
    }

    fn eval_pipeline(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, pipe: &Pipe) -> R<Value> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.eval_command(cx, vars, dot, cmd, value)?);
        }
        let value = value.unwrap_or_default();
        for d in &pipe.decl {
            if pipe.is_assign {
                self.set_var(cx, vars, pipe.pos, pipe, d, value.clone(), NilKind::Invalid)?;
            } else {
                vars.push((d.clone(), value.clone(), NilKind::Invalid));
            }
        }
        Ok(value)
    }

    fn not_a_function(&self, cx: &Cx, cmd: &Cmd, fin: &Option<Value>) -> R<()> {
        if cmd.args.len() > 1 || fin.is_some() {
            let a = &cmd.args[0];
            return Err(self.err(cx, a.pos(), a, format!("can't give argument to non-function {a}")));
        }
        Ok(())
    }

    fn eval_command(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, cmd: &Cmd, fin: Option<Value>) -> R<Value> {
        self.step(cx, cmd.pos, cmd)?;
        let first = &cmd.args[0];
        match first {
            Arg::Field(pos, idents) => {
                let k = self.dot_kind;
                return self
                    .eval_field_chain(cx, vars, dot, dot.clone(), k, *pos, first, idents, &cmd.args, fin)
                    .map(|r| r.0);
            }
            Arg::Chain(pos, node, fields) => {
                let recv = self.eval_chain_base(cx, vars, dot, node)?;
                return self
                    .eval_field_chain(cx, vars, dot, recv, NilKind::Invalid, *pos, first, fields, &cmd.args, fin)
                    .map(|r| r.0);
            }
            Arg::Identifier(pos, name, callee) => {
                return self.eval_function(cx, vars, dot, *pos, name, callee, cmd, &cmd.args[1..], fin);
            }
            Arg::Pipe(p) => {
                self.not_a_function(cx, cmd, &fin)?;
                return grow(|| self.eval_pipeline(cx, vars, dot, p));
            }
            Arg::Variable(pos, name, idents) => {
                let (v, k) = self.var_value(cx, vars, *pos, first, name)?;
                if idents.is_empty() {
                    self.not_a_function(cx, cmd, &fin)?;
                    return Ok(v);
                }
                return self.eval_field_chain(cx, vars, dot, v, k, *pos, first, idents, &cmd.args, fin).map(|r| r.0);
            }
            _ => {}
        }
        self.not_a_function(cx, cmd, &fin)?;
        match first {
            Arg::Bool(_, b) => Ok(Value::Bool(*b)),
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(pos) => Err(self.err(cx, *pos, first, "nil is not a command".into())),
            Arg::Number(pos, n) => self.ideal_constant(cx, *pos, n),
            Arg::String(_, _, s) => Ok(Value::str(&**s)),
            _ => Ok(Value::Nil),
        }
    }

    fn ideal_constant(&self, cx: &Cx, pos: u32, n: &Number) -> R<Value> {
        let t = &*n.text;
        let hex_int = (t.starts_with("0x") || t.starts_with("0X") || t.starts_with("-0x") || t.starts_with("-0X"))
            && !t.contains(['p', 'P']);
        if let Some(f) = n.float
            && !hex_int
            && !n.is_char
            && t.contains(['.', 'e', 'E', 'p', 'P'])
        {
            return Ok(Value::Float(f));
        }
        if let Some(i) = n.int {
            return Ok(Value::Int(i));
        }
        Err(self.err(cx, pos, &t, format!("{t} overflows int")))
    }

    fn var_value(&self, cx: &Cx, vars: &Vars, pos: u32, ctx: &dyn fmt::Display, name: &str) -> R<(Value, NilKind)> {
        for (n, v, k) in vars.iter().rev() {
            if &**n == name {
                return Ok((v.clone(), *k));
            }
        }
        Err(self.err(cx, pos, ctx, format!("undefined variable: {name}")))
    }

    fn eval_chain_base(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, node: &Arg) -> R<Value> {
        if let Arg::Nil(pos) = node {
            return Err(self.err(cx, *pos, node, format!("indirection through explicit nil in {node}")));
        }
        self.eval_arg_any(cx, vars, dot, node)
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_field_chain(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        mut recv: Value,
        mut nil_kind: NilKind,
        pos: u32,
        node: &Arg,
        idents: &[Arc<str>],
        args: &[Arg],
        fin: Option<Value>,
    ) -> R<(Value, NilKind)> {
        let n = idents.len();
        for ident in &idents[..n - 1] {
            let (v, k) = self.eval_field(cx, vars, dot, pos, node, ident, &[], None, recv, nil_kind)?;
            recv = v;
            nil_kind = k;
        }
        self.eval_field(cx, vars, dot, pos, node, &idents[n - 1], args, fin, recv, nil_kind)
    }

    /// One field of a chain. `args` is the whole command (its first element
    /// the chain itself) when this is the chain's last field.
    #[allow(clippy::too_many_arguments)]
    fn eval_field(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        pos: u32,
        node: &Arg,
        name: &str,
        args: &[Arg],
        fin: Option<Value>,
        recv: Value,
        nil_kind: NilKind,
    ) -> R<(Value, NilKind)> {
        let has_args = args.len() > 1 || fin.is_some();
        match &recv {
            Value::Nil => {
                if nil_kind == NilKind::Interface {
                    return Err(self.err(cx, pos, node, format!("nil pointer evaluating interface {{}}.{name}")));
                }
                if self.opts.missing_key == MissingKey::Error {
                    return Err(self.err(cx, pos, node, format!("nil data; no entry for key {name:?}")));
                }
                Ok((Value::Nil, NilKind::Invalid))
            }
            Value::Map(m) => {
                if let Some(methods) = self.opts.map_methods.clone() {
                    let mut argv = Vec::new();
                    if has_args {
                        for a in &args[1..] {
                            argv.push(self.eval_arg_any(cx, vars, dot, a)?);
                        }
                        argv.extend(fin.clone());
                    }
                    match (methods.0)(m, name, &argv) {
                        Some(Ok(v)) => return Ok((v, NilKind::Interface)),
                        Some(Err(e)) => return Err(self.func_error(cx, pos, node, name, e)),
                        None => {}
                    }
                }
                if has_args {
                    return Err(self.err(cx, pos, node, format!("{name} is not a method but has arguments")));
                }
                let found = m.borrow().get(name).cloned();
                match found {
                    Some(v) => Ok((v, NilKind::Interface)),
                    None => match self.opts.missing_key {
                        MissingKey::Default => Ok((Value::Nil, NilKind::Invalid)),
                        MissingKey::Zero => Ok((Value::Nil, NilKind::Interface)),
                        MissingKey::Error => Err(self.err(cx, pos, node, format!("map has no entry for key {name:?}"))),
                    },
                }
            }
            Value::Object(o) => {
                if has_args {
                    let mut argv = Vec::with_capacity(args.len());
                    for a in &args[1..] {
                        argv.push(self.eval_arg_any(cx, vars, dot, a)?);
                    }
                    if let Some(f) = fin {
                        argv.push(f);
                    }
                    return match o.call(name, &argv) {
                        Some(Ok(v)) => Ok((v, NilKind::Interface)),
                        Some(Err(e)) => Err(self.func_error(cx, pos, node, name, e)),
                        None => {
                            if o.field(name).is_some() {
                                Err(self.err(
                                    cx,
                                    pos,
                                    node,
                                    format!("{name} has arguments but cannot be invoked as function"),
                                ))
                            } else {
                                Err(self.err(
                                    cx,
                                    pos,
                                    node,
                                    format!("can't evaluate field {name} in type {}", o.type_name()),
                                ))
                            }
                        }
                    };
                }
                if let Some(v) = o.field(name) {
                    let k = if v.is_nil() { NilKind::Interface } else { NilKind::Invalid };
                    return Ok((v, k));
                }
                match o.call(name, &[]) {
                    Some(Ok(v)) => Ok((v, NilKind::Interface)),
                    Some(Err(e)) => Err(self.func_error(cx, pos, node, name, e)),
                    None => match o.elements() {
                        // A map type with methods: a key of the map.
                        Some(Value::Map(m)) => {
                            Ok((m.borrow().get(name).cloned().unwrap_or_default(), NilKind::Invalid))
                        }
                        _ => Err(self.err(
                            cx,
                            pos,
                            node,
                            format!("can't evaluate field {name} in type {}", o.type_name()),
                        )),
                    },
                }
            }
            other => {
                let t = if nil_kind == NilKind::Interface { "interface {}".to_string() } else { other.type_name() };
                Err(self.err(cx, pos, node, format!("can't evaluate field {name} in type {t}")))
            }
        }
    }

    fn func_error(
        &mut self,
        cx: &Cx,
        pos: u32,
        ctx: &dyn fmt::Display,
        name: &str,
        e: FuncError,
    ) -> Box<TemplateError> {
        let (kind, msg) = match e {
            FuncError::Message(m) => (TemplateErrorKind::Exec, m),
            FuncError::Fail(m) => (TemplateErrorKind::Fail, m),
            FuncError::Limit(m) => (TemplateErrorKind::Limit, m),
        };
        let mut err = self.error_at(cx, pos, ctx, kind, format!("error calling {name}: {msg}"));
        if kind == TemplateErrorKind::Fail {
            err.detail = self.fail_detail.take().unwrap_or(msg);
        }
        err.origin = self.inner.take();
        err
    }

    /// Evaluates an argument for an `interface{}` parameter.
    fn eval_arg_any(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<Value> {
        match a {
            Arg::Field(..) | Arg::Variable(..) | Arg::Chain(..) | Arg::Dot(_) => {
                self.eval_arg_kind(cx, vars, dot, a).map(|r| r.0)
            }
            _ => self.eval_arg_simple(cx, vars, dot, a),
        }
    }

    /// An argument with its static type (fields, variables, dot).
    fn eval_arg_kind(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<(Value, NilKind)> {
        match a {
            Arg::Dot(_) => Ok((dot.clone(), self.dot_kind)),
            Arg::Field(pos, idents) => {
                let k = self.dot_kind;
                self.eval_field_chain(cx, vars, dot, dot.clone(), k, *pos, a, idents, std::slice::from_ref(a), None)
            }
            Arg::Variable(pos, name, idents) => {
                let (v, k) = self.var_value(cx, vars, *pos, a, name)?;
                if idents.is_empty() {
                    return Ok((v, k));
                }
                self.eval_field_chain(cx, vars, dot, v, k, *pos, a, idents, std::slice::from_ref(a), None)
            }
            Arg::Chain(pos, node, fields) => {
                let recv = self.eval_chain_base(cx, vars, dot, node)?;
                self.eval_field_chain(
                    cx,
                    vars,
                    dot,
                    recv,
                    NilKind::Invalid,
                    *pos,
                    a,
                    fields,
                    std::slice::from_ref(a),
                    None,
                )
            }
            _ => Ok((self.eval_arg_simple(cx, vars, dot, a)?, NilKind::Invalid)),
        }
    }

    fn eval_arg_simple(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<Value> {
        match a {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Ok(Value::Nil),
            Arg::Bool(_, b) => Ok(Value::Bool(*b)),
            Arg::Number(pos, n) => self.ideal_constant(cx, *pos, n),
            Arg::String(_, _, s) => Ok(Value::str(&**s)),
            Arg::Field(..) | Arg::Variable(..) | Arg::Chain(..) => self.eval_arg_kind(cx, vars, dot, a).map(|r| r.0),
            Arg::Pipe(p) => grow(|| self.eval_pipeline(cx, vars, dot, p)),
            Arg::Identifier(pos, name, callee) => {
                let cmd = Cmd { pos: *pos, args: Vec::new() };
                self.eval_function_node(cx, vars, dot, *pos, name, callee, a, &cmd, &[], None)
            }
        }
    }

    /// Evaluates an argument for a typed parameter, converting constants
    /// and checking values as Go's reflection does.
    fn eval_arg(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg, p: Param) -> R<Value> {
        match a {
            Arg::Nil(pos) => {
                if can_be_nil(p) {
                    return Ok(Value::Nil);
                }
                return Err(self.err(cx, *pos, a, format!("cannot assign nil to {}", param_name(p))));
            }
            Arg::Bool(pos, b) => {
                return match p {
                    Param::Bool | Param::Any => Ok(Value::Bool(*b)),
                    _ => Err(self.const_mismatch(cx, *pos, a, p)),
                };
            }
            Arg::String(pos, _, s) => {
                return match p {
                    Param::String | Param::Any => Ok(Value::str(&**s)),
                    _ => Err(self.const_mismatch(cx, *pos, a, p)),
                };
            }
            Arg::Number(pos, n) => {
                return match p {
                    Param::Int => n.int.map(Value::Int).ok_or_else(|| self.const_mismatch(cx, *pos, a, p)),
                    Param::Int64 => n.int.map(Value::Int64).ok_or_else(|| self.const_mismatch(cx, *pos, a, p)),
                    Param::Float64 => n.float.map(Value::Float).ok_or_else(|| self.const_mismatch(cx, *pos, a, p)),
                    Param::Any => self.ideal_constant(cx, *pos, n),
                    _ => Err(self.const_mismatch(cx, *pos, a, p)),
                };
            }
            _ => {}
        }
        let (v, kind) = match a {
            Arg::Field(..) | Arg::Variable(..) | Arg::Chain(..) | Arg::Dot(_) => {
                self.eval_arg_kind(cx, vars, dot, a)?
            }
            _ => (self.eval_arg_any(cx, vars, dot, a)?, NilKind::Invalid),
        };
        // A nil interface (a null or, with missingkey=zero, a missing key) is a
        // typed value to Go: it is the wrong type, not an invalid value.
        if v.is_nil() && kind == NilKind::Interface && !can_be_nil(p) {
            let msg = format!("wrong type for value; expected {}; got interface {{}}", param_name(p));
            return Err(self.err(cx, a.pos(), a, msg));
        }
        self.validate(cx, a.pos(), a, v, p)
    }

    fn const_mismatch(&self, cx: &Cx, pos: u32, a: &Arg, p: Param) -> Box<TemplateError> {
        let msg = match p {
            Param::Bool => format!("expected bool; found {a}"),
            Param::String => format!("expected string; found {a}"),
            Param::Int | Param::Int64 => format!("expected integer; found {a}"),
            Param::Float64 => format!("expected float; found {a}"),
            _ => format!("can't handle {a} for arg of type {}", param_name(p)),
        };
        self.err(cx, pos, a, msg)
    }

    fn validate(&self, cx: &Cx, pos: u32, ctx: &dyn fmt::Display, v: Value, p: Param) -> R<Value> {
        let ok = match (&v, p) {
            (_, Param::Any) => true,
            (Value::Nil, _) => {
                if can_be_nil(p) {
                    return Ok(Value::Nil);
                }
                return Err(self.err(cx, pos, ctx, format!("invalid value; expected {}", param_name(p))));
            }
            (Value::String(_), Param::String)
            | (Value::Int(_), Param::Int)
            | (Value::Int64(_), Param::Int64)
            | (Value::Float(_), Param::Float64)
            | (Value::Bool(_), Param::Bool)
            | (Value::List(_), Param::List)
            | (Value::Map(_), Param::Map) => true,
            _ => false,
        };
        if ok {
            return Ok(v);
        }
        Err(self.err(cx, pos, ctx, format!("wrong type for value; expected {}; got {}", param_name(p), v.type_name())))
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        pos: u32,
        name: &str,
        callee: &Callee,
        cmd: &Cmd,
        args: &[Arg],
        fin: Option<Value>,
    ) -> R<Value> {
        self.eval_function_node(cx, vars, dot, pos, name, callee, &cmd.args[0], cmd, args, fin)
    }

    #[allow(clippy::too_many_arguments)]
    fn eval_function_node(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        pos: u32,
        name: &str,
        callee: &Callee,
        ident: &Arg,
        cmd: &Cmd,
        args: &[Arg],
        fin: Option<Value>,
    ) -> R<Value> {
        // The node errors point at: the command, or the identifier alone.
        let ctx: &dyn fmt::Display = if cmd.args.is_empty() { ident } else { cmd };
        let num_in = args.len() + usize::from(fin.is_some());
        match callee {
            Callee::Builtin(b) => {
                let (fixed, variadic) = b.arity();
                if variadic {
                    if num_in < fixed {
                        return Err(self.err(
                            cx,
                            pos,
                            ident,
                            format!("wrong number of args for {name}: want at least {fixed} got {}", args.len()),
                        ));
                    }
                } else if num_in != fixed {
                    return Err(self.err(
                        cx,
                        pos,
                        ident,
                        format!("wrong number of args for {name}: want {fixed} got {num_in}"),
                    ));
                }
                if matches!(b, Builtin::And | Builtin::Or) {
                    let want = *b == Builtin::Or;
                    let mut v = Value::Nil;
                    for a in args {
                        v = self.eval_arg_any(cx, vars, dot, a)?;
                        if v.is_true() == want {
                            return Ok(v);
                        }
                    }
                    if let Some(f) = fin {
                        v = f;
                    }
                    return Ok(v);
                }
                if *b == Builtin::Call {
                    // Go names the callee by its node in the message.
                    let v = match args.first() {
                        Some(a) => self.eval_arg_any(cx, vars, dot, a)?,
                        None => fin.clone().unwrap_or_default(),
                    };
                    let callee = args.first().map(|a| a.to_string()).unwrap_or_default();
                    let msg = if v.is_nil() {
                        "call of nil".to_string()
                    } else {
                        format!("non-function {callee} of type {}", v.type_name())
                    };
                    return Err(self.err(cx, pos, ctx, format!("error calling {name}: {msg}")));
                }
                if *b == Builtin::Len
                    && let Some(a) = args.first()
                {
                    let (v, k) = self.eval_arg_kind(cx, vars, dot, a)?;
                    if v.is_nil() && k == NilKind::Interface {
                        return Err(self.err(cx, pos, ctx, format!("error calling {name}: len of nil pointer")));
                    }
                    return b.call(&[v]).map_err(|m| self.err(cx, pos, ctx, format!("error calling {name}: {m}")));
                }
                let mut argv = Vec::with_capacity(num_in);
                for (i, a) in args.iter().enumerate() {
                    if *b == Builtin::Printf && i == 0 {
                        argv.push(self.eval_arg(cx, vars, dot, a, Param::String)?);
                    } else {
                        argv.push(self.eval_arg_any(cx, vars, dot, a)?);
                    }
                }
                if let Some(f) = fin {
                    if *b == Builtin::Printf && argv.is_empty() {
                        argv.push(self.validate(cx, pos, ctx, f, Param::String)?);
                    } else {
                        argv.push(f);
                    }
                }
                let v = b.call(&argv).map_err(|m| self.err(cx, pos, ctx, format!("error calling {name}: {m}")))?;
                self.sized(v).map_err(|e| self.func_error(cx, pos, ctx, name, e))
            }
            Callee::User(f) => {
                let sig = &f.signature;
                let fixed = sig.params.len();
                if sig.variadic.is_some() {
                    if num_in < fixed {
                        return Err(self.err(
                            cx,
                            pos,
                            ident,
                            format!("wrong number of args for {name}: want at least {fixed} got {}", args.len()),
                        ));
                    }
                } else if num_in != fixed {
                    return Err(self.err(
                        cx,
                        pos,
                        ident,
                        format!("wrong number of args for {name}: want {fixed} got {num_in}"),
                    ));
                }
                let param_at =
                    |i: usize| -> Param { if i < fixed { sig.params[i] } else { sig.variadic.unwrap_or(Param::Any) } };
                let mut argv = Vec::with_capacity(num_in);
                for (i, a) in args.iter().enumerate() {
                    argv.push(self.eval_arg(cx, vars, dot, a, param_at(i))?);
                }
                if let Some(v) = fin {
                    let p = param_at(num_in - 1);
                    argv.push(self.validate(cx, pos, ctx, v, p)?);
                }
                match (f.body)(self, &argv).and_then(|v| self.sized(v)) {
                    Ok(v) => Ok(v),
                    Err(e) => Err(self.func_error(cx, pos, ctx, name, e)),
                }
            }
        }
    }

    /// A function's result is charged by its size and refused past the size
    /// limit: doubling a string in a loop (`$s = print $s $s`) ends here,
    /// long before memory does.
    fn sized(&mut self, v: Value) -> Result<Value, FuncError> {
        let size = match &v {
            Value::String(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::List(l) => l.len(),
            _ => return Ok(v),
        };
        crate::func::room(self, "result", size as u128)?;
        Ok(v)
    }

    fn nested(&mut self, tree: &Tree, name: &str, data: &Value) -> Result<String, FuncError> {
        if self.depth >= self.opts.limits.max_depth {
            return Err(FuncError::Limit(format!("exceeded maximum template depth ({})", self.opts.limits.max_depth)));
        }
        self.depth += 1;
        let r = grow(|| self.run_tree(tree, name, data));
        self.depth -= 1;
        r.inspect_err(|e| {
            let (template, line, detail) = e.innermost();
            self.inner.set(Some(Box::new(Origin { template: template.to_string(), line, detail: detail.to_string() })));
        })
        .map_err(|e| match e.kind {
            TemplateErrorKind::Fail => {
                self.fail_detail = Some(e.detail.clone());
                FuncError::Fail(e.to_string())
            }
            TemplateErrorKind::Limit => FuncError::Limit(e.to_string()),
            _ => FuncError::Message(e.to_string()),
        })
    }
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
