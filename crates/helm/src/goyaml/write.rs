//! Writing: a value through Go's JSON into the nodes go-yaml v2 emits, keys
//! in its "natural" order.

use crate::sprig::gofmt::format_float_g;
use gotmpl::value::Value;

use super::emitter::*;

/// A node as go-yaml sees the JSON that Go's `json.Marshal` produced.
pub(super) enum Node {
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

pub(super) fn to_node(v: &Value) -> Result<Node, String> {
    Ok(match v {
        Value::Nil => Node::Null,
        Value::Bool(b) => Node::Bool(*b),
        Value::Int(i) | Value::Int64(i) => Node::Number(i.to_string()),
        Value::Float(f) => {
            let json = crate::sprig::encoding_json_float(*f).map_err(|e| e.to_string())?;
            // go-yaml reads the JSON number back: an int when it fits, else a float
            if let Some(i) = crate::sprig::parse_int(&json) {
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
pub(super) fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Greater, Less};
    if a == b {
        return std::cmp::Ordering::Equal;
    }
    if key_less(a, b) { Less } else { Greater }
}

pub(super) fn key_less(a: &str, b: &str) -> bool {
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
