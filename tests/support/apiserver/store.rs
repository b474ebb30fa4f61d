//! The state of the test API server and the semantics of every write.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};

use serde_json::{Map, Value, json};
use tokio::sync::broadcast;

use super::selector::{FieldSelector, LabelSelector};

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

/// Leaf field paths of an apply configuration (lists and scalars are leaves: lists are atomic here).
fn leaf_paths(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
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

fn get_path<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(k))
}

/// Removes a field and then any parent map it leaves empty (never the root or `metadata`).
fn remove_path(v: &mut Value, path: &[String]) {
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
fn deep_merge(target: &mut Value, src: &Value) {
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

fn overlaps(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `managedFields` in the FieldsV1 shape, built from owned leaf paths.
fn fields_v1(paths: &BTreeSet<FieldPath>) -> Value {
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

    /// PATCH, on the object or its `/status`. Apply creates a missing object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        status: bool,
        kind: PatchType,
        body: &[u8],
        manager: Option<&str>,
        force: bool,
    ) -> Res<Value> {
        let key = Self::key(rt, ns.unwrap_or(""), name);
        if kind == PatchType::Apply {
            return self.apply(rt, ns, name, status, body, manager, force);
        }
        let old = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        let mut doc = Self::render(rt, &old);
        match kind {
            PatchType::Json => {
                let mut ops: json_patch::Patch =
                    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid JSON patch: {e}")))?;
                // As the real server's JSON patch library: testing a missing field against null holds.
                ops.0.retain(|op| match op {
                    json_patch::PatchOperation::Test(t) => {
                        !(t.value.is_null() && doc.pointer(t.path.as_str()).is_none())
                    }
                    _ => true,
                });
                json_patch::patch(&mut doc, &ops)
                    .map_err(|e| ApiError::new(422, "Invalid", format!("the JSON patch could not be applied: {e}")))?;
            }
            _ => {
                let p: Value =
                    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid merge patch: {e}")))?;
                json_patch::merge(&mut doc, &p);
            }
        }
        let new = Self::incoming(rt, ns, doc)?;
        Self::check_rv(&old.obj, &new, rt, name)?;
        self.write_existing(rt, &key, new, status, None)
    }

    /// Server-side apply with simplified field ownership: each manager owns the leaf paths it
    /// applied; lists are atomic; conflicts are checked against other apply managers only.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        status: bool,
        body: &[u8],
        manager: Option<&str>,
        force: bool,
    ) -> Res<Value> {
        let manager = manager.ok_or_else(|| {
            ApiError::bad(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            )
        })?;
        let config: Value =
            serde_saphyr::from_slice(body).map_err(|e| ApiError::bad(format!("invalid apply body: {e}")))?;
        if config.get("apiVersion").is_none() || config.get("kind").is_none() {
            return Err(ApiError::bad("apply configurations must carry apiVersion and kind"));
        }
        let mut config = Self::incoming(rt, ns, config)?;
        if meta(&config, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad("the name of the object does not match the name on the URL"));
        }
        meta_mut(&mut config).insert("name".into(), json!(name));
        // Only the part of the configuration the endpoint writes is owned.
        if let Some(o) = config.as_object_mut() {
            if status {
                o.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind" || k == "metadata");
                meta_mut(&mut config).retain(|k, _| k == "name" || k == "namespace");
            } else if rt.status {
                o.remove("status");
            }
        }
        let mut paths = BTreeSet::new();
        leaf_paths(&config, &mut vec![], &mut paths);
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let Some(old) = self.objects.get(&key).cloned() else {
            if status {
                return Err(ApiError::not_found(rt, name));
            }
            let created = self.create(rt, ns, config)?;
            if let Some(st) = self.objects.get_mut(&key) {
                st.managers.insert(manager.to_string(), (now(), paths));
                let st = st.clone();
                return Ok(Self::render(rt, &st));
            }
            return Ok(created);
        };
        Self::check_rv(&old.obj, &config, rt, name)?;
        let mut managers = old.managers.clone();
        // Conflicts: fields another manager owns with a different value.
        let mut conflicts = Vec::new();
        for (other, (_, owned)) in managers.iter_mut().filter(|(m, _)| m.as_str() != manager) {
            let mut lost = Vec::new();
            for p in &paths {
                for q in owned.iter().filter(|q| overlaps(p, q)) {
                    if get_path(&old.obj, p) != get_path(&config, p) {
                        conflicts.push(format!("conflict with \"{other}\": .{}", p.join(".")));
                        lost.push(q.clone());
                    }
                }
            }
            if force {
                for q in lost {
                    owned.remove(&q);
                }
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!("Apply failed with {} conflicts: {}", conflicts.len(), conflicts.join("; ")),
            ));
        }
        managers.retain(|_, (_, owned)| !owned.is_empty());
        let previous = managers.get(manager).map(|(_, p)| p.clone()).unwrap_or_default();
        let mut new = old.obj.clone();
        for gone in previous.difference(&paths) {
            let still_owned = managers.iter().any(|(m, (_, o))| m != manager && o.iter().any(|q| overlaps(q, gone)));
            if !still_owned {
                remove_path(&mut new, gone);
            }
        }
        deep_merge(&mut new, &config);
        let time = match managers.get(manager) {
            Some((t, p)) if *p == paths && new == old.obj => t.clone(),
            _ => now(),
        };
        managers.insert(manager.to_string(), (time, paths));
        self.write_existing(rt, &key, new, status, Some(managers))
    }

    /// DELETE: marks objects with finalizers, removes the others.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        precondition_uid: Option<&str>,
    ) -> Res<Value> {
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let old = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        if let Some(want) = precondition_uid
            && meta(&old.obj, "uid").as_deref() != Some(want)
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Precondition failed: UID in precondition: {want}, UID in object meta: {}",
                    meta(&old.obj, "uid").unwrap_or_default()
                ),
            ));
        }
        self.delete_key(&key, rt)
    }

    fn delete_key(&mut self, key: &Key, rt: &ResourceType) -> Res<Value> {
        let Some(old) = self.objects.get(key).cloned() else { return Err(ApiError::not_found(rt, &key.3)) };
        let has_finalizers =
            old.obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        let is_namespace = rt.kind == "Namespace" && rt.group.is_empty();
        if has_finalizers || is_namespace {
            if old.obj.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Self::render(rt, &old));
            }
            let mut st = old;
            meta_mut(&mut st.obj).insert("deletionTimestamp".into(), json!(now()));
            meta_mut(&mut st.obj).insert("deletionGracePeriodSeconds".into(), json!(0));
            if is_namespace {
                st.obj["status"] = json!({"phase": "Terminating"});
            }
            let out = self.commit(key, rt, Some(st));
            self.after_write(rt, &key.3);
            return Ok(out);
        }
        let out = self.commit(key, rt, None);
        self.after_write(rt, &key.3);
        Ok(out)
    }

    /// Side effects of writes: CRDs (un)register their resources, owners' dependents and
    /// namespaces' contents are collected.
    fn after_write(&mut self, rt: &ResourceType, name: &str) {
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            self.sync_crd(name);
        }
        self.collect_garbage();
    }

    /// Makes the resources of an established CRD servable, and forgets those of a removed one
    /// (deleting their objects, as a real cluster does).
    fn sync_crd(&mut self, name: &str) {
        let key = (
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
            String::new(),
            name.to_string(),
        );
        let crd = self.objects.get(&key).map(|s| s.obj.clone());
        let established = crd.as_ref().is_some_and(|c| {
            c.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
        });
        let old_types: Vec<ResourceType> =
            self.types.iter().filter(|t| t.crd.as_deref() == Some(name)).cloned().collect();
        self.types.retain(|t| t.crd.as_deref() != Some(name));
        if let (Some(crd), true) = (&crd, established) {
            let spec = &crd["spec"];
            let names = &spec["names"];
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            for v in spec["versions"].as_array().into_iter().flatten().filter(|v| v["served"] != false) {
                self.types.push(ResourceType {
                    group: s(&spec["group"]),
                    version: s(&v["name"]),
                    kind: s(&names["kind"]),
                    plural: s(&names["plural"]),
                    singular: names["singular"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| s(&names["kind"]).to_lowercase()),
                    namespaced: spec["scope"] != "Cluster",
                    status: v.pointer("/subresources/status").is_some(),
                    crd: Some(name.to_string()),
                    short_names: names["shortNames"].as_array().into_iter().flatten().map(s).collect(),
                });
            }
        }
        if crd.is_none() {
            // The CRD is gone: so are its objects.
            for t in old_types.iter().take(1) {
                let keys: Vec<Key> =
                    self.objects.keys().filter(|k| k.0 == t.group && k.1 == t.plural).cloned().collect();
                for k in keys {
                    self.commit(&k, t, None);
                }
            }
        }
    }

    /// Sets a CRD's `Established` and `NamesAccepted` conditions, which makes its resources servable.
    pub fn establish_crd(&mut self, name: &str) {
        let key = (
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
            String::new(),
            name.to_string(),
        );
        let Some(mut st) = self.objects.get(&key).cloned() else { return };
        let t = now();
        let cond = |ty: &str, reason: &str| json!({"type": ty, "status": "True", "reason": reason, "message": "", "lastTransitionTime": t});
        st.obj["status"] = json!({
            "conditions": [cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")],
            "acceptedNames": st.obj["spec"]["names"].clone(),
            "storedVersions": st.obj["spec"]["versions"].as_array().into_iter().flatten()
                .filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>(),
        });
        let rt = self.types.iter().find(|t| t.plural == "customresourcedefinitions").cloned();
        if let Some(rt) = rt {
            self.commit(&key, &rt, Some(st));
            self.sync_crd(name);
        }
    }

    /// Deletes objects none of whose owners (by uid) exist any more, and finishes deleting
    /// terminating namespaces that are empty. Runs until nothing changes.
    fn collect_garbage(&mut self) {
        if !std::mem::take(&mut self.gc_due) {
            return;
        }
        loop {
            let uids = &self.uids;
            let orphan = self.objects.iter().find(|(_, s)| {
                let refs = s.obj.pointer("/metadata/ownerReferences").and_then(Value::as_array);
                let alive = refs.is_some_and(|r| r.iter().any(|o| o["uid"].as_str().is_some_and(|u| uids.contains(u))));
                refs.is_some_and(|r| !r.is_empty()) && !alive && s.obj.pointer("/metadata/deletionTimestamp").is_none()
            });
            if let Some((k, _)) = orphan {
                let k = k.clone();
                if let Some(rt) = self.type_of_key(&k) {
                    let _ = self.delete_key(&k, &rt);
                    continue;
                }
            }
            // Terminating namespaces: delete their contents, then themselves.
            let terminating: Vec<String> = self
                .objects
                .iter()
                .filter(|(k, s)| {
                    k.0.is_empty() && k.1 == "namespaces" && s.obj.pointer("/metadata/deletionTimestamp").is_some()
                })
                .map(|(k, _)| k.3.clone())
                .collect();
            let mut changed = false;
            for ns in terminating {
                let inside: Vec<Key> = self
                    .objects
                    .iter()
                    .filter(|(k, s)| k.2 == ns && s.obj.pointer("/metadata/deletionTimestamp").is_none())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &inside {
                    if let Some(rt) = self.type_of_key(k) {
                        let _ = self.delete_key(k, &rt);
                        changed = true;
                    }
                }
                let empty = !self.objects.keys().any(|k| k.2 == ns);
                let nskey = (String::new(), "namespaces".to_string(), String::new(), ns.clone());
                let no_finalizers = self.objects.get(&nskey).is_some_and(|s| {
                    s.obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
                });
                if empty && no_finalizers {
                    let rt = self.types[0].clone();
                    self.commit(&nskey, &rt, None);
                    changed = true;
                }
            }
            if !changed {
                self.gc_due = false;
                return;
            }
        }
    }

    /// Creates or replaces an object directly, as an out-of-band edit (no validation but the kind).
    pub fn put_direct(&mut self, mut obj: Value) -> Res<Value> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let rt = self
            .resource_for_kind(&api_version, &kind)
            .ok_or_else(|| ApiError::new(404, "NotFound", format!("no resource for {api_version} {kind}")))?;
        let ns = meta(&obj, "namespace").unwrap_or_else(|| "default".into());
        let name = meta(&obj, "name").ok_or_else(|| ApiError::bad("metadata.name is required"))?;
        let key = Self::key(&rt, &ns, &name);
        if self.objects.contains_key(&key) {
            meta_mut(&mut obj).remove("resourceVersion");
            let new = Self::incoming(&rt, Some(&ns), obj)?;
            let st = self.objects.get(&key).cloned().map(|s| s.managers);
            // Out-of-band writes change status too.
            let status = new.get("status").cloned();
            let out = self.write_existing(&rt, &key, new, false, st)?;
            if let (Some(s), true) = (status, rt.status) {
                let mut cur = self.objects.get(&key).map(|s| s.obj.clone()).unwrap_or_default();
                cur["status"] = s;
                return self.write_existing(&rt, &key, cur, true, None);
            }
            Ok(out)
        } else {
            // Out-of-band creations keep their status too (a test's Cluster starts Ready), where
            // a client's create through a status subresource would drop it.
            let status = obj.get("status").cloned();
            let out = self.create(&rt, if rt.namespaced { Some(&ns) } else { None }, obj)?;
            match (status, rt.status) {
                (Some(s), true) => {
                    let mut cur = self.objects.get(&key).map(|s| s.obj.clone()).unwrap_or_default();
                    cur["status"] = s;
                    self.write_existing(&rt, &key, cur, true, None)
                }
                _ => Ok(out),
            }
        }
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
