//! Go's template parser (text/template/parse/parse.go and node.go): the
//! syntax tree, parse errors worded as Go words them, and [`Templates`], a
//! set of parsed templates sharing their `define`s.

mod number;
mod parser;

use number::parse_number;
pub use number::unquote;
pub(crate) use parser::parse;

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
    pub root: Box<[Node]>,
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
    /// Text as written: a range of the tree's `text` (start, end), which the tree holds anyway;
    /// a copy of its own for each would double a chart's templates in memory.
    Text(u32, u32),
    Action(Pipe),
    If(Box<Control>),
    Range(Box<Control>),
    With(Box<Control>),
    Template {
        pos: u32,
        name: Arc<str>,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

// Lists are boxed slices, sized once parsed: a chart's templates make hundreds of thousands of
// them, most of one element, where a `Vec` would hold room for four.
pub struct Control {
    pub pos: u32,
    pub pipe: Pipe,
    pub list: Box<[Node]>,
    pub else_list: Option<Box<[Node]>>,
}

pub struct Pipe {
    pub pos: u32,
    pub is_assign: bool,
    pub decl: Box<[Arc<str>]>,
    pub cmds: Box<[Cmd]>,
}

pub struct Cmd {
    pub pos: u32,
    pub args: Box<[Arg]>,
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
    Field(u32, Box<[Arc<str>]>),
    /// `$x.a.b`: name (with `$`), then fields.
    Variable(u32, Arc<str>, Box<[Arc<str>]>),
    Identifier(u32, Arc<str>, Callee),
    Pipe(Box<Pipe>),
    /// `(pipeline).a.b`
    Chain(u32, Box<Arg>, Box<[Arc<str>]>),
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
            if tree.root.iter().all(|n| is_empty_node(&tree.text, n))
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

fn is_empty_node(text: &str, n: &Node) -> bool {
    match n {
        Node::Text(start, end) => text[*start as usize..*end as usize].trim().is_empty(),
        _ => false,
    }
}
