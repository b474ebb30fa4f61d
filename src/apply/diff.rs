//! The diff step: what an apply of a render would change on a cluster, found without writing.
//!
//! Every rendered object is prepared exactly as [`Applier::apply`] prepares it and sent as a
//! server-side apply with `dryRun=All` and the same field manager, so the server's own merge,
//! defaulting and validation decide the answer (as Flux's `ssa` `manager_diff.go` and
//! `kubectl diff --server-side` do). The answer is compared with the live object, both without
//! what the server sets by itself (status, `managedFields`, `resourceVersion`, `generation`,
//! `uid`, `creationTimestamp`). Objects of the previous inventory that the render no longer has
//! and that still carry our labels are reported as "would be pruned". Nothing is ever written.

use std::collections::HashSet;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;

use super::apply_all::{PrepareError, Prepared};
use super::{Applier, ApplyError, ApplyOptions, ObjectKey, describe, forbidden_message};

/// What one object's apply would do.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectDiff {
    /// Nothing would change.
    Unchanged,
    /// The object exists and would change: both sides as comparable YAML.
    Changed {
        /// The live object.
        live: String,
        /// The object as the apply would leave it.
        merged: String,
    },
    /// The object does not exist and would be created (as YAML).
    Created {
        /// The object as the apply would create it.
        merged: String,
    },
    /// The object is in the previous inventory, not in the render, and carries our labels.
    Pruned {
        /// The live object.
        live: String,
    },
    /// The object could not be compared.
    Failed {
        /// Why.
        error: String,
    },
}

/// One object of a diff.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffEntry {
    /// The object.
    pub key: ObjectKey,
    /// What would happen to it.
    pub diff: ObjectDiff,
}

impl DiffEntry {
    /// A unified diff of the object (`None` when it is unchanged or failed); the headers name
    /// the object, as `kubectl diff` names the live and merged files.
    pub fn unified(&self) -> Option<String> {
        let (before, after) = match &self.diff {
            ObjectDiff::Changed { live, merged } => (live.as_str(), merged.as_str()),
            ObjectDiff::Created { merged } => ("", merged.as_str()),
            ObjectDiff::Pruned { live } => (live.as_str(), ""),
            ObjectDiff::Unchanged | ObjectDiff::Failed { .. } => return None,
        };
        Some(unified(&self.key.to_string(), before, after))
    }
}

/// The result of [`Applier::diff`], in render order, then the objects that would be pruned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DiffReport {
    /// One entry per rendered object, then one per object that would be pruned.
    pub entries: Vec<DiffEntry>,
    /// Objects of the previous inventory not in the render that no longer carry our labels: a
    /// prune would leave them alone.
    pub prune_skipped: Vec<ObjectKey>,
}

impl DiffReport {
    /// Whether an apply would change anything (create, change or prune).
    pub fn has_differences(&self) -> bool {
        self.entries.iter().any(|e| !matches!(e.diff, ObjectDiff::Unchanged | ObjectDiff::Failed { .. }))
    }

    /// Whether some object could not be compared.
    pub fn has_errors(&self) -> bool {
        self.entries.iter().any(|e| matches!(e.diff, ObjectDiff::Failed { .. }))
    }

    /// How many objects are (unchanged, changed, created, pruned, failed).
    pub fn counts(&self) -> (usize, usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0, 0);
        for e in &self.entries {
            match e.diff {
                ObjectDiff::Unchanged => c.0 += 1,
                ObjectDiff::Changed { .. } => c.1 += 1,
                ObjectDiff::Created { .. } => c.2 += 1,
                ObjectDiff::Pruned { .. } => c.3 += 1,
                ObjectDiff::Failed { .. } => c.4 += 1,
            }
        }
        c
    }
}

/// A unified diff with three lines of context, headed `live/<object>` and `merged/<object>`.
pub fn unified(object: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("live/{object}"), &format!("merged/{object}"))
        .to_string()
}

/// Metadata the server sets by itself: never a difference worth showing.
const SERVER_SET_METADATA: [&str; 8] = [
    "managedFields",
    "resourceVersion",
    "generation",
    "uid",
    "creationTimestamp",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// An object as compared: without status and server-set metadata, keys sorted at every level
/// (the server's key order is no difference either).
pub fn comparable(obj: &Value) -> Value {
    let mut v = sorted(obj);
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in SERVER_SET_METADATA {
                meta.remove(f);
            }
        }
    }
    v
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Hides the values of a Secret's `data` and `stringData` as `kubectl diff` does: `***` when
/// both sides hold the same value, `*** (before)` / `*** (after)` when it changes, so a diff
/// shows which keys change without printing a secret into a terminal or a CI log.
pub fn mask_secret(live: Option<&mut Value>, merged: Option<&mut Value>) {
    let is_secret =
        |v: &Option<&mut Value>| v.as_ref().is_some_and(|v| v["kind"] == "Secret" && v["apiVersion"] == "v1");
    if !is_secret(&live) && !is_secret(&merged) {
        return;
    }
    let (mut live, mut merged) = (live, merged);
    for field in ["data", "stringData"] {
        let before = live.as_deref().and_then(|v| v.get(field)).cloned();
        let after = merged.as_deref().and_then(|v| v.get(field)).cloned();
        let mask = |side: Option<&mut Value>, other: &Option<Value>, tag: &str| {
            let Some(map) = side.and_then(|v| v.get_mut(field)).and_then(Value::as_object_mut) else { return };
            for (k, value) in map.iter_mut() {
                let same = other.as_ref().and_then(|o| o.get(k)) == Some(&*value);
                *value = Value::String(if same { "***".into() } else { format!("*** ({tag})") });
            }
        };
        mask(live.as_deref_mut(), &after, "before");
        mask(merged.as_deref_mut(), &before, "after");
    }
}

fn yaml(v: &Value) -> String {
    // A Value always serialises; an error would only lose the display, never the verdict.
    serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# not printable as YAML: {e}\n"))
}

/// Both sides of a comparison as YAML, Secret values masked.
fn sides(live: Option<&Value>, merged: Option<&Value>) -> (Option<String>, Option<String>) {
    let mut live = live.map(comparable);
    let mut merged = merged.map(comparable);
    mask_secret(live.as_mut(), merged.as_mut());
    (live.as_ref().map(yaml), merged.as_ref().map(yaml))
}

/// The (group, kind) pairs the CRDs of a render define, so objects of those kinds count as
/// "would be created" although the cluster does not serve the kind yet.
fn kinds_defined(objects: &[DynamicObject]) -> HashSet<(String, String)> {
    objects
        .iter()
        .filter(|o| {
            o.types.as_ref().is_some_and(|t| {
                t.kind == "CustomResourceDefinition" && t.api_version.starts_with("apiextensions.k8s.io/")
            })
        })
        .filter_map(|o| {
            let group = o.data.pointer("/spec/group")?.as_str()?;
            let kind = o.data.pointer("/spec/names/kind")?.as_str()?;
            Some((group.to_string(), kind.to_string()))
        })
        .collect()
}

impl Applier {
    /// What [`Applier::apply`] would do with `objects` and `opts`, asked of the server with
    /// dry-run applies; writes nothing.
    pub async fn diff(&self, objects: &[DynamicObject], opts: &ApplyOptions) -> Result<DiffReport, ApplyError> {
        self.discovery.resolve(&GroupVersionKind::gvk("", "v1", "Namespace")).await.map_err(ApplyError::Discovery)?;
        let defined = kinds_defined(objects);
        let pending: Vec<_> = objects.iter().map(|obj| self.diff_one(obj, opts, &defined)).collect();
        let mut entries: Vec<DiffEntry> = futures::stream::iter(pending).buffered(self.concurrency).collect().await;

        let wanted: HashSet<(String, String, String, String)> = entries
            .iter()
            .map(|e| (e.key.group.clone(), e.key.kind.clone(), e.key.namespace.clone(), e.key.name.clone()))
            .collect();
        let mut report = DiffReport::default();
        for key in opts.previous.entries.iter().map(|e| e.key.clone()) {
            let id = (key.group.clone(), key.kind.clone(), key.namespace.clone(), key.name.clone());
            if wanted.contains(&id) {
                continue;
            }
            match self.live(&key).await {
                Ok(None) => {}
                Ok(Some(live)) if opts.owner.owns(live.labels()) => {
                    let (live, _) = sides(serde_json::to_value(&live).ok().as_ref(), None);
                    entries.push(DiffEntry { key, diff: ObjectDiff::Pruned { live: live.unwrap_or_default() } });
                }
                Ok(Some(_)) => report.prune_skipped.push(key),
                Err(error) => entries.push(DiffEntry { key, diff: ObjectDiff::Failed { error } }),
            }
        }
        report.entries = entries;
        Ok(report)
    }

    /// The live object of a key, `None` when it (or its kind) does not exist.
    async fn live(&self, key: &ObjectKey) -> Result<Option<DynamicObject>, String> {
        let resolved = match self.discovery.resolve(&key.gvk()).await {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("discovery failed: {}", describe(&e))),
        };
        match self.api(&resolved, &key.namespace).get_opt(&key.name).await {
            Ok(o) => Ok(o),
            Err(kube::Error::Api(s)) if s.code == 403 => {
                Err(forbidden_message(&key.group, &resolved.resource.plural, "get"))
            }
            Err(e) => Err(format!("reading it failed: {}", describe(&e))),
        }
    }

    async fn diff_one(
        &self,
        obj: &DynamicObject,
        opts: &ApplyOptions,
        defined: &HashSet<(String, String)>,
    ) -> DiffEntry {
        let Prepared { key, resolved, body } = match self.prepare(obj, &opts.owner).await {
            Ok(p) => p,
            Err(PrepareError { key, unserved: true, .. })
                if defined.contains(&(key.group.clone(), key.kind.clone())) =>
            {
                // Its CRD is part of the same render: the apply creates the kind first.
                let (_, merged) = sides(None, serde_json::to_value(obj).ok().as_ref());
                return DiffEntry { key, diff: ObjectDiff::Created { merged: merged.unwrap_or_default() } };
            }
            Err(e) => return DiffEntry { key: e.key, diff: ObjectDiff::Failed { error: e.message } },
        };
        let live = match self.live(&key).await {
            Ok(l) => l,
            Err(error) => return DiffEntry { key, diff: ObjectDiff::Failed { error } },
        };
        let api = self.api(&resolved, &key.namespace);
        let mut params = PatchParams::apply(self.field_manager).force();
        params.dry_run = true;
        let merged = match api.patch(&key.name, &params, &Patch::Apply(&body)).await {
            Ok(m) => m,
            Err(kube::Error::Api(s)) if s.code == 403 => {
                let error = forbidden_message(&key.group, &resolved.resource.plural, "patch");
                return DiffEntry { key, diff: ObjectDiff::Failed { error } };
            }
            Err(e) => {
                let error = format!("dry-run server-side apply failed: {}", describe(&e));
                return DiffEntry { key, diff: ObjectDiff::Failed { error } };
            }
        };
        let live = live.and_then(|l| serde_json::to_value(l).ok());
        let merged = serde_json::to_value(merged).ok();
        let diff = match (&live, &merged) {
            (_, None) => ObjectDiff::Failed { error: "the server's answer cannot be read".into() },
            (None, Some(_)) => ObjectDiff::Created { merged: sides(None, merged.as_ref()).1.unwrap_or_default() },
            (Some(l), Some(m)) if comparable(l) == comparable(m) => ObjectDiff::Unchanged,
            (Some(_), Some(_)) => {
                let (live, merged) = sides(live.as_ref(), merged.as_ref());
                ObjectDiff::Changed { live: live.unwrap_or_default(), merged: merged.unwrap_or_default() }
            }
        };
        DiffEntry { key, diff }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_set_fields_and_key_order_are_no_difference() {
        let live = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "a", "uid": "1", "resourceVersion": "7", "generation": 2,
                         "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [{"manager": "x"}]},
            "data": {"b": "2", "a": "1"}, "status": {"x": 1}});
        let merged = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"a": "1", "b": "2"}});
        assert_eq!(comparable(&live), comparable(&merged));
        let changed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
            "data": {"a": "1", "b": "3"}});
        assert_ne!(comparable(&live), comparable(&changed));
        // Labels are not server-set: a changed label is a difference.
        let labelled = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "y"}},
            "data": {"a": "1", "b": "2"}});
        assert_ne!(comparable(&live), comparable(&labelled));
    }

    #[test]
    fn a_unified_diff_shows_the_changed_line_with_context() {
        let d = unified("v1 ConfigMap ns/a", "a: 1\nb: 2\nc: 3\n", "a: 1\nb: 3\nc: 3\n");
        assert!(d.starts_with("--- live/v1 ConfigMap ns/a\n+++ merged/v1 ConfigMap ns/a\n"), "{d}");
        assert!(d.contains("-b: 2\n+b: 3\n"), "{d}");
        assert!(d.contains(" a: 1\n"), "{d}");
    }

    #[test]
    fn secret_values_are_masked_but_changes_stay_visible() {
        let mut live = json!({"apiVersion": "v1", "kind": "Secret", "data": {"same": "YQ==", "changed": "Yg=="}});
        let mut merged =
            json!({"apiVersion": "v1", "kind": "Secret", "data": {"same": "YQ==", "changed": "Yw==", "new": "ZA=="}});
        mask_secret(Some(&mut live), Some(&mut merged));
        assert_eq!(live["data"], json!({"same": "***", "changed": "*** (before)"}));
        assert_eq!(merged["data"], json!({"same": "***", "changed": "*** (after)", "new": "*** (after)"}));
        // Not a Secret: untouched.
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"}});
        mask_secret(Some(&mut cm), None);
        assert_eq!(cm["data"]["k"], "v");
    }

    #[test]
    fn report_verdicts() {
        let key = ObjectKey {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: "ns".into(),
            name: "a".into(),
        };
        let entry = |diff| DiffEntry { key: key.clone(), diff };
        let same = DiffReport { entries: vec![entry(ObjectDiff::Unchanged)], prune_skipped: vec![] };
        assert!(!same.has_differences() && !same.has_errors());
        let failed =
            DiffReport { entries: vec![entry(ObjectDiff::Failed { error: "x".into() })], prune_skipped: vec![] };
        assert!(!failed.has_differences() && failed.has_errors());
        let pruned =
            DiffReport { entries: vec![entry(ObjectDiff::Pruned { live: "a: 1\n".into() })], prune_skipped: vec![] };
        assert!(pruned.has_differences());
        assert_eq!(pruned.counts(), (0, 0, 0, 1, 0));
        let created = entry(ObjectDiff::Created { merged: "a: 1\n".into() });
        assert!(created.unified().is_some_and(|u| u.contains("+a: 1")));
        assert!(entry(ObjectDiff::Unchanged).unified().is_none());
    }
}
