//! The state of the test API server and the semantics of every write.

mod fields;
mod lifecycle;
mod patch;
mod write;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

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

/// `DeleteOptions.preconditions`: the delete goes ahead only if the object still has them.
#[derive(Debug, Default)]
pub struct Preconditions {
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl Preconditions {
    pub fn of(options: &Value) -> Self {
        let field =
            |f: &str| options.pointer(&format!("/preconditions/{f}")).and_then(Value::as_str).map(str::to_string);
        Self { uid: field("uid"), resource_version: field("resourceVersion") }
    }
}

/// A watch event as stored in the history and broadcast to open watches, shared (`Arc`) by
/// every watch and encoded at most once, as the real server's watch cache encodes an event once
/// for all its watchers: copying and encoding it per watch made the double's fan-out cost grow
/// with the number of watches of any kind.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub kind: &'static str,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub obj: Value,
    line: std::sync::OnceLock<bytes::Bytes>,
}

impl Event {
    pub fn new(rv: u64, kind: &'static str, group: String, plural: String, namespace: String, obj: Value) -> Self {
        Self { rv, kind, group, plural, namespace, obj, line: std::sync::OnceLock::new() }
    }

    /// The event as a line of a watch response: `{"type":…,"object":…}` and a newline.
    pub fn line(&self) -> bytes::Bytes {
        self.line.get_or_init(|| encode_line(self.kind, &self.obj)).clone()
    }
}

/// One line of a watch response, the object encoded in place.
pub fn encode_line(kind: &str, obj: &Value) -> bytes::Bytes {
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"type\":");
    // Encoding a `Value` into a Vec cannot fail (string keys only, no I/O).
    let _ = serde_json::to_writer(&mut out, kind);
    out.extend_from_slice(b",\"object\":");
    let _ = serde_json::to_writer(&mut out, obj);
    out.extend_from_slice(b"}\n");
    bytes::Bytes::from(out)
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
    /// Owner uid → the objects naming it in `ownerReferences`: a deletion finds its dependents
    /// without a scan, as the real garbage collector's graph does (a scan of every object per
    /// deletion made a DELETE cost the double milliseconds at 30,000 objects).
    dependents: HashMap<String, BTreeSet<Key>>,
    /// Objects to check for garbage, in key order: dependents of removed owners, and objects
    /// written naming only owners that do not exist.
    gc_queue: BTreeSet<Key>,
    /// Namespaces being deleted: their contents go, then they do.
    terminating: BTreeSet<String>,
    /// Set while collecting, so that the collector's own deletions queue their dependents
    /// instead of collecting recursively.
    collecting: bool,
    history: VecDeque<Arc<Event>>,
    /// Versions up to this one are compacted away: resuming from them answers 410 Gone.
    compacted: u64,
    pub tx: broadcast::Sender<Arc<Event>>,
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn uid() -> String {
    let b: [u8; 16] = rand::random();
    let h = hex::encode(b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// The owner uids an object names, `None` when it names no owner (an owner reference without
/// a uid names none that exists).
fn owner_uids(obj: &Value) -> Option<Vec<String>> {
    let refs = obj.get("metadata")?.get("ownerReferences")?.as_array().filter(|r| !r.is_empty())?;
    Some(refs.iter().filter_map(|o| o.get("uid")?.as_str().map(str::to_string)).collect())
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
            dependents: HashMap::new(),
            gc_queue: BTreeSet::new(),
            terminating: BTreeSet::new(),
            collecting: false,
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
            dependents: self.dependents.clone(),
            gc_queue: BTreeSet::new(),
            terminating: self.terminating.clone(),
            collecting: false,
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
                let owners = owner_uids(&st.obj);
                if let Some(old) = self.objects.get(key) {
                    for u in owner_uids(&old.obj).into_iter().flatten() {
                        if !owners.as_ref().is_some_and(|o| o.contains(&u)) {
                            self.unindex_dependent(&u, key);
                        }
                    }
                }
                if let Some(owners) = owners {
                    if !owners.iter().any(|u| self.uids.contains(u)) {
                        self.gc_queue.insert(key.clone());
                    }
                    for u in owners {
                        self.dependents.entry(u).or_default().insert(key.clone());
                    }
                }
                if key.0.is_empty() && key.1 == "namespaces" && st.obj.pointer("/metadata/deletionTimestamp").is_some()
                {
                    self.terminating.insert(key.3.clone());
                }
                self.objects.insert(key.clone(), st);
                (kind, rendered)
            }
            None => {
                let Some(mut st) = self.objects.remove(key) else { return Value::Null };
                if let Some(uid) = meta(&st.obj, "uid") {
                    self.uids.remove(&uid);
                    if let Some(dependents) = self.dependents.get(&uid) {
                        self.gc_queue.extend(dependents.iter().cloned());
                    }
                }
                for u in owner_uids(&st.obj).into_iter().flatten() {
                    self.unindex_dependent(&u, key);
                }
                if key.0.is_empty() && key.1 == "namespaces" {
                    self.terminating.remove(&key.3);
                }
                // A deleted object's last event carries a fresh resourceVersion, like etcd's.
                meta_mut(&mut st.obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
                ("DELETED", Self::render(rt, &st))
            }
        };
        let ev = Arc::new(Event::new(self.rv, kind, key.0.clone(), key.1.clone(), key.2.clone(), rendered.clone()));
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
    pub fn events_since(&self, rv: u64, group: &str, plural: &str) -> Res<Vec<Arc<Event>>> {
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
        // The objects of one resource (and namespace) are one range of the ordered keys; the
        // selectors read only metadata the client sees unchanged, so they are checked before
        // the (copying) rendering, as the real server filters its watch cache before encoding.
        let start = (rt.group.clone(), rt.plural.clone(), ns.unwrap_or_default().to_string(), String::new());
        self.objects
            .range(start..)
            .take_while(|(k, _)| k.0 == rt.group && k.1 == rt.plural && ns.is_none_or(|n| k.2 == n))
            .filter(|(_, st)| labels.matches(&st.obj) && fields.matches(&st.obj))
            .map(|(_, st)| Self::render(rt, st))
            .collect()
    }

    /// Calls `f` with every stored object of a resource (not rendered).
    pub fn visit(&self, rt: &ResourceType, mut f: impl FnMut(&Value)) {
        let start = (rt.group.clone(), rt.plural.clone(), String::new(), String::new());
        for (_, st) in self.objects.range(start..).take_while(|(k, _)| k.0 == rt.group && k.1 == rt.plural) {
            f(&st.obj);
        }
    }
}
