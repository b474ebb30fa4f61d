//! The YAML of nearly every manifest read at a fraction of the general reader's cost.
//!
//! Rendered manifests and the `crds/` files of charts are block YAML written by tools
//! (controller-gen, go-yaml's emitter, templates shaped like both): block mappings and
//! sequences indented with spaces, plain keys, plain and quoted scalars (over several lines
//! too), literal and folded block scalars, `{}`, `[]` and one-line flow sequences of scalars.
//! [`read_json`] reads exactly that, line by line, straight into the JSON value
//! [`super::yaml_to_json`] gives, and gives up (`None`) at the first thing it does not read
//! itself: anchors, aliases, tags, flow mappings, nested or multi-line flow collections,
//! complex or non-string keys, tabs and other control characters, `|+`, explicit indentation,
//! a document marker, anything it cannot tell is valid. The caller then reads the document with
//! the general reader, which also gives every error: this reader never fails, so what it
//! accepts it reads as the general reader does, and what it refuses costs one wasted pass over
//! a prefix of the text. [`read_head`] builds only the head ([`super::yaml_head`]). The tests
//! (random documents, the whole public corpus) hold the two readers together.
//!
//! Why: a chart's CRDs are megabytes (kube-prometheus-stack's are 4.5 MB) and the operator reads
//! each as an object on every render; the general reader spends about 110 instructions a byte
//! (its event parser most of it), this one about a quarter of that.

use std::cell::Cell;

use serde_json::{Map, Value};

use super::resolve::{Plain, resolve_plain};

mod scalars;
#[cfg(test)]
mod tests;

use scalars::has_comment;

/// The document uses something this reader leaves to the general one.
struct GiveUp;

type Read<T> = Result<T, GiveUp>;

/// Deeper nesting than manifests have is left to the general reader (which has its own limit).
const MAX_DEPTH: usize = 200;
/// libyaml refuses implicit keys longer than 1024 characters; longer ones are left to it.
const MAX_KEY: usize = 1000;

/// [`super::yaml_to_json`] of `text` when it is block YAML of the kind described above; `None`
/// when the general reader must read it (which then also finds any error).
pub(super) fn read_json(text: &str) -> Option<Value> {
    read(text, false)
}

/// [`read_json`] cut down to `apiVersion`, `kind` and `metadata` ([`super::yaml_head`]): the rest
/// of a mapping is read as closely (so it gives up on the same documents) but not built.
pub(super) fn read_head(text: &str) -> Option<Value> {
    read(text, true)
}

fn read(text: &str, head: bool) -> Option<Value> {
    if !plain_characters(text.as_bytes()) {
        return None;
    }
    Fast { s: text.as_bytes(), t: text, pos: 0, depth: 0, head, build: true, line: Cell::new((usize::MAX, 0)) }
        .document()
        .ok()
}

/// Whether every character is one this reader handles: no tab, carriage return or other control
/// character, no C1 control, byte-order mark, non-character or Unicode line break (which YAML
/// readers treat in ways of their own).
fn plain_characters(s: &[u8]) -> bool {
    // Runs of printable ASCII (nearly all of a manifest) are checked 32 bytes at a time, without
    // a branch per byte.
    const RUN: usize = 32;
    let mut i = 0;
    while i < s.len() {
        if let Some(run) = s.get(i..i + RUN) {
            let odd = run.iter().fold(0u8, |odd, &c| odd | u8::from((c < 0x20 && c != b'\n') || c >= 0x7f));
            if odd == 0 {
                i += RUN;
                continue;
            }
        }
        let c = s[i];
        if c < 0x80 {
            if (c < 0x20 && c != b'\n') || c == 0x7f {
                return false;
            }
        } else {
            let next = |k: usize| s.get(i + k).copied().unwrap_or(0);
            match c {
                // U+0080..U+009F (NEL among them).
                0xc2 if next(1) < 0xa0 => return false,
                // U+2028, U+2029.
                0xe2 if next(1) == 0x80 && matches!(next(2), 0xa8 | 0xa9) => return false,
                // U+FEFF, U+FFFE, U+FFFF.
                0xef if (next(1) == 0xbb && next(2) == 0xbf) || (next(1) == 0xbf && matches!(next(2), 0xbe | 0xbf)) => {
                    return false;
                }
                _ => {}
            }
        }
        i += 1;
    }
    true
}

struct Fast<'a> {
    s: &'a [u8],
    t: &'a str,
    /// The start of the line being read.
    pos: usize,
    depth: usize,
    /// Only the head of a root mapping is built.
    head: bool,
    /// Whether the node being read is built (else only read: [`Value::Null`] stands for it).
    build: bool,
    /// The last line whose end was looked for (start, end): each line is looked at by the
    /// reader of the next content, then by the collection that reads it.
    line: Cell<(usize, usize)>,
}

impl Fast<'_> {
    fn document(&mut self) -> Read<Value> {
        let Some((start, indent)) = self.next_content()? else { return Ok(Value::Null) };
        let end = self.line_end(start);
        let value = if is_entry(&self.s[start + indent..end]) {
            // A document that is no mapping has no head to cut: it is read whole.
            self.head = false;
            self.sequence(indent)?
        } else {
            self.mapping(indent, start + indent)?
        };
        match self.next_content()? {
            None => Ok(value),
            Some(_) => Err(GiveUp),
        }
    }

    fn line_end(&self, from: usize) -> usize {
        let (start, end) = self.line.get();
        if start == from {
            return end;
        }
        let end = match memchr(b'\n', &self.s[from..]) {
            Some(i) => from + i,
            None => self.s.len(),
        };
        self.line.set((from, end));
        end
    }

    fn after(&self, end: usize) -> usize {
        (end + 1).min(self.s.len())
    }

    fn indent(&self, start: usize, end: usize) -> usize {
        self.s[start..end].iter().take_while(|c| **c == b' ').count()
    }

    /// Moves to the next line that is neither blank nor a comment: its start and indentation,
    /// or `None` at the end. A document marker or directive gives up.
    fn next_content(&mut self) -> Read<Option<(usize, usize)>> {
        while self.pos < self.s.len() {
            let start = self.pos;
            let end = self.line_end(start);
            let indent = self.indent(start, end);
            if start + indent == end || self.s[start + indent] == b'#' {
                self.pos = self.after(end);
                continue;
            }
            if indent == 0 {
                let line = &self.s[start..end];
                if line.starts_with(b"---") || line.starts_with(b"...") || line[0] == b'%' {
                    return Err(GiveUp);
                }
            }
            return Ok(Some((start, indent)));
        }
        Ok(None)
    }

    fn enter(&mut self) -> Read<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(GiveUp);
        }
        Ok(())
    }

    /// The node on the lines after a `key:` or `-` with nothing after it, in a collection at
    /// `parent`; `same`: a sequence may start at `parent` itself (a mapping's value).
    fn block_node(&mut self, parent: usize, same: bool) -> Read<Value> {
        let Some((start, indent)) = self.next_content()? else { return Ok(Value::Null) };
        let end = self.line_end(start);
        if is_entry(&self.s[start + indent..end]) {
            if indent > parent || (same && indent == parent) {
                return self.sequence(indent);
            }
            return Ok(Value::Null);
        }
        if indent <= parent {
            return Ok(Value::Null);
        }
        match self.key(start + indent, end)? {
            Some(_) => self.mapping(indent, start + indent),
            // A scalar (or `{}`, `[]`) on a line of its own.
            None => self.inline(parent, start + indent, end),
        }
    }

    /// A block mapping whose keys are at column `indent`, the first at byte `at` of the
    /// current line.
    fn mapping(&mut self, indent: usize, mut at: usize) -> Read<Value> {
        self.enter()?;
        let (build, head) = (self.build, self.head && self.depth == 1);
        let mut map = Map::new();
        loop {
            let end = self.line_end(self.pos);
            let (key, after) = self.key(at, end)?.ok_or(GiveUp)?;
            if head {
                self.build = super::head::HEAD_KEYS.contains(&key.as_str());
            }
            let value = self.value(indent, after, end)?;
            if self.build {
                map.insert(key, value);
            }
            self.build = build;
            let Some((start, next)) = self.next_content()? else { break };
            if next < indent {
                break;
            }
            if next > indent || is_entry(&self.s[start + next..self.line_end(start)]) {
                return Err(GiveUp);
            }
            at = start + next;
        }
        self.depth -= 1;
        Ok(if build { Value::Object(map) } else { Value::Null })
    }

    /// A block sequence whose `-` are at column `indent`, the current line holding the first.
    fn sequence(&mut self, indent: usize) -> Read<Value> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            let end = self.line_end(self.pos);
            let dash = self.pos + indent;
            let mut j = dash + 1;
            while j < end && self.s[j] == b' ' {
                j += 1;
            }
            let item = if j == end || (self.s[j] == b'#' && j > dash + 1) {
                self.pos = self.after(end);
                self.block_node(indent, false)?
            } else if is_entry(&self.s[j..end]) {
                return Err(GiveUp);
            } else if self.key(j, end)?.is_some() {
                self.mapping(j - self.pos, j)?
            } else {
                self.inline(indent, j, end)?
            };
            if self.build {
                items.push(item);
            }
            let Some((start, next)) = self.next_content()? else { break };
            if next < indent {
                break;
            }
            if next > indent {
                return Err(GiveUp);
            }
            if !is_entry(&self.s[start + next..self.line_end(start)]) {
                // The next key of the mapping this sequence is the value of.
                break;
            }
        }
        self.depth -= 1;
        Ok(if self.build { Value::Array(items) } else { Value::Null })
    }

    /// The key starting at byte `at` of the current line (ending at `end`), and where its value
    /// starts (after the `:`); `None` when the text there is not a key.
    fn key(&self, at: usize, end: usize) -> Read<Option<(String, usize)>> {
        let s = self.s;
        let c = s[at];
        if c == b'"' || c == b'\'' {
            let Some((key, close, _)) = self.quoted(None, at, end)? else { return Ok(None) };
            let mut i = close;
            while i < end && s[i] == b' ' {
                i += 1;
            }
            if i < end && s[i] == b':' && (i + 1 == end || s[i + 1] == b' ') {
                return Ok(Some((key, i + 1)));
            }
            return Ok(None);
        }
        if starts_other_than_plain(&s[at..end]) {
            return Ok(None);
        }
        let mut i = at;
        let colon = loop {
            let Some(k) = memchr(b':', &s[i..end]) else { return Ok(None) };
            let k = i + k;
            if k + 1 == end || s[k + 1] == b' ' {
                break k;
            }
            i = k + 1;
        };
        let key = self.t[at..colon].trim_end_matches(' ');
        if key.is_empty() || key.len() > MAX_KEY || has_comment(key.as_bytes()) {
            return Err(GiveUp);
        }
        // Keys that resolve to anything but a string (numbers, booleans, null, `<<`) become
        // JSON keys by rules of their own: left to the general reader.
        match resolve_plain(key) {
            Plain::Str | Plain::Timestamp => Ok(Some((key.to_string(), colon + 1))),
            _ => Err(GiveUp),
        }
    }

    /// The value after a key's `:` at byte `from` of the current line, in a mapping at `indent`.
    fn value(&mut self, indent: usize, from: usize, end: usize) -> Read<Value> {
        let mut i = from;
        while i < end && self.s[i] == b' ' {
            i += 1;
        }
        if i == end || self.s[i] == b'#' {
            self.pos = self.after(end);
            return self.block_node(indent, true);
        }
        self.inline(indent, i, end)
    }

    /// A scalar (or `{}`, `[]`) starting at byte `i` of the current line, in a collection at
    /// `parent`; reads its lines and leaves the position at the line after them.
    fn inline(&mut self, parent: usize, i: usize, end: usize) -> Read<Value> {
        let s = self.s;
        match s[i] {
            b'"' | b'\'' => {
                let (text, close, close_line_end) = self.quoted(Some(parent), i, end)?.ok_or(GiveUp)?;
                self.only_comment(close, close_line_end)?;
                self.pos = self.after(close_line_end);
                Ok(if self.build { Value::String(text) } else { Value::Null })
            }
            b'|' | b'>' => self.block_scalar(parent, i, end).map(|text| match self.build {
                true => Value::String(text),
                false => Value::Null,
            }),
            b'{' => {
                if s.get(i + 1) != Some(&b'}') {
                    return Err(GiveUp);
                }
                self.only_comment(i + 2, end)?;
                self.pos = self.after(end);
                Ok(Value::Object(Map::new()))
            }
            b'[' => self.flow_sequence(i, end),
            _ => {
                if starts_other_than_plain(&s[i..end]) {
                    return Err(GiveUp);
                }
                self.plain(parent, i, end)
            }
        }
    }

    /// Nothing but blanks and a comment from `from` to `end`.
    fn only_comment(&self, from: usize, end: usize) -> Read<()> {
        let mut k = from;
        while k < end && self.s[k] == b' ' {
            k += 1;
        }
        if k == end || (self.s[k] == b'#' && k > from) { Ok(()) } else { Err(GiveUp) }
    }
}

/// A block sequence entry: `-` then a space or the end of the line.
fn is_entry(line: &[u8]) -> bool {
    line.first() == Some(&b'-') && (line.len() == 1 || line[1] == b' ')
}

/// Text that starts with an indicator (and so is not a plain scalar this reader reads).
fn starts_other_than_plain(text: &[u8]) -> bool {
    match text.first() {
        None => true,
        Some(b'-' | b'?' | b':') => text.len() == 1 || text[1] == b' ',
        Some(c) => b",[]{}#&*!|>'\"%@`".contains(c),
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    memchr::memchr(needle, haystack)
}
