//! The expected side of every comparison with helm, read with a YAML library of its own: the
//! `libyaml-safer` crate, a line-by-line Rust port of libyaml, the C library go-yaml's scanner
//! and parser were themselves ported from. Nothing of `clusterstack-helm`'s go-yaml emulation
//! (its `goyaml` module over `granit-parser`, which `serde-saphyr` is built on too) is used, so a
//! reader bug there cannot hide by misreading both sides alike.
//!
//! The library gives events; what a plain scalar means is decided here, as the API server is
//! given helm's output: `sigs.k8s.io/yaml` reads it with go-yaml v2, YAML 1.1 rules (`yes`,
//! `on`, `n` are booleans, `0644` is octal, `1_000` an integer), then turns it into JSON (a whole
//! float is a JSON integer, keys become strings). That table is go-yaml v2's `resolve`, written
//! out below from its source, not taken from ours. It is honest about YAML 1.1: every plain
//! scalar the YAML 1.2 core schema would read differently is counted in [`Reading::yaml11`], and
//! the tests print them, so such a reading is seen, never silently taken.

// Each including test uses a different part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Cursor;

use libyaml_safer::{EventData, Parser, ScalarStyle};
use serde_json::{Map, Number, Value as Json};

/// What a text reads as: its documents, and the plain scalars YAML 1.1 (go-yaml v2) reads
/// differently from YAML 1.2's core schema (`"on" -> true`), for the record.
#[derive(Debug, Default)]
pub struct Reading {
    pub documents: Vec<Json>,
    pub yaml11: Vec<String>,
}

/// Every document of a YAML stream, as the API server is given it.
///
/// libyaml-safer 0.3.0 panics ("unexpected end of input") on a text that ends inside a block
/// scalar without a final line break, where libyaml (and go-yaml, its port) reads the end of
/// the input as no line break at all: `a: |\n  x` is `x`. helm's documents are split and
/// trimmed before they are read, so this is common (a ConfigMap ending in a `|` block). Such a
/// text is read with a line break added, and the one block scalar that reaches the end of the
/// input is given back without it. Any other panic of the library is an error here.
pub fn read_stream(text: &str) -> Result<Reading, String> {
    let added_break = !text.is_empty() && !text.ends_with(['\n', '\r']);
    let input = if added_break { format!("{text}\n") } else { text.to_string() };
    let end = input.len() as u64;
    let read = std::panic::catch_unwind(|| {
        let mut parser = Parser::new();
        parser.set_input(Cursor::new(input.as_bytes()));
        let mut builder = Builder::default();
        for event in parser {
            let mut event = event.map_err(|e| format!("YAML (libyaml): {e}"))?;
            if added_break
                && event.end_mark.index == end
                && let EventData::Scalar { value, style: ScalarStyle::Literal | ScalarStyle::Folded, .. } =
                    &mut event.data
                && value.ends_with('\n')
            {
                value.pop();
            }
            builder.event(event.data).map_err(|e| format!("YAML (libyaml) at {}: {e}", event.start_mark))?;
        }
        Ok(Reading { documents: builder.documents, yaml11: builder.yaml11 })
    });
    read.unwrap_or_else(|_| Err("YAML (libyaml): the reader panicked (see the message above)".into()))
}

/// One document (an empty text is `null`, as `sigs.k8s.io/yaml` reads it); more than one is an
/// error.
pub fn read_one(text: &str) -> Result<Json, String> {
    let mut reading = read_stream(text)?;
    match reading.documents.len() {
        0 => Ok(Json::Null),
        1 => Ok(reading.documents.remove(0)),
        n => Err(format!("{n} YAML documents where one was expected")),
    }
}

enum Frame {
    Seq { items: Vec<Json>, anchor: Option<String> },
    Map { map: Map<String, Json>, anchor: Option<String>, key: Option<Key> },
}

enum Key {
    Name(String),
    /// `<<`: the value's mapping(s) are merged in.
    Merge,
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<String, Json>,
    documents: Vec<Json>,
    yaml11: Vec<String>,
}

impl Builder {
    fn event(&mut self, event: EventData) -> Result<(), String> {
        match event {
            EventData::StreamStart { .. } | EventData::StreamEnd | EventData::DocumentEnd { .. } => Ok(()),
            EventData::DocumentStart { .. } => {
                self.anchors.clear();
                Ok(())
            }
            EventData::Alias { anchor } => {
                let value = self.anchors.get(&anchor).cloned().ok_or_else(|| format!("unknown anchor {anchor:?}"))?;
                self.value(value)
            }
            EventData::Scalar { anchor, tag, value, style, .. } => {
                let is_key = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
                if is_key {
                    let merge = value == "<<"
                        && (style == ScalarStyle::Plain && tag.is_none() || tag.as_deref() == Some(MERGE_TAG));
                    let key =
                        if merge { Key::Merge } else { Key::Name(self.key_string(&value, style, tag.as_deref())?) };
                    if let Some(Frame::Map { key: slot, .. }) = self.stack.last_mut() {
                        *slot = Some(key);
                    }
                    return Ok(());
                }
                let v = self.scalar(&value, style, tag.as_deref())?;
                if let Some(a) = anchor {
                    self.anchors.insert(a, v.clone());
                }
                self.value(v)
            }
            EventData::SequenceStart { anchor, .. } => {
                self.expect_not_key("a sequence")?;
                self.stack.push(Frame::Seq { items: Vec::new(), anchor });
                Ok(())
            }
            EventData::MappingStart { anchor, .. } => {
                self.expect_not_key("a mapping")?;
                self.stack.push(Frame::Map { map: Map::new(), anchor, key: None });
                Ok(())
            }
            EventData::SequenceEnd | EventData::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { items, anchor }) => (Json::Array(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Json::Object(map), anchor),
                    None => return Err("end of a collection that was not started".into()),
                };
                if let Some(a) = anchor {
                    self.anchors.insert(a, value.clone());
                }
                self.value(value)
            }
        }
    }

    fn expect_not_key(&self, what: &str) -> Result<(), String> {
        match self.stack.last() {
            Some(Frame::Map { key: None, .. }) => {
                Err(format!("{what} as a mapping key (sigs.k8s.io/yaml has no JSON form for it)"))
            }
            _ => Ok(()),
        }
    }

    /// A finished value: into the collection being built, or a whole document.
    fn value(&mut self, value: Json) -> Result<(), String> {
        match self.stack.last_mut() {
            None => self.documents.push(value),
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                Some(Key::Name(k)) => {
                    // go-yaml v2 into a map: a repeated key's later value wins.
                    map.insert(k, value);
                }
                Some(Key::Merge) => merge(map, value)?,
                None => return Err("an alias as a mapping key".into()),
            },
        }
        Ok(())
    }

    fn scalar(&mut self, value: &str, style: ScalarStyle, tag: Option<&str>) -> Result<Json, String> {
        let resolved = match tag {
            // Quoted, literal and folded scalars without a tag are strings (go-yaml's
            // `implicit` is libyaml's `plain_implicit`).
            None if style != ScalarStyle::Plain => return Ok(Json::String(value.to_string())),
            None | Some(NON_SPECIFIC_TAG) if style == ScalarStyle::Plain => {
                let r = resolve_plain(value);
                if r != resolve_core(value) {
                    self.yaml11.push(format!("{value:?} read as {r:?} (YAML 1.2 core: {:?})", resolve_core(value)));
                }
                r
            }
            None | Some(NON_SPECIFIC_TAG) | Some(STR_TAG) => return Ok(Json::String(value.to_string())),
            Some(BINARY_TAG) => {
                use base64::Engine as _;
                let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(compact)
                    .map_err(|e| format!("!!binary {value:?}: {e}"))?;
                return Ok(Json::String(String::from_utf8_lossy(&bytes).into_owned()));
            }
            Some(t @ (INT_TAG | FLOAT_TAG | BOOL_TAG | NULL_TAG | TIMESTAMP_TAG)) => {
                let r = resolve_plain(value);
                match (t, r) {
                    (INT_TAG, r @ (Scalar::Int(_) | Scalar::Uint(_))) => r,
                    (FLOAT_TAG, Scalar::Int(i)) => Scalar::Float(i as f64),
                    (FLOAT_TAG, Scalar::Uint(u)) => Scalar::Float(u as f64),
                    (FLOAT_TAG, r @ Scalar::Float(_)) => r,
                    (BOOL_TAG, r @ Scalar::Bool(_)) => r,
                    (NULL_TAG, Scalar::Null) => Scalar::Null,
                    (TIMESTAMP_TAG, Scalar::Str) if looks_like_timestamp(value) => Scalar::Str,
                    (t, r) => return Err(format!("cannot decode {r:?} `{value}` as a {t}")),
                }
            }
            // Any other tag: go-yaml keeps the text.
            Some(_) => return Ok(Json::String(value.to_string())),
        };
        to_json(resolved, value)
    }

    /// A mapping key as `sigs.k8s.io/yaml` writes it in JSON: resolved like a value, then
    /// turned into a string.
    fn key_string(&mut self, value: &str, style: ScalarStyle, tag: Option<&str>) -> Result<String, String> {
        match self.scalar(value, style, tag)? {
            Json::String(s) => Ok(s),
            Json::Bool(b) => Ok(b.to_string()),
            Json::Number(n) => Ok(match resolve_plain(value) {
                // Floats as go-yaml marshals them: `strconv.FormatFloat(f, 'g', -1, 32)`.
                Scalar::Float(f) => format_float32_g(f),
                _ => n.to_string(),
            }),
            other => Err(format!("a mapping key {other} has no JSON form (sigs.k8s.io/yaml refuses it)")),
        }
    }
}

/// go-yaml v2's merge: a mapping's entries set in order (overriding what came before), a
/// sequence of mappings merged last to first (so that the first wins).
fn merge(into: &mut Map<String, Json>, value: Json) -> Result<(), String> {
    match value {
        Json::Object(m) => {
            into.extend(m);
            Ok(())
        }
        Json::Array(items) => {
            for item in items.into_iter().rev() {
                match item {
                    Json::Object(m) => into.extend(m),
                    other => return Err(format!("map merge requires maps, found {other}")),
                }
            }
            Ok(())
        }
        other => Err(format!("map merge requires a map or a sequence of maps, found {other}")),
    }
}

const STR_TAG: &str = "tag:yaml.org,2002:str";
const INT_TAG: &str = "tag:yaml.org,2002:int";
const FLOAT_TAG: &str = "tag:yaml.org,2002:float";
const BOOL_TAG: &str = "tag:yaml.org,2002:bool";
const NULL_TAG: &str = "tag:yaml.org,2002:null";
const TIMESTAMP_TAG: &str = "tag:yaml.org,2002:timestamp";
const BINARY_TAG: &str = "tag:yaml.org,2002:binary";
const MERGE_TAG: &str = "tag:yaml.org,2002:merge";
const NON_SPECIFIC_TAG: &str = "!";

/// A plain scalar's meaning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str,
}

/// How go-yaml v2 (`resolve.go`, the v2 branch) resolves a plain scalar decoded into
/// `interface{}`: a first-character hint, a table of words (YAML 1.1 booleans among them), then
/// Go's `strconv.ParseInt(s, 0, 64)` with `_` removed (leading-zero octal included),
/// `ParseUint`, and floats matching its `yamlStyleFloat` expression. A timestamp stays a string
/// in an `interface{}` (v2 keeps the text for compatibility), as does anything else.
pub fn resolve_plain(s: &str) -> Scalar {
    let hint = match s.bytes().next() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~') => b'M',
        Some(b'.') => b'.',
        Some(_) => return Scalar::Str,
    };
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => return Scalar::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match hint {
        // `strconv.ParseFloat(s, 64)` of a text starting with `.`: digits, an optional exponent.
        b'.' => {
            let rest = &s[1..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits > 0
                && is_exponent(&rest[digits..])
                && let Ok(f) = s.parse::<f64>()
            {
                return Scalar::Float(f);
            }
            Scalar::Str
        }
        b'D' | b'S' => {
            let plain: String = s.chars().filter(|c| *c != '_').collect();
            if let Some(r) = go_parse_int(&plain) {
                return r;
            }
            if is_yaml_style_float(&plain)
                && let Ok(f) = plain.parse::<f64>()
            {
                return Scalar::Float(f);
            }
            Scalar::Str
        }
        _ => Scalar::Str,
    }
}

/// `""` or `[eE][-+]?[0-9]+`.
fn is_exponent(s: &str) -> bool {
    let Some(rest) = s.strip_prefix(['e', 'E']) else { return s.is_empty() };
    let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_style_float(s: &str) -> bool {
    let s = s.strip_prefix(['+', '-']).unwrap_or(s);
    let whole = s.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &s[whole..];
    let rest = match rest.strip_prefix('.') {
        Some(r) => {
            let fraction = r.bytes().take_while(u8::is_ascii_digit).count();
            if whole == 0 && fraction == 0 {
                return false;
            }
            &r[fraction..]
        }
        None if whole == 0 => return false,
        None => rest,
    };
    is_exponent(rest)
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)` (no sign) for what overflows.
fn go_parse_int(s: &str) -> Option<Scalar> {
    let (negative, signed, body) = match s.as_bytes().first() {
        Some(b'-') => (true, true, &s[1..]),
        Some(b'+') => (false, true, &s[1..]),
        _ => (false, false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        return (magnitude <= 1 << 63).then(|| Scalar::Int((-(magnitude as i128)) as i64));
    }
    if magnitude <= i64::MAX as u128 {
        return Some(Scalar::Int(magnitude as i64));
    }
    (!signed && magnitude <= u64::MAX as u128).then_some(Scalar::Uint(magnitude as u64))
}

/// The YAML 1.2 core schema's reading, only to tell where YAML 1.1 differs.
fn resolve_core(s: &str) -> Scalar {
    match s {
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => return Scalar::Float(f64::INFINITY),
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        _ => {}
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<i64>() {
            Ok(i) => Scalar::Int(i),
            Err(_) => s.parse::<u64>().map_or(Scalar::Str, Scalar::Uint),
        };
    }
    for (prefix, radix) in [("0o", 8), ("0x", 16)] {
        if let Some(d) = s.strip_prefix(prefix)
            && !d.is_empty()
            && let Ok(v) = u64::from_str_radix(d, radix)
        {
            return i64::try_from(v).map_or(Scalar::Uint(v), Scalar::Int);
        }
    }
    if is_yaml_style_float(s) {
        return s.parse::<f64>().map_or(Scalar::Str, Scalar::Float);
    }
    Scalar::Str
}

fn looks_like_timestamp(s: &str) -> bool {
    s.len() >= 5 && s.as_bytes()[..4].iter().all(u8::is_ascii_digit) && s.as_bytes()[4] == b'-'
}

/// A resolved scalar as JSON, as `encoding/json` writes go-yaml's value and the API server reads
/// it: a whole float below 1e21 is written without a fraction (so reads as an integer); NaN and
/// the infinities have no JSON form.
fn to_json(s: Scalar, text: &str) -> Result<Json, String> {
    Ok(match s {
        Scalar::Null => Json::Null,
        Scalar::Bool(b) => Json::Bool(b),
        Scalar::Int(i) => Json::Number(i.into()),
        Scalar::Uint(u) => Json::Number(u.into()),
        Scalar::Str => Json::String(text.to_string()),
        Scalar::Float(f) if !f.is_finite() => return Err(format!("`{text}` is {f}, which JSON cannot carry")),
        Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 1e21 => {
            serde_json::from_str(&format!("{f:.0}")).map_err(|e| format!("`{text}`: {e}"))?
        }
        Scalar::Float(f) => Number::from_f64(f).map_or(Json::Null, Json::Number),
    })
}

/// `strconv.FormatFloat(f, 'g', -1, 32)` for the floats a mapping key is likely to hold.
fn format_float32_g(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf".into() } else { "-.inf".into() };
    }
    let exp = if f == 0.0 { 0 } else { f.abs().log10().floor() as i32 };
    if !(-4..21).contains(&exp) {
        // Go: `1e+21`; Rust: `1e21`.
        let s = format!("{f:e}");
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e:0>2}"),
            Some((m, e)) => format!("{m}e-{:0>2}", &e[1..]),
            None => s,
        }
    } else {
        format!("{f}")
    }
}
