//! The state of the test API server and the semantics of every write.

mod fields;
mod lifecycle;
mod patch;

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::selector::{FieldSelector, LabelSelector};
use fields::{deep_merge, fields_v1, get_path, leaf_paths, overlaps, remove_path};

/// How many watch events are kept for watches that resume from an older `resourceVersion`;
/// older ones answer 410 Gone, as etcd compaction does.
const HISTORY: usize = 20_000;

/// A resource the server serves (one per group, version and plural).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    /// Has a `/status` subresource.
    pub status: bool,
    /// Name of the CRD that defines it; `None` for built-in kinds.
    pub crd: Option<String>,
    pub short_names: Vec<String>,
}

impl ResourceType {
    fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool, status: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            status,
            crd: None,
            short_names: vec![],
        }
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// The kinds every test cluster serves.
fn builtin_types() -> Vec<ResourceType> {
    use ResourceType as T;
    vec![
        T::builtin("", "v1", "Namespace", "namespaces", false, true),
        T::builtin("", "v1", "ConfigMap", "configmaps", true, false),
        T::builtin("", "v1", "Secret", "secrets", true, false),
        T::builtin("", "v1", "ServiceAccount", "serviceaccounts", true, false),
        T::builtin("", "v1", "Service", "services", true, true),
        T::builtin("", "v1", "Event", "events", true, false),
        T::builtin("events.k8s.io", "v1", "Event", "events", true, false),
        T::builtin("coordination.k8s.io", "v1", "Lease", "leases", true, false),
        T::builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, false),
        T::builtin("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, false),
        T::builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true, false),
        T::builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, false),
        T::builtin("apps", "v1", "Deployment", "deployments", true, true),
        T::builtin("apps", "v1", "DaemonSet", "daemonsets", true, true),
        T::builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices", false, true),
        T::builtin("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false, true),
    ]
}

/// Key of a stored object: group, plural, namespace (empty when cluster-scoped), name.
pub type Key = (String, String, String, String);

/// A field path, e.g. `["spec", "replicas"]`.
type FieldPath = Vec<String>;

/// One stored object and the fields each server-side-apply manager owns.
#[derive(Debug, Clone)]
struct Stored {
    obj: Value,
    managers: BTreeMap<String, (String, BTreeSet<FieldPath>)>,
}

/// A watch event as stored in the history and broadcast to open watches.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static str,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub obj: Value,
}

/// An API error, answered as a `Status` object.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into() }
    }
    fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{}.{} \"{name}\" not found", rt.plural, rt.group))
    }
    fn bad(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    /// The `Status` body.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        })
    }
}

type Res<T> = Result<T, ApiError>;

/// Which kind of patch a PATCH request carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchType {
    Json,
    Merge,
    /// Treated as a merge patch (no patch strategies from schemas here).
    Strategic,
    Apply,
}

/// All server state; guarded by one mutex in the server.
pub struct Store {
    rv: u64,
    pub types: Vec<ResourceType>,
    objects: BTreeMap<Key, Stored>,
    /// The uids of the stored objects, so owners are checked without a scan.
    uids: HashSet<String>,
    /// Whether the last writes may have left garbage (an object removed, an owned object whose
    /// owner is missing, a namespace terminating); collecting scans every object, so only then.
    gc_due: bool,
    history: VecDeque<Event>,
    /// Versions up to this one are compacted away: resuming from them answers 410 Gone.
    compacted: u64,
    pub tx: broadcast::Sender<Event>,
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn uid() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

fn meta(obj: &Value, field: &str) -> Option<String> {
    obj.get("metadata")?.get(field)?.as_str().map(str::to_string)
}

fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

/// The object without `metadata` and `status`: what `generation` tracks.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

/// Metadata fields the server owns; clients' values are ignored.
const SERVER_META: [&str; 7] =
    ["uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp", "managedFields", "selfLink"];

impl Store {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(16_384);
        let mut s = Self {
            rv: 1,
            types: builtin_types(),
            objects: BTreeMap::new(),
            uids: HashSet::new(),
            gc_due: false,
            history: VecDeque::new(),
            compacted: 0,
            tx,
        };
        for ns in ["default", "kube-system", "kube-public"] {
            let rt = s.types[0].clone();
            let _ = s.create(&rt, None, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        }
        s
    }

    /// A copy of the objects and served types to run a `dryRun=All` write on: validation,
    /// defaulting and apply merging behave as for a real write, but the copy has its own
    /// (unwatched) event channel and is dropped after the answer, so nothing is stored, no
    /// resourceVersion moves and no watch sees an event.
    pub fn dry_run_copy(&self) -> Store {
        let (tx, _) = broadcast::channel(16);
        Store {
            rv: self.rv,
            types: self.types.clone(),
            objects: self.objects.clone(),
            uids: self.uids.clone(),
            gc_due: false,
            history: VecDeque::new(),
            compacted: self.compacted,
            tx,
        }
    }

    /// The current resourceVersion of the whole store.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// Finds a served resource by group, version and plural.
    pub fn resource(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural).cloned()
    }

    /// Finds a served resource by apiVersion and kind.
    pub fn resource_for_kind(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.types.iter().find(|t| t.api_version() == api_version && t.kind == kind).cloned()
    }

    fn key(rt: &ResourceType, ns: &str, name: &str) -> Key {
        (rt.group.clone(), rt.plural.clone(), if rt.namespaced { ns.to_string() } else { String::new() }, name.into())
    }

    /// The object as clients see it: its served apiVersion and kind and managedFields.
    fn render(rt: &ResourceType, st: &Stored) -> Value {
        let mut v = st.obj.clone();
        v["apiVersion"] = json!(rt.api_version());
        v["kind"] = json!(rt.kind);
        if !st.managers.is_empty() {
            let entries: Vec<Value> = st
                .managers
                .iter()
                .map(|(m, (time, paths))| {
                    json!({"manager": m, "operation": "Apply", "apiVersion": rt.api_version(), "time": time,
                           "fieldsType": "FieldsV1", "fieldsV1": fields_v1(paths)})
                })
                .collect();
            meta_mut(&mut v).insert("managedFields".into(), Value::Array(entries));
        }
        v
    }

    fn type_of_key(&self, key: &Key) -> Option<ResourceType> {
        self.types.iter().find(|t| t.group == key.0 && t.plural == key.1).cloned()
    }

    /// Stores a new version of an object (or removes it with `None`), bumps the resourceVersion and
    /// notifies watches.
    fn commit(&mut self, key: &Key, rt: &ResourceType, new: Option<Stored>) -> Value {
        self.rv += 1;
        let (kind, rendered) = match new {
            Some(mut st) => {
                meta_mut(&mut st.obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
                let kind = if self.objects.contains_key(key) { "MODIFIED" } else { "ADDED" };
                let rendered = Self::render(rt, &st);
                if let Some(uid) = meta(&st.obj, "uid") {
                    self.uids.insert(uid);
                }
                let orphaned = st.obj.pointer("/metadata/ownerReferences").and_then(Value::as_array).is_some_and(|r| {
                    !r.is_empty() && !r.iter().any(|o| o["uid"].as_str().is_some_and(|u| self.uids.contains(u)))
                });
                let terminating = key.1 == "namespaces" && st.obj.pointer("/metadata/deletionTimestamp").is_some();
                self.gc_due |= orphaned || terminating;
                self.objects.insert(key.clone(), st);
                (kind, rendered)
            }
            None => {
                let Some(mut st) = self.objects.remove(key) else { return Value::Null };
                if let Some(uid) = meta(&st.obj, "uid") {
                    self.uids.remove(&uid);
                }
                self.gc_due = true;
                // A deleted object's last event carries a fresh resourceVersion, like etcd's.
                meta_mut(&mut st.obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
                ("DELETED", Self::render(rt, &st))
            }
        };
        let ev = Event {
            rv: self.rv,
            kind,
            group: key.0.clone(),
            plural: key.1.clone(),
            namespace: key.2.clone(),
            obj: rendered.clone(),
        };
        self.history.push_back(ev.clone());
        if self.history.len() > HISTORY {
            self.history.pop_front();
        }
        let _ = self.tx.send(ev);
        rendered
    }

    /// Forgets the history, as an etcd compaction does: watches resuming from an earlier version
    /// get 410 Gone.
    pub fn compact(&mut self) {
        self.compacted = self.rv;
        self.history.clear();
    }

    /// Events after `rv` for one resource, or 410 Gone when they are no longer kept.
    pub fn events_since(&self, rv: u64, group: &str, plural: &str) -> Res<Vec<Event>> {
        if rv < self.compacted {
            return Err(ApiError::new(410, "Expired", format!("too old resource version: {rv} ({})", self.compacted)));
        }
        if let Some(first) = self.history.front()
            && first.rv > rv + 1
            && rv < self.rv
        {
            return Err(ApiError::new(410, "Expired", format!("too old resource version: {rv} ({})", first.rv - 1)));
        }
        Ok(self.history.iter().filter(|e| e.rv > rv && e.group == group && e.plural == plural).cloned().collect())
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Res<Value> {
        self.objects
            .get(&Self::key(rt, ns, name))
            .map(|st| Self::render(rt, st))
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Lists objects of a resource (in one namespace or all), filtered by selectors.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, _)| k.0 == rt.group && k.1 == rt.plural && ns.is_none_or(|n| k.2 == n))
            .map(|(_, st)| Self::render(rt, st))
            .filter(|o| labels.matches(o) && fields.matches(o))
            .collect()
    }

    fn check_namespace(&self, rt: &ResourceType, ns: &str) -> Res<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns_type = &self.types[0];
        match self.objects.get(&Self::key(ns_type, "", ns)) {
            None => Err(ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))),
            Some(st) if st.obj.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
                403,
                "Forbidden",
                format!("unable to create new content in namespace {ns} because it is being terminated"),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Normalises an incoming body: kind, namespace and server-owned metadata.
    fn incoming(rt: &ResourceType, ns: Option<&str>, mut body: Value) -> Res<Value> {
        if !body.is_object() {
            return Err(ApiError::bad("the body must be a JSON object"));
        }
        if let Some(k) = body.get("kind").and_then(Value::as_str)
            && k != rt.kind
        {
            return Err(ApiError::bad(format!("kind {k} does not match the resource {}", rt.plural)));
        }
        if rt.kind == "Secret"
            && rt.group.is_empty()
            && let Some(Value::Object(string_data)) = body.as_object_mut().and_then(|o| o.remove("stringData"))
        {
            // As the real server: stringData is write-only and lands base64-encoded in data.
            use base64::Engine;
            for (k, v) in string_data {
                let encoded = base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
                body["data"][k] = json!(encoded);
            }
        }
        let m = meta_mut(&mut body);
        if rt.namespaced {
            let path_ns = ns.ok_or_else(|| ApiError::bad("a namespace is required"))?;
            match m.get("namespace").and_then(Value::as_str) {
                Some(b) if !b.is_empty() && b != path_ns => {
                    return Err(ApiError::bad(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(path_ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        m.remove("managedFields");
        m.remove("selfLink");
        // Empty collections are omitted, as the real server's serialisation does.
        m.retain(|k, v| {
            !(["finalizers", "labels", "annotations", "ownerReferences"].contains(&k.as_str())
                && (v.is_null()
                    || v.as_array().is_some_and(|a| a.is_empty())
                    || v.as_object().is_some_and(|o| o.is_empty())))
        });
        Ok(body)
    }

    /// POST: creates an object.
    pub fn create(&mut self, rt: &ResourceType, ns: Option<&str>, body: Value) -> Res<Value> {
        let mut obj = Self::incoming(rt, ns, body)?;
        let m = meta_mut(&mut obj);
        let name = match m.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match m.get("generateName").and_then(Value::as_str) {
                Some(p) => format!("{p}{}", &hex::encode(rand::random::<[u8; 3]>())[..5]),
                None => return Err(ApiError::new(422, "Invalid", "metadata.name: Required value")),
            },
        };
        m.insert("name".into(), json!(name));
        if rt.group == "events.k8s.io" && rt.kind == "Event" {
            validate_event(&obj)?;
        }
        let m = meta_mut(&mut obj);
        for f in SERVER_META {
            m.remove(f);
        }
        m.insert("uid".into(), json!(uid()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.insert("generation".into(), json!(1));
        self.check_namespace(rt, ns.unwrap_or(""))?;
        let key = Self::key(rt, ns.unwrap_or(""), &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{}.{} \"{name}\" already exists", rt.plural, rt.group),
            ));
        }
        if rt.status {
            // With a status subresource, status is not set through the main resource.
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        if rt.kind == "Namespace" && rt.group.is_empty() {
            obj["status"] = json!({"phase": "Active"});
        }
        let out = self.commit(&key, rt, Some(Stored { obj, managers: BTreeMap::new() }));
        self.after_write(rt, &name);
        // Garbage collection may have removed it already (an owner that does not exist).
        Ok(self.objects.get(&key).map(|st| Self::render(rt, st)).unwrap_or(out))
    }

    /// Writes a new version of an existing object with the rules every update shares: status or
    /// spec preserved depending on the endpoint, generation bumped on spec changes, no write when
    /// nothing changed.
    fn write_existing(
        &mut self,
        rt: &ResourceType,
        key: &Key,
        mut new: Value,
        status_only: bool,
        managers: Option<BTreeMap<String, (String, BTreeSet<FieldPath>)>>,
    ) -> Res<Value> {
        let old = self.objects.get(key).cloned().ok_or_else(|| ApiError::not_found(rt, &key.3))?;
        if status_only {
            // The status endpoint changes status only.
            let status = new.get("status").cloned();
            new = old.obj.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        } else if rt.status {
            // The main endpoint never changes status.
            match old.obj.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        // Server-owned metadata stays as it was, except finalizers and the like the client sets.
        {
            let m = meta_mut(&mut new);
            for f in SERVER_META.iter().chain(["name", "namespace"].iter()) {
                match old.obj.pointer(&format!("/metadata/{f}")) {
                    Some(v) => {
                        m.insert(f.to_string(), v.clone());
                    }
                    None => {
                        m.remove(*f);
                    }
                }
            }
        }
        if spec_part(&new) != spec_part(&old.obj) {
            let g = old.obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        let managers = managers.unwrap_or(old.managers.clone());
        if new == old.obj && managers == old.managers {
            return Ok(Self::render(rt, &old));
        }
        let terminating = new.pointer("/metadata/deletionTimestamp").is_some();
        let no_finalizers = new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty());
        if terminating && no_finalizers {
            // The last finalizer is gone: the object goes.
            let out = self.commit(key, rt, None);
            self.after_write(rt, &key.3);
            return Ok(out);
        }
        let out = self.commit(key, rt, Some(Stored { obj: new, managers }));
        self.after_write(rt, &key.3);
        Ok(out)
    }

    fn check_rv(old: &Value, new: &Value, rt: &ResourceType, name: &str) -> Res<()> {
        if let Some(want) = meta(new, "resourceVersion").filter(|s| !s.is_empty())
            && meta(old, "resourceVersion").as_deref() != Some(want.as_str())
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    rt.plural, rt.group
                ),
            ));
        }
        Ok(())
    }

    /// PUT, on the object or its `/status`.
    pub fn update(&mut self, rt: &ResourceType, ns: Option<&str>, name: &str, status: bool, body: Value) -> Res<Value> {
        let new = Self::incoming(rt, ns, body)?;
        if meta(&new, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad("the name of the object does not match the name on the URL"));
        }
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let old = self.objects.get(&key).ok_or_else(|| ApiError::not_found(rt, name))?;
        Self::check_rv(&old.obj, &new, rt, name)?;
        self.write_existing(rt, &key, new, status, None)
    }
}

/// The real server's checks on a new `events.k8s.io/v1` Event (what a recorder gets wrong).
fn validate_event(obj: &Value) -> Res<()> {
    let invalid = |m: String| Err(ApiError::new(422, "Invalid", m));
    for field in ["eventTime", "reportingController", "reportingInstance", "action", "reason"] {
        if obj.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
            return invalid(format!("{field}: Required value"));
        }
    }
    if obj.get("note").and_then(Value::as_str).is_some_and(|n| n.len() > 1024) {
        return invalid("note: Too long: may not be more than 1024 bytes".into());
    }
    if !matches!(obj.get("type").and_then(Value::as_str), Some("Normal" | "Warning")) {
        return invalid("type: Invalid value: has invalid value".into());
    }
    Ok(())
}
