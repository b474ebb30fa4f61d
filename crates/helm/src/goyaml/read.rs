//! Reading: go-yaml v2's decoding into `interface{}` (anchors with an alias
//! budget, merge keys, duplicate keys), libyaml's error wording, and the
//! lenient indentation of quoted scalars libyaml accepts.

use std::collections::BTreeMap;

use granit_parser::{Event, Parser, ScalarStyle};

use crate::sprig::gofmt::{format_float_g, place_point};
use gotmpl::value::Value;

use super::resolve::*;

/// A node as go-yaml v2 decodes it into `interface{}`.
#[derive(Debug, Clone)]
pub(super) enum YNode {
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

/// [`yaml_to_value`] then [`Value::to_json`], without the template values in between: what a
/// rendered manifest becomes as an object. The node tree is consumed, so strings move instead of
/// being copied twice; numbers and keys come out exactly as through `to_json`. Most manifests
/// are read by [`super::fast`]; the rest, and every error, by the general reader.
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, String> {
    match super::fast::read_json(text) {
        Some(value) => Ok(value),
        None => general_json(text),
    }
}

/// [`yaml_to_json`] by the general reader alone.
pub(super) fn general_json(text: &str) -> Result<serde_json::Value, String> {
    let node = parse_first_document(text).map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))?;
    match node {
        None => Ok(serde_json::Value::Null),
        Some(n) => node_to_json(n).map_err(|e| format!("error converting YAML to JSON: {e}")),
    }
}

/// A float64 as `Value::to_json` writes it: whole numbers below 1e15 as integers.
pub(super) fn float_to_json(f: f64) -> serde_json::Value {
    if f.fract() == 0.0 && f.abs() < 1e15 {
        serde_json::Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)
    }
}

pub(super) fn node_to_json(n: YNode) -> Result<serde_json::Value, String> {
    Ok(match n {
        YNode::Null => serde_json::Value::Null,
        YNode::Bool(b) => serde_json::Value::Bool(b),
        // Through JSON every number is a float64, as in `to_json_value`.
        YNode::Int(i) => float_to_json(i as f64),
        YNode::UInt(u) => float_to_json(u as f64),
        YNode::Float(f) => {
            if !f.is_finite() {
                return Err(format!("json: unsupported value: {}", format_float_g(f)));
            }
            float_to_json(f)
        }
        YNode::Str(s) => serde_json::Value::String(s),
        YNode::Seq(items) => serde_json::Value::Array(items.into_iter().map(node_to_json).collect::<Result<_, _>>()?),
        YNode::Map(entries) => {
            // Sorted, the last of duplicate keys winning, as the template map does.
            let mut m = BTreeMap::new();
            for (k, v) in entries {
                m.insert(map_key(&k)?, node_to_json(v)?);
            }
            serde_json::Value::Object(m.into_iter().collect())
        }
    })
}

/// A mapping key as JSON has it: a string, or go-yaml's error for a key JSON can't hold.
pub(super) fn map_key(k: &YNode) -> Result<String, String> {
    Ok(match k {
        YNode::Str(s) => s.clone(),
        YNode::Int(i) => i.to_string(),
        YNode::Float(f) => float32_key(*f),
        YNode::Bool(b) => b.to_string(),
        other => {
            return Err(format!("unsupported map key of type: {}, key: {}", ynode_type(other), ynode_text(other)));
        }
    })
}

pub(super) fn to_json_value(n: &YNode) -> Result<Value, String> {
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
                m.insert(map_key(k)?, to_json_value(v)?);
            }
            Value::map(m)
        }
    })
}

pub(super) fn ynode_type(n: &YNode) -> &'static str {
    match n {
        YNode::Null => "%!s(<nil>)",
        YNode::UInt(_) => "uint64",
        YNode::Seq(_) => "[]interface {}",
        YNode::Map(_) => "map[interface {}]interface {}",
        _ => "?",
    }
}

pub(super) fn ynode_text(n: &YNode) -> String {
    match n {
        YNode::Null => "<nil>".into(),
        YNode::UInt(u) => format!("0x{u:x}"),
        _ => "...".into(),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` with YAML's names for the specials.
pub(super) fn float32_key(f: f64) -> String {
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

pub(super) struct Reader<'a> {
    pub(super) text: &'a str,
    pub(super) parser: Parser<'a, granit_parser::StrInput<'a>>,
    /// Anchored nodes and how many nodes each expands to.
    anchors: std::collections::HashMap<usize, (YNode, u64)>,
    /// Nodes built so far, aliases counted expanded: the alias budget.
    nodes: u64,
    pub(super) depth: usize,
    /// An anchor or an alias was read (the head reader then reads the whole document).
    pub(super) aliased: bool,
}

/// go-yaml v3's nesting limit.
pub(super) const MAX_DEPTH: usize = 10_000;

/// The most nodes a document may expand to through aliases beyond its own
/// size: ten lines of nested aliases (the "billion laughs") must not become
/// a billion nodes. go-yaml refuses such documents with this same message.
pub(super) const ALIAS_BUDGET: u64 = 1_000_000;

/// The first document; a quoted scalar continued at or left of its block's indentation (which
/// libyaml, go-yaml's base, accepts and YAML 1.2 parsers refuse) is read after indenting its
/// continuation lines, which changes nothing else: line folding drops their leading blanks.
pub(super) fn parse_first_document(text: &str) -> Result<Option<YNode>, String> {
    match parse_first_document_strict(text) {
        Err(e) if e.contains("invalid indentation in multiline quoted scalar") => {
            parse_first_document_strict(&indent_quoted_continuations(text))
        }
        other => other,
    }
}

/// Indents the continuation lines of multi-line quoted scalars in block context two columns
/// past the line that opens the scalar. Block scalars and comments are skipped.
pub(super) fn indent_quoted_continuations(text: &str) -> String {
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
pub(super) fn closing_quote(line: &str, from: usize, quote: char) -> Option<usize> {
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

/// A block scalar whose last line ends the text without a line break: libyaml (and so go-yaml)
/// reads the end of the input as no line break, so clip and keep chomping keep none
/// (`a: |\n  x` is `x`); the YAML 1.2 parser under us gives it one. helm's documents are split
/// and trimmed before they are read, so a ConfigMap ending in a `|` block is read this way.
fn without_break_past_the_end<'a>(text: &str, ev: Event<'a>, span: &granit_parser::Span) -> Event<'a> {
    // Counting characters is a pass over the whole text: asked last, only of such a scalar.
    let at_end = || span.end.byte_offset().map_or(span.end.index() >= text.chars().count(), |b| b >= text.len());
    match ev {
        Event::Scalar(value, style @ (ScalarStyle::Literal | ScalarStyle::Folded), anchor, tag)
            if !text.ends_with(['\n', '\r']) && value.ends_with('\n') && at_end() =>
        {
            let kept = value.len() - 1;
            let value = match value {
                std::borrow::Cow::Borrowed(v) => std::borrow::Cow::Borrowed(&v[..kept]),
                std::borrow::Cow::Owned(mut v) => {
                    v.truncate(kept);
                    std::borrow::Cow::Owned(v)
                }
            };
            Event::Scalar(value, style, anchor, tag)
        }
        ev => ev,
    }
}

/// `Some(())` when the scalar starting at `from` is still open at the end of the line.
pub(super) fn scan_quoted(line: &str, from: usize, quote: char) -> Option<()> {
    match closing_quote(line, from, quote) {
        Some(_) => None,
        None => Some(()),
    }
}

impl<'a> Reader<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        let mut options = granit_parser::Options::default();
        options.set_emit_comments(false);
        options.emit_unresolved_aliases = true;
        Reader {
            text,
            parser: Parser::new_from_str_with_options(text, options),
            anchors: Default::default(),
            nodes: 0,
            depth: 0,
            aliased: false,
        }
    }
}

pub(super) fn parse_first_document_strict(text: &str) -> Result<Option<YNode>, String> {
    let mut r = Reader::new(text);
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
    pub(super) fn next(&mut self) -> Result<Option<Event<'a>>, String> {
        match self.parser.next_event() {
            None => Ok(None),
            Some(Ok((ev, span))) => Ok(Some(without_break_past_the_end(self.text, ev, &span))),
            Some(Err(e)) => Err(libyaml_error(self.text, e.marker().line(), &e.info())),
        }
    }

    pub(super) fn node(&mut self, ev: Event<'a>) -> Result<YNode, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("yaml: exceeded max depth of {MAX_DEPTH}"));
        }
        self.depth += 1;
        let n = stacker::maybe_grow(64 * 1024, 1024 * 1024, || self.build(ev));
        self.depth -= 1;
        self.nodes += 1;
        n
    }

    /// Records an anchored node with its size: the nodes built since `before`, itself included,
    /// which each alias to it charges to the budget.
    fn anchor(&mut self, anchor: usize, n: &YNode, before: u64) {
        if anchor != 0 {
            self.aliased = true;
            self.anchors.insert(anchor, (n.clone(), self.nodes - before + 1));
        }
    }

    fn build(&mut self, ev: Event<'a>) -> Result<YNode, String> {
        let before = self.nodes;
        match ev {
            Event::Alias(id) => {
                self.aliased = true;
                let (n, size) = self.anchors.get(&id).ok_or_else(|| "unknown anchor referenced".to_string())?;
                self.nodes += size;
                if self.nodes > ALIAS_BUDGET + self.text.len() as u64 {
                    return Err("yaml: document contains excessive aliasing".into());
                }
                Ok(n.clone())
            }
            Event::UnresolvedAlias(name) => Err(format!("unknown anchor '{name}' referenced")),
            Event::Scalar(value, style, anchor, tag) => {
                let tag = tag.map(|t| tag_name(&t));
                let n = scalar(&value, style, tag.as_deref())?;
                self.anchor(anchor, &n, before);
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
                self.anchor(anchor, &n, before);
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
                self.anchor(anchor, &n, before);
                Ok(n)
            }
            other => Err(format!("unexpected event {other:?}")),
        }
    }
}

/// A tag as [`scalar`] takes it: YAML's own in the `!!` short form.
pub(super) fn tag_name(t: &granit_parser::Tag) -> String {
    if t.handle() == "tag:yaml.org,2002:" || t.handle() == "!!" {
        format!("!!{}", t.suffix())
    } else {
        format!("{}{}", t.handle(), t.suffix())
    }
}

/// go-yaml v2's wording for a parse error: libyaml's message, with
/// `line N: ` as v2 prints it (scanner errors 1-based and only past the
/// first line; parser errors at the 0-based line, end of input counting as
/// a new line).
pub(super) fn libyaml_error(text: &str, line: usize, info: &str) -> String {
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

pub(super) fn same_key(a: &YNode, b: &YNode) -> bool {
    match (a, b) {
        (YNode::Str(x), YNode::Str(y)) => x == y,
        (YNode::Int(x), YNode::Int(y)) => x == y,
        (YNode::Bool(x), YNode::Bool(y)) => x == y,
        (YNode::Float(x), YNode::Float(y)) => x == y,
        (YNode::Null, YNode::Null) => true,
        _ => false,
    }
}

pub(super) fn insert_entry(entries: &mut Vec<(YNode, YNode)>, k: YNode, v: YNode) {
    if let Some(e) = entries.iter_mut().find(|(ek, _)| same_key(ek, &k)) {
        e.1 = v;
    } else {
        entries.push((k, v));
    }
}

pub(super) fn scalar(value: &str, style: ScalarStyle, tag: Option<&str>) -> Result<YNode, String> {
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

pub(super) fn plain_tag(p: &Plain) -> &'static str {
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
