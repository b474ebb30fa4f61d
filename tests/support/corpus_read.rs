//! Reading `helm template`'s output and ours as the API server is given them, for
//! `tests/helm_corpus.rs`: split where helm splits documents, helm's side by the independent
//! reader (`crates/helm/tests/support/yaml_oracle.rs`), ours by our go-yaml reader, null-valued
//! keys dropped, numbers by value; where objects differ, and what helm randomises.

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// Helm's `releaseutil.SplitManifests`: the text trimmed, split at the regular expression
/// `(?:^|\s*\n)---\s*` (so `---# comment` and `---text` separate documents too), each part
/// trimmed, empty parts dropped.
pub fn split_like_helm(text: &str) -> Vec<String> {
    let sep = regex::Regex::new(r"(?:^|[\t\n\x0C\r ]*\n)---[\t\n\x0C\r ]*").expect("separator");
    sep.split(text.trim()).filter(|d| !d.is_empty()).map(|d| d.trim().to_string()).collect()
}

/// Who rendered a text, and so which reader reads it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Helm,
    Ours,
}

/// A document as sigs.k8s.io/yaml gives it to the API server, null-valued keys removed: helm's
/// read by the independent reader (with the plain scalars YAML 1.1 reads otherwise than YAML 1.2
/// added to `yaml11`), ours by ours.
pub fn read_doc(side: Side, text: &str, yaml11: &mut Vec<String>) -> Result<Json, String> {
    // Followed by a line break, as helm's release manifest writes each document for the API
    // server (`---\n# Source: NAME\nDOCUMENT\n`), and as the operator reads it.
    let text = &format!("{text}\n");
    let mut value = match side {
        Side::Helm => {
            let mut reading = super::helm::oracle::read_stream(text)?;
            yaml11.append(&mut reading.yaml11);
            match reading.documents.len() {
                0 => Json::Null,
                1 => reading.documents.remove(0),
                n => return Err(format!("{n} documents where helm split one")),
            }
        }
        Side::Ours => helm_render::yaml_to_value(text)?.to_json(),
    };
    drop_nulls(&mut value);
    whole_numbers(&mut value);
    Ok(value)
}

/// A JSON number is a value, whatever its notation: a whole float is written as the integer it
/// is (helm's Go writes `9223372036854775808` where our serde_json writes `9.223372036854776e18`
/// for the same float, and the API server reads one number from both).
pub fn whole_numbers(value: &mut Json) {
    match value {
        Json::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 1.8e19)
                && let Ok(whole) = serde_json::from_str::<Json>(&format!("{f:.0}"))
            {
                *value = whole;
            }
        }
        Json::Object(map) => map.values_mut().for_each(whole_numbers),
        Json::Array(items) => items.iter_mut().for_each(whole_numbers),
        _ => {}
    }
}

pub fn drop_nulls(value: &mut Json) {
    match value {
        Json::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Json::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// Objects by key; a document that is not an object with a kind is keyed by its source and
/// its position there.
pub fn objects_of(
    side: Side,
    docs: &[(String, String)],
    yaml11: &mut Vec<String>,
) -> Result<BTreeMap<String, Json>, String> {
    let who = if side == Side::Helm { "helm" } else { "ours" };
    let mut out = BTreeMap::new();
    let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
    for (source, content) in docs {
        for doc in split_like_helm(content) {
            let n = per_source.entry(source).or_default();
            *n += 1;
            let value = read_doc(side, &doc, yaml11).map_err(|e| format!("{who}: {source}: {e}\n{doc}"))?;
            if value.is_null() {
                continue;
            }
            let key = if value.get("kind").is_some_and(|k| k.is_string()) {
                super::helm::object_key(&value)
            } else {
                format!("{source}#{n}")
            };
            let (base, mut key, mut i) = (key.clone(), key, 1);
            while out.contains_key(&key) {
                i += 1;
                key = format!("{base}#{i}");
            }
            out.insert(key, value);
        }
    }
    Ok(out)
}

/// JSON pointers where `a` and `b` differ (the deepest differing nodes).
pub fn differing(a: &Json, b: &Json, at: String, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => differing(v, w, p, out),
                    _ => out.push(p),
                }
            }
        }
        (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differing(v, w, format!("{at}/{i}"), out);
            }
        }
        _ if a != b => out.push(at),
        _ => {}
    }
}

pub fn shape(v: &Json, with_len: bool) -> Json {
    // A certificate or key: its length varies with the random numbers in it; its kind does not.
    let mut pem = v.clone();
    super::helm::normalise(&mut pem);
    if pem != *v {
        return pem;
    }
    match v {
        Json::String(s) if with_len => Json::String(format!("<random string of {} bytes>", s.len())),
        Json::String(_) => Json::String("<random string>".into()),
        Json::Number(_) => Json::String("<random number>".into()),
        other => Json::String(format!("<random {}>", if other.is_array() { "list" } else { "value" })),
    }
}

/// Replaces, in helm's first run and in ours, what helm's two runs disagree on by its shape.
pub fn set_aside_random(
    h1: &mut BTreeMap<String, Json>,
    h2: &BTreeMap<String, Json>,
    ours: &mut BTreeMap<String, Json>,
) {
    for (key, a) in h1.iter_mut() {
        let Some(b) = h2.get(key) else { continue };
        let mut pointers = Vec::new();
        differing(a, b, String::new(), &mut pointers);
        for p in pointers {
            let (Some(x), Some(y)) = (a.pointer(&p), b.pointer(&p)) else { continue };
            let same_len = matches!((x, y), (Json::String(s), Json::String(t)) if s.len() == t.len());
            let s = shape(x, same_len);
            if let Some(o) = ours.get_mut(key).and_then(|o| o.pointer_mut(&p)) {
                *o = shape(o, same_len);
            }
            if let Some(x) = a.pointer_mut(&p) {
                *x = s;
            }
        }
    }
}
