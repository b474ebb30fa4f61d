//! YAML as Helm reads and writes it: `sigs.k8s.io/yaml` over go-yaml v2.
//!
//! - [`value_to_yaml`]: `yaml.Marshal` — the value goes through Go's JSON
//!   (so whole floats become integers, keys are strings), is read back by
//!   go-yaml v2 and printed by its emitter: keys in v2's "natural" order,
//!   sequences under a key not indented, strings quoted when they would read
//!   back as something else (`"true"`, `"1.0"`, `"2024-01-01"`, `""`), `'...'`
//!   when plain style can't hold them, literal `|` blocks for multi-line
//!   strings, long lines folded at 80 columns.
//! - [`yaml_to_value`]: `yaml.Unmarshal` into `interface{}` — YAML 1.1
//!   scalars (`y`/`yes`/`on`/`off` are booleans, `0777` octal, `1_000`),
//!   then JSON, so every number is a `float64` and every key a string;
//!   timestamps stay strings; `<<` merge keys; the first document only.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use granit_parser::{Event, Parser, ScalarStyle};

use super::sprig::gofmt::{format_float_g, place_point};
use gotmpl::value::Value;

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

/// A node as go-yaml sees the JSON that Go's `json.Marshal` produced.
enum Node {
    Null,
    Bool(bool),
    /// An integer or float, already in the text the emitter prints.
    Number(String),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

/// `sigs.k8s.io/yaml.Marshal(v)` (with its trailing newline; Helm's `toYaml`
/// trims it). `Err` when Go's JSON encoding fails (NaN, ±Inf).
pub fn marshal(v: &Value) -> Result<String, String> {
    if v.holds_itself() {
        // sigs.k8s.io/yaml encodes through encoding/json, which refuses it.
        return Err("json: unsupported value: encountered a cycle via map[string]interface {}".into());
    }
    let node = to_node(v)?;
    let mut e = Emitter::new();
    e.emit_node(&node, Ctx { root: true, mapping: false, simple_key: false });
    // document end (implicit); go-yaml's encoder clears `open_ended` before
    // the stream end, so no `...` follows a root scalar
    e.write_indent();
    Ok(e.out)
}

/// Helm's `toYamlPretty` (go-yaml v3, indent 2): like [`marshal`] with
/// sequences indented under their key.
pub fn pretty(v: &Value) -> String {
    if v.holds_itself() {
        return String::new();
    }
    let Ok(node) = to_node(v) else { return String::new() };
    let mut e = Emitter::new();
    e.indent_sequences = true;
    e.emit_node(&node, Ctx { root: true, mapping: false, simple_key: false });
    e.write_indent();
    e.out
}

/// `sigs.k8s.io/yaml.Marshal(v)` as text; an empty string when it fails, as
/// Helm's `toYaml` does.
pub fn value_to_yaml(v: &Value) -> String {
    marshal(v).unwrap_or_default()
}

fn to_node(v: &Value) -> Result<Node, String> {
    Ok(match v {
        Value::Nil => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Int(i) | Value::Int64(i) => Node::Number(i.to_string()),
        Value::Float(f) => {
            let json = super::sprig::encoding_json_float(*f).map_err(|e| e.to_string())?;
            // go-yaml reads the JSON number back: an int when it fits, else a float
            if let Some(i) = super::sprig::parse_int(&json) {
                Node::Number(i.to_string())
            } else if let Ok(u) = json.parse::<u64>() {
                Node::Number(u.to_string())
            } else {
                Node::Number(format_float_g(json.parse::<f64>().unwrap_or(*f)))
            }
        }
        Value::String(s) => Node::Str(s.to_string()),
        Value::Bytes(b) => {
            use base64::Engine as _;
            Node::Str(base64::engine::general_purpose::STANDARD.encode(b))
        }
        Value::List(items) => Node::Seq(items.iter().map(to_node).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let mut entries: Vec<(String, Node)> =
                m.borrow().iter().map(|(k, v)| Ok((k.clone(), to_node(v)?))).collect::<Result<_, String>>()?;
            entries.sort_by(|a, b| key_order(&a.0, &b.0));
            Node::Map(entries)
        }
        Value::Object(o) => to_node(&o.to_data())?,
    })
}

/// go-yaml v2's `keyList.Less` for string keys: letters before other
/// characters, runs of digits compared as numbers.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Greater, Less};
    if a == b {
        return std::cmp::Ordering::Equal;
    }
    if key_less(a, b) { Less } else { Greater }
}

fn key_less(a: &str, b: &str) -> bool {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i] < br[i];
        }
        if al || bl {
            return bl;
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an.wrapping_mul(10).wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn.wrapping_mul(10).wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an < bn;
        }
        if ai != bi {
            return ai < bi;
        }
        return ar[i] < br[i];
    }
    ar.len() < br.len()
}

#[derive(Clone, Copy)]
struct Ctx {
    root: bool,

    mapping: bool,
    simple_key: bool,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Style {
    Plain,
    Single,
    Double,
    Literal,
}

struct Analysis {
    multiline: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

const BEST_WIDTH: usize = 80;
const BEST_INDENT: i64 = 2;

/// go-yaml v2's emitter, block style only (what JSON-shaped data needs).
struct Emitter {
    out: String,
    column: usize,
    indent: i64,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    /// go-yaml v3 (`toYamlPretty`): sequences indented under their key.
    indent_sequences: bool,
}

fn is_break(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

fn is_blank(c: char) -> bool {
    c == ' ' || c == '\t'
}

fn is_printable(c: char) -> bool {
    let u = c as u32;
    u == 0x0A
        || (0x20..=0x7E).contains(&u)
        || (0xA0..=0xD7FF).contains(&u)
        || ((0xE000..=0xFFFD).contains(&u) && u != 0xFEFF)
}

fn analyze(value: &str) -> Analysis {
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
    fn new() -> Self {
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

    fn put(&mut self, c: char) {
        self.out.push(c);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push('\n');
        self.column = 0;
    }

    fn write_break(&mut self, c: char) {
        if c == '\n' {
            self.put_break();
        } else {
            self.out.push(c);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
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

    fn write_indicator(&mut self, ind: &str, need_ws: bool, is_ws: bool, is_indention: bool) {
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

    fn increase_indent(&mut self, flow: bool, indentless: bool) -> i64 {
        let saved = self.indent;
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
        saved
    }

    fn emit_node(&mut self, node: &Node, ctx: Ctx) {
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

    fn emit_empty(&mut self, open: &str, close: &str) {
        let saved = self.increase_indent(true, false);
        self.write_indicator(open, true, true, false);
        self.indent = saved;
        self.write_indicator(close, false, false, false);
    }

    fn emit_scalar(&mut self, value: &str, requested: Style, ctx: Ctx) {
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

    fn write_plain(&mut self, value: &str, allow_breaks: bool, root: bool) {
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

    fn write_single(&mut self, value: &str, allow_breaks: bool) {
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

    fn write_double(&mut self, value: &str, allow_breaks: bool) {
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

    fn write_literal(&mut self, value: &str) {
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

static BASE60: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$").expect("static regex"));
static YAML_FLOAT: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$").expect("static regex")
});
static TIMESTAMP: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(
        r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})(?:(?:[Tt]|[ ])([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?)?$",
    )
    .expect("static regex")
});

fn is_base60_float(s: &str) -> bool {
    let Some(c) = s.bytes().next() else { return false };
    if !(c == b'+' || c == b'-' || c.is_ascii_digit()) || !s.contains(':') {
        return false;
    }
    BASE60.is_match(s)
}

/// go-yaml v2's parseTimestamp (the formats it accepts, with range checks).
fn is_timestamp(s: &str) -> bool {
    let Some(c) = TIMESTAMP.captures(s) else { return false };
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
    let (Some(y), Some(mo), Some(d)) = (num(1), num(2), num(3)) else { return false };
    if !(1..=12).contains(&mo) || d == 0 {
        return false;
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo as usize - 1];
    if d > days {
        return false;
    }
    if c.get(4).is_some() {
        // "2006-1-2 15:4:5" has no zone; the T forms need one ... except go's
        // layout "2006-1-2T15:4:5.999999999Z07:00" requires the zone
        let sep_t = s.as_bytes()[c.get(3).map(|m| m.end()).unwrap_or(0)] != b' ';
        if sep_t && c.get(7).is_none() {
            return false;
        }
        if !sep_t && c.get(7).is_some() {
            return false;
        }
        let (Some(h), Some(mi), Some(se)) = (num(4), num(5), num(6)) else { return false };
        if h > 23 || mi > 59 || se > 59 {
            return false;
        }
    }
    true
}

/// Whether go-yaml v2 would read `s`, unquoted, back as a string.
pub(crate) fn resolves_as_string(s: &str) -> bool {
    // "<<" (the merge key) is written plain, as go-yaml does
    matches!(resolve_plain(s), Plain::Str | Plain::Merge)
}

/// A plain scalar as go-yaml v2 resolves it.
#[derive(Debug, Clone, PartialEq)]
enum Plain {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Timestamp,
    Merge,
    Str,
}

fn resolve_plain(s: &str) -> Plain {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Plain::Null,
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => return Plain::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Plain::Bool(false);
        }
        ".nan" | ".NaN" | ".NAN" => return Plain::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Plain::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Plain::Float(f64::NEG_INFINITY),
        "<<" => return Plain::Merge,
        _ => {}
    }
    let first = s.as_bytes()[0];
    match first {
        b'.' => match go_parse_float(s) {
            Some(f) => Plain::Float(f),
            None => Plain::Str,
        },
        b'0'..=b'9' | b'+' | b'-' => {
            if is_timestamp(s) {
                return Plain::Timestamp;
            }
            let plain = s.replace('_', "");
            if let Some(i) = super::sprig::parse_int(&plain) {
                return Plain::Int(i);
            }
            if let Some(u) = parse_go_uint(&plain) {
                return Plain::UInt(u);
            }
            if YAML_FLOAT.is_match(&plain)
                && let Some(f) = go_parse_float(&plain)
            {
                return Plain::Float(f);
            }
            if let Some(b) = plain.strip_prefix("0b") {
                if let Ok(i) = i64::from_str_radix(b, 2) {
                    return Plain::Int(i);
                }
                if let Ok(u) = u64::from_str_radix(b, 2) {
                    return Plain::UInt(u);
                }
            } else if let Some(b) = plain.strip_prefix("-0b")
                && let Ok(i) = i64::from_str_radix(&format!("-{b}"), 2)
            {
                return Plain::Int(i);
            }
            Plain::Str
        }
        _ => Plain::Str,
    }
}

fn parse_go_uint(s: &str) -> Option<u64> {
    if s.starts_with(['+', '-']) {
        return None;
    }
    let l = s.to_ascii_lowercase();
    if let Some(h) = l.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Some(o) = l.strip_prefix("0o") {
        return u64::from_str_radix(o, 8).ok();
    }
    if let Some(b) = l.strip_prefix("0b") {
        return u64::from_str_radix(b, 2).ok();
    }
    if l.len() > 1 && l.starts_with('0') {
        return u64::from_str_radix(&l[1..], 8).ok();
    }
    if l.is_empty() || !l.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    l.parse().ok()
}

/// `strconv.ParseFloat(s, 64)` for decimal forms (what YAML scalars reach).
fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.trim_start_matches(['+', '-']);
    let lower = body.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(if s.starts_with('-') { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    if lower == "nan" {
        return Some(f64::NAN);
    }
    if body.is_empty()
        || !body.bytes().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-' | b'_'))
    {
        return None;
    }
    let cleaned = if body.contains('_') {
        if !underscores_ok(body) {
            return None;
        }
        s.replace('_', "")
    } else {
        s.to_string()
    };
    cleaned.parse::<f64>().ok()
}

fn underscores_ok(s: &str) -> bool {
    let mut saw = '^';
    for c in s.chars() {
        if c.is_ascii_digit() {
            saw = '0';
            continue;
        }
        if c == '_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
            continue;
        }
        if saw == '_' {
            return false;
        }
        saw = '!';
    }
    saw != '_'
}

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// A node as go-yaml v2 decodes it into `interface{}`.
#[derive(Debug, Clone)]
enum YNode {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<YNode>),
    Map(Vec<(YNode, YNode)>),
}

/// `sigs.k8s.io/yaml.Unmarshal` into `interface{}`: the first document, as
/// Helm's values and `fromYaml` see it. Errors carry sigs.k8s.io/yaml's prefix.
pub fn yaml_to_value(text: &str) -> Result<Value, String> {
    let node = parse_first_document(text).map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
    match node {
        None => Ok(Value::Nil),
        Some(n) => to_json_value(&n).map_err(|e| format!("error converting YAML to JSON: {e}")),
    }
}

fn to_json_value(n: &YNode) -> Result<Value, String> {
    Ok(match n {
        YNode::Null => Value::Nil,
        YNode::Bool(b) => Value::Bool(*b),
        YNode::Int(i) => Value::Float(*i as f64),
        YNode::UInt(u) => Value::Float(*u as f64),
        YNode::Float(f) => {
            if !f.is_finite() {
                return Err(format!("json: unsupported value: {}", format_float_g(*f)));
            }
            Value::Float(*f)
        }
        YNode::Str(s) => Value::str(s.as_str()),
        YNode::Seq(items) => Value::list(items.iter().map(to_json_value).collect::<Result<_, _>>()?),
        YNode::Map(entries) => {
            let mut m = BTreeMap::new();
            for (k, v) in entries {
                let key = match k {
                    YNode::Str(s) => s.clone(),
                    YNode::Int(i) => i.to_string(),
                    YNode::Float(f) => float32_key(*f),
                    YNode::Bool(b) => b.to_string(),
                    other => {
                        return Err(format!(
                            "unsupported map key of type: {}, key: {}",
                            ynode_type(other),
                            ynode_text(other)
                        ));
                    }
                };
                m.insert(key, to_json_value(v)?);
            }
            Value::map(m)
        }
    })
}

fn ynode_type(n: &YNode) -> &'static str {
    match n {
        YNode::Null => "%!s(<nil>)",
        YNode::UInt(_) => "uint64",
        YNode::Seq(_) => "[]interface {}",
        YNode::Map(_) => "map[interface {}]interface {}",
        _ => "?",
    }
}

fn ynode_text(n: &YNode) -> String {
    match n {
        YNode::Null => "<nil>".into(),
        YNode::UInt(u) => format!("0x{u:x}"),
        _ => "...".into(),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with YAML's names for the specials.
fn float32_key(f: f64) -> String {
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf".into() } else { "-.inf".into() };
    }
    let g = f as f32;
    if g == 0.0 {
        return "0".into();
    }
    let s = format!("{:e}", g.abs());
    let (mant, exp) = s.split_once('e').unwrap_or((s.as_str(), "0"));
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if g < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let mut m = digits[..1].to_string();
        if digits.len() > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        format!("{sign}{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        format!("{sign}{}", place_point(&digits, exp))
    }
}

struct Reader<'a> {
    text: &'a str,
    parser: Parser<'a, granit_parser::StrInput<'a>>,
    /// Anchored nodes and how many nodes each expands to.
    anchors: std::collections::HashMap<usize, (YNode, u64)>,
    /// Nodes built so far, aliases counted expanded: the alias budget.
    nodes: u64,
    depth: usize,
}

/// go-yaml v3's nesting limit.
const MAX_DEPTH: usize = 10_000;

/// The most nodes a document may expand to through aliases beyond its own
/// size: ten lines of nested aliases (the "billion laughs") must not become
/// a billion nodes. go-yaml refuses such documents with this same message.
const ALIAS_BUDGET: u64 = 1_000_000;

/// The first document; a quoted scalar continued at or left of its block's indentation (which
/// libyaml, go-yaml's base, accepts and YAML 1.2 parsers refuse) is read after indenting its
/// continuation lines, which changes nothing else: line folding drops their leading blanks.
fn parse_first_document(text: &str) -> Result<Option<YNode>, String> {
    match parse_first_document_strict(text) {
        Err(e) if e.contains("invalid indentation in multiline quoted scalar") => {
            parse_first_document_strict(&indent_quoted_continuations(text))
        }
        other => other,
    }
}

/// Indents the continuation lines of multi-line quoted scalars in block context two columns
/// past the line that opens the scalar. Block scalars and comments are skipped.
fn indent_quoted_continuations(text: &str) -> String {
    let indent_of = |l: &str| l.len() - l.trim_start_matches(' ').len();
    let mut out = String::with_capacity(text.len() + 64);
    // Inside a quoted scalar: its quote and the indentation continuations need.
    let mut open: Option<(char, usize)> = None;
    // Inside a block scalar opened by a line of this indentation.
    let mut block: Option<usize> = None;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some((quote, need)) = open {
            let pad = need.saturating_sub(indent_of(bare));
            if !bare.trim().is_empty() {
                out.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line);
            // (After the closing quote, another scalar opening on the same line is not seen: rare.)
            open = scan_quoted(bare, 0, quote).map(|_| (quote, need));
            continue;
        }
        if let Some(b) = block {
            if bare.trim().is_empty() || indent_of(bare) > b {
                out.push_str(line);
                continue;
            }
            block = None;
        }
        out.push_str(line);
        let indent = indent_of(bare);
        let mut at_start = true;
        let chars: Vec<(usize, char)> = bare.char_indices().collect();
        let mut i = 0;
        while i < chars.len() {
            let (pos, c) = chars[i];
            match c {
                ' ' | '\t' => {}
                '#' if pos == 0 || bare[..pos].ends_with([' ', '\t']) => break,
                '"' | '\'' if at_start => match scan_quoted(bare, pos + 1, c) {
                    Some(_) => {
                        open = Some((c, indent + 2));
                        break;
                    }
                    None => {
                        // Closed on this line: skip to its end.
                        let close = closing_quote(bare, pos + 1, c).unwrap_or(bare.len());
                        i = chars.iter().position(|(p, _)| *p > close).unwrap_or(chars.len());
                        at_start = false;
                        continue;
                    }
                },
                '|' | '>' if at_start => {
                    block = Some(indent);
                    break;
                }
                '-' | '?' | ':' if bare[pos + 1..].starts_with([' ', '\t']) || pos + 1 == bare.len() => {
                    at_start = true;
                }
                '[' | '{' | ',' => at_start = true,
                _ => at_start = false,
            }
            i += 1;
        }
    }
    out
}

/// Byte offset of the quote closing a scalar whose text starts at `from`.
fn closing_quote(line: &str, from: usize, quote: char) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        match (quote, bytes[i]) {
            ('"', b'\\') => i += 1,
            ('"', b'"') => return Some(i),
            ('\'', b'\'') if bytes.get(i + 1) == Some(&b'\'') => i += 1,
            ('\'', b'\'') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// `Some(())` when the scalar starting at `from` is still open at the end of the line.
fn scan_quoted(line: &str, from: usize, quote: char) -> Option<()> {
    match closing_quote(line, from, quote) {
        Some(_) => None,
        None => Some(()),
    }
}

fn parse_first_document_strict(text: &str) -> Result<Option<YNode>, String> {
    let mut options = granit_parser::Options::default();
    options.set_emit_comments(false);
    options.emit_unresolved_aliases = true;
    let mut r = Reader {
        text,
        parser: Parser::new_from_str_with_options(text, options),
        anchors: Default::default(),
        nodes: 0,
        depth: 0,
    };
    loop {
        match r.next()? {
            None | Some(Event::StreamEnd) => return Ok(None),
            Some(Event::StreamStart) => continue,
            Some(Event::DocumentStart(..)) => {
                let ev = r.next()?.ok_or("unexpected end of stream")?;
                if matches!(ev, Event::DocumentEnd) {
                    return Ok(None);
                }
                return r.node(ev).map(Some);
            }
            Some(_) => continue,
        }
    }
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<Option<Event<'a>>, String> {
        match self.parser.next_event() {
            None => Ok(None),
            Some(Ok((ev, _))) => Ok(Some(ev)),
            Some(Err(e)) => Err(libyaml_error(self.text, e.marker().line(), &e.info())),
        }
    }

    fn node(&mut self, ev: Event<'a>) -> Result<YNode, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("yaml: exceeded max depth of {MAX_DEPTH}"));
        }
        self.depth += 1;
        let n = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.build(ev));
        self.depth -= 1;
        self.nodes += 1;
        n
    }

    fn build(&mut self, ev: Event<'a>) -> Result<YNode, String> {
        let before = self.nodes;
        match ev {
            Event::Alias(id) => {
                let (n, size) = self.anchors.get(&id).ok_or_else(|| "unknown anchor referenced".to_string())?;
                self.nodes += size;
                if self.nodes > ALIAS_BUDGET + self.text.len() as u64 {
                    return Err("yaml: document contains excessive aliasing".into());
                }
                Ok(n.clone())
            }
            Event::UnresolvedAlias(name) => Err(format!("unknown anchor '{name}' referenced")),
            Event::Scalar(value, style, anchor, tag) => {
                let tag = tag.map(|t| {
                    if t.handle() == "tag:yaml.org,2002:" || t.handle() == "!!" {
                        format!("!!{}", t.suffix())
                    } else {
                        format!("{}{}", t.handle(), t.suffix())
                    }
                });
                let n = scalar(&value, style, tag.as_deref())?;
                if anchor != 0 {
                    self.anchors.insert(anchor, (n.clone(), self.nodes - before + 1));
                }
                Ok(n)
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                loop {
                    let ev = self.next()?.ok_or("unexpected end of stream")?;
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(ev)?);
                }
                let n = YNode::Seq(items);
                if anchor != 0 {
                    self.anchors.insert(anchor, (n.clone(), self.nodes - before + 1));
                }
                Ok(n)
            }
            Event::MappingStart(_, anchor, _) => {
                let mut entries: Vec<(YNode, YNode)> = Vec::new();
                loop {
                    let ev = self.next()?.ok_or("unexpected end of stream")?;
                    if matches!(ev, Event::MappingEnd) {
                        break;
                    }
                    let is_merge = matches!(&ev, Event::Scalar(v, ScalarStyle::Plain, _, None) if v == "<<");
                    let k = self.node(ev)?;
                    let vev = self.next()?.ok_or("unexpected end of stream")?;
                    let v = self.node(vev)?;
                    if is_merge {
                        let maps: Vec<YNode> = match v {
                            YNode::Map(_) => vec![v],
                            YNode::Seq(items) => {
                                if items.iter().any(|x| !matches!(x, YNode::Map(_))) {
                                    return Err("map merge requires map or sequence of maps as the value".into());
                                }
                                items.into_iter().rev().collect()
                            }
                            _ => return Err("map merge requires map or sequence of maps as the value".into()),
                        };
                        for m in maps {
                            if let YNode::Map(es) = m {
                                for (mk, mv) in es {
                                    insert_entry(&mut entries, mk, mv);
                                }
                            }
                        }
                        continue;
                    }
                    insert_entry(&mut entries, k, v);
                }
                let n = YNode::Map(entries);
                if anchor != 0 {
                    self.anchors.insert(anchor, (n.clone(), self.nodes - before + 1));
                }
                Ok(n)
            }
            other => Err(format!("unexpected event {other:?}")),
        }
    }
}

/// go-yaml v2's wording for a parse error: libyaml's message, with
/// `line N: ` as v2 prints it (scanner errors 1-based and only past the
/// first line; parser errors at the 0-based line, end of input counting as
/// a new line).
fn libyaml_error(text: &str, line: usize, info: &str) -> String {
    let msg = info.rsplit(", ").next().unwrap_or(info).trim();
    let eof_line = text.lines().count();
    let scanner = |m: &str, line0: usize| if line0 == 0 { m.to_string() } else { format!("line {}: {m}", line0 + 1) };
    let parser = |m: &str, line0: usize| if line0 == 0 { m.to_string() } else { format!("line {line0}: {m}") };
    if msg.starts_with("unclosed bracket") {
        let open = if msg.contains('{') { '{' } else { '[' };
        let after = text.rfind(open).map(|i| text[i + 1..].trim()).unwrap_or("");
        let m = if after.is_empty() {
            "did not find expected node content".to_string()
        } else if open == '{' {
            "did not find expected ',' or '}'".to_string()
        } else {
            "did not find expected ',' or ']'".to_string()
        };
        return parser(&m, eof_line);
    }
    if msg.starts_with("unclosed quote") {
        return scanner("found unexpected end of stream", line.saturating_sub(1));
    }
    if msg.starts_with("unexpected character") {
        return scanner("found character that cannot start any token", line.saturating_sub(1));
    }
    if msg.contains("unknown anchor") {
        return msg.to_string();
    }
    if msg.contains("version number") || msg.contains("mapping values are not allowed") || msg.starts_with("found ") {
        return scanner(msg, line.saturating_sub(1));
    }
    parser(msg, line.saturating_sub(1))
}

fn same_key(a: &YNode, b: &YNode) -> bool {
    match (a, b) {
        (YNode::Str(x), YNode::Str(y)) => x == y,
        (YNode::Int(x), YNode::Int(y)) => x == y,
        (YNode::Bool(x), YNode::Bool(y)) => x == y,
        (YNode::Float(x), YNode::Float(y)) => x == y,
        (YNode::Null, YNode::Null) => true,
        _ => false,
    }
}

fn insert_entry(entries: &mut Vec<(YNode, YNode)>, k: YNode, v: YNode) {
    if let Some(e) = entries.iter_mut().find(|(ek, _)| same_key(ek, &k)) {
        e.1 = v;
    } else {
        entries.push((k, v));
    }
}

fn scalar(value: &str, style: ScalarStyle, tag: Option<&str>) -> Result<YNode, String> {
    let plain = matches!(style, ScalarStyle::Plain);
    match tag {
        Some("!!str") => return Ok(YNode::Str(value.to_string())),
        Some("!!binary") => {
            let cleaned: String = value.chars().filter(|c| !c.is_whitespace()).collect();
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(cleaned)
                .map_err(|e| format!("!!binary value contains invalid base64 data: {e}"))?;
            return Ok(YNode::Str(String::from_utf8_lossy(&bytes).into_owned()));
        }
        Some(t @ ("!!int" | "!!float" | "!!bool" | "!!null" | "!!timestamp")) => {
            let r = resolve_plain(value);
            return match (t, r) {
                ("!!int", Plain::Int(i)) => Ok(YNode::Int(i)),
                ("!!int", Plain::UInt(u)) => Ok(YNode::UInt(u)),
                ("!!float", Plain::Float(f)) => Ok(YNode::Float(f)),
                ("!!float", Plain::Int(i)) => Ok(YNode::Float(i as f64)),
                ("!!bool", Plain::Bool(b)) => Ok(YNode::Bool(b)),
                ("!!null", Plain::Null) => Ok(YNode::Null),
                ("!!timestamp", Plain::Timestamp) => Ok(YNode::Str(value.to_string())),
                (t, r) => Err(format!("cannot decode {} `{value}` as a {t}", plain_tag(&r))),
            };
        }
        Some(t) if !t.starts_with("!!") && !t.is_empty() && t != "!" => {
            // an application tag: go-yaml keeps the text
            return Ok(YNode::Str(value.to_string()));
        }
        _ => {}
    }
    if !plain || tag == Some("!") {
        return Ok(YNode::Str(value.to_string()));
    }
    Ok(match resolve_plain(value) {
        Plain::Null => YNode::Null,
        Plain::Bool(b) => YNode::Bool(b),
        Plain::Int(i) => YNode::Int(i),
        Plain::UInt(u) => YNode::UInt(u),
        Plain::Float(f) => YNode::Float(f),
        Plain::Timestamp | Plain::Merge | Plain::Str => YNode::Str(value.to_string()),
    })
}

fn plain_tag(p: &Plain) -> &'static str {
    match p {
        Plain::Null => "!!null",
        Plain::Bool(_) => "!!bool",
        Plain::Int(_) | Plain::UInt(_) => "!!int",
        Plain::Float(_) => "!!float",
        Plain::Timestamp => "!!timestamp",
        Plain::Merge => "!!merge",
        Plain::Str => "!!str",
    }
}

#[cfg(test)]
mod tests {
    /// go-yaml (libyaml) reads a double-quoted scalar continued at column 0, as
    /// `openstack/scs`'s cluster class renders it; the value is folded as usual.
    #[test]
    fn quoted_scalars_continued_left_of_their_block_are_read() {
        let text = "spec:\n  a:\n    description: \"one two\nthree 'x' # not a comment\n  four\"\n    b: 'it''s\nok'\n    c: |\n      \"open\n    d: 0755\n";
        let v = super::yaml_to_value(text).expect("reads").to_json();
        assert_eq!(v["spec"]["a"]["description"], "one two three 'x' # not a comment four");
        assert_eq!(v["spec"]["a"]["b"], "it's ok");
        assert_eq!(v["spec"]["a"]["c"], "\"open\n");
        assert_eq!(v["spec"]["a"]["d"], 493);
    }

    use super::*;

    fn m(pairs: &[(&str, Value)]) -> Value {
        Value::map(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    #[test]
    fn to_yaml_as_sigs_yaml() {
        let v = m(&[
            ("name", Value::str("x")),
            ("list", Value::list(vec![Value::str("a"), m(&[("k", Value::Float(1.0)), ("b", Value::Bool(true))])])),
            ("nested", m(&[("empty", Value::list(vec![])), ("map", m(&[]))])),
            (
                "quoted",
                Value::list(vec![
                    Value::str("true"),
                    Value::str("1.0"),
                    Value::str(""),
                    Value::str("yes"),
                    Value::str("2024-01-02"),
                ]),
            ),
            ("multi", Value::str("line1\nline2\n")),
            ("nil", Value::Nil),
            ("float", Value::Float(1.5)),
            ("big", Value::Float(1234567.5)),
            ("colon", Value::str("a: b")),
            ("dash", Value::str("- x")),
            ("star", Value::str("*x")),
            ("tab", Value::str("a\tb")),
        ]);
        let want = "big: 1.2345675e+06
colon: 'a: b'
dash: '- x'
float: 1.5
list:
- a
- b: true
  k: 1
multi: |
  line1
  line2
name: x
nested:
  empty: []
  map: {}
nil: null
quoted:
- \"true\"
- \"1.0\"
- \"\"
- \"yes\"
- \"2024-01-02\"
star: '*x'
tab: \"a\\tb\"
";
        assert_eq!(value_to_yaml(&v), want);
    }

    #[test]
    fn key_order_is_natural() {
        let v = m(&[("a10", Value::Nil), ("a2", Value::Nil), ("B", Value::Nil), ("_x", Value::Nil), ("a", Value::Nil)]);
        assert_eq!(value_to_yaml(&v), "_x: null\nB: null\na: null\na2: null\na10: null\n");
    }

    #[test]
    fn long_strings_fold_and_literals_keep() {
        let long = "word ".repeat(20).trim_end().to_string();
        let v = m(&[("k", Value::str(long.as_str()))]);
        let out = value_to_yaml(&v);
        assert_eq!(out, format!("k: {}\n  {}\n", "word ".repeat(16).trim_end(), "word ".repeat(4).trim_end()));
        let lit = m(&[("k", Value::str("a\n\nb"))]);
        assert_eq!(value_to_yaml(&lit), "k: |-\n  a\n\n  b\n");
        let nested = m(&[("l", Value::list(vec![Value::list(vec![Value::str("x")]), Value::str(" lead")]))]);
        assert_eq!(value_to_yaml(&nested), "l:\n- - x\n- ' lead'\n");
        assert_eq!(value_to_yaml(&Value::str("foo")), "foo\n");
        assert_eq!(value_to_yaml(&Value::list(vec![])), "[]\n");
    }

    #[test]
    fn reading_as_helm_reads() {
        let v = yaml_to_value("a: yes\nb: on\nc: 1\nd: 0777\ne: 1_000\nf: 2024-01-02\ng: '1'\nh: ~\ni: 1.5\n1: x\ntrue: y\nbase: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n")
            .expect("parse");
        let json = crate::sprig::format_value(&v);
        assert_eq!(
            json,
            "map[1:x a:true b:true base:map[x:1] c:1 d:511 e:1000 f:2024-01-02 g:1 h:<nil> i:1.5 m:map[true:2 x:1] true:true]"
        );
        assert!(
            matches!(yaml_to_value("c: 1").expect("p"), Value::Map(m) if matches!(m.borrow().get("c"), Some(Value::Float(_))))
        );
        assert!(yaml_to_value("a: [").is_err());
        assert!(matches!(yaml_to_value(""), Ok(Value::Nil)));
        assert!(yaml_to_value("a: .inf").is_err());
    }
}
