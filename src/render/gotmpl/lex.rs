//! The lexer of Go's `text/template`: splits a template into text and the
//! tokens of its actions, with Go's trim markers and comments.

use std::sync::Arc;

/// What a token is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    /// Text outside actions (already trimmed by `{{-`/`-}}`).
    Text(Arc<str>),
    /// `{{` (the trim marker, if any, already applied).
    Open,
    /// `}}`
    Close,
    /// `.` alone.
    Dot,
    /// `.a.b`: a field chain starting at dot.
    Field(Vec<Arc<str>>),
    /// `$x.a.b`: a variable and the fields after it (`$` is the root).
    Var(Arc<str>, Vec<Arc<str>>),
    /// `.a.b` right after `)`: fields of a parenthesised value.
    ChainFields(Vec<Arc<str>>),
    /// A function name or keyword.
    Ident(Arc<str>),
    Str(Arc<str>),
    /// A number constant, with its text (Go decides int/float from the text).
    Number(Arc<str>),
    /// A character constant, as its code point.
    Char(u32),
    Bool(bool),
    Nil,
    Pipe,
    LParen,
    RParen,
    /// `:=`
    Declare,
    /// `=`
    Assign,
    Comma,
}

/// A token and where it starts: its byte offset in the template text.
#[derive(Debug, Clone)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: usize,
    /// The byte offset after the token.
    pub end: usize,
    /// The position Go reports for the node: for a field chain, its second
    /// field (`.Values.x` is reported at `.x`); for `$v.a`, the first field.
    pub go_pos: usize,
    /// Whether white space precedes the token inside an action (Go needs it
    /// to tell `.a .b` from `.a.b` and `(x) .a` from `(x).a`).
    pub space_before: bool,
}

/// A lexing error at byte offset `pos`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LexError {
    pub pos: usize,
    pub message: String,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_alnum(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Splits `text` into tokens.
pub(crate) fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    // Set by `-}}`: the next text loses its leading white space.
    let mut trim_next = false;
    while pos < bytes.len() {
        let open = text[pos..].find("{{").map(|i| pos + i);
        let text_end = open.unwrap_or(bytes.len());
        let mut chunk = &text[pos..text_end];
        if trim_next {
            chunk = chunk.trim_start_matches([' ', '\t', '\r', '\n']);
        }
        let Some(open) = open else {
            if !chunk.is_empty() {
                tokens.push(Token { tok: Tok::Text(chunk.into()), pos, end: pos, go_pos: pos, space_before: false });
            }
            break;
        };
        // `{{- ` trims the white space before it.
        let left_trim = bytes.get(open + 2) == Some(&b'-') && bytes.get(open + 3).is_some_and(|c| is_space(*c));
        if left_trim {
            chunk = chunk.trim_end_matches([' ', '\t', '\r', '\n']);
        }
        if !chunk.is_empty() {
            tokens.push(Token { tok: Tok::Text(chunk.into()), pos, end: pos, go_pos: pos, space_before: false });
        }
        let mut p = open + 2;
        if left_trim {
            p += 2;
        }
        // A comment: `{{/* ... */}}`, optionally with trim markers.
        if text[p..].starts_with("/*") {
            let Some(end) = text[p + 2..].find("*/").map(|i| p + 2 + i + 2) else {
                return Err(LexError { pos: open, message: "unclosed comment".into() });
            };
            let rest = &text[end..];
            let (right_trim, close) = if rest.starts_with(" -}}")
                || rest.starts_with("\t-}}")
                || rest.starts_with("\n-}}")
                || rest.starts_with("\r-}}")
            {
                (true, end + 4)
            } else if rest.starts_with("}}") {
                (false, end + 2)
            } else {
                return Err(LexError { pos: open, message: "comment ends before closing delimiter".into() });
            };
            trim_next = right_trim;
            pos = close;
            continue;
        }
        tokens.push(Token { tok: Tok::Open, pos: open, end: open + 2, go_pos: open, space_before: false });
        let (next, right_trim) = lex_action(text, p, &mut tokens)?;
        trim_next = right_trim;
        pos = next;
    }
    Ok(tokens)
}

/// Lexes the inside of an action starting at `pos`; returns the offset after
/// its `}}` and whether it ended with a trim marker.
fn lex_action(text: &str, mut pos: usize, tokens: &mut Vec<Token>) -> Result<(usize, bool), LexError> {
    let bytes = text.as_bytes();
    let start = pos;
    let mut space = true;
    let mut paren_depth = 0usize;
    loop {
        let Some(&c) = bytes.get(pos) else {
            return Err(LexError { pos: start, message: "unclosed action".into() });
        };
        // ` -}}` closes with a trim marker; the space before `-` is required.
        if is_space(c) {
            let ws_end = pos + bytes[pos..].iter().take_while(|b| is_space(**b)).count();
            if text[ws_end..].starts_with("-}}") {
                tokens.push(Token {
                    tok: Tok::Close,
                    pos: ws_end,
                    end: ws_end + 3,
                    go_pos: ws_end,
                    space_before: true,
                });
                return Ok((ws_end + 3, true));
            }
            pos = ws_end;
            space = true;
            continue;
        }
        if text[pos..].starts_with("}}") {
            if paren_depth > 0 {
                return Err(LexError { pos, message: "unclosed left paren".into() });
            }
            tokens.push(Token { tok: Tok::Close, pos, end: pos + 2, go_pos: pos, space_before: space });
            return Ok((pos + 2, false));
        }
        let tok_start = pos;
        let mut go_pos = None;
        let tok = match c {
            b'|' => {
                pos += 1;
                Tok::Pipe
            }
            b'(' => {
                pos += 1;
                paren_depth += 1;
                Tok::LParen
            }
            b')' => {
                pos += 1;
                if paren_depth == 0 {
                    return Err(LexError { pos: tok_start, message: "unexpected right paren".into() });
                }
                paren_depth -= 1;
                Tok::RParen
            }
            b',' => {
                pos += 1;
                Tok::Comma
            }
            b':' => {
                if bytes.get(pos + 1) != Some(&b'=') {
                    return Err(LexError { pos, message: "expected :=".into() });
                }
                pos += 2;
                Tok::Declare
            }
            b'=' => {
                pos += 1;
                Tok::Assign
            }
            b'"' => {
                let (s, next) = lex_quote(text, pos)?;
                pos = next;
                Tok::Str(s.into())
            }
            b'`' => {
                let Some(end) = text[pos + 1..].find('`') else {
                    return Err(LexError { pos, message: "unterminated raw quoted string".into() });
                };
                let s = &text[pos + 1..pos + 1 + end];
                pos = pos + 1 + end + 1;
                Tok::Str(s.into())
            }
            b'\'' => {
                let (ch, next) = lex_char(text, pos)?;
                pos = next;
                Tok::Char(ch)
            }
            b'$' => {
                let name_end =
                    pos + 1 + text[pos + 1..].chars().take_while(|c| is_alnum(*c)).map(char::len_utf8).sum::<usize>();
                let name: Arc<str> = text[pos..name_end].into();
                pos = name_end;
                let (fields, positions) = lex_fields(text, &mut pos)?;
                go_pos = positions.first().copied();
                Tok::Var(name, fields)
            }
            b'.' => {
                if bytes.get(pos + 1).is_some_and(|b| b.is_ascii_digit()) {
                    let (n, next) = lex_number(text, pos)?;
                    pos = next;
                    Tok::Number(n.into())
                } else {
                    let after_paren = matches!(tokens.last(), Some(Token { tok: Tok::RParen, .. })) && !space;
                    let (fields, positions) = lex_fields(text, &mut pos)?;
                    go_pos = positions.get(1).copied();
                    if fields.is_empty() {
                        pos += 1;
                        Tok::Dot
                    } else if after_paren {
                        Tok::ChainFields(fields)
                    } else {
                        Tok::Field(fields)
                    }
                }
            }
            b'+' | b'-' | b'0'..=b'9' => {
                let (n, next) = lex_number(text, pos)?;
                pos = next;
                Tok::Number(n.into())
            }
            _ => {
                let ch = text[pos..].chars().next().unwrap_or('\0');
                if !is_alnum(ch) {
                    return Err(LexError { pos, message: format!("unrecognized character in action: {ch:?}") });
                }
                let end = pos + text[pos..].chars().take_while(|c| is_alnum(*c)).map(char::len_utf8).sum::<usize>();
                let word = &text[pos..end];
                pos = end;
                let tok = match word {
                    "true" => Tok::Bool(true),
                    "false" => Tok::Bool(false),
                    "nil" => Tok::Nil,
                    _ => Tok::Ident(word.into()),
                };
                // A field chain right after an identifier (`fn.x`) is an error in
                // Go; after a word like `true.x` too. Lex it so the parser can say so.
                if bytes.get(pos) == Some(&b'.') && bytes.get(pos + 1).is_some_and(|b| (*b as char).is_alphabetic()) {
                    tokens.push(Token { tok, pos: tok_start, end, go_pos: tok_start, space_before: space });
                    let (fields, _) = lex_fields(text, &mut pos)?;
                    tokens.push(Token {
                        tok: Tok::ChainFields(fields),
                        pos: end,
                        end: pos,
                        go_pos: end,
                        space_before: false,
                    });
                    space = false;
                    continue;
                }
                tok
            }
        };
        // `(...)` followed by `.x` chains; record it via ChainFields above.
        tokens.push(Token { tok, pos: tok_start, end: pos, go_pos: go_pos.unwrap_or(tok_start), space_before: space });
        space = false;
    }
}

/// Reads `.a.b.c` at `pos` (which points to a `.`), returning the names.
fn lex_fields(text: &str, pos: &mut usize) -> Result<(Vec<Arc<str>>, Vec<usize>), LexError> {
    let bytes = text.as_bytes();
    let mut fields = Vec::new();
    let mut positions = Vec::new();
    while bytes.get(*pos) == Some(&b'.') {
        positions.push(*pos);
        let start = *pos + 1;
        let len: usize = text[start..].chars().take_while(|c| is_alnum(*c)).map(char::len_utf8).sum();
        if len == 0 {
            break;
        }
        fields.push(text[start..start + len].into());
        *pos = start + len;
    }
    positions.truncate(fields.len());
    Ok((fields, positions))
}

fn lex_number(text: &str, start: usize) -> Result<(&str, usize), LexError> {
    let bytes = text.as_bytes();
    let mut pos = start;
    if matches!(bytes.get(pos), Some(b'+' | b'-')) {
        pos += 1;
    }
    let mut digits = "0123456789_";
    if bytes.get(pos) == Some(&b'0') && matches!(bytes.get(pos + 1), Some(b'x' | b'X' | b'o' | b'O' | b'b' | b'B')) {
        digits = match bytes[pos + 1] {
            b'x' | b'X' => "0123456789abcdefABCDEF_",
            b'o' | b'O' => "01234567_",
            _ => "01_",
        };
        pos += 2;
    }
    let take = |pos: &mut usize, set: &str| {
        while bytes.get(*pos).is_some_and(|b| set.as_bytes().contains(b)) {
            *pos += 1;
        }
    };
    take(&mut pos, digits);
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        take(&mut pos, digits);
    }
    let exp = if digits.len() == 23 { b"pP" } else { b"eE" };
    if bytes.get(pos).is_some_and(|b| exp.contains(b)) {
        pos += 1;
        if matches!(bytes.get(pos), Some(b'+' | b'-')) {
            pos += 1;
        }
        take(&mut pos, "0123456789_");
    }
    if bytes.get(pos) == Some(&b'i') {
        pos += 1;
    }
    // A number must end at a separator.
    if let Some(c) = text[pos..].chars().next()
        && is_alnum(c)
    {
        let end = pos + text[pos..].chars().take_while(|c| is_alnum(*c)).map(char::len_utf8).sum::<usize>();
        return Err(LexError { pos: start, message: format!("bad number syntax: {:?}", &text[start..end]) });
    }
    if pos == start {
        return Err(LexError { pos: start, message: "bad number syntax".into() });
    }
    Ok((&text[start..pos], pos))
}

/// Reads a Go interpreted string literal starting at the `"` at `start`.
fn lex_quote(text: &str, start: usize) -> Result<(String, usize), LexError> {
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, start + 1 + i + 1)),
            '\n' => break,
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '\\' => out.push('\\'),
                    '"' => out.push('"'),
                    '\'' => out.push('\''),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..n).filter_map(|_| chars.next().map(|(_, c)| c)).collect();
                        let code = u32::from_str_radix(&hex, 16).map_err(|_| LexError {
                            pos: start,
                            message: "invalid syntax: bad escape in string".into(),
                        })?;
                        if e == 'x' {
                            // \x is a byte; only ASCII bytes make sense in a UTF-8 string.
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        } else {
                            out.push(char::from_u32(code).ok_or_else(|| LexError {
                                pos: start,
                                message: "invalid syntax: bad escape in string".into(),
                            })?);
                        }
                    }
                    '0'..='7' => {
                        let mut code = e.to_digit(8).unwrap_or(0);
                        for _ in 0..2 {
                            let Some((_, d)) = chars.next() else { break };
                            code = code * 8 + d.to_digit(8).unwrap_or(0);
                        }
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    _ => {
                        return Err(LexError {
                            pos: start,
                            message: "invalid syntax: unknown escape in string".into(),
                        });
                    }
                }
            }
            c => out.push(c),
        }
    }
    Err(LexError { pos: start, message: "unterminated quoted string".into() })
}

fn lex_char(text: &str, start: usize) -> Result<(u32, usize), LexError> {
    let rest = &text[start + 1..];
    let Some(end) = rest.find('\'') else {
        return Err(LexError { pos: start, message: "unterminated character constant".into() });
    };
    // `'\''` : the first quote found may be escaped.
    let end = match rest.strip_prefix("\\'") {
        Some(tail) => tail.find('\'').map(|i| i + 2).unwrap_or(end),
        None => end,
    };
    let body = &rest[..end];
    let (s, _) = lex_quote(&format!("\"{}\"", body.replace("\\'", "'")), 0)?;
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok((c as u32, start + 1 + end + 1)),
        _ => Err(LexError { pos: start, message: format!("malformed character constant: '{body}'") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        lex(text).expect("lexes").into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn trim_markers_remove_surrounding_white_space() {
        assert_eq!(
            toks("a \n {{- 1 -}} \n b"),
            vec![Tok::Text("a".into()), Tok::Open, Tok::Number("1".into()), Tok::Close, Tok::Text("b".into())]
        );
        // `{{-3}}` is the number -3, not a trim marker.
        assert_eq!(toks("a {{-3}}"), vec![Tok::Text("a ".into()), Tok::Open, Tok::Number("-3".into()), Tok::Close]);
    }

    #[test]
    fn comments_vanish_and_may_trim() {
        assert_eq!(toks("a {{/* x */}} b"), vec![Tok::Text("a ".into()), Tok::Text(" b".into())]);
        assert_eq!(toks("a {{- /* x */ -}} b"), vec![Tok::Text("a".into()), Tok::Text("b".into())]);
        assert!(lex("{{/* x */ 1}}").is_err());
    }

    #[test]
    fn raw_strings_keep_backslashes_and_quoted_strings_unescape() {
        assert_eq!(toks(r#"{{`a\n`}}"#)[1], Tok::Str(r"a\n".into()));
        assert_eq!(toks(r#"{{"a\n\x41\u00e9"}}"#)[1], Tok::Str("a\nAé".into()));
        assert_eq!(toks(r"{{'a'}}")[1], Tok::Char(97));
        assert_eq!(toks(r"{{'\n'}}")[1], Tok::Char(10));
    }

    #[test]
    fn fields_variables_and_chains() {
        assert_eq!(toks("{{.a.b}}")[1], Tok::Field(vec!["a".into(), "b".into()]));
        assert_eq!(toks("{{$x.a}}")[1], Tok::Var("$x".into(), vec!["a".into()]));
        assert_eq!(toks("{{$}}")[1], Tok::Var("$".into(), vec![]));
        let t = toks("{{(.a).b}}");
        assert_eq!(t[4], Tok::ChainFields(vec!["b".into()]));
        assert_eq!(toks("{{ . }}")[1], Tok::Dot);
    }

    #[test]
    fn close_inside_a_string_does_not_end_the_action() {
        assert_eq!(toks(r#"{{ "}}" }}"#)[1], Tok::Str("}}".into()));
    }

    #[test]
    fn unclosed_action_is_an_error() {
        assert_eq!(lex("{{ .a ").unwrap_err().message, "unclosed action");
    }
}
