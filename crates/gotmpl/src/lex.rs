//! Go's template lexer (text/template/parse/lex.go): text, `{{`/`}}` with
//! trim markers, comments, and the tokens inside actions.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tok {
    Text,
    LeftDelim,
    RightDelim,
    Space,
    Identifier,
    Field,
    Variable,
    Dot,
    Bool,
    Number,
    String,
    RawString,
    CharConst,
    Nil,
    Pipe,
    LeftParen,
    RightParen,
    Declare,
    Assign,
    /// A printable ASCII character not otherwise used (`,` in `range $i, $v`).
    Char,
    // Keywords.
    Block,
    Break,
    Continue,
    Define,
    Else,
    End,
    If,
    Range,
    Template,
    With,
    Eof,
    Error,
}

#[derive(Debug, Clone, Copy)]
pub struct Token<'a> {
    pub kind: Tok,
    /// Byte offset in the template text.
    pub pos: usize,
    /// The token's text.
    pub text: &'a str,
}

const LEFT: &str = "{{";
const RIGHT: &str = "}}";

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// `{{- ` at `pos` (just after `{{`)?
fn has_left_trim(s: &[u8]) -> bool {
    s.len() >= 2 && s[0] == b'-' && is_space(s[1])
}

/// ` -` before `}}`?
fn has_right_trim(s: &[u8]) -> bool {
    s.len() >= 2 && is_space(s[0]) && s[1] == b'-'
}

pub struct Lexer<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
    start: usize,
    paren_depth: i32,
    pub tokens: Vec<Token<'a>>,
    /// Set when the last action ended with ` -}}`: trim the next text's leading space.
    trim_next: bool,
    error: Option<String>,
}

/// Lexes the whole template. The last token is Eof or Error (with its message).
pub fn lex(input: &str) -> (Vec<Token<'_>>, Option<String>) {
    let mut l = Lexer {
        input,
        bytes: input.as_bytes(),
        pos: 0,
        start: 0,
        paren_depth: 0,
        tokens: Vec::with_capacity(input.len() / 4 + 4),
        trim_next: false,
        error: None,
    };
    l.run();
    (l.tokens, l.error)
}

impl<'a> Lexer<'a> {
    fn emit(&mut self, kind: Tok) {
        self.tokens.push(Token { kind, pos: self.start, text: &self.input[self.start..self.pos] });
        self.start = self.pos;
    }

    fn error(&mut self, msg: String) {
        self.tokens.push(Token { kind: Tok::Error, pos: self.start, text: "" });
        self.error = Some(msg);
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn next(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn run(&mut self) {
        loop {
            // Text up to the next "{{".
            let rest = &self.input[self.pos..];
            match rest.find(LEFT) {
                Some(off) => {
                    let delim = self.pos + off;
                    let trim = has_left_trim(&self.bytes[delim + LEFT.len()..]);
                    let mut text_start = self.pos;
                    let mut text_end = delim;
                    if self.trim_next {
                        while text_start < text_end && is_space(self.bytes[text_start]) {
                            text_start += 1;
                        }
                    }
                    if trim {
                        while text_end > text_start && is_space(self.bytes[text_end - 1]) {
                            text_end -= 1;
                        }
                    }
                    self.trim_next = false;
                    if text_end > text_start {
                        self.tokens.push(Token {
                            kind: Tok::Text,
                            pos: text_start,
                            text: &self.input[text_start..text_end],
                        });
                    }
                    self.pos = delim;
                    self.start = delim;
                    if !self.lex_left_delim(trim) {
                        return;
                    }
                }
                None => {
                    let mut text_start = self.pos;
                    if self.trim_next {
                        while text_start < self.bytes.len() && is_space(self.bytes[text_start]) {
                            text_start += 1;
                        }
                    }
                    if text_start < self.bytes.len() {
                        self.tokens.push(Token { kind: Tok::Text, pos: text_start, text: &self.input[text_start..] });
                    }
                    self.pos = self.bytes.len();
                    self.start = self.pos;
                    self.emit(Tok::Eof);
                    return;
                }
            }
        }
    }

    /// At "{{". Returns false on error.
    fn lex_left_delim(&mut self, trim: bool) -> bool {
        self.pos += LEFT.len();
        let after_marker = if trim { self.pos + 2 } else { self.pos };
        if self.input[after_marker..].starts_with("/*") {
            self.pos = after_marker;
            self.start = self.pos;
            return self.lex_comment();
        }
        self.emit(Tok::LeftDelim);
        self.pos = after_marker;
        self.start = self.pos;
        self.paren_depth = 0;
        self.lex_inside_action()
    }

    fn lex_comment(&mut self) -> bool {
        self.pos += 2;
        let Some(end) = self.input[self.pos..].find("*/") else {
            self.error("unclosed comment".into());
            return false;
        };
        self.pos += end + 2;
        let (delim, trim) = self.at_right_delim();
        if !delim {
            self.error("comment ends before closing delimiter".into());
            return false;
        }
        if trim {
            self.pos += 2;
        }
        self.pos += RIGHT.len();
        self.trim_next = trim;
        self.start = self.pos;
        true
    }

    /// (at "}}" or " -}}", trim marker present)
    fn at_right_delim(&self) -> (bool, bool) {
        let rest = &self.bytes[self.pos..];
        if has_right_trim(rest) && rest[2..].starts_with(RIGHT.as_bytes()) {
            return (true, true);
        }
        (rest.starts_with(RIGHT.as_bytes()), false)
    }

    fn lex_inside_action(&mut self) -> bool {
        loop {
            let (delim, trim) = self.at_right_delim();
            if delim {
                if self.paren_depth != 0 {
                    self.error("unclosed left paren".into());
                    return false;
                }
                if trim {
                    self.pos += 2;
                    self.start = self.pos;
                }
                self.pos += RIGHT.len();
                self.emit(Tok::RightDelim);
                self.trim_next = trim;
                return true;
            }
            let Some(c) = self.next() else {
                self.error("unclosed action".into());
                return false;
            };
            let ok = match c {
                ' ' | '\t' | '\r' | '\n' => {
                    self.pos -= 1;
                    self.lex_space();
                    true
                }
                '=' => {
                    self.emit(Tok::Assign);
                    true
                }
                ':' => {
                    if self.next() != Some('=') {
                        self.error("expected :=".into());
                        return false;
                    }
                    self.emit(Tok::Declare);
                    true
                }
                '|' => {
                    self.emit(Tok::Pipe);
                    true
                }
                '"' => self.lex_quote(),
                '`' => self.lex_raw_quote(),
                '$' => self.lex_field_or_variable(Tok::Variable),
                '\'' => self.lex_char(),
                '.' => match self.bytes.get(self.pos) {
                    Some(b) if b.is_ascii_digit() => {
                        self.pos -= 1;
                        self.lex_number()
                    }
                    _ => self.lex_field_or_variable(Tok::Field),
                },
                '+' | '-' | '0'..='9' => {
                    self.pos -= 1;
                    self.lex_number()
                }
                '(' => {
                    self.emit(Tok::LeftParen);
                    self.paren_depth += 1;
                    true
                }
                ')' => {
                    self.paren_depth -= 1;
                    if self.paren_depth < 0 {
                        self.error("unexpected right paren".into());
                        return false;
                    }
                    self.emit(Tok::RightParen);
                    true
                }
                c if is_alnum(c) => {
                    self.pos -= c.len_utf8();
                    self.lex_identifier()
                }
                c if c.is_ascii() && !c.is_ascii_control() => {
                    self.emit(Tok::Char);
                    true
                }
                c => {
                    self.error(format!("unrecognized character in action: {}", go_unicode(c)));
                    false
                }
            };
            if !ok {
                return false;
            }
        }
    }

    fn lex_space(&mut self) {
        let mut n = 0;
        while self.pos < self.bytes.len() && is_space(self.bytes[self.pos]) {
            self.pos += 1;
            n += 1;
        }
        // A trim-marked closing delimiter: the space belongs to it.
        let before = self.pos - 1;
        if has_right_trim(&self.bytes[before..]) && self.bytes[before + 2..].starts_with(RIGHT.as_bytes()) {
            self.pos -= 1;
            if n == 1 {
                return;
            }
        }
        self.emit(Tok::Space);
    }

    fn at_terminator(&self) -> bool {
        let Some(c) = self.peek() else { return true };
        if c.is_ascii() && is_space(c as u8) {
            return true;
        }
        match c {
            '.' | ',' | '|' | ':' | ')' | '(' => true,
            _ => self.bytes[self.pos..].starts_with(RIGHT.as_bytes()),
        }
    }

    fn lex_identifier(&mut self) -> bool {
        while let Some(c) = self.peek() {
            if !is_alnum(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        if !self.at_terminator() {
            let c = self.peek().unwrap_or(' ');
            self.error(format!("bad character {}", go_unicode(c)));
            return false;
        }
        let word = &self.input[self.start..self.pos];
        let kind = match word {
            "block" => Tok::Block,
            "break" => Tok::Break,
            "continue" => Tok::Continue,
            "define" => Tok::Define,
            "else" => Tok::Else,
            "end" => Tok::End,
            "if" => Tok::If,
            "range" => Tok::Range,
            "nil" => Tok::Nil,
            "template" => Tok::Template,
            "with" => Tok::With,
            "true" | "false" => Tok::Bool,
            _ => Tok::Identifier,
        };
        self.emit(kind);
        true
    }

    /// After '.' or '$'.
    fn lex_field_or_variable(&mut self, kind: Tok) -> bool {
        if self.at_terminator() {
            self.emit(if kind == Tok::Variable { Tok::Variable } else { Tok::Dot });
            return true;
        }
        while let Some(c) = self.peek() {
            if !is_alnum(c) {
                break;
            }
            self.pos += c.len_utf8();
        }
        if !self.at_terminator() {
            let c = self.peek().unwrap_or(' ');
            self.error(format!("bad character {}", go_unicode(c)));
            return false;
        }
        self.emit(kind);
        true
    }

    fn lex_char(&mut self) -> bool {
        loop {
            match self.next() {
                Some('\\') if self.next().is_none() => {
                    self.error("unterminated character constant".into());
                    return false;
                }
                Some('\\') => {}
                None | Some('\n') => {
                    self.error("unterminated character constant".into());
                    return false;
                }
                Some('\'') => break,
                _ => {}
            }
        }
        self.emit(Tok::CharConst);
        true
    }

    fn lex_quote(&mut self) -> bool {
        loop {
            match self.next() {
                Some('\\') => {
                    if matches!(self.next(), None | Some('\n')) {
                        self.error("unterminated quoted string".into());
                        return false;
                    }
                }
                None | Some('\n') => {
                    self.error("unterminated quoted string".into());
                    return false;
                }
                Some('"') => break,
                _ => {}
            }
        }
        self.emit(Tok::String);
        true
    }

    fn lex_raw_quote(&mut self) -> bool {
        match self.input[self.pos..].find('`') {
            Some(off) => {
                self.pos += off + 1;
                self.emit(Tok::RawString);
                true
            }
            None => {
                self.error("unterminated raw quoted string".into());
                false
            }
        }
    }

    fn accept(&mut self, set: &str) -> bool {
        match self.peek() {
            Some(c) if set.contains(c) => {
                self.pos += c.len_utf8();
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, set: &str) {
        while self.accept(set) {}
    }

    fn lex_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if let Some(c) = self.peek()
            && is_alnum(c)
        {
            self.pos += c.len_utf8();
            let text = self.input[self.start..self.pos].to_string();
            self.error(format!("bad number syntax: {text:?}"));
            return false;
        }
        self.emit(Tok::Number);
        true
    }
}

/// Go's `%#U` of a rune: `U+0041 'A'`.
pub fn go_unicode(c: char) -> String {
    if c.is_control() { format!("U+{:04X}", c as u32) } else { format!("U+{:04X} '{c}'", c as u32) }
}
