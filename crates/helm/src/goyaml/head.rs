//! The head of a rendered manifest: what helm reads of each document it prints (`apiVersion`,
//! `kind`, `metadata`), with the whole document checked as [`yaml_to_json`] checks it, but
//! without building the rest. `helm template` reads every document through `sigs.k8s.io/yaml`
//! (so any YAML or JSON error in it fails the chart) and keeps only that head, to sort by kind and
//! to find hooks; it prints the document's text. A large document (a CRD, a dashboard) is mostly
//! what helm never looks at, so here the rest is only parsed, not built.

use granit_parser::{Event, ScalarStyle};

use super::read::{
    MAX_DEPTH, Reader, YNode, indent_quoted_continuations, insert_entry, map_key, node_to_json, scalar, tag_name,
};
use super::resolve::{Plain, resolve_plain};
use super::yaml_to_json;

/// The keys of a document helm reads ([`yaml_head`] keeps these).
pub(super) const HEAD_KEYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// [`yaml_to_json`] with a mapping cut down to `apiVersion`, `kind` and `metadata`: the same
/// value there, the same error for every document [`yaml_to_json`] refuses. Documents whose
/// reading needs the whole tree (anchors and aliases, merge keys, a value JSON cannot hold) are
/// read whole.
pub fn yaml_head(text: &str) -> Result<serde_json::Value, String> {
    if let Some(head) = super::fast::read_head(text) {
        return Ok(head);
    }
    let outcome = match head_strict(text) {
        Err(e) if e.contains("invalid indentation in multiline quoted scalar") => {
            head_strict(&indent_quoted_continuations(text))
        }
        other => other,
    };
    match outcome.map_err(|e| format!("error converting YAML to JSON: yaml: {e}"))? {
        Outcome::Head(v) => Ok(v),
        Outcome::Whole => yaml_to_json(text).map(only_head),
    }
}

/// A document cut down to its head; anything but a mapping stays whole.
pub(super) fn only_head(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(mut m) => {
            m.retain(|k, _| HEAD_KEYS.contains(&k.as_str()));
            serde_json::Value::Object(m)
        }
        other => other,
    }
}

enum Outcome {
    Head(serde_json::Value),
    /// Read the whole document: the head alone cannot say what it would.
    Whole,
}

fn head_strict(text: &str) -> Result<Outcome, String> {
    let mut r = Reader::new(text);
    loop {
        match r.next()? {
            None | Some(Event::StreamEnd) => return Ok(Outcome::Head(serde_json::Value::Null)),
            Some(Event::DocumentStart(..)) => {
                let ev = r.next()?.ok_or("unexpected end of stream")?;
                return match ev {
                    Event::DocumentEnd => Ok(Outcome::Head(serde_json::Value::Null)),
                    Event::MappingStart(_, 0, _) => root_mapping(&mut r),
                    _ => Ok(Outcome::Whole),
                };
            }
            Some(_) => continue,
        }
    }
}

/// The entries of the root mapping (its start read): head entries built, the others skipped.
fn root_mapping(r: &mut Reader<'_>) -> Result<Outcome, String> {
    r.depth = 1;
    let mut head: Vec<(YNode, YNode)> = Vec::new();
    loop {
        let ev = r.next()?.ok_or("unexpected end of stream")?;
        let key = match ev {
            Event::MappingEnd => break,
            Event::Scalar(ref v, ScalarStyle::Plain, _, None) if v == "<<" => return Ok(Outcome::Whole),
            Event::Scalar(_, _, 0, _) => r.node(ev)?,
            _ => return Ok(Outcome::Whole),
        };
        let value_ev = r.next()?.ok_or("unexpected end of stream")?;
        if matches!(&key, YNode::Str(k) if HEAD_KEYS.contains(&k.as_str())) {
            let value = r.node(value_ev)?;
            insert_entry(&mut head, key, value);
        } else {
            if map_key(&key).is_err() {
                return Ok(Outcome::Whole);
            }
            if let Skipped::Whole = skip(r, value_ev)? {
                return Ok(Outcome::Whole);
            }
        }
        if r.aliased {
            return Ok(Outcome::Whole);
        }
    }
    let mut out = serde_json::Map::new();
    for (k, v) in head {
        match (map_key(&k), node_to_json(v)) {
            (Ok(k), Ok(v)) => {
                out.insert(k, v);
            }
            _ => return Ok(Outcome::Whole),
        }
    }
    Ok(Outcome::Head(serde_json::Value::Object(out)))
}

enum Skipped {
    Done,
    Whole,
}

/// One open collection of a skipped node.
struct Frame {
    map: bool,
    /// In a mapping: the next node is a key.
    key_next: bool,
}

/// Reads the node starting with `first` to its end without building it, failing where
/// [`Reader::node`] fails while reading (syntax, a tagged scalar its tag refuses, nesting), and
/// giving up ([`Skipped::Whole`]) where building it could matter: anchors and aliases, merge
/// keys, keys and values JSON cannot hold.
fn skip<'a>(r: &mut Reader<'a>, first: Event<'a>) -> Result<Skipped, String> {
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending = Some(first);
    loop {
        let ev = match pending.take() {
            Some(ev) => ev,
            None => r.next()?.ok_or("unexpected end of stream")?,
        };
        let is_key = stack.last().is_some_and(|f| f.map && f.key_next);
        match ev {
            Event::SequenceEnd | Event::MappingEnd => {
                stack.pop();
                r.depth -= 1;
            }
            Event::Scalar(value, style, anchor, tag) => {
                if r.depth >= MAX_DEPTH {
                    return Err(format!("yaml: exceeded max depth of {MAX_DEPTH}"));
                }
                if anchor != 0 {
                    return Ok(Skipped::Whole);
                }
                let plain = matches!(style, ScalarStyle::Plain);
                if tag.is_some() || is_key {
                    if is_key && plain && tag.is_none() && value == "<<" {
                        return Ok(Skipped::Whole);
                    }
                    let tag = tag.map(|t| tag_name(&t));
                    let n = scalar(&value, style, tag.as_deref())?;
                    let bad = match &n {
                        YNode::Float(f) => !f.is_finite(),
                        _ => false,
                    };
                    if bad || (is_key && map_key(&n).is_err()) {
                        return Ok(Skipped::Whole);
                    }
                } else if plain
                    && value.as_bytes().first().is_some_and(|c| matches!(c, b'.' | b'+' | b'-' | b'0'..=b'9'))
                    && matches!(resolve_plain(&value), Plain::Float(f) if !f.is_finite())
                {
                    return Ok(Skipped::Whole);
                }
            }
            Event::SequenceStart(_, anchor, _) | Event::MappingStart(_, anchor, _) => {
                if r.depth >= MAX_DEPTH {
                    return Err(format!("yaml: exceeded max depth of {MAX_DEPTH}"));
                }
                // A collection as a key is one JSON cannot hold.
                if anchor != 0 || is_key {
                    return Ok(Skipped::Whole);
                }
                let map = matches!(ev, Event::MappingStart(..));
                stack.push(Frame { map, key_next: true });
                r.depth += 1;
                continue;
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) => return Ok(Skipped::Whole),
            other => return Err(format!("unexpected event {other:?}")),
        }
        // A node ended: the next one in a mapping alternates between key and value.
        match stack.last_mut() {
            None => return Ok(Skipped::Done),
            Some(f) if f.map => f.key_next = !f.key_next,
            Some(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every document reads to the same head, or fails with the same error, as the whole read.
    #[test]
    fn the_head_is_the_whole_reads_head() {
        let docs = [
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels: {a: b}\ndata:\n  k: v\n",
            "kind: CustomResourceDefinition\nspec:\n  versions:\n  - name: v1\n    schema: {openAPIV3Schema: {type: object, properties: {a: {type: string}}}}\nmetadata: {name: y}\napiVersion: apiextensions.k8s.io/v1\n",
            "# only a comment\n",
            "",
            "- a\n- b\n",
            "just text\n",
            "metadata:\n  name: a\nmetadata:\n  name: b\nkind: K\n",
            "kind: K\nspec: &s {a: 1}\nother: *s\nmetadata: {name: m}\n",
            "kind: K\n<<: {apiVersion: v9}\nmetadata: {name: m}\n",
            "kind: K\nspec: {a: .inf}\n",
            "kind: K\nspec: {a: .inf, a: 1}\n",
            "kind: K\nspec: {? [a]: 1}\n",
            "kind: K\nspec: {~: 1}\n",
            "kind: K\nspec: {0xffffffffffffffff: 1}\n",
            "kind: K\nspec: {a: !!int x}\nbroken: [\n",
            "kind: K\nspec: {a: !!binary '!!'}\n",
            "kind: K\nspec: {a: !!float 1.5, b: !!str 1, c: !custom x, d: 0755, e: on}\nmetadata: {name: n, labels: {x: 0755}}\n",
            "kind: K\nspec: [1, 2\n",
            "kind: K\nspec:\n  a: b\n c: d\n",
            "kind: K\nspec: *nowhere\n",
            "kind: K\nmetadata:\n  description: \"one\ntwo\"\n",
            "kind: K\nspec:\n  description: \"one\ntwo\"\n  bad: [\n",
            "kind: K\nspec: {a: 1}\n---\nbroken: [\n",
            "{kind: K, metadata: {name: a}}",
            "&root {kind: K}",
            "kind: [K]\napiVersion: 1.5\nmetadata: 7\n",
            "kind: K\n.inf: x\n",
            "kind: K\n1: x\ntrue: y\n",
        ];
        for doc in docs {
            let whole = yaml_to_json(doc).map(only_head);
            assert_eq!(yaml_head(doc), whole, "{doc:?}");
        }
        let deep = format!("kind: K\nspec: {}{}\n", "[".repeat(10_001), "]".repeat(10_001));
        assert_eq!(yaml_head(&deep), yaml_to_json(&deep).map(only_head));
        assert!(yaml_head(&deep).is_err());
    }

    /// Plain documents are read by their head; only what needs the tree is read whole.
    #[test]
    fn only_what_needs_the_tree_is_read_whole() {
        let by_head = |doc: &str| matches!(head_strict(doc), Ok(Outcome::Head(_)));
        assert!(by_head("apiVersion: v1\nkind: K\nmetadata: {name: x}\nspec: {a: [1, {b: c}], d: 0755, e: !!str 1}\n"));
        assert!(by_head("kind: K\nspec: {a: .5, b: -1, c: 1e3}\n"));
        for whole in ["kind: K\nspec: &a {}\n", "kind: K\nspec: {a: .inf}\n", "kind: K\n<<: {}\n", "- a\n"] {
            assert!(!by_head(whole), "{whole:?}");
        }
    }

    /// What is skipped is still read: an error deep in the rest fails the head too.
    #[test]
    fn errors_in_the_rest_fail_the_head() {
        let err = yaml_head("apiVersion: v1\nkind: K\nmetadata: {name: x}\nspec:\n  a: [1, 2\n").unwrap_err();
        assert!(err.starts_with("error converting YAML to JSON: yaml: line "), "{err}");
        let err = yaml_head("kind: K\nspec: {a: .nan}\n").unwrap_err();
        assert_eq!(err, "error converting YAML to JSON: json: unsupported value: NaN");
    }
}
