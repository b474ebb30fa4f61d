//! The parser of Go's `text/template`: tokens into trees, one per template
//! (the file itself and each `define`/`block` in it).
//!
//! Functions are resolved while parsing, as Go does (`function "x" not
//! defined` is a parse error), so execution never looks a name up.

use std::sync::Arc;

use super::func::{Func, FuncMap};
use super::lex::{LexError, Tok, Token, lex};

/// Go's builtin functions, evaluated by the engine itself (`and`/`or` need
/// their arguments unevaluated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    And,
    Or,
    Not,
    Len,
    Index,
    Slice,
    Print,
    Printf,
    Println,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Call,
    Html,
    Js,
    Urlquery,
}

impl Builtin {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "and" => Builtin::And,
            "or" => Builtin::Or,
            "not" => Builtin::Not,
            "len" => Builtin::Len,
            "index" => Builtin::Index,
            "slice" => Builtin::Slice,
            "print" => Builtin::Print,
            "printf" => Builtin::Printf,
            "println" => Builtin::Println,
            "eq" => Builtin::Eq,
            "ne" => Builtin::Ne,
            "lt" => Builtin::Lt,
            "le" => Builtin::Le,
            "gt" => Builtin::Gt,
            "ge" => Builtin::Ge,
            "call" => Builtin::Call,
            "html" => Builtin::Html,
            "js" => Builtin::Js,
            "urlquery" => Builtin::Urlquery,
            _ => return None,
        })
    }
}

/// A function a command calls.
#[derive(Clone)]
pub(crate) enum FuncRef {
    Builtin(Builtin),
    User(Func),
}

/// A number constant with the interpretations Go allows for its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Number {
    pub text: Arc<str>,
    pub int: Option<i64>,
    pub float: Option<f64>,
    /// Go passes it as a `float64` to an `interface{}` parameter (the text
    /// has a fraction or an exponent), otherwise as an `int`.
    pub prefers_float: bool,
}

/// An operand of a command.
#[derive(Clone)]
pub(crate) enum Term {
    Dot,
    Nil,
    Bool(bool),
    Str(Arc<str>),
    Num(Number),
    /// `.a.b`
    Field(Vec<Arc<str>>),
    /// `$x.a.b`
    Var(Arc<str>, Vec<Arc<str>>),
    /// A function name.
    Func(Arc<str>, FuncRef),
    /// `(pipeline)`
    Pipe(Box<Pipe>),
    /// `(pipeline).a.b` or `true.a`
    Chain(Box<Term>, Vec<Arc<str>>),
}

/// An operand and its position.
#[derive(Clone)]
pub(crate) struct Arg {
    /// Where Go reports the node.
    pub pos: usize,
    /// The node's text, for error messages.
    pub span: (usize, usize),
    pub term: Term,
}

/// One command of a pipeline: a function (or value) and its arguments.
#[derive(Clone)]
pub(crate) struct Cmd {
    pub pos: usize,
    pub span: (usize, usize),
    pub args: Vec<Arg>,
}

/// A pipeline, possibly declaring or assigning variables.
#[derive(Clone)]
pub(crate) struct Pipe {
    pub pos: usize,
    pub decl: Vec<Arc<str>>,
    /// `=` rather than `:=`.
    pub assign: bool,
    pub cmds: Vec<Cmd>,
}

#[derive(Clone)]
pub(crate) enum Node {
    Text(Arc<str>),
    Action(Pipe),
    If { pipe: Pipe, then: Vec<Node>, els: Option<Vec<Node>> },
    With { pipe: Pipe, then: Vec<Node>, els: Option<Vec<Node>> },
    Range { pipe: Pipe, body: Vec<Node>, els: Option<Vec<Node>> },
    Template { pos: usize, name: Arc<str>, pipe: Option<Pipe> },
    Break,
    Continue,
}

/// A parsed template.
pub(crate) struct Tree {
    /// The template's name (a file, or a `define`d name).
    pub name: Arc<str>,
    /// The file it was parsed from: positions are offsets into `text`.
    pub parse_name: Arc<str>,
    pub text: Arc<str>,
    pub root: Vec<Node>,
}

impl Tree {
    /// Go's `line:col` of a position (the column is the byte offset in the line).
    pub fn line_col(&self, pos: usize) -> (usize, usize) {
        line_col(&self.text, pos)
    }

    /// Whether the template is only white space (Go does not let such a
    /// definition replace a non-empty one).
    pub fn is_empty(&self) -> bool {
        self.root.iter().all(|n| matches!(n, Node::Text(t) if t.trim().is_empty()))
    }
}

pub(crate) fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(text.len());
    let before = &text[..pos];
    let line = 1 + before.matches('\n').count();
    let col = match before.rfind('\n') {
        Some(i) => pos - i - 1,
        None => pos,
    };
    (line, col)
}

/// A parse error: where and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParseError {
    pub pos: usize,
    pub message: String,
}

impl From<LexError> for ParseError {
    fn from(e: LexError) -> Self {
        ParseError { pos: e.pos, message: e.message }
    }
}

/// What ended a list of nodes.
enum Stop {
    Eof,
    End(usize),
    Else(usize),
}

struct Parser<'a> {
    tokens: Vec<Token>,
    at: usize,
    funcs: &'a FuncMap,
    /// Declared variables, innermost last.
    vars: Vec<Arc<str>>,
    range_depth: usize,
    text: Arc<str>,
    parse_name: Arc<str>,
    defines: Vec<Tree>,
    eof_pos: usize,
}

/// Parses `text` as template `name`: its own tree first, then its `define`s.
pub(crate) fn parse(name: &str, text: &str, funcs: &FuncMap) -> Result<Vec<Tree>, ParseError> {
    let tokens = lex(text)?;
    let text: Arc<str> = text.into();
    let mut p = Parser {
        tokens,
        at: 0,
        funcs,
        vars: vec!["$".into()],
        range_depth: 0,
        text: text.clone(),
        parse_name: name.into(),
        defines: Vec::new(),
        eof_pos: text.len(),
    };
    let (root, end) = p.list(true)?;
    match end {
        Stop::Eof => {}
        Stop::End(pos) => return Err(ParseError { pos, message: "unexpected {{end}}".into() }),
        Stop::Else(pos) => return Err(ParseError { pos, message: "unexpected {{else}}".into() }),
    }
    let mut trees = vec![Tree { name: name.into(), parse_name: name.into(), text, root }];
    trees.append(&mut p.defines);
    Ok(trees)
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn peek_at(&self, n: usize) -> Option<&Token> {
        self.tokens.get(self.at + n)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn pos(&self) -> usize {
        self.peek().map(|t| t.pos).unwrap_or(self.eof_pos)
    }

    fn err<T>(&self, pos: usize, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError { pos, message: message.into() })
    }

    fn expect_close(&mut self, context: &str) -> Result<(), ParseError> {
        match self.next() {
            Some(Token { tok: Tok::Close, .. }) => Ok(()),
            Some(t) => self.err(t.pos, format!("unexpected {} in {context}", describe(&t.tok))),
            None => self.err(self.eof_pos, "unexpected EOF"),
        }
    }

    /// Parses nodes until EOF, `{{end}}` or `{{else}}` (the latter two consumed
    /// up to, not including, what follows the keyword).
    fn list(&mut self, top: bool) -> Result<(Vec<Node>, Stop), ParseError> {
        let mut nodes = Vec::new();
        loop {
            let Some(tok) = self.next() else { return Ok((nodes, Stop::Eof)) };
            match tok.tok {
                Tok::Text(t) => nodes.push(Node::Text(t)),
                Tok::Open => {
                    let kw = match self.peek() {
                        Some(Token { tok: Tok::Ident(name), .. }) => Some(name.clone()),
                        _ => None,
                    };
                    let kw_pos = self.pos();
                    match kw.as_deref() {
                        Some("end") => {
                            self.at += 1;
                            self.expect_close("end")?;
                            return Ok((nodes, Stop::End(kw_pos)));
                        }
                        Some("else") => {
                            self.at += 1;
                            return Ok((nodes, Stop::Else(kw_pos)));
                        }
                        Some("if") => {
                            self.at += 1;
                            nodes.push(self.control(Ctl::If)?);
                        }
                        Some("with") => {
                            self.at += 1;
                            nodes.push(self.control(Ctl::With)?);
                        }
                        Some("range") => {
                            self.at += 1;
                            nodes.push(self.control(Ctl::Range)?);
                        }
                        Some("define") => {
                            if !top {
                                return self.err(kw_pos, "unexpected <define> in command");
                            }
                            self.at += 1;
                            self.define(kw_pos)?;
                        }
                        Some("template") => {
                            self.at += 1;
                            nodes.push(self.template(kw_pos)?);
                        }
                        Some("block") => {
                            self.at += 1;
                            nodes.push(self.block(kw_pos)?);
                        }
                        Some("break") | Some("continue") => {
                            self.at += 1;
                            if self.range_depth == 0 {
                                return self
                                    .err(kw_pos, format!("{{{{{}}}}} outside {{{{range}}}}", kw.unwrap_or_default()));
                            }
                            self.expect_close(kw.as_deref().unwrap_or(""))?;
                            nodes.push(if kw.as_deref() == Some("break") { Node::Break } else { Node::Continue });
                        }
                        _ => {
                            let pipe = self.pipeline("command", false)?;
                            nodes.push(Node::Action(pipe));
                        }
                    }
                }
                other => return self.err(tok.pos, format!("unexpected {}", describe(&other))),
            }
        }
    }

    fn control(&mut self, ctl: Ctl) -> Result<Node, ParseError> {
        let mark = self.vars.len();
        let pipe = self.pipeline(ctl.name(), ctl == Ctl::Range)?;
        if ctl == Ctl::Range {
            self.range_depth += 1;
        }
        let (then, end) = self.list(false)?;
        if ctl == Ctl::Range {
            self.range_depth -= 1;
        }
        let els = match end {
            Stop::Eof => return self.err(self.eof_pos, "unexpected EOF"),
            Stop::End(_) => None,
            Stop::Else(pos) => {
                // `{{else if ...}}` / `{{else with ...}}`: a nested control that
                // shares this one's `{{end}}`.
                let chained = match (ctl, self.peek()) {
                    (Ctl::If, Some(Token { tok: Tok::Ident(n), .. })) if &**n == "if" => true,
                    (Ctl::With, Some(Token { tok: Tok::Ident(n), .. })) if &**n == "with" => true,
                    _ => false,
                };
                if chained {
                    self.at += 1;
                    let nested = self.control(ctl)?;
                    Some(vec![nested])
                } else {
                    self.expect_close("else").map_err(|e| ParseError { pos, ..e })?;
                    let (els, end) = self.list(false)?;
                    match end {
                        Stop::End(_) => {}
                        Stop::Else(p) => return self.err(p, "expected end; found {{else}}"),
                        Stop::Eof => return self.err(self.eof_pos, "unexpected EOF"),
                    }
                    Some(els)
                }
            }
        };
        self.vars.truncate(mark);
        Ok(match ctl {
            Ctl::If => Node::If { pipe, then, els },
            Ctl::With => Node::With { pipe, then, els },
            Ctl::Range => Node::Range { pipe, body: then, els },
        })
    }

    fn template_name(&mut self, context: &str) -> Result<Arc<str>, ParseError> {
        match self.next() {
            Some(Token { tok: Tok::Str(s), .. }) => Ok(s),
            Some(t) => self.err(t.pos, format!("unexpected {} in {context} clause", describe(&t.tok))),
            None => self.err(self.eof_pos, "unexpected EOF"),
        }
    }

    fn template(&mut self, pos: usize) -> Result<Node, ParseError> {
        let name = self.template_name("template")?;
        let pipe = if matches!(self.peek(), Some(Token { tok: Tok::Close, .. })) {
            self.at += 1;
            None
        } else {
            Some(self.pipeline("template", false)?)
        };
        Ok(Node::Template { pos, name, pipe })
    }

    fn define(&mut self, pos: usize) -> Result<(), ParseError> {
        let name = self.template_name("define")?;
        self.expect_close("define")?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let (root, end) = self.list(false)?;
        self.vars = saved;
        match end {
            Stop::End(_) => {}
            Stop::Else(p) => return self.err(p, "unexpected {{else}}"),
            Stop::Eof => return self.err(pos, "unexpected EOF"),
        }
        self.defines.push(Tree { name, parse_name: self.parse_name.clone(), text: self.text.clone(), root });
        Ok(())
    }

    fn block(&mut self, pos: usize) -> Result<Node, ParseError> {
        let name = self.template_name("block")?;
        let pipe = self.pipeline("block", false)?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let (root, end) = self.list(false)?;
        self.vars = saved;
        match end {
            Stop::End(_) => {}
            Stop::Else(p) => return self.err(p, "unexpected {{else}}"),
            Stop::Eof => return self.err(pos, "unexpected EOF"),
        }
        self.defines.push(Tree {
            name: name.clone(),
            parse_name: self.parse_name.clone(),
            text: self.text.clone(),
            root,
        });
        Ok(Node::Template { pos, name, pipe: Some(pipe) })
    }

    /// A pipeline up to and including `}}` (or `)` when `in_paren`, handled
    /// by `paren_pipeline`).
    fn pipeline(&mut self, context: &str, range: bool) -> Result<Pipe, ParseError> {
        let pos = self.pos();
        let mut decl = Vec::new();
        let mut assign = false;
        // `$x :=`, `$x =`, `$i, $v :=` (the latter in range only).
        if let Some(Token { tok: Tok::Var(name, fields), .. }) = self.peek()
            && fields.is_empty()
        {
            let name = name.clone();
            match self.peek_at(1).map(|t| &t.tok) {
                Some(Tok::Declare) | Some(Tok::Assign) => {
                    let is_assign = matches!(self.peek_at(1).map(|t| &t.tok), Some(Tok::Assign));
                    self.at += 2;
                    decl.push(name);
                    assign = is_assign;
                }
                Some(Tok::Comma) if range => {
                    if let Some(Token { tok: Tok::Var(second, f2), .. }) = self.peek_at(2)
                        && f2.is_empty()
                        && matches!(self.peek_at(3).map(|t| &t.tok), Some(Tok::Declare) | Some(Tok::Assign))
                    {
                        let second = second.clone();
                        assign = matches!(self.peek_at(3).map(|t| &t.tok), Some(Tok::Assign));
                        self.at += 4;
                        decl.push(name);
                        decl.push(second);
                    } else {
                        return self.err(pos, "range can only initialize variables");
                    }
                }
                Some(Tok::Comma) => return self.err(pos, format!("too many declarations in {context}")),
                _ => {}
            }
        }
        if assign {
            for v in &decl {
                if !self.vars.contains(v) {
                    return self.err(pos, format!("undefined variable \"{v}\""));
                }
            }
        }
        let cmds = self.commands(context, false)?;
        if !assign {
            self.vars.extend(decl.iter().cloned());
        }
        if cmds.is_empty() {
            return self.err(pos, format!("missing value for {context}"));
        }
        Ok(Pipe { pos, decl, assign, cmds })
    }

    /// Commands separated by `|`, up to `}}` (or `)` when `in_paren`), consumed.
    fn commands(&mut self, context: &str, in_paren: bool) -> Result<Vec<Cmd>, ParseError> {
        let mut cmds = Vec::new();
        loop {
            let cmd_pos = self.pos();
            let mut args = Vec::new();
            loop {
                let Some(tok) = self.peek().cloned() else {
                    return self.err(self.eof_pos, "unexpected EOF");
                };
                match tok.tok {
                    Tok::Close if !in_paren => {
                        self.at += 1;
                        if args.is_empty() && !cmds.is_empty() {
                            return self.err(tok.pos, "missing command");
                        }
                        if !args.is_empty() {
                            let span = (cmd_pos, args.last().map(|a: &Arg| a.span.1).unwrap_or(cmd_pos));
                            cmds.push(Cmd { pos: cmd_pos, span, args });
                        }
                        return Ok(cmds);
                    }
                    Tok::RParen if in_paren => {
                        self.at += 1;
                        if args.is_empty() {
                            return self.err(tok.pos, "missing command");
                        }
                        let span = (cmd_pos, args.last().map(|a: &Arg| a.span.1).unwrap_or(cmd_pos));
                        cmds.push(Cmd { pos: cmd_pos, span, args });
                        return Ok(cmds);
                    }
                    Tok::Pipe => {
                        self.at += 1;
                        if args.is_empty() {
                            return self.err(tok.pos, "missing command");
                        }
                        let span = (cmd_pos, args.last().map(|a: &Arg| a.span.1).unwrap_or(cmd_pos));
                        cmds.push(Cmd { pos: cmd_pos, span, args });
                        break;
                    }
                    _ => {
                        if !args.is_empty() && !tok.space_before && !matches!(tok.tok, Tok::ChainFields(_)) {
                            return self
                                .err(tok.pos, format!("missing space? unexpected {} in operand", describe(&tok.tok)));
                        }
                        let arg = self.operand(context)?;
                        args.push(arg);
                    }
                }
            }
        }
    }

    fn operand(&mut self, context: &str) -> Result<Arg, ParseError> {
        let Some(tok) = self.next() else { return self.err(self.eof_pos, "unexpected EOF") };
        let pos = tok.pos;
        let go_pos = tok.go_pos;
        let start = tok.pos;
        let term = match tok.tok {
            Tok::Dot => Term::Dot,
            Tok::Nil => Term::Nil,
            Tok::Bool(b) => Term::Bool(b),
            Tok::Str(s) => Term::Str(s),
            Tok::Number(text) => Term::Num(
                number(&text).ok_or_else(|| ParseError { pos, message: format!("illegal number syntax: {text:?}") })?,
            ),
            Tok::Char(c) => Term::Num(Number {
                text: format!("{c}").into(),
                int: Some(i64::from(c)),
                float: Some(f64::from(c)),
                prefers_float: false,
            }),
            Tok::Field(fields) => Term::Field(fields),
            Tok::Var(name, fields) => {
                if !self.vars.contains(&name) {
                    return self.err(pos, format!("undefined variable \"{name}\""));
                }
                Term::Var(name, fields)
            }
            Tok::Ident(name) => {
                if let Some(f) = self.funcs.get(&name) {
                    Term::Func(name, FuncRef::User(f.clone()))
                } else if let Some(b) = Builtin::from_name(&name) {
                    Term::Func(name, FuncRef::Builtin(b))
                } else {
                    return self.err(pos, format!("function \"{name}\" not defined"));
                }
            }
            Tok::LParen => {
                let cmds = self.commands(context, true)?;
                Term::Pipe(Box::new(Pipe { pos, decl: Vec::new(), assign: false, cmds }))
            }
            other => return self.err(pos, format!("unexpected {} in operand", describe(&other))),
        };
        let end = self.tokens.get(self.at.wrapping_sub(1)).map(|t| t.end).unwrap_or(start);
        if let Some(Token { tok: Tok::ChainFields(fields), pos: chain_pos, end: chain_end, .. }) = self.peek() {
            let (fields, chain_pos, chain_end) = (fields.clone(), *chain_pos, *chain_end);
            self.at += 1;
            match term {
                Term::Func(name, _) => {
                    return self.err(pos, format!("unexpected . after term \"{name}\""));
                }
                Term::Nil => return self.err(pos, "nil is not a command"),
                _ => {
                    return Ok(Arg {
                        pos: chain_pos,
                        span: (start, chain_end),
                        term: Term::Chain(Box::new(term), fields),
                    });
                }
            }
        }
        Ok(Arg { pos: go_pos, span: (start, end), term })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctl {
    If,
    With,
    Range,
}

impl Ctl {
    fn name(self) -> &'static str {
        match self {
            Ctl::If => "if",
            Ctl::With => "with",
            Ctl::Range => "range",
        }
    }
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Text(_) => "text".into(),
        Tok::Open => "\"{{\"".into(),
        Tok::Close => "\"}}\"".into(),
        Tok::Dot => "<.>".into(),
        Tok::Field(f) | Tok::ChainFields(f) => format!("<.{}>", f.join(".")),
        Tok::Var(n, _) => format!("<{n}>"),
        Tok::Ident(n) => format!("<{n}>"),
        Tok::Str(s) => format!("{s:?}"),
        Tok::Number(n) => format!("<{n}>"),
        Tok::Char(c) => format!("<{c}>"),
        Tok::Bool(b) => format!("<{b}>"),
        Tok::Nil => "<nil>".into(),
        Tok::Pipe => "\"|\"".into(),
        Tok::LParen => "\"(\"".into(),
        Tok::RParen => "\")\"".into(),
        Tok::Declare => "\":=\"".into(),
        Tok::Assign => "\"=\"".into(),
        Tok::Comma => "\",\"".into(),
    }
}

/// Go's reading of a number constant: which of int and float64 it can be.
pub(crate) fn number(text: &str) -> Option<Number> {
    let clean: String = text.chars().filter(|c| *c != '_').collect();
    if clean.ends_with('i') {
        return None; // complex constants: not supported by Helm's values anyway
    }
    let (neg, body) = match clean.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    let lower = body.to_ascii_lowercase();
    let radix_int = if let Some(h) = lower.strip_prefix("0x") {
        if h.contains('.') || h.contains('p') { None } else { i128::from_str_radix(h, 16).ok() }
    } else if let Some(o) = lower.strip_prefix("0o") {
        i128::from_str_radix(o, 8).ok()
    } else if let Some(b) = lower.strip_prefix("0b") {
        i128::from_str_radix(b, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit()) {
        i128::from_str_radix(&lower[1..], 8).ok()
    } else if lower.bytes().all(|b| b.is_ascii_digit()) && !lower.is_empty() {
        lower.parse::<i128>().ok()
    } else {
        None
    };
    let is_hex = lower.starts_with("0x");
    let prefers_float = !is_hex && lower.contains(['.', 'e', 'p']);
    let mut n = Number { text: text.into(), int: None, float: None, prefers_float };
    if let Some(v) = radix_int {
        let v = if neg { -v } else { v };
        if let Ok(i) = i64::try_from(v) {
            n.int = Some(i);
        }
        n.float = Some(v as f64);
        return Some(n);
    }
    let f: f64 = if is_hex { parse_hex_float(&lower)? } else { lower.parse().ok()? };
    let f = if neg { -f } else { f };
    n.float = Some(f);
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        n.int = Some(f as i64);
    }
    Some(n)
}

fn parse_hex_float(lower: &str) -> Option<f64> {
    let h = lower.strip_prefix("0x")?;
    let (mant, exp) = h.split_once('p')?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    let e: i32 = exp.parse().ok()?;
    Some(v * 2f64.powi(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> String {
        match parse("t", text, &FuncMap::new()) {
            Err(e) => e.message,
            Ok(_) => panic!("{text:?} parsed"),
        }
    }

    #[test]
    fn numbers_are_read_as_go_reads_them() {
        let n = number("1").expect("int");
        assert_eq!((n.int, n.float, n.prefers_float), (Some(1), Some(1.0), false));
        let n = number("1.0").expect("float");
        assert_eq!((n.int, n.float, n.prefers_float), (Some(1), Some(1.0), true));
        let n = number("1.5").expect("float");
        assert_eq!((n.int, n.prefers_float), (None, true));
        assert_eq!(number("0x1F").and_then(|n| n.int), Some(31));
        assert_eq!(number("0o17").and_then(|n| n.int), Some(15));
        assert_eq!(number("017").and_then(|n| n.int), Some(15));
        assert_eq!(number("1_000").and_then(|n| n.int), Some(1000));
        assert_eq!(number("-2e3").and_then(|n| n.int), Some(-2000));
    }

    #[test]
    fn parse_errors_are_worded_as_go_words_them() {
        assert_eq!(parse_err("{{ foo }}"), "function \"foo\" not defined");
        assert_eq!(parse_err("{{ if 1 }}x"), "unexpected EOF");
        assert_eq!(parse_err("{{ end }}"), "unexpected {{end}}");
        assert_eq!(parse_err("{{ $x }}"), "undefined variable \"$x\"");
        assert_eq!(parse_err("{{ break }}"), "{{break}} outside {{range}}");
        assert_eq!(parse_err("{{ if }}{{ end }}"), "missing value for if");
    }

    #[test]
    fn variables_go_out_of_scope_at_end() {
        assert!(parse("t", "{{ if 1 }}{{ $x := 1 }}{{ end }}{{ $x }}", &FuncMap::new()).is_err());
        assert!(parse("t", "{{ $x := 1 }}{{ if 1 }}{{ $x = 2 }}{{ end }}{{ $x }}", &FuncMap::new()).is_ok());
    }

    #[test]
    fn defines_become_their_own_trees() {
        let trees =
            parse("f", r#"{{ define "a" }}A{{ end }}{{ block "b" . }}B{{ end }}"#, &FuncMap::new()).expect("parses");
        let names: Vec<&str> = trees.iter().map(|t| &*t.name).collect();
        assert_eq!(names, ["f", "a", "b"]);
    }

    #[test]
    fn line_and_column_of_a_position() {
        assert_eq!(line_col("ab\ncd", 4), (2, 1));
        assert_eq!(line_col("ab", 1), (1, 1));
    }
}
