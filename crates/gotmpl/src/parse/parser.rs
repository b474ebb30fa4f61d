//! The recursive-descent parser over the lexer's tokens: actions, control
//! structures, pipelines, commands and operands, with Go's error wording.

use super::*;

/// A template of a parse: its name and tree.
pub(crate) type Named = (Arc<str>, Arc<Tree>);

/// Parses `text` as template `name` from file `parse_name`: the template
/// itself and every template it defines.
pub(crate) fn parse(name: &str, parse_name: &str, text: &str, funcs: &FuncMap) -> Result<Vec<Named>, TemplateError> {
    // Positions and texts are kept as 32-bit offsets into `text`.
    if u32::try_from(text.len()).is_err() {
        return Err(TemplateError {
            template: parse_name.to_string(),
            line: 0,
            column: 0,
            kind: TemplateErrorKind::Parse,
            detail: "template is larger than 4 GiB".into(),
            message: "template is larger than 4 GiB".into(),
            origin: None,
        });
    }
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
        vars: Vec::new(),
        range_depth: 0,
        defined: Vec::new(),
        last_pos: 0,
        shared: HashMap::default(),
        strings: HashMap::default(),
        nodes: Vec::new(),
        cmds: Vec::new(),
        args: Vec::new(),
        fields: Vec::new(),
    };
    let dollar = p.shared("$");
    p.vars.push(dollar);
    let root = p.parse_top()?;
    let mut out = Vec::with_capacity(p.defined.len() + 1);
    let mk =
        |root: Vec<Node>| Arc::new(Tree { parse_name: parse_name.clone(), text: text_arc.clone(), root: root.into() });
    let defined = std::mem::take(&mut p.defined);
    let mut seen: HashMap<Arc<str>, bool> = HashMap::new();
    for (n, pos, list) in defined {
        let empty = list.iter().all(|n| is_empty_node(text, n));
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
    if !(root.iter().all(|n| is_empty_node(text, n)) && seen.get(&name).is_some_and(|e| !e)) {
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
    /// Names already made in this parse, shared: a chart's templates say `.Values` and `include`
    /// thousands of times, each its own allocation before.
    shared: HashMap<&'a str, Arc<str>, foldhash::fast::RandomState>,
    /// String constants as written, and their values, likewise.
    strings: HashMap<&'a str, (Arc<str>, Arc<str>), foldhash::fast::RandomState>,
    /// The lists being parsed, innermost last: each list is pushed here and moved out into a
    /// slice of its exact size when it ends ([`take`]), so no list is allocated twice.
    nodes: Vec<Node>,
    cmds: Vec<Cmd>,
    args: Vec<Arg>,
    fields: Vec<Arc<str>>,
}

/// The items of `stack` from `base` on, as a slice of their own.
fn take<T>(stack: &mut Vec<T>, base: usize) -> Box<[T]> {
    stack.drain(base..).collect()
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
    fn shared(&mut self, s: &'a str) -> Arc<str> {
        self.shared.entry(s).or_insert_with(|| Arc::from(s)).clone()
    }

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
        let dollar = self.shared("$");
        let saved_vars = std::mem::replace(&mut self.vars, vec![dollar]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let (list, end) = self.item_list()?;
        self.vars = saved_vars;
        self.range_depth = saved_range;
        if let End::Else = end {
            return Err(self.error(format!("unexpected {{{{else}}}} in {context}")));
        }
        self.defined.push((name, t.pos as u32, list.into()));
        Ok(())
    }

    fn item_list(&mut self) -> PResult<(Box<[Node]>, End)> {
        let base = self.nodes.len();
        let r = self.item_list_on(base);
        if r.is_err() {
            self.nodes.truncate(base);
        }
        r
    }

    fn item_list_on(&mut self, base: usize) -> PResult<(Box<[Node]>, End)> {
        while self.peek_non_space().kind != Tok::Eof {
            match self.text_or_action()? {
                Item::Node(n) => self.nodes.push(n),
                Item::End(e) => return Ok((take(&mut self.nodes, base), e)),
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
            // A text token is the slice of the template's text from its position (after what
            // `{{-`/`-}}` trimmed); `parse` refused texts too long for 32-bit offsets.
            Tok::Text => Ok(Item::Node(Node::Text(t.pos as u32, (t.pos + t.text.len()) as u32))),
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
        crate::exec::grow(|| self.control_inner(context))
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
                else_list = Some(Box::new([Node::If(Box::new(c))]) as Box<[Node]>);
            } else if context == "with" && p.kind == Tok::With {
                self.next();
                let c = self.control("with")?;
                else_list = Some(Box::new([Node::With(Box::new(c))]) as Box<[Node]>);
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
        let dollar = self.shared("$");
        let saved_vars = std::mem::replace(&mut self.vars, vec![dollar]);
        let saved_range = std::mem::replace(&mut self.range_depth, 0);
        let r = self.item_list();
        self.vars = saved_vars;
        self.range_depth = saved_range;
        let (list, end) = r?;
        if let End::Else = end {
            return Err(self.error(format!("unexpected {{{{else}}}} in {context}")));
        }
        self.defined.push((name.clone(), t.pos as u32, list.into()));
        Ok(Node::Template { pos: t.pos as u32, name, pipe: Some(pipe) })
    }

    fn pipeline(&mut self, context: &str, end: Tok) -> PResult<Pipe> {
        let start = self.peek_non_space();
        let (pos, mut is_assign, mut decl) = (start.pos as u32, false, Vec::new());
        let base = self.cmds.len();
        let r = self.pipeline_on(context, end, base, &mut is_assign, &mut decl);
        let cmds = take(&mut self.cmds, base);
        r.map(|()| Pipe { pos, is_assign, decl: decl.into(), cmds })
    }

    fn pipeline_on(
        &mut self,
        context: &str,
        end: Tok,
        base: usize,
        is_assign: &mut bool,
        decl: &mut Vec<Arc<str>>,
    ) -> PResult<()> {
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
                    *is_assign = next.kind == Tok::Assign;
                    self.next_non_space();
                    let name = self.shared(v.text);
                    decl.push(name.clone());
                    self.vars.push(name);
                    break;
                }
                Tok::Char if next.text == "," => {
                    self.next_non_space();
                    let name = self.shared(v.text);
                    decl.push(name.clone());
                    self.vars.push(name);
                    if context == "range" && decl.len() < 2 {
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
                let cmds = &self.cmds[base..];
                if cmds.is_empty() {
                    return Err(self.error(format!("missing value for {context}")));
                }
                for (i, c) in cmds.iter().enumerate().skip(1) {
                    if matches!(
                        c.args.first(),
                        Some(Arg::Bool(..) | Arg::Dot(_) | Arg::Nil(_) | Arg::Number(..) | Arg::String(..))
                    ) {
                        return Err(self.error(format!("non executable command in pipeline stage {}", i + 1)));
                    }
                }
                return Ok(());
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
                    self.cmds.push(c);
                }
                _ => return Err(self.unexpected(&t, context)),
            }
        }
    }

    fn command(&mut self) -> PResult<Cmd> {
        let pos = self.peek_non_space().pos as u32;
        let base = self.args.len();
        let r = self.command_on();
        let args = take(&mut self.args, base);
        r?;
        if args.is_empty() {
            return Err(self.error("empty command".into()));
        }
        Ok(Cmd { pos, args })
    }

    fn command_on(&mut self) -> PResult<()> {
        loop {
            self.peek_non_space();
            if let Some(op) = self.operand()? {
                self.args.push(op);
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
        Ok(())
    }

    fn operand(&mut self) -> PResult<Option<Arg>> {
        let Some(node) = self.term()? else { return Ok(None) };
        if self.peek().kind != Tok::Field {
            return Ok(Some(node));
        }
        let chain_pos = self.peek().pos as u32;
        // Fields and variables took the fields after them (`term`); what is left is a chain.
        let base = self.fields.len();
        while self.peek().kind == Tok::Field {
            let t = self.next();
            let name = self.shared(&t.text[1..]);
            self.fields.push(name);
        }
        let fields = take(&mut self.fields, base);
        Ok(Some(match node {
            Arg::Bool(..) | Arg::String(..) | Arg::Number(..) | Arg::Nil(_) | Arg::Dot(_) => {
                return Err(self.error(format!("unexpected . after term {:?}", node.to_string())));
            }
            other => Arg::Chain(chain_pos, Box::new(other), fields),
        }))
    }

    /// `first` and the fields that follow: `.a.b.c` is lexed as three fields, and Go's parser
    /// gives the chain the position of the second (`.b`) when there is one.
    fn fields_after(&mut self, pos: u32, first: Option<Arc<str>>) -> (u32, Box<[Arc<str>]>) {
        if self.peek().kind != Tok::Field {
            return (pos, first.into_iter().collect());
        }
        let chain_pos = self.peek().pos as u32;
        let base = self.fields.len();
        self.fields.extend(first);
        while self.peek().kind == Tok::Field {
            let t = self.next();
            let name = self.shared(&t.text[1..]);
            self.fields.push(name);
        }
        (chain_pos, take(&mut self.fields, base))
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
                Arg::Identifier(pos, self.shared(t.text), callee)
            }
            Tok::Dot => Arg::Dot(pos),
            Tok::Nil => Arg::Nil(pos),
            Tok::Variable => {
                if !self.vars.iter().any(|v| &**v == t.text) {
                    return Err(self.error(format!("undefined variable {:?}", t.text)));
                }
                let name = self.shared(t.text);
                let (pos, fields) = self.fields_after(pos, None);
                Arg::Variable(pos, name, fields)
            }
            Tok::Field => {
                let first = self.shared(&t.text[1..]);
                let (pos, fields) = self.fields_after(pos, Some(first));
                Arg::Field(pos, fields)
            }
            Tok::Bool => Arg::Bool(pos, t.text == "true"),
            Tok::Number | Tok::CharConst => {
                let n = parse_number(t.text, t.kind == Tok::CharConst).map_err(|e| self.error(e))?;
                Arg::Number(pos, Box::new(n))
            }
            Tok::LeftParen => {
                let p = crate::exec::grow(|| self.pipeline("parenthesized pipeline", Tok::RightParen))?;
                Arg::Pipe(Box::new(p))
            }
            Tok::String | Tok::RawString => {
                let (quoted, value) = match self.strings.get(t.text) {
                    Some(known) => known.clone(),
                    None => {
                        let value = unquote(t.text).map_err(|e| self.error(e))?;
                        let known = (Arc::from(t.text), Arc::from(value));
                        self.strings.insert(t.text, known.clone());
                        known
                    }
                };
                Arg::String(pos, quoted, value)
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
