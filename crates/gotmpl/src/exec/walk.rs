//! Walking a template's nodes: text, actions, `if`/`with`, `range` with
//! `break`/`continue`, variable assignment, and the step and output limits.

use super::*;

impl Exec<'_> {
    pub(super) fn run_named(&mut self, name: &str, data: &Value) -> Result<String, TemplateError> {
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

    pub(super) fn run_tree(&mut self, tree: &Tree, name: &str, data: &Value) -> R<String> {
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

    pub(super) fn error_at(
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

    pub(super) fn err(&self, cx: &Cx, pos: u32, context: &dyn fmt::Display, msg: String) -> Box<TemplateError> {
        self.error_at(cx, pos, context, TemplateErrorKind::Exec, msg)
    }

    pub(super) fn step(&mut self, cx: &Cx, pos: u32, context: &dyn fmt::Display) -> R<()> {
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

    pub(super) fn check_output(&self, cx: &Cx, pos: u32, context: &dyn fmt::Display, out: &str) -> R<()> {
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

    pub(super) fn walk_list(
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

    pub(super) fn walk(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        node: &Node,
        out: &mut String,
    ) -> Result<(), Stop> {
        match node {
            Node::Text(start, end) => {
                out.push_str(&cx.tree.text[*start as usize..*end as usize]);
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
                        Value::Object(o) if ends_addressable(pipe) && o.addressable_string().is_some() => {
                            out.push_str(&o.addressable_string().unwrap_or_default());
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

    pub(super) fn walk_if_with(
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

    pub(super) fn walk_range(
        &mut self,
        cx: &Cx,
        vars: &mut Vars,
        dot: &Value,
        c: &Control,
        out: &mut String,
    ) -> Result<(), Stop> {
        let mark = vars.len();
        self.step(cx, c.pos, &c.pipe)?;
        let r = self.range_inner(cx, vars, dot, c, out);
        vars.truncate(mark);
        r
    }

    pub(super) fn range_inner(
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
                    .err(cx, pos, ctx, format!("range can't iterate over {}", crate::fmt::format_value(other)))
                    .into());
            }
        }
        if !ran && let Some(e) = &c.else_list {
            self.walk_list(cx, vars, dot, e, out)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn set_var(
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
}

/// Whether a pipeline's value is one Go can address when the action prints it: its last command
/// is a field chain, a variable or dot (possibly in parentheses), not a function's result. (Go
/// knows where each value came from: a variable or dot set from a function's result is not
/// addressable either; we do not track that, and such values are rare among Helm's objects.)
fn ends_addressable(pipe: &crate::parse::Pipe) -> bool {
    fn addressable(arg: &crate::parse::Arg) -> bool {
        use crate::parse::Arg;
        match arg {
            Arg::Field(..) | Arg::Variable(..) | Arg::Dot(..) => true,
            Arg::Chain(_, inner, fields) => !fields.is_empty() || addressable(inner),
            Arg::Pipe(inner) => inner.decl.is_empty() && ends_addressable(inner),
            _ => false,
        }
    }
    pipe.cmds.last().is_some_and(|cmd| cmd.args.len() == 1 && cmd.args.first().is_some_and(addressable))
}
