//! Calling functions and builtins with Go's rules, and running nested
//! templates (`template`, `include`, `tpl`) under the depth and size limits.

use super::*;

impl Exec<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn eval_function(
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
    pub(super) fn eval_function_node(
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
    pub(super) fn sized(&mut self, v: Value) -> Result<Value, FuncError> {
        let size = match &v {
            Value::String(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::List(l) => l.len(),
            _ => return Ok(v),
        };
        crate::func::room(self, "result", size as u128)?;
        Ok(v)
    }

    pub(super) fn nested(&mut self, tree: &Tree, name: &str, data: &Value) -> Result<String, FuncError> {
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
