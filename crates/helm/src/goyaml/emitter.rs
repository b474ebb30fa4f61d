//! go-yaml v2's emitter (block style): scalar analysis and the plain,
//! quoted and literal writers, folding at 80 columns.

use super::resolve::*;
use super::write::Node;

#[derive(Clone, Copy)]
pub(super) struct Ctx {
    pub(super) root: bool,
    pub(super) mapping: bool,
    pub(super) simple_key: bool,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

pub(super) struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

pub(super) const BEST_WIDTH: usize = 80;
pub(super) const BEST_INDENT: i64 = 2;

/// go-yaml v2's emitter, block style only (what JSON-shaped data needs).
pub(super) struct Emitter {
    pub(super) out: String,
    column: usize,
    indent: i64,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    /// go-yaml v3 (`toYamlPretty`): sequences indented under their key.
    pub(super) indent_sequences: bool,
}

pub(super) fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

pub(super) fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

pub(super) fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

pub(super) fn analyze(value: &str) -> Analysis {
    if value.is_empty() {
        return Analysis {
            multiline: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let chars: Vec<char> = value.chars().collect();
    let (mut block_ind, mut line_breaks, mut special) = (false, false, false);
    let (mut leading_space, mut leading_break, mut trailing_space, mut trailing_break) = (false, false, false, false);
    let (mut break_space, mut space_break) = (false, false);
    let (mut prev_space, mut prev_break) = (false, false);
    if value.starts_with("---") || value.starts_with("...") {
        block_ind = true;
    }
    let mut preceded_by_ws = true;
    for (i, &c) in chars.iter().enumerate() {
        let followed_by_ws = i + 1 >= chars.len() || is_blank(chars[i + 1]) || is_break(chars[i + 1]);
        if i == 0 {
            match c {
                '#' | ',' | '[' | ']' | '{' | '}' | '&' | '*' | '!' | '|' | '>' | '\'' | '"' | '%' | '@' | '`' => {
                    block_ind = true
                }
                '?' | ':' if followed_by_ws => block_ind = true,
                '-' if followed_by_ws => block_ind = true,
                _ => {}
            }
        } else {
            match c {
                ':' if followed_by_ws => block_ind = true,
                '#' if preceded_by_ws => block_ind = true,
                _ => {}
            }
        }
        // 0x85 is printable for libyaml but a break; tabs are not printable
        if !is_printable(c) || (c as u32) > 0xFFFF {
            special = true;
        }
        if c == ' ' {
            if i == 0 {
                leading_space = true;
            }
            if i + 1 == chars.len() {
                trailing_space = true;
            }
            if prev_break {
                break_space = true;
            }
            prev_space = true;
            prev_break = false;
        } else if is_break(c) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + 1 == chars.len() {
                trailing_break = true;
            }
            if prev_space {
                space_break = true;
            }
            prev_space = false;
            prev_break = true;
        } else {
            prev_space = false;
            prev_break = false;
        }
        preceded_by_ws = is_blank(c) || is_break(c);
    }
    let mut a = Analysis {
        multiline: line_breaks,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        a.block_plain_allowed = false;
    }
    if trailing_space {
        a.block_allowed = false;
    }
    if break_space {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
    }
    if space_break || special {
        a.block_plain_allowed = false;
        a.single_quoted_allowed = false;
        a.block_allowed = false;
    }
    if line_breaks || block_ind {
        a.block_plain_allowed = false;
    }
    a
}

impl Emitter {
    pub(super) fn new() -> Self {
        Self {
            out: String::new(),
            column: 0,
            indent: -1,
            whitespace: true,
            indention: true,
            open_ended: false,
            indent_sequences: false,
        }
    }

    pub(super) fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    pub(super) fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    pub(super) fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    pub(super) fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    pub(super) fn write_indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
        if need_ws && !self.whitespace {
            self.put(' ');
        }
        for c in ind.chars() {
            self.put(c);
        }
        self.whitespace = is_ws;
        self.indention = self.indention && is_indention;
        self.open_ended = false;
    }

    pub(super) fn increase_indent(&mut self, flow: bool, indentless: bool) -> i64 {
        let saved = self.indent;
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
        saved
    }

    pub(super) fn emit_node(&mut self, node: &Node, ctx: Ctx) {
        match node {
            Node::Null => self.emit_scalar("null", Style::Plain, ctx),
            Node::Bool(b) => self.emit_scalar(if *b { "true" } else { "false" }, Style::Plain, ctx),
            Node::Number(n) => self.emit_scalar(n, Style::Plain, ctx),
            Node::Str(s) => {
                let style = if s.contains('\n') {
                    Style::Literal
                } else if resolves_as_string(s) && !is_base60_float(s) {
                    Style::Plain
                } else {
                    Style::Double
                };
                self.emit_scalar(s, style, ctx);
            }
            Node::Seq(items) if items.is_empty() => self.emit_empty("[", "]"),
            Node::Map(entries) if entries.is_empty() => self.emit_empty("{", "}"),
            Node::Seq(items) => {
                let saved = self.increase_indent(false, !self.indent_sequences && ctx.mapping && !self.indention);
                for item in items {
                    self.write_indent();
                    self.write_indicator("-", true, false, true);
                    self.emit_node(item, Ctx { root: false, mapping: false, simple_key: false });
                }
                self.indent = saved;
            }
            Node::Map(entries) => {
                let saved = self.increase_indent(false, false);
                for (k, v) in entries {
                    self.write_indent();
                    let simple = !k.contains(is_break) && k.len() <= 128;
                    let key = Node::Str(k.clone());
                    if simple {
                        self.emit_node(&key, Ctx { root: false, mapping: true, simple_key: true });
                        self.write_indicator(":", false, false, false);
                    } else {
                        self.write_indicator("?", true, false, true);
                        self.emit_node(&key, Ctx { root: false, mapping: true, simple_key: false });
                        self.write_indent();
                        self.write_indicator(":", true, false, true);
                    }
                    self.emit_node(v, Ctx { root: false, mapping: true, simple_key: false });
                }
                self.indent = saved;
            }
        }
    }

    pub(super) fn emit_empty(&mut self, open: &str, close: &str) {
        let saved = self.increase_indent(true, false);
        self.write_indicator(open, true, true, false);
        self.indent = saved;
        self.write_indicator(close, false, false, false);
    }

    pub(super) fn emit_scalar(&mut self, value: &str, requested: Style, ctx: Ctx) {
        let a = analyze(value);
        let mut style = requested;
        if ctx.simple_key && a.multiline {
            style = Style::Double;
        }
        if style == Style::Plain && (!a.block_plain_allowed || (value.is_empty() && ctx.simple_key)) {
            style = Style::Single;
        }
        if style == Style::Single && !a.single_quoted_allowed {
            style = Style::Double;
        }
        if style == Style::Literal && (!a.block_allowed || ctx.simple_key) {
            style = Style::Double;
        }
        let saved = self.increase_indent(true, false);
        let allow_breaks = !ctx.simple_key;
        match style {
            Style::Plain => self.write_plain(value, allow_breaks, ctx.root),
            Style::Single => self.write_single(value, allow_breaks),
            Style::Double => self.write_double(value, allow_breaks),
            Style::Literal => self.write_literal(value),
        }
        self.indent = saved;
    }

    pub(super) fn write_plain(&mut self, value: &str, allow_breaks: bool, root: bool) {
        if !self.whitespace {
            self.put(' ');
        }
        let chars: Vec<char> = value.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && chars.get(i + 1) != Some(&' ') {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
        if root {
            self.open_ended = true;
        }
    }

    pub(super) fn write_single(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("'", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let (mut spaces, mut breaks) = (false, false);
        for (i, &c) in chars.iter().enumerate() {
            if c == ' ' {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i + 1 < chars.len()
                    && chars.get(i + 1) != Some(&' ')
                {
                    self.write_indent();
                } else {
                    self.put(c);
                }
                spaces = true;
            } else if is_break(c) {
                if !breaks && c == '\n' {
                    self.put_break();
                }
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if c == '\'' {
                    self.put('\'');
                }
                self.put(c);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator("'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    pub(super) fn write_double(&mut self, value: &str, allow_breaks: bool) {
        self.write_indicator("\"", true, false, false);
        let chars: Vec<char> = value.chars().collect();
        let mut spaces = false;
        for (i, &c) in chars.iter().enumerate() {
            let u = c as u32;
            if !is_printable(c) || u > 0xFFFF || u == 0xFEFF || is_break(c) || c == '"' || c == '\\' {
                self.put('\\');
                match u {
                    0x00 => self.put('0'),
                    0x07 => self.put('a'),
                    0x08 => self.put('b'),
                    0x09 => self.put('t'),
                    0x0A => self.put('n'),
                    0x0B => self.put('v'),
                    0x0C => self.put('f'),
                    0x0D => self.put('r'),
                    0x1B => self.put('e'),
                    0x22 => self.put('"'),
                    0x5C => self.put('\\'),
                    0x85 => self.put('N'),
                    0xA0 => self.put('_'),
                    0x2028 => self.put('L'),
                    0x2029 => self.put('P'),
                    _ => {
                        let (p, w) = if u <= 0xFF {
                            ('x', 2)
                        } else if u <= 0xFFFF {
                            ('u', 4)
                        } else {
                            ('U', 8)
                        };
                        self.put(p);
                        for ch in format!("{u:0w$X}").chars() {
                            self.put(ch);
                        }
                    }
                }
                spaces = false;
            } else if c == ' ' {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && i > 0 && i + 1 < chars.len() {
                    self.write_indent();
                    if chars.get(i + 1) == Some(&' ') {
                        self.put('\\');
                    }
                } else {
                    self.put(c);
                }
                spaces = true;
            } else {
                self.put(c);
                spaces = false;
            }
        }
        self.write_indicator("\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    pub(super) fn write_literal(&mut self, value: &str) {
        self.write_indicator("|", true, false, false);
        // block scalar hints
        let chars: Vec<char> = value.chars().collect();
        if chars.first().is_some_and(|c| *c == ' ' || is_break(*c)) {
            self.write_indicator(&BEST_INDENT.to_string(), false, false, false);
        }
        self.open_ended = false;
        let chomp = match chars.len() {
            0 => Some("-"),
            n if !is_break(chars[n - 1]) => Some("-"),
            1 => Some("+"),
            n if is_break(chars[n - 2]) => Some("+"),
            _ => None,
        };
        if let Some(h) = chomp {
            self.write_indicator(h, false, false, false);
        }
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        for &c in &chars {
            if is_break(c) {
                self.write_break(c);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.put(c);
                self.indention = false;
                breaks = false;
            }
        }
    }
}
