//! Go's template parser (text/template/parse/parse.go and node.go): the
//! syntax tree, parse errors worded as Go words them, and [`Templates`], a
//! set of parsed templates sharing their `define`s.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::builtins::Builtin;
use super::exec::{TemplateError, TemplateErrorKind};
use super::func::{Func, FuncMap};
use super::lex::{Tok, Token, lex};

/// A parsed template: its body and where it came from.
pub struct Tree {
    /// The file the template was parsed from (Go's `ParseName`).
    pub parse_name: Arc<str>,
    /// That file's text, for line and column numbers.
    pub text: Arc<str>,
    pub root: Vec<Node>,
}

impl Tree {
    /// (line, column) of a byte offset, as Go's `ErrorContext` counts them
    /// (1-based line, 0-based byte column).
    pub fn line_col(&self, pos: u32) -> (usize, usize) {
        line_col(&self.text, pos as usize)
    }
}

pub fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(text.len());
    let before = &text.as_bytes()[..pos];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
    let col = match before.iter().rposition(|&b| b == b'\n') {
        Some(nl) => pos - nl - 1,
        None => pos,
    };
    (line, col)
}

pub enum Node {
    Text(Arc<str>),
    Action(Pipe),
    If(Box<Control>),
    Range(Box<Control>),
    With(Box<Control>),
    Template { pos: u32, name: Arc<str>, pipe: Option<Pipe> },
    Break,
    Continue,
}

pub struct Control {
    pub pos: u32,
    pub pipe: Pipe,
    pub list: Vec<Node>,
    pub else_list: Option<Vec<Node>>,
}

pub struct Pipe {
    pub pos: u32,
    pub is_assign: bool,
    pub decl: Vec<Arc<str>>,
    pub cmds: Vec<Cmd>,
}

pub struct Cmd {
    pub pos: u32,
    pub args: Vec<Arg>,
}

/// A function an identifier names, resolved when parsing.
#[derive(Clone)]
pub enum Callee {
    Builtin(Builtin),
    User(Func),
}

pub struct Number {
    pub text: Arc<str>,
    pub int: Option<i64>,
    pub float: Option<f64>,
    /// A rune constant (`'a'`).
    pub is_char: bool,
}

pub enum Arg {
    Dot(u32),
    Nil(u32),
    Bool(u32, bool),
    Number(u32, Box<Number>),
    /// (pos, quoted text as written, value)
    String(u32, Arc<str>, Arc<str>),
    Field(u32, Vec<Arc<str>>),
    /// `$x.a.b`: name (with `$`), then fields.
    Variable(u32, Arc<str>, Vec<Arc<str>>),
    Identifier(u32, Arc<str>, Callee),
    Pipe(Box<Pipe>),
    /// `(pipeline).a.b`
    Chain(u32, Box<Arg>, Vec<Arc<str>>),
}

impl Arg {
    pub fn pos(&self) -> u32 {
        match self {
            Arg::Dot(p)
            | Arg::Nil(p)
            | Arg::Bool(p, _)
            | Arg::Number(p, _)
            | Arg::String(p, _, _)
            | Arg::Field(p, _)
            | Arg::Variable(p, _, _)
            | Arg::Identifier(p, _, _)
            | Arg::Chain(p, _, _) => *p,
            Arg::Pipe(pipe) => pipe.pos,
        }
    }
}

impl fmt::Display for Arg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arg::Dot(_) => f.write_str("."),
            Arg::Nil(_) => f.write_str("nil"),
            Arg::Bool(_, b) => write!(f, "{b}"),
            Arg::Number(_, n) => f.write_str(&n.text),
            Arg::String(_, q, _) => f.write_str(q),
            Arg::Field(_, idents) => {
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Variable(_, name, idents) => {
                f.write_str(name)?;
                for i in idents {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
            Arg::Identifier(_, name, _) => f.write_str(name),
            Arg::Pipe(p) => write!(f, "({p})"),
            Arg::Chain(_, node, fields) => {
                write!(f, "{node}")?;
                for i in fields {
                    write!(f, ".{i}")?;
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.decl.is_empty() {
            for (i, d) in self.decl.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                f.write_str(d)?;
            }
            f.write_str(if self.is_assign { " = " } else { " := " })?;
        }
        for (i, c) in self.cmds.iter().enumerate() {
            if i > 0 {
                f.write_str(" | ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

/// A set of parsed templates (Go's template with its associated templates).
/// Cloning is cheap; the set is `Send + Sync`.
#[derive(Clone)]
pub struct Templates {
    pub(crate) trees: Arc<HashMap<Arc<str>, Arc<Tree>>>,
    /// The set's own name (Helm: `gotpl`), used in `include`'s "no template"
    /// error and as the name of `tpl`'s templates.
    pub(crate) name: Arc<str>,
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.trees.keys().map(|k| &**k).collect();
        names.sort_unstable();
        f.debug_struct("Templates").field("name", &self.name).field("templates", &names).finish()
    }
}

impl Templates {
    pub fn new() -> Self {
        Self { trees: Arc::new(HashMap::new()), name: Arc::from("gotpl") }
    }

    /// Parses `text` as template `name` (e.g. "mychart/templates/cm.yaml"),
    /// adding its define/block templates to the set (a later definition
    /// replaces an earlier one, as in Go; an empty one never replaces).
    pub fn add(&mut self, name: &str, text: &str, funcs: &FuncMap) -> Result<(), TemplateError> {
        let parsed = parse(name, name, text, funcs)?;
        let trees = Arc::make_mut(&mut self.trees);
        for (n, tree) in parsed {
            if tree.root.iter().all(is_empty_node)
                && let Some(old) = trees.get(&n)
                && !old.root.is_empty()
            {
                continue;
            }
            trees.insert(n, tree);
        }
        Ok(())
    }

    pub fn has(&self, name: &str) -> bool {
        self.trees.contains_key(name)
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Tree>> {
        self.trees.get(name)
    }

    /// The names of the set's templates, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.trees.keys().map(|k| k.to_string()).collect();
        names.sort_unstable();
        names
    }
}

fn is_empty_node(n: &Node) -> bool {
    match n {
        Node::Text(t) => t.trim().is_empty(),
        _ => false,
    }
}

/// A template of a parse: its name and tree.
pub(crate) type Named = (Arc<str>, Arc<Tree>);

/// Parses `text` as template `name` from file `parse_name`: the template
/// itself and every template it defines.
pub(crate) fn parse(name: &str, parse_name: &str, text: &str, funcs: &FuncMap) -> Result<Vec<Named>, TemplateError> {
    let (tokens, lex_error) = lex(text);
    let text_arc: Arc<str> = Arc::from(text);
    let parse_name: Arc<str> = Arc::from(parse_name);
    let mut p = Parser {
        tokens,
        i: 0,
        lex_error,
        text,
        parse_name: parse_name.clone(),
        funcs,
        vars: vec![Arc::from("$")],
        range_depth: 0,
        defined: Vec::new(),
        last_pos: 0,
    };
    let root = p.parse_top()?;
    let mut out = Vec::with_capacity(p.defined.len() + 1);
    let mk = |root| Arc::new(Tree { parse_name: parse_name.clone(), text: text_arc.clone(), root });
    let defined = std::mem::take(&mut p.defined);
    let mut seen: HashMap<Arc<str>, bool> = HashMap::new();
    for (n, pos, list) in defined {
        let empty = list.iter().all(is_empty_node);
        if let Some(prev_empty) = seen.get(&n) {
            if !*prev_empty && !empty {
                p.last_pos = pos as usize;
                return Err(p.error(format!("template: multiple definition of template {:?}", &*n)));
            }
            if empty {
                continue;
            }
        }
        seen.insert(n.clone(), empty);
        out.retain(|(m, _): &Named| *m != n);
        out.push((n, mk(list)));
    }
    let name: Arc<str> = Arc::from(name);
    if !(root.iter().all(is_empty_node) && seen.get(&name).is_some_and(|e| !e)) {
        out.retain(|(m, _)| *m != name);
        out.push((name, mk(root)));
    }
    Ok(out)
}

struct Parser<'a, 'f> {
    tokens: Vec<Token<'a>>,
    i: usize,
    lex_error: Option<String>,
    text: &'a str,
    parse_name: Arc<str>,
    funcs: &'f FuncMap,
    vars: Vec<Arc<str>>,
    range_depth: usize,
    defined: Vec<(Arc<str>, u32, Vec<Node>)>,
    last_pos: usize,
}

/// What ended an item list.
enum End {
    End,
    Else,
}

type PResult<T> = Result<T, TemplateError>;

fn describe(t: &Token, lex_error: &Option<String>) -> String {
    match t.kind {
        Tok::Eof => "EOF".into(),
        Tok::Error => lex_error.clone().unwrap_or_default(),
        Tok::Block
        | Tok::Break
        | Tok::Continue
        | Tok::Define
        | Tok::Else
        | Tok::End
        | Tok::If
        | Tok::Range
        | Tok::Nil
        | Tok::Template
        | Tok::Dot
        | Tok::With => format!("<{}>", t.text),
        _ => {
            if t.text.chars().count() > 10 {
                let head: String = t.text.chars().take(10).collect();
                format!("{head:?}...")
            } else {
                format!("{:?}", t.text)
            }
        }
    }
}

impl<'a> Parser<'a, '_> {
    fn error(&self, msg: String) -> TemplateError {
        let (line, _) = line_col(self.text, self.last_pos);
        TemplateError {
            template: self.parse_name.to_string(),
            line,
            column: 0,
            kind: TemplateErrorKind::Parse,
            detail: msg.clone(),
            message: msg,
            origin: None,
        }
    }

    fn next(&mut self) -> Token<'a> {
        let t = self.tokens[self.i.min(self.tokens.len() - 1)];
        self.i += 1;
        self.last_pos = t.pos;
        t
    }

    fn peek(&self) -> Token<'a> {
        self.tokens[self.i.min(self.tokens.len() - 1)]
    }

    fn backup(&mut self) {
        self.i -= 1;
    }

    fn next_non_space(&mut self) -> Token<'a> {
        loop {
            let t = self.next();
            if t.kind != Tok::Space {
                return t;
            }
        }
    }

    fn peek_non_space(&mut self) -> Token<'a> {
        let t = self.next_non_space();
        self.backup();
        t
    }

    fn unexpected(&self, t: &Token, context: &str) -> TemplateError {
        if t.kind == Tok::Error {
            return self.error(describe(t, &self.lex_error));
        }
        self.error(format!("unexpected {} in {}", describe(t, &self.lex_error), context))
    }

    fn expect(&mut self, kind: Tok, context: &str) -> PResult<Token<'a>> {
        let t = self.next_non_space();
        if t.kind != kind {
            return Err(self.unexpected(&t, context));
        }
        Ok(t)
    }

    fn parse_top(&mut self) -> PResult<Vec<Node>> {
        let mut root = Vec::new();
        while self.peek().kind != Tok::Eof {
            if self.peek().kind == Tok::LeftDelim {
                let save = self.i;
                self.next();
                if self.next_non_space().kind == Tok::Define {
                    self.parse_definition()?;
                    continue;
                }
                self.i = save;
            }
            match self.text_or_action()? {
                Item::Node(n) => root.push(n),
                Item::End(End::End) => return Err(self.error("unexpected {{end}}".into())),
                Item::End(End::Else) => return Err(self.error("unexpected {{else}}".into())),
            }
        }
        Ok(root)
    }

    fn template_name(&mut self, t: &Token, context: &str) -> PResult<Arc<str>> {
        match t.kind {
            Tok::String | Tok::RawString => {
                let s = unquote(t.text).map_err(|e| self.error(e))?;
                Ok(Arc::from(s))
            }
            _ => Err(self.unexpected(t, context)),
        }
    }

    fn parse_definition(&mut self) -> PResult<()> {
        let context = "define clause";
        let t = self.next_non_space();
        let name = self.template_name(&t, context)?;
        self.expect(Tok::RightDelim, context)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec![Arc::from("$")]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if let End::Else = end {
            return Err(self.error(format!("unexpected {{{{else}}}} in {context}")));
        }
        self.defined.push((name, t.pos as u32, list));
        Ok(())
    }

    fn item_list(&mut self) -> PResult<(Vec<Node>, End)> {
        let mut list = Vec::new();
        while self.peek_non_space().kind != Tok::Eof {
            match self.text_or_action()? {
                Item::Node(n) => list.push(n),
                Item::End(e) => return Ok((list, e)),
            }
        }
        if self.peek().kind == Tok::Eof && self.lex_error.is_none() {
            return Err(self.error("unexpected EOF".into()));
        }
        Err(self.error(self.lex_error.clone().unwrap_or_else(|| "unexpected EOF".into())))
    }

    fn text_or_action(&mut self) -> PResult<Item> {
        let t = self.next_non_space();
        match t.kind {
            Tok::Text => Ok(Item::Node(Node::Text(Arc::from(t.text)))),
            Tok::LeftDelim => self.action(),
            _ => Err(self.unexpected(&t, "input")),
        }
    }

    fn action(&mut self) -> PResult<Item> {
        let t = self.next_non_space();
        match t.kind {
            Tok::Block => return self.block_control().map(Item::Node),
            Tok::Break | Tok::Continue => {
                let word = t.text;
                let n = self.next_non_space();
                if n.kind != Tok::RightDelim {
                    return Err(self.unexpected(&n, &format!("{{{{{word}}}}}")));
                }
                if self.range_depth == 0 {
                    return Err(self.error(format!("{{{{{word}}}}} outside {{{{range}}}}")));
                }
                return Ok(Item::Node(if t.kind == Tok::Break { Node::Break } else { Node::Continue }));
            }
            Tok::Else => {
                let p = self.peek_non_space();
                if p.kind == Tok::If || p.kind == Tok::With {
                    return Ok(Item::End(End::Else));
                }
                self.expect(Tok::RightDelim, "else")?;
                return Ok(Item::End(End::Else));
            }
            Tok::End => {
                self.expect(Tok::RightDelim, "end")?;
                return Ok(Item::End(End::End));
            }
            Tok::If => return self.control("if").map(|c| Item::Node(Node::If(Box::new(c)))),
            Tok::Range => return self.control("range").map(|c| Item::Node(Node::Range(Box::new(c)))),
            Tok::With => return self.control("with").map(|c| Item::Node(Node::With(Box::new(c)))),
            Tok::Template => return self.template_control().map(Item::Node),
            _ => {}
        }
        self.backup();
        let pipe = self.pipeline("command", Tok::RightDelim)?;
        Ok(Item::Node(Node::Action(pipe)))
    }

    fn control(&mut self, context: &'static str) -> PResult<Control> {
        super::exec::grow(|| self.control_inner(context))
    }

    fn control_inner(&mut self, context: &'static str) -> PResult<Control> {
        let nvars = self.vars.len();
        let pipe = self.pipeline(context, Tok::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let r = self.item_list();
        if context == "range" {
            self.range_depth -= 1;
        }
        let (list, end) = r?;
        let mut else_list = None;
        if let End::Else = end {
            let p = self.peek();
            if context == "if" && p.kind == Tok::If {
                self.next();
                let c = self.control("if")?;
                else_list = Some(vec![Node::If(Box::new(c))]);
            } else if context == "with" && p.kind == Tok::With {
                self.next();
                let c = self.control("with")?;
                else_list = Some(vec![Node::With(Box::new(c))]);
            } else {
                let (l, e) = self.item_list()?;
                if let End::Else = e {
                    return Err(self.error("expected end; found {{else}}".into()));
                }
                else_list = Some(l);
            }
        }
        self.vars.truncate(nvars);
        Ok(Control { pos: pipe.pos, pipe, list, else_list })
    }

    fn template_control(&mut self) -> PResult<Node> {
        let context = "template clause";
        let t = self.next_non_space();
        let name = self.template_name(&t, context)?;
        let pipe = if self.next_non_space().kind != Tok::RightDelim {
            self.backup();
            Some(self.pipeline(context, Tok::RightDelim)?)
        } else {
            None
        };
        Ok(Node::Template { pos: t.pos as u32, name, pipe })
    }

    fn block_control(&mut self) -> PResult<Node> {
        let context = "block clause";
        let t = self.next_non_space();
        let name = self.template_name(&t, context)?;
        let pipe = self.pipeline(context, Tok::RightDelim)?;
        let saved_vars = std::mem::replace(&mut self.vars, vec![Arc::from("$")]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let r = self.item_list();
        self.vars = saved_vars;
        self.range_depth = saved_range;
        let (list, end) = r?;
        if let End::Else = end {
            return Err(self.error(format!("unexpected {{{{else}}}} in {context}")));
        }
        self.defined.push((name.clone(), t.pos as u32, list));
        Ok(Node::Template { pos: t.pos as u32, name, pipe: Some(pipe) })
    }

    fn pipeline(&mut self, context: &str, end: Tok) -> PResult<Pipe> {
        let start = self.peek_non_space();
        let mut pipe = Pipe { pos: start.pos as u32, is_assign: false, decl: Vec::new(), cmds: Vec::new() };
        // Declarations or assignments.
        loop {
            let v = self.peek_non_space();
            if v.kind != Tok::Variable {
                break;
            }
            let save = self.i;
            self.next_non_space();
            let next = self.peek_non_space();
            match next.kind {
                Tok::Assign | Tok::Declare => {
                    pipe.is_assign = next.kind == Tok::Assign;
                    self.next_non_space();
                    pipe.decl.push(Arc::from(v.text));
                    self.vars.push(Arc::from(v.text));
                    break;
                }
                Tok::Char if next.text == "," => {
                    self.next_non_space();
                    pipe.decl.push(Arc::from(v.text));
                    self.vars.push(Arc::from(v.text));
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().kind {
                            Tok::Variable | Tok::RightDelim | Tok::RightParen => continue,
                            _ => return Err(self.error("range can only initialize variables".into())),
                        }
                    }
                    return Err(self.error(format!("too many declarations in {context}")));
                }
                _ => {
                    self.i = save;
                    break;
                }
            }
        }
        loop {
            let t = self.next_non_space();
            if t.kind == end {
                if pipe.cmds.is_empty() {
                    return Err(self.error(format!("missing value for {context}")));
                }
                for (i, c) in pipe.cmds.iter().enumerate().skip(1) {
                    if matches!(
                        c.args.first(),
                        Some(Arg::Bool(..) | Arg::Dot(_) | Arg::Nil(_) | Arg::Number(..) | Arg::String(..))
                    ) {
                        return Err(self.error(format!("non executable command in pipeline stage {}", i + 1)));
                    }
                }
                return Ok(pipe);
            }
            match t.kind {
                Tok::Bool
                | Tok::CharConst
                | Tok::Dot
                | Tok::Field
                | Tok::Identifier
                | Tok::Number
                | Tok::Nil
                | Tok::RawString
                | Tok::String
                | Tok::Variable
                | Tok::LeftParen => {
                    self.backup();
                    let c = self.command()?;
                    pipe.cmds.push(c);
                }
                _ => return Err(self.unexpected(&t, context)),
            }
        }
    }

    fn command(&mut self) -> PResult<Cmd> {
        let mut cmd = Cmd { pos: self.peek_non_space().pos as u32, args: Vec::new() };
        loop {
            self.peek_non_space();
            if let Some(op) = self.operand()? {
                cmd.args.push(op);
            }
            let t = self.next();
            match t.kind {
                Tok::Space => continue,
                Tok::RightDelim | Tok::RightParen => self.backup(),
                Tok::Pipe => {}
                _ => return Err(self.unexpected(&t, "operand")),
            }
            break;
        }
        if cmd.args.is_empty() {
            return Err(self.error("empty command".into()));
        }
        Ok(cmd)
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else { return Ok(None) };
        if self.peek().kind != Tok::Field {
            return Ok(Some(node));
        }
        let chain_pos = self.peek().pos as u32;
        let mut fields = Vec::new();
        while self.peek().kind == Tok::Field {
            let t = self.next();
            fields.push(Arc::from(&t.text[1..]));
        }
        Ok(Some(match node {
            Arg::Field(_, mut idents) => {
                idents.extend(fields);
                Arg::Field(chain_pos, idents)
            }
            Arg::Variable(_, name, mut idents) => {
                idents.extend(fields);
                Arg::Variable(chain_pos, name, idents)
            }
            Arg::Bool(..) | Arg::String(..) | Arg::Number(..) | Arg::Nil(_) | Arg::Dot(_) => {
                return Err(self.error(format!("unexpected . after term {:?}", node.to_string())));
            }
            other => Arg::Chain(chain_pos, Box::new(other), fields),
        }))
    }

    fn term(&mut self) -> PResult<Option<Arg>> {
        let t = self.next_non_space();
        let pos = t.pos as u32;
        Ok(Some(match t.kind {
            Tok::Identifier => {
                let callee = match self.funcs.get(t.text) {
                    Some(f) => Callee::User(f.clone()),
                    None => match Builtin::from_name(t.text) {
                        Some(b) => Callee::Builtin(b),
                        None => return Err(self.error(format!("function {:?} not defined", t.text))),
                    },
                };
                Arg::Identifier(pos, Arc::from(t.text), callee)
            }
            Tok::Dot => Arg::Dot(pos),
            Tok::Nil => Arg::Nil(pos),
            Tok::Variable => {
                if !self.vars.iter().any(|v| &**v == t.text) {
                    return Err(self.error(format!("undefined variable {:?}", t.text)));
                }
                Arg::Variable(pos, Arc::from(t.text), Vec::new())
            }
            Tok::Field => Arg::Field(pos, vec![Arc::from(&t.text[1..])]),
            Tok::Bool => Arg::Bool(pos, t.text == "true"),
            Tok::Number | Tok::CharConst => {
                let n = parse_number(t.text, t.kind == Tok::CharConst).map_err(|e| self.error(e))?;
                Arg::Number(pos, Box::new(n))
            }
            Tok::LeftParen => {
                let p = super::exec::grow(|| self.pipeline("parenthesized pipeline", Tok::RightParen))?;
                Arg::Pipe(Box::new(p))
            }
            Tok::String | Tok::RawString => {
                let s = unquote(t.text).map_err(|e| self.error(e))?;
                Arg::String(pos, Arc::from(t.text), Arc::from(s))
            }
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

enum Item {
    Node(Node),
    End(End),
}

/// Go's `parse.NewNumber`: which of int and float the constant can be.
fn parse_number(text: &str, is_char: bool) -> Result<Number, String> {
    let text_arc: Arc<str> = Arc::from(text);
    if is_char {
        let s = unquote(text)?;
        let mut chars = s.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return Err(format!("malformed character constant: {text}"));
        };
        return Ok(Number { text: text_arc, int: Some(c as i64), float: Some(c as u32 as f64), is_char: true });
    }
    if text.ends_with('i') {
        return Err(format!("complex constants are not supported: {text:?}"));
    }
    let int = parse_go_int(text);
    let uint_ok = int.is_none() && parse_go_uint(text).is_some();
    let mut n = Number { text: text_arc, int, float: None, is_char: false };
    if let Some(i) = int {
        n.float = Some(i as f64);
    } else if uint_ok {
        n.float = parse_go_uint(text).map(|u| u as f64);
    } else if let Some(f) = parse_go_float(text) {
        if !text.contains(['.', 'e', 'E', 'p', 'P']) {
            return Err(format!("integer overflow: {text:?}"));
        }
        n.float = Some(f);
        if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 {
            n.int = Some(f as i64);
        }
    }
    if n.int.is_none() && n.float.is_none() {
        return Err(format!("illegal number syntax: {text:?}"));
    }
    Ok(n)
}

/// Removes `_` separators (Go allows them only between digits, after a base prefix).
fn strip_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'_' {
            let prev_ok = i > 0 && (b[i - 1].is_ascii_alphanumeric());
            let next_ok = i + 1 < b.len() && b[i + 1].is_ascii_alphanumeric();
            if !prev_ok || !next_ok {
                return None;
            }
        }
    }
    Some(s.replace('_', ""))
}

fn split_sign(s: &str) -> (bool, &str) {
    if let Some(r) = s.strip_prefix('-') {
        (true, r)
    } else if let Some(r) = s.strip_prefix('+') {
        (false, r)
    } else {
        (false, s)
    }
}

fn parse_go_uint(s: &str) -> Option<u64> {
    let (neg, body) = split_sign(s);
    if neg || s.starts_with('+') {
        return None;
    }
    let body = strip_underscores(body)?;
    let (radix, digits) = if let Some(r) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, r)
    } else if let Some(r) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (8, r)
    } else if let Some(r) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, r)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body.as_str())
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn parse_go_int(s: &str) -> Option<i64> {
    let (neg, body) = split_sign(s);
    let u = parse_go_uint(body)?;
    if neg {
        if u <= i64::MAX as u64 + 1 { Some((u as i128).wrapping_neg() as i64) } else { None }
    } else if u <= i64::MAX as u64 {
        Some(u as i64)
    } else {
        None
    }
}

fn parse_go_float(s: &str) -> Option<f64> {
    let (neg, body) = split_sign(s);
    let body = strip_underscores(body)?;
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let f = parse_hex_float(hex)?;
        return Some(if neg { -f } else { f });
    }
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let f: f64 = body.parse().ok()?;
    Some(if neg { -f } else { f })
}

/// A hexadecimal float's mantissa and `p` exponent (after `0x`).
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mant, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = exp.parse().ok()?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let mut v = 0f64;
    for c in int.chars() {
        v = v * 16.0 + c.to_digit(16)? as f64;
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars() {
        v += c.to_digit(16)? as f64 * scale;
        scale /= 16.0;
    }
    Some(v * 2f64.powi(exp))
}

/// Go's `strconv.Unquote` for "…", `…` and '…'.
pub fn unquote(s: &str) -> Result<String, String> {
    let bad = || "invalid syntax".to_string();
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err(bad());
    }
    let q = b[0];
    if q != b[b.len() - 1] {
        return Err(bad());
    }
    let body = &s[1..s.len() - 1];
    if q == b'`' {
        if body.contains('`') {
            return Err(bad());
        }
        return Ok(body.replace('\r', ""));
    }
    if q != b'"' && q != b'\'' {
        return Err(bad());
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == q as char || c == '\n' {
            return Err(bad());
        }
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next().ok_or_else(bad)?;
        match e {
            'a' => out.push('\u{7}'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\u{b}'),
            '\\' => out.push('\\'),
            '\'' if q == b'\'' => out.push('\''),
            '"' if q == b'"' => out.push('"'),
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let mut v: u32 = 0;
                for _ in 0..n {
                    let d = chars.next().and_then(|c| c.to_digit(16)).ok_or_else(bad)?;
                    v = v * 16 + d;
                }
                if e == 'x' {
                    if q == b'\'' {
                        out.push(char::from_u32(v).ok_or_else(bad)?);
                    } else if v < 0x80 {
                        out.push(v as u8 as char);
                    } else {
                        // A raw byte: not representable in a Rust string; keep it as U+FFFD.
                        out.push('\u{FFFD}');
                    }
                } else {
                    out.push(char::from_u32(v).ok_or_else(bad)?);
                }
            }
            '0'..='7' => {
                let mut v = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    let d = chars.next().and_then(|c| c.to_digit(8)).ok_or_else(bad)?;
                    v = v * 8 + d;
                }
                if v > 255 {
                    return Err(bad());
                }
                if v < 0x80 {
                    out.push(v as u8 as char);
                } else {
                    out.push('\u{FFFD}');
                }
            }
            _ => return Err(bad()),
        }
    }
    if q == b'\'' && out.chars().count() != 1 {
        return Err(bad());
    }
    Ok(out)
}
