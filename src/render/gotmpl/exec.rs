//! Execution of parsed templates with Go's semantics: scopes, truthiness,
//! missing keys, argument conversion, the builtins, and the limits that
//! keep a hostile template from running away.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use rand::SeedableRng as _;

use super::fmt::{format_value, sprint, sprintf, sprintln};
use super::func::{FuncMap, Host, Param};
use super::parse::{Arg, Builtin, Cmd, FuncRef, Node, Number, Pipe, Term, Tree, line_col, parse};
use super::value::{FuncError, Value};

/// A set of parsed templates: Go's template with its associated templates.
#[derive(Clone, Default)]
pub struct Templates {
    trees: Arc<HashMap<Arc<str>, Arc<Tree>>>,
}

impl Templates {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `text` as template `name`, adding its `define`/`block`
    /// templates to the set. A later definition replaces an earlier one,
    /// except that an empty one never replaces a non-empty one (Go's rule).
    pub fn add(&mut self, name: &str, text: &str, funcs: &FuncMap) -> Result<(), TemplateError> {
        let trees = parse(name, text, funcs).map_err(|e| {
            let (line, column) = line_col(text, e.pos);
            TemplateError::new(TemplateErrorDetail {
                template: name.to_string(),
                name: name.to_string(),
                line,
                column,
                context: String::new(),
                kind: TemplateErrorKind::Parse,
                message: e.message,
                trace: Vec::new(),
            })
        })?;
        let map = Arc::make_mut(&mut self.trees);
        for tree in trees {
            if tree.is_empty()
                && let Some(old) = map.get(&tree.name)
                && !old.is_empty()
            {
                continue;
            }
            map.insert(tree.name.clone(), Arc::new(tree));
        }
        Ok(())
    }

    pub fn has(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    /// The names of all templates in the set, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.trees.keys().map(|k| k.to_string()).collect();
        names.sort();
        names
    }

    fn get(&self, name: &str) -> Option<Arc<Tree>> {
        self.trees.get(name).cloned()
    }
}

/// What a missing map key gives (Go's `missingkey` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Go's default: an invalid value, printed `<no value>`; further fields
    /// of it are invalid too.
    #[default]
    Default,
    /// `missingkey=zero` (Helm's choice): the map's zero value, a nil
    /// interface; a field of it fails with "nil pointer evaluating".
    Zero,
    /// `missingkey=error` (Helm's `--strict`).
    Error,
}

/// Limits that stop a runaway template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecLimits {
    /// Nodes evaluated in one `execute` (includes and `tpl` count too).
    pub max_steps: u64,
    /// Largest output of one template or `include`, in bytes.
    pub max_output_bytes: usize,
    /// Nesting of `template`, `include` and `tpl`.
    pub max_depth: usize,
}

impl Default for ExecLimits {
    fn default() -> Self {
        // A large upstream chart (Cilium) takes a few million steps; nesting in
        // real charts stays below 30. The depth also bounds native stack use.
        Self { max_steps: 200_000_000, max_output_bytes: 64 * 1024 * 1024, max_depth: 200 }
    }
}

/// How to execute.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    pub missing_key: MissingKey,
    pub limits: ExecLimits,
    /// Seeds the random functions (tests); `None` draws from the OS.
    pub seed: Option<u64>,
    /// "Now" for date functions and certificates.
    pub now: jiff::Zoned,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self { missing_key: MissingKey::Default, limits: ExecLimits::default(), seed: None, now: jiff::Zoned::now() }
    }
}

/// The kind of a template failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateErrorKind {
    /// The template text is not valid.
    Parse,
    /// Execution failed: a missing value, a wrong type, a failed function.
    Exec,
    /// The author's own failure (`fail`, `required`).
    Fail,
    /// A work, output or depth limit was reached.
    Limit,
}

/// A template failure: a boxed [`TemplateErrorDetail`] (its fields read
/// through `Deref`), so results stay small on the engine's hot paths.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError(Box<TemplateErrorDetail>);

impl TemplateError {
    pub fn new(detail: TemplateErrorDetail) -> Self {
        Self(Box::new(detail))
    }
}

impl std::ops::Deref for TemplateError {
    type Target = TemplateErrorDetail;
    fn deref(&self) -> &TemplateErrorDetail {
        &self.0
    }
}

impl std::ops::DerefMut for TemplateError {
    fn deref_mut(&mut self) -> &mut TemplateErrorDetail {
        &mut self.0
    }
}

/// Where a template failed and why (the innermost template when it failed
/// inside an `include`; `trace` lists the callers).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateErrorDetail {
    /// The file the failing template was parsed from.
    pub template: String,
    /// The template being executed (a file or a `define`d name).
    pub name: String,
    pub line: usize,
    /// Byte offset in the line, as Go counts it.
    pub column: usize,
    /// The failing action's text, e.g. `.Values.image.tag`.
    pub context: String,
    pub kind: TemplateErrorKind,
    pub message: String,
    /// Where the failing template was included from, innermost first.
    pub trace: Vec<String>,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TemplateErrorKind::Parse => write!(f, "template: {}:{}: {}", self.template, self.line, self.message)?,
            _ => write!(
                f,
                "template: {}:{}:{}: executing \"{}\" at <{}>: {}",
                self.template, self.line, self.column, self.name, self.context, self.message
            )?,
        }
        for t in &self.trace {
            write!(f, " (included from {t})")?;
        }
        Ok(())
    }
}

impl std::error::Error for TemplateError {}

/// Executes template `name` of `set` with `data`.
pub fn execute(
    set: &Templates,
    name: &str,
    data: &Value,
    funcs: &FuncMap,
    opts: &ExecOptions,
) -> Result<String, TemplateError> {
    let rng = match opts.seed {
        Some(seed) => rand::rngs::StdRng::seed_from_u64(seed),
        None => rand::rngs::StdRng::from_os_rng(),
    };
    let mut state = State {
        set: set.clone(),
        funcs,
        opts,
        steps: 0,
        depth: 0,
        rng,
        vars: Vec::new(),
        tree: None,
        nested: None,
        span: (0, 0),
    };
    state.run_template(name, Step::from_value(data.clone()), None)
}

/// A value as Go's reflection sees it while evaluating: `Invalid` is the
/// zero `reflect.Value` (a missing key by default, a nil pipeline result);
/// `Val(Value::Nil)` is a nil interface (a `null` in the values, a missing key
/// with `missingkey=zero`, a nil list element), whose fields can't be read.
#[derive(Clone, Debug)]
enum Step {
    Invalid,
    Val(Value),
}

impl Step {
    /// A pipeline's result: Go turns a nil interface into an invalid value.
    fn from_value(v: Value) -> Self {
        match v {
            Value::Nil => Step::Invalid,
            v => Step::Val(v),
        }
    }

    fn into_value(self) -> Value {
        match self {
            Step::Invalid => Value::Nil,
            Step::Val(v) => v,
        }
    }

    fn truth(&self) -> bool {
        match self {
            Step::Invalid => false,
            Step::Val(v) => v.is_true(),
        }
    }
}

enum Flow {
    Normal,
    Break,
    Continue,
}

struct State<'a> {
    set: Templates,
    funcs: &'a FuncMap,
    opts: &'a ExecOptions,
    steps: u64,
    depth: usize,
    rng: rand::rngs::StdRng,
    vars: Vec<(Arc<str>, Step)>,
    tree: Option<Arc<Tree>>,
    /// A failure inside `include`/`tpl`, kept whole so the error names the
    /// innermost template rather than the call.
    nested: Option<TemplateError>,
    /// The node being evaluated (start, end), named in error messages.
    span: (usize, usize),
}

type R<T> = Result<T, TemplateError>;

impl State<'_> {
    fn error(&self, pos: usize, kind: TemplateErrorKind, message: impl Into<String>) -> TemplateError {
        let (template, name, line, column, context) = match &self.tree {
            Some(tree) => {
                let (line, column) = tree.line_col(pos);
                let context = match tree.text.get(self.span.0..self.span.1) {
                    Some(s) if self.span.1 > self.span.0 && self.span.0 <= pos && pos <= self.span.1 => s.to_string(),
                    _ => context_at(&tree.text, pos),
                };
                (tree.parse_name.to_string(), tree.name.to_string(), line, column, context)
            }
            None => (String::new(), String::new(), 0, 0, String::new()),
        };
        TemplateError::new(TemplateErrorDetail {
            template,
            name,
            line,
            column,
            context,
            kind,
            message: message.into(),
            trace: Vec::new(),
        })
    }

    fn exec_err(&self, pos: usize, message: impl Into<String>) -> TemplateError {
        self.error(pos, TemplateErrorKind::Exec, message)
    }

    fn step(&mut self, pos: usize) -> R<()> {
        self.steps += 1;
        if self.steps > self.opts.limits.max_steps {
            return Err(self.error(
                pos,
                TemplateErrorKind::Limit,
                format!("stopped after {} steps: an endless loop, or raise the limit", self.opts.limits.max_steps),
            ));
        }
        Ok(())
    }

    /// Runs a template of the set with a fresh variable scope (`$` = data).
    fn run_template(&mut self, name: &str, data: Step, call_pos: Option<usize>) -> R<String> {
        let Some(tree) = self.set.get(name) else {
            let message = format!("no such template \"{name}\"");
            return Err(match call_pos {
                Some(pos) => self.exec_err(pos, message),
                None => TemplateError::new(TemplateErrorDetail {
                    template: name.to_string(),
                    name: name.to_string(),
                    line: 0,
                    column: 0,
                    context: String::new(),
                    kind: TemplateErrorKind::Exec,
                    message,
                    trace: Vec::new(),
                }),
            });
        };
        if self.depth >= self.opts.limits.max_depth {
            let pos = call_pos.unwrap_or(0);
            return Err(self.error(
                pos,
                TemplateErrorKind::Limit,
                format!("exceeded maximum template depth ({})", self.opts.limits.max_depth),
            ));
        }
        self.depth += 1;
        let saved_vars = std::mem::replace(&mut self.vars, vec![("$".into(), data.clone())]);
        let saved_tree = self.tree.replace(tree.clone());
        let mut out = String::new();
        // Nested templates recurse natively: grow the stack on the heap rather
        // than overflow a small thread stack (tokio workers have 2 MiB).
        let result = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.walk_list(&tree.root, &data, &mut out));
        self.vars = saved_vars;
        self.tree = saved_tree;
        self.depth -= 1;
        match result? {
            Flow::Normal => Ok(out),
            // The parser allows break/continue only inside range.
            Flow::Break | Flow::Continue => Ok(out),
        }
    }

    fn write(&self, out: &mut String, s: &str, pos: usize) -> R<()> {
        out.push_str(s);
        if out.len() > self.opts.limits.max_output_bytes {
            return Err(self.error(
                pos,
                TemplateErrorKind::Limit,
                format!("output exceeds the limit of {} bytes", self.opts.limits.max_output_bytes),
            ));
        }
        Ok(())
    }

    fn walk_list(&mut self, nodes: &[Node], dot: &Step, out: &mut String) -> R<Flow> {
        for node in nodes {
            match self.walk(node, dot, out)? {
                Flow::Normal => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Normal)
    }

    fn walk(&mut self, node: &Node, dot: &Step, out: &mut String) -> R<Flow> {
        match node {
            Node::Text(t) => {
                self.write(out, t, 0)?;
            }
            Node::Action(pipe) => {
                self.step(pipe.pos)?;
                let v = self.eval_pipeline(dot, pipe)?;
                if pipe.decl.is_empty() {
                    match &v {
                        Step::Invalid | Step::Val(Value::Nil) => self.write(out, "<no value>", pipe.pos)?,
                        Step::Val(Value::String(s)) => self.write(out, s, pipe.pos)?,
                        Step::Val(v) => self.write(out, &format_value(v), pipe.pos)?,
                    }
                }
            }
            Node::If { pipe, then, els } | Node::With { pipe, then, els } => {
                self.step(pipe.pos)?;
                let mark = self.vars.len();
                let v = self.eval_pipeline(dot, pipe)?;
                let is_with = matches!(node, Node::With { .. });
                let flow = if v.truth() {
                    let new_dot = if is_with { v } else { dot.clone() };
                    self.walk_list(then, &new_dot, out)
                } else if let Some(els) = els {
                    self.walk_list(els, dot, out)
                } else {
                    Ok(Flow::Normal)
                };
                self.vars.truncate(mark);
                return flow;
            }
            Node::Range { pipe, body, els } => {
                self.step(pipe.pos)?;
                let mark = self.vars.len();
                let flow = self.walk_range(dot, pipe, body, els.as_deref(), out);
                self.vars.truncate(mark);
                return flow;
            }
            Node::Template { pos, name, pipe } => {
                self.step(*pos)?;
                let data = match pipe {
                    Some(p) => self.eval_pipeline(dot, p)?,
                    None => Step::Invalid,
                };
                let s = self.run_template(name, data, Some(*pos))?;
                self.write(out, &s, *pos)?;
            }
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn walk_range(
        &mut self,
        dot: &Step,
        pipe: &Pipe,
        body: &[Node],
        els: Option<&[Node]>,
        out: &mut String,
    ) -> R<Flow> {
        // The range variables are set per element, not by the pipeline.
        let plain = Pipe { pos: pipe.pos, decl: Vec::new(), assign: false, cmds: pipe.cmds.clone() };
        let v = match self.eval_pipeline(dot, &plain)? {
            Step::Val(Value::Object(o)) if o.elements().is_some() => Step::Val(o.elements().unwrap_or_default()),
            v => v,
        };
        // Lists are shared (Rc) and maps are snapshotted in key order, as Go
        // ranges over sorted keys; integers are counted, never materialised.
        enum Items {
            List(Rc<Vec<Value>>),
            Bytes(Rc<[u8]>),
            Map(Vec<(String, Value)>),
            Count(i64, bool),
        }
        let items = match &v {
            Step::Invalid | Step::Val(Value::Nil) => None,
            Step::Val(Value::List(l)) => Some(Items::List(l.clone())),
            Step::Val(Value::Bytes(b)) => Some(Items::Bytes(b.clone())),
            Step::Val(Value::Map(m)) => {
                Some(Items::Map(m.borrow().iter().map(|(k, e)| (k.clone(), e.clone())).collect()))
            }
            Step::Val(Value::Int(n)) | Step::Val(Value::Int64(n)) => {
                if pipe.decl.len() > 1 {
                    return Err(self.exec_err(pipe.pos, format!("can't use 2 variables with range over integer {n}")));
                }
                Some(Items::Count(*n, matches!(v, Step::Val(Value::Int64(_)))))
            }
            Step::Val(other) => {
                return Err(self.exec_err(pipe.pos, format!("range can't iterate over {}", format_value(other))));
            }
        };
        let len = match &items {
            None => 0,
            Some(Items::List(l)) => l.len(),
            Some(Items::Bytes(b)) => b.len(),
            Some(Items::Map(m)) => m.len(),
            Some(Items::Count(n, _)) => (*n).max(0) as usize,
        };
        let Some(items) = items.filter(|_| len > 0) else {
            return match els {
                Some(els) => self.walk_list(els, dot, out),
                None => Ok(Flow::Normal),
            };
        };
        let mark = self.vars.len();
        for i in 0..len {
            self.step(pipe.pos)?;
            let (key, elem) = match &items {
                Items::List(l) => (Value::Int(i as i64), l[i].clone()),
                Items::Bytes(b) => (Value::Int(i as i64), Value::Int(i64::from(b[i]))),
                Items::Map(m) => (Value::str(m[i].0.as_str()), m[i].1.clone()),
                Items::Count(_, wide) => {
                    let n = if *wide { Value::Int64(i as i64) } else { Value::Int(i as i64) };
                    (n.clone(), n)
                }
            };
            match pipe.decl.as_slice() {
                [] => {}
                [v] => self.set_var(v, Step::Val(elem.clone()), pipe.assign),
                [k, v, ..] => {
                    self.set_var(k, Step::Val(key), pipe.assign);
                    self.set_var(v, Step::Val(elem.clone()), pipe.assign);
                }
            }
            let flow = self.walk_list(body, &Step::Val(elem), out)?;
            self.vars.truncate(mark);
            if let Flow::Break = flow {
                break;
            }
        }
        Ok(Flow::Normal)
    }

    fn set_var(&mut self, name: &Arc<str>, value: Step, assign: bool) {
        if assign && let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) {
            slot.1 = value;
            return;
        }
        self.vars.push((name.clone(), value));
    }

    fn var(&self, name: &str, pos: usize) -> R<Step> {
        self.vars
            .iter()
            .rev()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| self.exec_err(pos, format!("undefined variable: {name}")))
    }

    fn eval_pipeline(&mut self, dot: &Step, pipe: &Pipe) -> R<Step> {
        let mut value: Option<Step> = None;
        for cmd in &pipe.cmds {
            let v = self.eval_command(dot, cmd, value.take())?;
            value = Some(match v {
                Step::Val(Value::Nil) => Step::Invalid,
                v => v,
            });
        }
        let value = value.unwrap_or(Step::Invalid);
        for name in &pipe.decl {
            self.set_var(name, value.clone(), pipe.assign);
        }
        Ok(value)
    }

    fn eval_command(&mut self, dot: &Step, cmd: &Cmd, last: Option<Step>) -> R<Step> {
        self.step(cmd.pos)?;
        let first = &cmd.args[0];
        let rest = &cmd.args[1..];
        self.span = if matches!(first.term, Term::Func(..)) { cmd.span } else { first.span };
        match &first.term {
            Term::Field(fields) => self.eval_chain(dot, dot.clone(), fields, rest, last, first.pos),
            Term::Chain(term, fields) => {
                let recv = match &**term {
                    Term::Pipe(p) => self.eval_pipeline(dot, p)?,
                    other => {
                        let arg = Arg { pos: first.pos, span: first.span, term: other.clone() };
                        self.eval_arg(dot, &arg, Param::Any)?
                    }
                };
                self.eval_chain(dot, recv, fields, rest, last, first.pos)
            }
            Term::Var(name, fields) => {
                let v = self.var(name, first.pos)?;
                if fields.is_empty() {
                    self.not_a_function(rest, &last, name, first.pos)?;
                    return Ok(v);
                }
                self.eval_chain(dot, v, fields, rest, last, first.pos)
            }
            Term::Func(name, f) => self.call(dot, name, f, rest, last, first.pos, cmd.span),
            Term::Pipe(p) => {
                self.not_a_function(rest, &last, "pipeline", first.pos)?;
                self.eval_pipeline(dot, p)
            }
            Term::Nil => Err(self.exec_err(first.pos, "nil is not a command")),
            Term::Dot => {
                self.not_a_function(rest, &last, ".", first.pos)?;
                Ok(dot.clone())
            }
            Term::Bool(b) => {
                self.not_a_function(rest, &last, if *b { "true" } else { "false" }, first.pos)?;
                Ok(Step::Val(Value::Bool(*b)))
            }
            Term::Str(s) => {
                self.not_a_function(rest, &last, s, first.pos)?;
                Ok(Step::Val(Value::String(s.to_string().into())))
            }
            Term::Num(n) => {
                self.not_a_function(rest, &last, &n.text, first.pos)?;
                Ok(Step::Val(self.ideal_constant(n, first.pos)?))
            }
        }
    }

    fn not_a_function(&self, rest: &[Arg], last: &Option<Step>, what: &str, pos: usize) -> R<()> {
        if !rest.is_empty() || last.is_some() {
            return Err(self.exec_err(pos, format!("can't give argument to non-function {what}")));
        }
        Ok(())
    }

    /// Go's untyped constant passed where anything goes: `int` unless the
    /// text has a fraction or exponent.
    fn ideal_constant(&self, n: &Number, pos: usize) -> R<Value> {
        if n.prefers_float {
            return n
                .float
                .map(Value::Float)
                .ok_or_else(|| self.exec_err(pos, format!("illegal number syntax: {}", n.text)));
        }
        match n.int {
            Some(i) => Ok(Value::Int(i)),
            None => Err(self.exec_err(pos, format!("{} overflows int", n.text))),
        }
    }

    /// Evaluates `.a.b.c` on `recv`; arguments and the pipeline's last value
    /// go to the last name, which must then be a method.
    fn eval_chain(
        &mut self,
        dot: &Step,
        recv: Step,
        fields: &[Arc<str>],
        args: &[Arg],
        last: Option<Step>,
        pos: usize,
    ) -> R<Step> {
        let mut cur = recv;
        let n = fields.len();
        let mut last = last;
        for (i, name) in fields.iter().enumerate() {
            let is_last = i + 1 == n;
            let (a, l) = if is_last { (args, last.take()) } else { (&[][..], None) };
            cur = self.eval_field(dot, cur, name, a, l, pos)?;
        }
        Ok(cur)
    }

    fn eval_field(
        &mut self,
        dot: &Step,
        recv: Step,
        name: &str,
        args: &[Arg],
        last: Option<Step>,
        pos: usize,
    ) -> R<Step> {
        let has_args = !args.is_empty() || last.is_some();
        match recv {
            Step::Invalid => {
                if self.opts.missing_key == MissingKey::Error {
                    return Err(self.exec_err(pos, format!("nil data; no entry for key \"{name}\"")));
                }
                Ok(Step::Invalid)
            }
            Step::Val(Value::Nil) => Err(self.exec_err(pos, format!("nil pointer evaluating interface {{}}.{name}"))),
            Step::Val(Value::Map(m)) => {
                if has_args {
                    return Err(self.exec_err(pos, format!("{name} is not a method but has arguments")));
                }
                let found = m.borrow().get(name).cloned();
                match found {
                    Some(v) => Ok(Step::Val(v)),
                    None => match self.opts.missing_key {
                        MissingKey::Default => Ok(Step::Invalid),
                        MissingKey::Zero => Ok(Step::Val(Value::Nil)),
                        MissingKey::Error => Err(self.exec_err(pos, format!("map has no entry for key \"{name}\""))),
                    },
                }
            }
            Step::Val(Value::Object(o)) => {
                if has_args {
                    let mut values = Vec::with_capacity(args.len() + 1);
                    for a in args {
                        values.push(self.eval_arg(dot, a, Param::Any)?.into_value());
                    }
                    if let Some(l) = last {
                        values.push(l.into_value());
                    }
                    return match o.call(name, &values) {
                        Some(Ok(v)) => Ok(Step::Val(v)),
                        Some(Err(e)) => Err(self.func_error(pos, name, e)),
                        None if o.field(name).is_some() => {
                            Err(self.exec_err(pos, format!("{name} has arguments but cannot be invoked as function")))
                        }
                        None => {
                            Err(self.exec_err(pos, format!("can't evaluate field {name} in type {}", o.type_name())))
                        }
                    };
                }
                match o.field(name) {
                    Some(v) => Ok(Step::Val(v)),
                    None => match o.call(name, &[]) {
                        Some(Ok(v)) => Ok(Step::Val(v)),
                        Some(Err(e)) => Err(self.func_error(pos, name, e)),
                        None => {
                            Err(self.exec_err(pos, format!("can't evaluate field {name} in type {}", o.type_name())))
                        }
                    },
                }
            }
            Step::Val(other) => {
                Err(self.exec_err(pos, format!("can't evaluate field {name} in type {}", other.type_name())))
            }
        }
    }

    fn func_error(&mut self, pos: usize, name: &str, e: FuncError) -> TemplateError {
        if let Some(mut nested) = self.nested.take() {
            if let Some(tree) = &self.tree {
                let (line, _) = tree.line_col(pos);
                nested.trace.push(format!("{}:{}", tree.parse_name, line));
            }
            return nested;
        }
        match e {
            FuncError::Message(m) => self.exec_err(pos, format!("error calling {name}: {m}")),
            FuncError::Fail(m) => self.error(pos, TemplateErrorKind::Fail, m),
            FuncError::Limit(m) => self.error(pos, TemplateErrorKind::Limit, m),
        }
    }

    /// Evaluates an argument for a parameter of type `param`, converting as
    /// Go's reflection does.
    fn eval_arg(&mut self, dot: &Step, arg: &Arg, param: Param) -> R<Step> {
        let pos = arg.pos;
        self.span = arg.span;
        let value =
            match &arg.term {
                Term::Num(n) => {
                    return match param {
                        Param::Any => Ok(Step::Val(self.ideal_constant(n, pos)?)),
                        Param::Int => n
                            .int
                            .map(|i| Step::Val(Value::Int(i)))
                            .ok_or_else(|| self.exec_err(pos, format!("expected integer; found {}", n.text))),
                        Param::Int64 => n
                            .int
                            .map(|i| Step::Val(Value::Int64(i)))
                            .ok_or_else(|| self.exec_err(pos, format!("expected integer; found {}", n.text))),
                        Param::Float64 => n
                            .float
                            .map(|f| Step::Val(Value::Float(f)))
                            .ok_or_else(|| self.exec_err(pos, format!("expected float; found {}", n.text))),
                        Param::String => Err(self.exec_err(pos, format!("expected string; found {}", n.text))),
                        Param::Bool => Err(self.exec_err(pos, format!("expected bool; found {}", n.text))),
                        Param::List | Param::Map => Err(self
                            .exec_err(pos, format!("can't handle {} for arg of type {}", n.text, param_type(param)))),
                    };
                }
                Term::Str(s) => {
                    return match param {
                        Param::Any | Param::String => Ok(Step::Val(Value::String(s.to_string().into()))),
                        _ => Err(self.exec_err(pos, format!("expected {}; found {:?}", param_word(param), &**s))),
                    };
                }
                Term::Bool(b) => {
                    return match param {
                        Param::Any | Param::Bool => Ok(Step::Val(Value::Bool(*b))),
                        _ => Err(self.exec_err(pos, format!("expected {}; found {b}", param_word(param)))),
                    };
                }
                Term::Nil => {
                    return match param {
                        Param::Any | Param::Map => Ok(Step::Val(Value::Nil)),
                        Param::List => Ok(Step::Val(Value::list(Vec::new()))),
                        _ => Err(self.exec_err(pos, format!("cannot assign nil to {}", param_type(param)))),
                    };
                }
                Term::Dot => dot.clone(),
                Term::Field(fields) => self.eval_chain(dot, dot.clone(), fields, &[], None, pos)?,
                Term::Var(name, fields) => {
                    let v = self.var(name, pos)?;
                    if fields.is_empty() { v } else { self.eval_chain(dot, v, fields, &[], None, pos)? }
                }
                Term::Chain(term, fields) => {
                    let recv = match &**term {
                        Term::Pipe(p) => self.eval_pipeline(dot, p)?,
                        other => self.eval_arg(dot, &Arg { pos, span: arg.span, term: other.clone() }, Param::Any)?,
                    };
                    self.span = arg.span;
                    self.eval_chain(dot, recv, fields, &[], None, pos)?
                }
                Term::Pipe(p) => self.eval_pipeline(dot, p)?,
                Term::Func(name, f) => self.call(dot, name, f, &[], None, pos, arg.span)?,
            };
        self.span = arg.span;
        self.validate(value, param, pos)
    }

    /// Go's `validateType`: a computed value against a parameter type.
    fn validate(&self, value: Step, param: Param, pos: usize) -> R<Step> {
        let v = match value {
            Step::Invalid => {
                return match param {
                    Param::Any | Param::Map => Ok(Step::Val(Value::Nil)),
                    Param::List => Ok(Step::Val(Value::list(Vec::new()))),
                    _ => Err(self.exec_err(pos, format!("invalid value; expected {}", param_type(param)))),
                };
            }
            Step::Val(v) => v,
        };
        let ok = match (param, &v) {
            (Param::Any, _) => true,
            (Param::String, Value::String(_)) => true,
            (Param::Int, Value::Int(_)) => true,
            (Param::Int64, Value::Int64(_)) => true,
            (Param::Float64, Value::Float(_)) => true,
            (Param::Bool, Value::Bool(_)) => true,
            (Param::List, Value::List(_)) => true,
            (Param::List, Value::Nil) => return Ok(Step::Val(Value::list(Vec::new()))),
            (Param::Map, Value::Map(_) | Value::Nil) => true,
            _ => false,
        };
        if ok {
            return Ok(Step::Val(v));
        }
        let got = if v.is_nil() { "interface {}".to_string() } else { v.type_name() };
        Err(self.exec_err(pos, format!("wrong type for value; expected {}; got {got}", param_type(param))))
    }

    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        dot: &Step,
        name: &str,
        f: &FuncRef,
        args: &[Arg],
        last: Option<Step>,
        pos: usize,
        span: (usize, usize),
    ) -> R<Step> {
        self.span = span;
        match f {
            FuncRef::Builtin(b) => {
                let r = self.call_builtin(dot, name, *b, args, last, pos, span);
                self.span = span;
                r
            }
            FuncRef::User(func) => {
                let sig = &func.signature;
                let given = args.len() + usize::from(last.is_some());
                let fixed = sig.params.len();
                let arity_ok = if sig.variadic.is_some() { given >= fixed } else { given == fixed };
                if !arity_ok {
                    let want = if sig.variadic.is_some() { format!("at least {fixed}") } else { fixed.to_string() };
                    return Err(self.exec_err(pos, format!("wrong number of args for {name}: want {want} got {given}")));
                }
                let mut values = Vec::with_capacity(given);
                let param_of =
                    |i: usize| -> Param { if i < fixed { sig.params[i] } else { sig.variadic.unwrap_or(Param::Any) } };
                for (i, a) in args.iter().enumerate() {
                    values.push(self.eval_arg(dot, a, param_of(i))?.into_value());
                }
                self.span = span;
                if let Some(l) = last {
                    let p = param_of(args.len());
                    values.push(self.validate(l, p, pos)?.into_value());
                }
                let body = func.body.clone();
                match body(self, &values) {
                    Ok(v) => Ok(Step::Val(v)),
                    Err(e) => Err(self.func_error(pos, name, e)),
                }
            }
        }
    }

    fn eval_args_any(&mut self, dot: &Step, args: &[Arg], last: Option<Step>, span: (usize, usize)) -> R<Vec<Step>> {
        let mut values = Vec::with_capacity(args.len() + 1);
        for a in args {
            values.push(self.eval_arg(dot, a, Param::Any).map(|s| match s {
                Step::Val(Value::Nil) => Step::Invalid,
                s => s,
            })?);
        }
        if let Some(l) = last {
            values.push(l);
        }
        self.span = span;
        Ok(values)
    }

    #[allow(clippy::too_many_arguments)]
    fn call_builtin(
        &mut self,
        dot: &Step,
        name: &str,
        b: Builtin,
        args: &[Arg],
        last: Option<Step>,
        pos: usize,
        span: (usize, usize),
    ) -> R<Step> {
        let given = args.len() + usize::from(last.is_some());
        let want_args = |min: usize, exact: bool| -> Result<(), String> {
            let ok = if exact { given == min } else { given >= min };
            if ok {
                Ok(())
            } else {
                let want = if exact { min.to_string() } else { format!("at least {min}") };
                Err(format!("wrong number of args for {name}: want {want} got {given}"))
            }
        };
        match b {
            Builtin::And | Builtin::Or => {
                want_args(1, false).map_err(|m| self.exec_err(pos, m))?;
                let is_or = b == Builtin::Or;
                let mut v = Step::Invalid;
                for a in args {
                    v = self.eval_arg(dot, a, Param::Any)?;
                    if v.truth() == is_or {
                        return Ok(v);
                    }
                }
                if let Some(l) = last {
                    v = l;
                }
                Ok(v)
            }
            Builtin::Not => {
                want_args(1, true).map_err(|m| self.exec_err(pos, m))?;
                let v = self.eval_args_any(dot, args, last, span)?;
                Ok(Step::Val(Value::Bool(!v[0].truth())))
            }
            Builtin::Len => {
                want_args(1, true).map_err(|m| self.exec_err(pos, m))?;
                let v = self.eval_args_any(dot, args, last, span)?;
                let v: Vec<Step> = v.into_iter().map(underlying).collect();
                let n = match &v[0] {
                    Step::Val(Value::String(s)) => s.len(),
                    Step::Val(Value::Bytes(b)) => b.len(),
                    Step::Val(Value::List(l)) => l.len(),
                    Step::Val(Value::Map(m)) => m.borrow().len(),
                    Step::Invalid | Step::Val(Value::Nil) => {
                        return Err(self.exec_err(pos, "error calling len: len of nil pointer"));
                    }
                    Step::Val(other) => {
                        return Err(self.exec_err(pos, format!("error calling len: len of type {}", other.type_name())));
                    }
                };
                Ok(Step::Val(Value::Int(n as i64)))
            }
            Builtin::Index => {
                want_args(1, false).map_err(|m| self.exec_err(pos, m))?;
                let v = self.eval_args_any(dot, args, last, span)?;
                let v: Vec<Step> = v.into_iter().map(underlying).collect();
                self.index(&v[0], &v[1..], pos)
            }
            Builtin::Slice => {
                want_args(1, false).map_err(|m| self.exec_err(pos, m))?;
                let v = self.eval_args_any(dot, args, last, span)?;
                self.slice(&v[0], &v[1..], pos)
            }
            Builtin::Print | Builtin::Printf | Builtin::Println => {
                let v: Vec<Value> =
                    self.eval_args_any(dot, args, last, span)?.into_iter().map(Step::into_value).collect();
                let s = match b {
                    Builtin::Print => sprint(&v),
                    Builtin::Println => sprintln(&v),
                    _ => {
                        let Some(Value::String(f)) = v.first() else {
                            return Err(self.exec_err(
                                pos,
                                match v.first() {
                                    None => format!("wrong number of args for {name}: want at least 1 got 0"),
                                    Some(o) => format!("wrong type for value; expected string; got {}", o.type_name()),
                                },
                            ));
                        };
                        sprintf(f, &v[1..])
                    }
                };
                Ok(Step::Val(Value::str(s)))
            }
            Builtin::Eq | Builtin::Ne | Builtin::Lt | Builtin::Le | Builtin::Gt | Builtin::Ge => {
                let v = self.eval_args_any(dot, args, last, span)?;
                let result = match b {
                    Builtin::Eq => {
                        if v.len() < 2 {
                            return Err(self.exec_err(pos, "error calling eq: missing argument for comparison"));
                        }
                        let mut any = false;
                        for other in &v[1..] {
                            if go_eq(&v[0], other).map_err(|m| self.exec_err(pos, format!("error calling eq: {m}")))? {
                                any = true;
                                break;
                            }
                        }
                        any
                    }
                    _ => {
                        want_args(2, true).map_err(|m| self.exec_err(pos, m))?;
                        let r = match b {
                            Builtin::Ne => go_eq(&v[0], &v[1]).map(|e| !e),
                            Builtin::Lt => go_lt(&v[0], &v[1]),
                            Builtin::Le => {
                                go_lt(&v[0], &v[1]).and_then(|lt| if lt { Ok(true) } else { go_eq(&v[0], &v[1]) })
                            }
                            Builtin::Gt => go_lt(&v[0], &v[1])
                                .and_then(|lt| if lt { Ok(false) } else { go_eq(&v[0], &v[1]).map(|e| !e) }),
                            _ => go_lt(&v[0], &v[1]).map(|lt| !lt),
                        };
                        let fname = match b {
                            Builtin::Ne => "ne",
                            Builtin::Lt => "lt",
                            Builtin::Le => "le",
                            Builtin::Gt => "gt",
                            _ => "ge",
                        };
                        r.map_err(|m| self.exec_err(pos, format!("error calling {fname}: {m}")))?
                    }
                };
                Ok(Step::Val(Value::Bool(result)))
            }
            Builtin::Html | Builtin::Js | Builtin::Urlquery => {
                let v: Vec<Value> =
                    self.eval_args_any(dot, args, last, span)?.into_iter().map(Step::into_value).collect();
                let s = if v.len() == 1
                    && let Value::String(s) = &v[0]
                {
                    s.to_string()
                } else {
                    sprint(&v)
                };
                Ok(Step::Val(Value::str(match b {
                    Builtin::Html => html_escape(&s),
                    Builtin::Js => js_escape(&s),
                    _ => url_query_escape(&s),
                })))
            }
            Builtin::Call => Err(self.exec_err(pos, "error calling call: call of non-function")),
        }
    }

    fn index(&self, item: &Step, indexes: &[Step], pos: usize) -> R<Step> {
        let mut cur = item.clone();
        if matches!(cur, Step::Invalid) {
            return Err(self.exec_err(pos, "error calling index: index of untyped nil"));
        }
        for idx in indexes {
            let idx = idx.clone().into_value();
            cur = match cur {
                Step::Invalid | Step::Val(Value::Nil) => {
                    return Err(self.exec_err(pos, "error calling index: index of nil pointer"));
                }
                Step::Val(Value::Map(m)) => match idx {
                    Value::String(k) => Step::Val(m.borrow().get(&*k).cloned().unwrap_or(Value::Nil)),
                    Value::Nil => {
                        return Err(self.exec_err(pos, "error calling index: value is nil; should be of type string"));
                    }
                    other => {
                        return Err(self.exec_err(
                            pos,
                            format!("error calling index: value has type {}; should be string", other.type_name()),
                        ));
                    }
                },
                Step::Val(Value::List(l)) => {
                    let i = self.int_index(&idx, l.len(), pos)?;
                    Step::Val(l[i].clone())
                }
                Step::Val(Value::Bytes(b)) => {
                    let i = self.int_index(&idx, b.len(), pos)?;
                    Step::Val(Value::Int(i64::from(b[i])))
                }
                Step::Val(Value::String(s)) => {
                    let i = self.int_index(&idx, s.len(), pos)?;
                    Step::Val(Value::Int(i64::from(s.as_bytes()[i])))
                }
                Step::Val(other) => {
                    return Err(self.exec_err(
                        pos,
                        format!("error calling index: can't index item of type {}", other.type_name()),
                    ));
                }
            };
        }
        Ok(cur)
    }

    fn int_index(&self, idx: &Value, len: usize, pos: usize) -> R<usize> {
        let i = match idx {
            Value::Int(i) | Value::Int64(i) => *i,
            Value::Nil => return Err(self.exec_err(pos, "error calling index: cannot index slice/array with nil")),
            other => {
                return Err(self.exec_err(
                    pos,
                    format!("error calling index: cannot index slice/array with type {}", other.type_name()),
                ));
            }
        };
        if i < 0 || i as usize >= len {
            return Err(self.exec_err(pos, format!("error calling index: index out of range: {i}")));
        }
        Ok(i as usize)
    }

    fn slice(&self, item: &Step, indexes: &[Step], pos: usize) -> R<Step> {
        let err = |m: String| self.exec_err(pos, format!("error calling slice: {m}"));
        let v = match item {
            Step::Invalid | Step::Val(Value::Nil) => return Err(err("slice of untyped nil".into())),
            Step::Val(v) => v,
        };
        if indexes.len() > 3 {
            return Err(err(format!("too many slice indexes: {}", indexes.len())));
        }
        let len = match v {
            Value::String(s) => s.len(),
            Value::List(l) => l.len(),
            Value::Bytes(b) => b.len(),
            other => return Err(err(format!("can't slice item of type {}", other.type_name()))),
        };
        if matches!(v, Value::String(_)) && indexes.len() == 3 {
            return Err(err("cannot 3-index slice a string".into()));
        }
        let mut idx = [0usize, len, len];
        for (i, s) in indexes.iter().enumerate() {
            match s {
                Step::Val(Value::Int(n)) | Step::Val(Value::Int64(n)) => {
                    if *n < 0 || *n as usize > len {
                        return Err(err(format!("index out of range: {n}")));
                    }
                    idx[i] = *n as usize;
                }
                other => {
                    return Err(err(format!(
                        "cannot index slice/array with type {}",
                        other.clone().into_value().type_name()
                    )));
                }
            }
        }
        if idx[0] > idx[1] {
            return Err(err(format!("invalid slice index: {} > {}", idx[0], idx[1])));
        }
        Ok(Step::Val(match v {
            Value::String(s) => Value::str(s.get(idx[0]..idx[1]).unwrap_or_default()),
            Value::List(l) => Value::list(l[idx[0]..idx[1]].to_vec()),
            Value::Bytes(b) => Value::Bytes(Rc::from(&b[idx[0]..idx[1]])),
            _ => Value::Nil,
        }))
    }
}

impl Host for State<'_> {
    fn include(&mut self, name: &str, data: &Value) -> Result<String, FuncError> {
        match self.run_template(name, Step::from_value(data.clone()), None) {
            Ok(s) => Ok(s),
            Err(e) => Err(self.keep_nested(e)),
        }
    }

    fn tpl(&mut self, text: &str, data: &Value) -> Result<String, FuncError> {
        // Helm parses the text into a copy of the set, under one fixed name.
        let mut set = self.set.clone();
        if let Err(e) = set.add(TPL_NAME, text, self.funcs) {
            return Err(FuncError::msg(e.to_string()));
        }
        let saved = std::mem::replace(&mut self.set, set);
        let result = self.run_template(TPL_NAME, Step::from_value(data.clone()), None);
        self.set = saved;
        result.map_err(|e| self.keep_nested(e))
    }

    fn rng(&mut self) -> &mut dyn rand::RngCore {
        &mut self.rng
    }

    fn now(&self) -> jiff::Zoned {
        self.opts.now.clone()
    }
}

/// The name `tpl` parses its text under (Helm's engine template name).
pub const TPL_NAME: &str = "gotpl";

impl State<'_> {
    fn keep_nested(&mut self, e: TemplateError) -> FuncError {
        let err = match e.kind {
            TemplateErrorKind::Limit => FuncError::Limit(e.message.clone()),
            TemplateErrorKind::Fail => FuncError::Fail(e.message.clone()),
            _ => FuncError::Message(e.to_string()),
        };
        self.nested = Some(e);
        err
    }
}

/// A slice or map type with methods, as its elements.
fn underlying(s: Step) -> Step {
    match s {
        Step::Val(Value::Object(o)) => match o.elements() {
            Some(v) => Step::Val(v),
            None => Step::Val(Value::Object(o)),
        },
        s => s,
    }
}

fn param_type(p: Param) -> &'static str {
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

fn param_word(p: Param) -> &'static str {
    match p {
        Param::Int | Param::Int64 => "integer",
        Param::Float64 => "float",
        other => param_type(other),
    }
}

/// The text of the action at `pos`, for error messages (Go prints the node).
fn context_at(text: &str, pos: usize) -> String {
    let rest = text.get(pos..).unwrap_or_default();
    let end = rest.find("}}").unwrap_or(rest.len()).min(rest.find('\n').unwrap_or(rest.len()));
    let s = rest[..end].trim().trim_end_matches('-').trim();
    if s.len() > 60 {
        let mut cut = 60;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}...", &s[..cut])
    } else {
        s.to_string()
    }
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

fn basic_kind(v: &Step) -> Kind {
    match v {
        Step::Invalid | Step::Val(Value::Nil) => Kind::Invalid,
        Step::Val(Value::Bool(_)) => Kind::Bool,
        Step::Val(Value::Int(_) | Value::Int64(_)) => Kind::Int,
        Step::Val(Value::Float(_)) => Kind::Float,
        Step::Val(Value::String(_)) => Kind::String,
        _ => Kind::Other,
    }
}

/// Go's `eq` for two arguments.
fn go_eq(a: &Step, b: &Step) -> Result<bool, String> {
    let (ka, kb) = (basic_kind(a), basic_kind(b));
    if ka != kb {
        if ka != Kind::Invalid && kb != Kind::Invalid {
            return Err(format!("incompatible types for comparison: {} and {}", kind_type(a), kind_type(b)));
        }
        return Ok(false);
    }
    Ok(match (a, b) {
        (Step::Val(Value::Bool(x)), Step::Val(Value::Bool(y))) => x == y,
        (Step::Val(Value::Int(x) | Value::Int64(x)), Step::Val(Value::Int(y) | Value::Int64(y))) => x == y,
        (Step::Val(Value::Float(x)), Step::Val(Value::Float(y))) => x == y,
        (Step::Val(Value::String(x)), Step::Val(Value::String(y))) => x == y,
        (Step::Invalid | Step::Val(Value::Nil), Step::Invalid | Step::Val(Value::Nil)) => true,
        (Step::Val(x), _) => return Err(format!("non-comparable type {}: {}", format_value(x), x.type_name())),
        _ => false,
    })
}

fn kind_type(v: &Step) -> String {
    match v {
        Step::Invalid => "<nil>".into(),
        Step::Val(v) => v.type_name(),
    }
}

/// Go's `lt`.
fn go_lt(a: &Step, b: &Step) -> Result<bool, String> {
    let (ka, kb) = (basic_kind(a), basic_kind(b));
    if ka != kb {
        return Err(format!("incompatible types for comparison: {} and {}", kind_type(a), kind_type(b)));
    }
    match (a, b) {
        (Step::Val(Value::Int(x) | Value::Int64(x)), Step::Val(Value::Int(y) | Value::Int64(y))) => Ok(x < y),
        (Step::Val(Value::Float(x)), Step::Val(Value::Float(y))) => Ok(x < y),
        (Step::Val(Value::String(x)), Step::Val(Value::String(y))) => Ok(x < y),
        _ => Err("invalid type for comparison".into()),
    }
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn js_escape(s: &str) -> String {
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
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn url_query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
