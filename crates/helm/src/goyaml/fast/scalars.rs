//! The scalars of the fast reader: quoted (over lines too), plain (over lines too), literal and
//! folded blocks, and one-line flow sequences of scalars.

use serde_json::Value;

use super::super::read::float_to_json;
use super::super::resolve::{Plain, resolve_plain};
use super::{Fast, GiveUp, Read, memchr, starts_other_than_plain};

impl Fast<'_> {
    /// A quoted scalar opening at `at` (the current line ends at `end`): its value, the byte after
    /// its closing quote and the end of that quote's line. It may go on over later lines (folded
    /// as YAML folds flow scalars, each line indented past `parent`) only when `parent` is given;
    /// `None` when it does not close on its line and may not go on.
    pub(super) fn quoted(&self, parent: Option<usize>, at: usize, end: usize) -> Read<Option<(String, usize, usize)>> {
        let (s, t) = (self.s, self.t);
        let double = s[at] == b'"';
        let mut out = String::new();
        let (mut i, mut end) = (at + 1, end);
        loop {
            // Up to here `out` holds escapes: line folding never trims them.
            let mut protected = out.len();
            let mut escaped_break = false;
            loop {
                let found = if double { memchr::memchr2(b'"', b'\\', &s[i..end]) } else { memchr(b'\'', &s[i..end]) };
                let Some(k) = found.map(|k| i + k) else {
                    out.push_str(&t[i..end]);
                    break;
                };
                out.push_str(&t[i..k]);
                if !double {
                    if k + 1 < end && s[k + 1] == b'\'' {
                        out.push('\'');
                        i = k + 2;
                        continue;
                    }
                    return Ok(Some((out, k + 1, end)));
                }
                if s[k] == b'"' {
                    return Ok(Some((out, k + 1, end)));
                }
                if k + 1 == end {
                    // An escaped line break; blanks before it are left to the general reader.
                    if out.len() > protected && out.ends_with(' ') {
                        return Err(GiveUp);
                    }
                    escaped_break = true;
                    break;
                }
                i = self.escape(k, end, &mut out)?;
                protected = out.len();
            }
            let Some(parent) = parent else { return Ok(None) };
            if !escaped_break {
                // White space before a line break goes.
                let kept = out.trim_end_matches(' ').len().max(protected);
                out.truncate(kept);
            }
            // Blank lines are newlines; a single break is a space (none after an escaped one).
            let mut breaks = 0;
            let mut start = self.after(end);
            loop {
                if start >= s.len() {
                    return Err(GiveUp);
                }
                let line_end = self.line_end(start);
                let indent = self.indent(start, line_end);
                if start + indent < line_end {
                    if indent <= parent {
                        return Err(GiveUp);
                    }
                    (i, end) = (start + indent, line_end);
                    break;
                }
                breaks += 1;
                start = self.after(line_end);
            }
            if breaks == 0 && !escaped_break {
                out.push(' ');
            } else {
                out.extend(std::iter::repeat_n('\n', breaks));
            }
        }
    }

    /// The escape sequence at `k` (a backslash) of a double-quoted scalar: appends its character
    /// and returns the byte after it.
    pub(super) fn escape(&self, k: usize, end: usize, out: &mut String) -> Read<usize> {
        let Some(&c) = self.s.get(k + 1).filter(|_| k + 1 < end) else { return Err(GiveUp) };
        let simple = match c {
            b'0' => '\0',
            b'a' => '\x07',
            b'b' => '\x08',
            b't' => '\t',
            b'n' => '\n',
            b'v' => '\x0b',
            b'f' => '\x0c',
            b'r' => '\r',
            b'e' => '\x1b',
            b' ' => ' ',
            b'"' => '"',
            b'/' => '/',
            b'\\' => '\\',
            b'x' | b'u' | b'U' => {
                let len = match c {
                    b'x' => 2,
                    b'u' => 4,
                    _ => 8,
                };
                let digits = self.t.get(k + 2..k + 2 + len).filter(|_| k + 2 + len <= end).ok_or(GiveUp)?;
                if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
                    return Err(GiveUp);
                }
                let code = u32::from_str_radix(digits, 16).map_err(|_| GiveUp)?;
                // Surrogates (pairs among them) are left to the general reader.
                let ch = char::from_u32(code).ok_or(GiveUp)?;
                out.push(ch);
                return Ok(k + 2 + len);
            }
            _ => return Err(GiveUp),
        };
        out.push(simple);
        Ok(k + 2)
    }

    /// A flow sequence of scalars on one line (`[a, "b"]`) opening at byte `at`.
    pub(super) fn flow_sequence(&mut self, at: usize, end: usize) -> Read<Value> {
        let s = self.s;
        let skip = |mut k: usize| {
            while k < end && s[k] == b' ' {
                k += 1;
            }
            k
        };
        let mut items = Vec::new();
        let mut k = skip(at + 1);
        if k < end && s[k] == b']' {
            k += 1;
        } else {
            loop {
                if k >= end {
                    return Err(GiveUp);
                }
                let (item, next) = if s[k] == b'"' || s[k] == b'\'' {
                    let (text, close, _) = self.quoted(None, k, end)?.ok_or(GiveUp)?;
                    (Value::String(text), close)
                } else {
                    let stop = k + memchr::memchr2(b',', b']', &s[k..end]).ok_or(GiveUp)?;
                    let text = self.t[k..stop].trim_end_matches(' ');
                    let b = text.as_bytes();
                    if starts_other_than_plain(b)
                        || b[0] == b'?'
                        || b.iter().any(|c| matches!(c, b'[' | b'{' | b'}'))
                        || plain_line(text).is_err()
                        || has_comment(b)
                    {
                        return Err(GiveUp);
                    }
                    (self.finish_plain(text)?, stop)
                };
                if self.build {
                    items.push(item);
                }
                k = skip(next);
                match s.get(k).filter(|_| k < end) {
                    Some(b',') => {
                        k = skip(k + 1);
                        if k < end && s[k] == b']' {
                            // A trailing comma.
                            return Err(GiveUp);
                        }
                    }
                    Some(b']') => {
                        k += 1;
                        break;
                    }
                    _ => return Err(GiveUp),
                }
            }
        }
        self.only_comment(k, end)?;
        self.pos = self.after(end);
        Ok(if self.build { Value::Array(items) } else { Value::Null })
    }

    /// A plain scalar starting at byte `i` of the current line and going on over the more
    /// indented lines after it, folded; resolved as go-yaml resolves plain scalars.
    pub(super) fn plain(&mut self, parent: usize, i: usize, end: usize) -> Read<Value> {
        let (first, mut commented) = plain_line(&self.t[i..end])?;
        self.pos = self.after(end);
        let mut folded: Option<String> = None;
        loop {
            if commented {
                // A comment ends the scalar (a more indented line after it is an error).
                return self.finish_plain(folded.as_deref().unwrap_or(first));
            }
            // Blank lines, then a more indented line that is no comment, continue the scalar.
            let (mut start, mut breaks) = (self.pos, 0);
            let (line_start, indent, line_end) = loop {
                if start >= self.s.len() {
                    return self.finish_plain(folded.as_deref().unwrap_or(first));
                }
                let line_end = self.line_end(start);
                let indent = self.indent(start, line_end);
                if start + indent < line_end {
                    break (start, indent, line_end);
                }
                breaks += 1;
                start = self.after(line_end);
            };
            if indent <= parent || self.s[line_start + indent] == b'#' {
                return self.finish_plain(folded.as_deref().unwrap_or(first));
            }
            // Any character but `#` may go on a plain scalar (indicators only matter first).
            let text = &self.t[line_start + indent..line_end];
            let (more, comment) = plain_line(text)?;
            commented = comment;
            if !self.build {
                // Only a one-line scalar can resolve to anything but a string.
                folded.get_or_insert_with(String::new);
                self.pos = self.after(line_end);
                continue;
            }
            let out = folded.get_or_insert_with(|| first.to_string());
            if breaks == 0 {
                out.push(' ');
            } else {
                out.extend(std::iter::repeat_n('\n', breaks));
            }
            out.push_str(more);
            self.pos = self.after(line_end);
        }
    }

    /// A literal (`|`, `|-`) or folded (`>`, `>-`) block scalar whose header is at byte `at` of
    /// the current line, in a collection at `parent`.
    pub(super) fn block_scalar(&mut self, parent: usize, at: usize, end: usize) -> Read<String> {
        let s = self.s;
        let literal = s[at] == b'|';
        let mut j = at + 1;
        let strip = j < end && s[j] == b'-';
        if strip {
            j += 1;
        }
        if j < end && s[j] != b' ' {
            // `|+`, an indentation indicator, or anything else.
            return Err(GiveUp);
        }
        self.only_comment(j, end)?;
        let mut start = self.after(end);
        // Leading blank lines, then the first line with text sets the indentation.
        let mut leading = 0;
        let content_indent = loop {
            if start >= s.len() {
                break None;
            }
            let line_end = self.line_end(start);
            let indent = self.indent(start, line_end);
            if start + indent < line_end {
                break Some(indent);
            }
            leading += 1;
            start = self.after(line_end);
        };
        let Some(m) = content_indent.filter(|m| *m > parent) else {
            if leading > 0 {
                return Err(GiveUp);
            }
            self.pos = start;
            return Ok(String::new());
        };
        if leading > 0 {
            // Blank lines before the text (each may be longer than the indentation: content).
            return Err(GiveUp);
        }
        let mut out = String::new();
        let mut blanks = 0;
        let mut first = true;
        loop {
            if start >= s.len() {
                break;
            }
            let line_end = self.line_end(start);
            let indent = self.indent(start, line_end);
            if start + indent == line_end {
                if indent > m {
                    return Err(GiveUp);
                }
                blanks += 1;
                start = self.after(line_end);
                continue;
            }
            if indent < m {
                break;
            }
            if !first {
                if literal {
                    out.extend(std::iter::repeat_n('\n', blanks + 1));
                } else if blanks == 0 {
                    out.push(' ');
                } else {
                    out.extend(std::iter::repeat_n('\n', blanks));
                }
            }
            if !literal && indent > m {
                // More indented lines of a folded scalar keep their breaks: left to the general
                // reader.
                return Err(GiveUp);
            }
            if self.build {
                out.push_str(&self.t[start + m..line_end]);
            }
            first = false;
            blanks = 0;
            start = self.after(line_end);
        }
        if start >= s.len() && !s.ends_with(b"\n") && !s.ends_with(b"\r") {
            // Ending the text without a line break: go-yaml keeps no final break (see
            // `read::without_break_past_the_end`), left to the general reader.
            return Err(GiveUp);
        }
        if !strip {
            out.push('\n');
        }
        self.pos = start;
        Ok(out)
    }
}

/// The text of a plain scalar's line, up to a comment and without trailing blanks, and whether
/// a comment ends the line. Gives up on a `: ` or a final `:`, which would make it a key.
pub(super) fn plain_line(text: &str) -> Read<(&str, bool)> {
    let b = text.as_bytes();
    let mut end = b.len();
    let mut comment = false;
    // One pass over the line's `#` and `:` (searching for `" #"` and `": "` as strings costs more
    // than reading the line).
    let mut from = 0;
    while let Some(k) = memchr::memchr2(b'#', b':', &b[from..]).map(|k| from + k) {
        if b[k] == b'#' {
            if k > 0 && b[k - 1] == b' ' {
                (end, comment) = (k - 1, true);
                break;
            }
        } else if k + 1 == b.len() || b[k + 1] == b' ' {
            return Err(GiveUp);
        }
        from = k + 1;
    }
    let cut = text[..end].trim_end_matches(' ');
    if cut.ends_with(':') {
        return Err(GiveUp);
    }
    Ok((cut, comment))
}

/// Whether `text` holds a comment start (` #`).
pub(super) fn has_comment(text: &[u8]) -> bool {
    memchr::memchr_iter(b'#', text).any(|k| k > 0 && text[k - 1] == b' ')
}

impl Fast<'_> {
    /// A plain scalar's value as go-yaml v2 resolves it, through JSON (not built, only checked to
    /// be one JSON can hold, when the node is not built).
    pub(super) fn finish_plain(&self, text: &str) -> Read<Value> {
        if !self.build {
            // Only these start the floats JSON cannot hold (`.inf`, `-.inf`, `.nan`, `1e400`...).
            let number = text.as_bytes().first().is_some_and(|c| matches!(c, b'.' | b'+' | b'-' | b'0'..=b'9'));
            if number && matches!(resolve_plain(text), Plain::Float(f) if !f.is_finite()) {
                return Err(GiveUp);
            }
            return Ok(Value::Null);
        }
        finish_plain(text)
    }
}

/// A plain scalar's value as go-yaml v2 resolves it, through JSON.
fn finish_plain(text: &str) -> Read<Value> {
    Ok(match resolve_plain(text) {
        Plain::Null => Value::Null,
        Plain::Bool(b) => Value::Bool(b),
        Plain::Int(i) => float_to_json(i as f64),
        Plain::UInt(u) => float_to_json(u as f64),
        Plain::Float(f) if f.is_finite() => float_to_json(f),
        Plain::Float(_) => return Err(GiveUp),
        Plain::Timestamp | Plain::Merge | Plain::Str => Value::String(text.to_string()),
    })
}
