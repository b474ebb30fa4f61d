//! A stateful Kubernetes API server test double on 127.0.0.1, driven by a real `kube::Client`.
//!
//! What it does, faithfully enough for the operator's controllers:
//! - discovery: `/api`, `/api/v1`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`, the
//!   aggregated discovery (`as=APIGroupDiscoveryList`, v2) that `Discovery::run_aggregated` asks for,
//!   and `/version`; built-in kinds (Namespace, ConfigMap, Secret, ServiceAccount, Service, Event in
//!   core and `events.k8s.io/v1`, Lease, RBAC, Deployment, CustomResourceDefinition) and every
//!   served version of every established CRD;
//! - create, get, list (label selectors `=`, `==`, `!=`, `in`, `notin`, existence, `!key`; field
//!   selectors on `metadata.name`/`metadata.namespace`), update, delete; JSON patch (with `test`),
//!   merge patch, strategic merge patch (treated as a merge patch), server-side apply with
//!   per-manager field ownership and conflicts; the `/status` subresource; `resourceVersion`, 409 on a
//!   stale update; `generation` bumped on any change outside `metadata`/`status`; `uid`,
//!   `creationTimestamp`; a no-op write keeps the `resourceVersion`;
//! - watch with `resourceVersion`, `allowWatchBookmarks`, `sendInitialEvents`, `timeoutSeconds`,
//!   410 Gone for a version older than the kept history;
//! - finalizers and `deletionTimestamp`; garbage collection of objects whose owners (by uid) are
//!   all gone; deleting a namespace deletes its contents; deleting a CRD deletes its objects;
//!   namespaced objects need an existing, non-terminating namespace (`default`, `kube-system`,
//!   `kube-public` exist at start);
//! - fault injection, latency, a request log, direct reads and edits.
//!
//! Limits (do not rely on them in tests):
//! - no authentication, admission, defaulting, OpenAPI validation or CEL rules; no conversion
//!   between CRD versions (an object is served unchanged under every version);
//! - server-side apply is simplified: lists are atomic (no `listType=map` merging, so two managers
//!   cannot share one list), ownership is tracked for apply managers only (updates and patches do not
//!   take ownership), `managedFields` is rendered but writes to it are ignored;
//! - garbage collection runs synchronously after each write (not in the background) and only
//!   with background propagation (no foreground deletion, no orphaning);
//! - `limit`/`continue` are ignored: a list returns everything in one page;
//! - `dryRun=All` on create, update, patch (server-side apply included) and delete: the write runs
//!   on a copy of the store (validated, merged, conflicts checked) and the answer is the object as
//!   it would be stored, with the live `resourceVersion` (none for a create); nothing is stored and
//!   no watch sees it, as the real server's dry-run storage does; any other `dryRun` value is a 400;
//! - `deletecollection`, `resourceVersionMatch` semantics, and subresources other than
//!   `/status` are not implemented (they answer 405 or are ignored);
//! - updates do not create missing objects (`PUT` answers 404) and unconditional updates (no
//!   `resourceVersion`) are allowed for every kind.

mod discovery;
mod selector;
mod serve;
mod store;
mod watch;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clusterstack::util::lock;
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub use selector::{FieldSelector, LabelSelector};
use store::{ApiError, PatchType, Preconditions, ResourceType, Store};

/// Which requests a fault or a count applies to; unset fields match anything.
#[derive(Debug, Clone, Default)]
pub struct RequestMatch {
    verb: Option<String>,
    resource: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

impl RequestMatch {
    /// Matches every request.
    pub fn any() -> Self {
        Self::default()
    }
    /// Only this verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `discovery`.
    pub fn verb(mut self, verb: &str) -> Self {
        self.verb = Some(verb.into());
        self
    }
    /// Only this resource (plural, e.g. `configmaps`).
    pub fn resource(mut self, resource: &str) -> Self {
        self.resource = Some(resource.into());
        self
    }
    /// Only this object name.
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Only this subresource (`status`; empty: the object itself).
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }
    fn matches(&self, r: &RequestRecord) -> bool {
        self.subresource.as_ref().is_none_or(|v| *v == r.subresource)
            && self.verb.as_ref().is_none_or(|v| *v == r.verb)
            && self.resource.as_ref().is_none_or(|v| *v == r.resource)
            && self.name.as_ref().is_none_or(|v| *v == r.name)
    }
}

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    pub method: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection` or `discovery`.
    pub verb: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub group: String,
    /// The plural resource name, empty for discovery.
    pub resource: String,
    pub namespace: String,
    pub name: String,
    pub subresource: String,
    pub content_type: String,
    pub body: Option<Value>,
    pub status: u16,
    /// When it was answered (after the latency).
    pub at: std::time::Instant,
}

struct Fault {
    matcher: RequestMatch,
    code: u16,
    remaining: usize,
}

struct Shared {
    store: Mutex<Store>,
    faults: Mutex<Vec<Fault>>,
    latency: Mutex<Duration>,
    log: Mutex<Vec<RequestRecord>>,
    /// `None`: CRDs are never established; `Some(d)`: after `d`.
    establish_delay: Mutex<Option<Duration>>,
    bookmark_interval: Duration,
    /// Requests being answered now, and the most at once so far (watches excluded).
    in_flight: Mutex<(usize, usize)>,
    /// Bumped by `expire_watches`: every open watch ends.
    expire: tokio::sync::watch::Sender<u64>,
    /// Resources (plural names) whose watches carry no events: see `cut_watch_events`.
    cut_watches: Mutex<std::collections::HashSet<String>>,
}

/// The running test API server. Stops when dropped.
pub struct ApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: oneshot::Sender<()>,
}

impl ApiServer {
    /// Starts a server on 127.0.0.1 on a free port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            faults: Mutex::new(Vec::new()),
            latency: Mutex::new(Duration::ZERO),
            log: Mutex::new(Vec::new()),
            establish_delay: Mutex::new(Some(Duration::ZERO)),
            bookmark_interval: Duration::from_secs(1),
            in_flight: Mutex::new((0, 0)),
            expire: tokio::sync::watch::Sender::new(0),
            cut_watches: Mutex::new(Default::default()),
        });
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Self { addr, shared, _stop: stop }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A `kube::Client` talking to this server, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        clusterstack::install_crypto_provider();
        let config = kube::Config::new(self.url().parse().expect("server URL"));
        kube::Client::try_from(config).expect("kube client for the test server")
    }

    /// Fails the next `times` requests matching `matcher` with `code` (a `Status` body).
    pub fn fail_next(&self, matcher: RequestMatch, code: u16, times: usize) {
        lock(&self.shared.faults).push(Fault { matcher, code, remaining: times });
    }

    /// Drops every fault not yet used up.
    pub fn clear_faults(&self) {
        lock(&self.shared.faults).clear();
    }

    /// Ends every open watch and compacts the history: clients resuming from the version they had
    /// get 410 Gone and must list again (what an API server restart or etcd compaction does).
    pub fn expire_watches(&self) {
        lock(&self.shared.store).compact();
        self.shared.expire.send_modify(|n| *n += 1);
    }

    /// Cuts the event stream of every watch of `resource` (a plural name), open or future: the
    /// watch stays open and bookmarks go on, but no event reaches the client, as when a stream
    /// silently stops delivering. Lists still answer the truth. What only a periodic resync can
    /// repair.
    pub fn cut_watch_events(&self, resource: &str) {
        lock(&self.shared.cut_watches).insert(resource.to_string());
    }

    /// Adds `latency` before answering every request.
    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.shared.latency) = latency;
    }

    /// When CRDs become established: `Some(Duration::ZERO)` at once (the default), `Some(d)` after
    /// `d`, `None` never.
    pub fn set_crd_establish_delay(&self, delay: Option<Duration>) {
        *lock(&self.shared.establish_delay) = delay;
    }

    /// Every request answered so far.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.log).clone()
    }

    /// How many answered requests match.
    pub fn count(&self, matcher: &RequestMatch) -> usize {
        lock(&self.shared.log).iter().filter(|r| matcher.matches(r)).count()
    }

    /// Counts by `verb resource` (e.g. `"patch configmaps"`).
    pub fn counters(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for r in lock(&self.shared.log).iter() {
            *out.entry(format!("{} {}", r.verb, r.resource).trim().to_string()).or_insert(0) += 1;
        }
        out
    }

    /// The most requests (watches excluded) the server was answering at the same time.
    pub fn max_in_flight(&self) -> usize {
        lock(&self.shared.in_flight).1
    }

    /// Forgets the request log.
    pub fn clear_requests(&self) {
        lock(&self.shared.log).clear();
    }

    /// Reads an object as a client would see it; `namespace` is ignored for cluster-scoped kinds.
    pub fn get_object(&self, api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let store = lock(&self.shared.store);
        let rt = store.resource_for_kind(api_version, kind)?;
        store.get(&rt, namespace.unwrap_or("default"), name).ok()
    }

    /// Calls `f` with every object of a kind (all namespaces) as stored, in place: a check
    /// polled every few milliseconds copies nothing while it holds the store (the object has no
    /// `apiVersion`, `kind` or `managedFields` here).
    pub fn visit_objects(&self, api_version: &str, kind: &str, f: impl FnMut(&Value)) {
        let store = lock(&self.shared.store);
        if let Some(rt) = store.resource_for_kind(api_version, kind) {
            store.visit(&rt, f);
        }
    }

    /// Every object of a kind (all namespaces).
    pub fn list_objects(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let store = lock(&self.shared.store);
        match store.resource_for_kind(api_version, kind) {
            Some(rt) => store.list(&rt, None, &LabelSelector::default(), &FieldSelector::default()),
            None => vec![],
        }
    }

    /// Creates or replaces an object out of band (a manual edit): metadata the server owns is
    /// kept, `resourceVersion` and `generation` move as for any write, watches see it.
    pub fn put_object(&self, obj: Value) -> Value {
        let out = lock(&self.shared.store).put_direct(obj);
        match out {
            Ok(v) if v["kind"] == "CustomResourceDefinition" => {
                let rt =
                    lock(&self.shared.store).resource_for_kind("apiextensions.k8s.io/v1", "CustomResourceDefinition");
                match rt {
                    Some(rt) => establish_if_crd(&self.shared, &rt, v),
                    None => v,
                }
            }
            Ok(v) => v,
            Err(e) => panic!("put_object: {}", e.message),
        }
    }

    /// Edits an existing object out of band with `edit`; panics when it does not exist.
    pub fn edit_object(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Value {
        let mut obj = self
            .get_object(api_version, kind, namespace, name)
            .unwrap_or_else(|| panic!("edit_object: {kind} {name} not found"));
        edit(&mut obj);
        self.put_object(obj)
    }

    /// The store's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).resource_version()
    }
}

fn status_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [(header::CONTENT_TYPE, "application/json")], e.to_status().to_string()).into_response()
}

fn json_response(code: StatusCode, v: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

/// What a request addresses.
#[derive(Debug, Default)]
struct Target {
    discovery: Option<Vec<String>>,
    group: String,
    version: String,
    resource: String,
    namespace: Option<String>,
    name: String,
    subresource: String,
}

fn parse_path(path: &str) -> Result<Target, ApiError> {
    let segs: Vec<String> = path.trim_matches('/').split('/').map(str::to_string).collect();
    let (group, version, rest) = match segs.first().map(String::as_str) {
        Some("api") if segs.len() <= 2 => return Ok(Target { discovery: Some(segs), ..Default::default() }),
        Some("apis") if segs.len() <= 3 => return Ok(Target { discovery: Some(segs), ..Default::default() }),
        Some("version") => return Ok(Target { discovery: Some(segs), ..Default::default() }),
        Some("api") => (String::new(), segs[1].clone(), &segs[2..]),
        Some("apis") => (segs[1].clone(), segs[2].clone(), &segs[3..]),
        _ => {
            return Err(ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource {path}"),
            ));
        }
    };
    let mut t = Target { group, version, ..Default::default() };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let namespaced = rest.first() == Some(&"namespaces")
        && rest.len() >= 3
        && !(rest.len() == 3 && (rest[2] == "status" || rest[2] == "finalize"));
    let tail: &[&str] = if namespaced {
        t.namespace = Some(rest[1].to_string());
        &rest[2..]
    } else {
        &rest[..]
    };
    match tail {
        [r] => t.resource = r.to_string(),
        [r, n] => (t.resource, t.name) = (r.to_string(), n.to_string()),
        [r, n, s] => (t.resource, t.name, t.subresource) = (r.to_string(), n.to_string(), s.to_string()),
        _ => {
            return Err(ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource {path}"),
            ));
        }
    }
    Ok(t)
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let is_watch = req.uri().query().is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    if !is_watch {
        let mut f = lock(&shared.in_flight);
        f.0 += 1;
        f.1 = f.1.max(f.0);
    }
    let response = answer(&shared, req).await;
    if !is_watch {
        lock(&shared.in_flight).0 -= 1;
    }
    response
}

async fn answer(shared: &Arc<Shared>, req: Request) -> Response {
    let latency = *lock(&shared.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query: BTreeMap<String, String> =
        Query::<BTreeMap<String, String>>::try_from_uri(req.uri()).map(|q| q.0).unwrap_or_default();
    let content_type =
        req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let body = axum::body::to_bytes(req.into_body(), 64 << 20).await.unwrap_or_default();
    let target = match parse_path(&path) {
        Ok(t) => t,
        Err(e) => return status_response(&e),
    };
    let is_watch = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = if target.discovery.is_some() {
        "discovery"
    } else {
        match (&method, target.name.is_empty()) {
            (&Method::GET, true) if is_watch => "watch",
            (&Method::GET, true) => "list",
            (&Method::GET, false) => "get",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, false) => "delete",
            (&Method::DELETE, true) => "deletecollection",
            _ => "unknown",
        }
    };
    let mut record = RequestRecord {
        at: std::time::Instant::now(),
        method: method.to_string(),
        verb: verb.to_string(),
        path: path.clone(),
        query: query.clone(),
        group: target.group.clone(),
        resource: target.resource.clone(),
        namespace: target.namespace.clone().unwrap_or_default(),
        // A create names its object in the body only.
        name: if target.name.is_empty() && method == Method::POST {
            serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|b| b.pointer("/metadata/name").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default()
        } else {
            target.name.clone()
        },
        subresource: target.subresource.clone(),
        content_type: content_type.clone(),
        body: if body.is_empty() {
            None
        } else {
            serde_json::from_slice(&body).ok().or_else(|| serde_saphyr::from_slice(&body).ok())
        },
        status: 0,
    };
    let fault = {
        let mut faults = lock(&shared.faults);
        let hit = faults.iter_mut().find(|f| f.remaining > 0 && f.matcher.matches(&record));
        hit.map(|f| {
            f.remaining -= 1;
            f.code
        })
    };
    let response = match fault {
        Some(code) => status_response(&ApiError::new(code, "InternalError", format!("injected fault ({code})"))),
        None => match &target.discovery {
            Some(segs) => discovery::discovery(shared, segs, &accept),
            None => serve::serve(shared, &target, verb, &query, &content_type, &body),
        },
    };
    record.status = response.status().as_u16();
    lock(&shared.log).push(record);
    response
}

/// A created CRD becomes established at once, later, or never, as configured.
fn establish_if_crd(shared: &Arc<Shared>, rt: &ResourceType, created: Value) -> Value {
    if rt.kind != "CustomResourceDefinition" {
        return created;
    }
    let name = created.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
    match *lock(&shared.establish_delay) {
        Some(d) if d.is_zero() => {
            let mut store = lock(&shared.store);
            store.establish_crd(&name);
            store.get(rt, "", &name).unwrap_or(created)
        }
        Some(d) => {
            let shared = shared.clone();
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                lock(&shared.store).establish_crd(&name);
            });
            created
        }
        None => created,
    }
}
