//! Field paths for server-side apply: the leaf paths of an object, reading and removing a path,
//! merging, overlap of two paths, and `managedFields`' `fieldsV1` form.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{FieldPath, SERVER_META};

/// Leaf field paths of an apply configuration (lists and scalars are leaves: lists are atomic here).
pub(super) fn leaf_paths(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, child) in m {
                let skip = match prefix.len() {
                    0 => k == "apiVersion" || k == "kind",
                    1 if prefix[0] == "metadata" => {
                        k == "name" || k == "namespace" || SERVER_META.contains(&k.as_str())
                    }
                    _ => false,
                };
                if skip || child.is_null() {
                    continue;
                }
                prefix.push(k.clone());
                leaf_paths(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

pub(super) fn get_path<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

/// Removes a field and then any parent map it leaves empty (never the root or `metadata`).
pub(super) fn remove_path(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = &mut *v;
    for k in parents {
        match cur.get_mut(k) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
        if m.is_empty() && parents.len() > 1 || (parents.len() == 1 && parents[0] != "metadata" && m.is_empty()) {
            remove_path(v, parents);
        }
    }
}

/// Deep merge for apply: maps merge, everything else (lists included) is replaced.
pub(super) fn deep_merge(target: &mut Value, src: &Value) {
    match (target, src) {
        (Value::Object(t), Value::Object(s)) => {
            for (k, sv) in s {
                if sv.is_null() {
                    continue;
                }
                match t.get_mut(k) {
                    Some(tv) if tv.is_object() && sv.is_object() => deep_merge(tv, sv),
                    _ => {
                        t.insert(k.clone(), sv.clone());
                    }
                }
            }
        }
        (t, s) => *t = s.clone(),
    }
}

pub(super) fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `managedFields` in the FieldsV1 shape, built from owned leaf paths.
pub(super) fn fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
    let mut root = json!({});
    for p in paths {
        let mut cur = &mut root;
        for k in p {
            cur = &mut cur[format!("f:{k}")];
        }
        if cur.is_null() {
            *cur = json!({});
        }
    }
    root
}
