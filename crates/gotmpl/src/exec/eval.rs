//! Evaluating pipelines, commands and arguments: constants, variables, field
//! chains on maps and objects (with their methods), and Go's argument conversion.

use super::*;

impl Exec<'_> {
    pub(super) fn eval_pipeline(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, pipe: &Pipe) -> R<Value> {
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

    pub(super) fn not_a_function(&self, cx: &Cx, cmd: &Cmd, fin: &Option<Value>) -> R<()> {
        if cmd.args.len() > 1 || fin.is_some() {
            let a = &cmd.args[0];
            return Err(self.err(cx, a.pos(), a, format!("can't give argument to non-function {a}")));
        }
        Ok(())
    }

    pub(super) fn eval_command(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        cmd: &Cmd,
        fin: Option<Value>,
    ) -> R<Value> {
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

    pub(super) fn ideal_constant(&self, cx: &Cx, pos: u32, n: &Number) -> R<Value> {
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

    pub(super) fn var_value(
        &self,
        cx: &Cx,
        vars: &Vars,
        pos: u32,
        ctx: &dyn fmt::Display,
        name: &str,
    ) -> R<(Value, NilKind)> {
        for (n, v, k) in vars.iter().rev() {
            if &**n == name {
                return Ok((v.clone(), *k));
            }
        }
        Err(self.err(cx, pos, ctx, format!("undefined variable: {name}")))
    }

    pub(super) fn eval_chain_base(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, node: &Arg) -> R<Value> {
        if let Arg::Nil(pos) = node {
            return Err(self.err(cx, *pos, node, format!("indirection through explicit nil in {node}")));
        }
        self.eval_arg_any(cx, vars, dot, node)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn eval_field_chain(
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
    pub(super) fn eval_field(
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

    pub(super) fn func_error(
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
    pub(super) fn eval_arg_any(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<Value> {
        match a {
            Arg::Field(..) | Arg::Variable(..) | Arg::Chain(..) | Arg::Dot(_) => {
                self.eval_arg_kind(cx, vars, dot, a).map(|r| r.0)
            }
            _ => self.eval_arg_simple(cx, vars, dot, a),
        }
    }

    /// An argument with its static type (fields, variables, dot).
    pub(super) fn eval_arg_kind(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<(Value, NilKind)> {
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

    pub(super) fn eval_arg_simple(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg) -> R<Value> {
        match a {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Ok(Value::Nil),
            Arg::Bool(_, b) => Ok(Value::Bool(*b)),
            Arg::Number(pos, n) => self.ideal_constant(cx, *pos, n),
            Arg::String(_, _, s) => Ok(Value::str(&**s)),
            Arg::Field(..) | Arg::Variable(..) | Arg::Chain(..) => self.eval_arg_kind(cx, vars, dot, a).map(|r| r.0),
            Arg::Pipe(p) => grow(|| self.eval_pipeline(cx, vars, dot, p)),
            Arg::Identifier(pos, name, callee) => {
                let cmd = Cmd { pos: *pos, args: Box::default() };
                self.eval_function_node(cx, vars, dot, *pos, name, callee, a, &cmd, &[], None)
            }
        }
    }

    /// Evaluates an argument for a typed parameter, converting constants
    /// and checking values as Go's reflection does.
    pub(super) fn eval_arg(&mut self, cx: &Cx, vars: &mut Vars, dot: &Value, a: &Arg, p: Param) -> R<Value> {
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

    pub(super) fn const_mismatch(&self, cx: &Cx, pos: u32, a: &Arg, p: Param) -> Box<TemplateError> {
        let msg = match p {
            Param::Bool => format!("expected bool; found {a}"),
            Param::String => format!("expected string; found {a}"),
            Param::Int | Param::Int64 => format!("expected integer; found {a}"),
            Param::Float64 => format!("expected float; found {a}"),
            _ => format!("can't handle {a} for arg of type {}", param_name(p)),
        };
        self.err(cx, pos, a, msg)
    }

    pub(super) fn validate(&self, cx: &Cx, pos: u32, ctx: &dyn fmt::Display, v: Value, p: Param) -> R<Value> {
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
}
