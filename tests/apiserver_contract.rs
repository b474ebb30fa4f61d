//! The API-server double (`tests/support/apiserver`) may not drift from the real kube-apiserver: the
//! same requests go to both, in the same order, and the answers must agree on status codes and on
//! the fields the operator reads (managed-field owners, conflicts' fields, status-subresource
//! semantics, selector results, watch events, preconditions, finalizers).
//!
//! `harness = false`: one real control plane for the binary (tests/support/real.rs); each scenario
//! starts a fresh double and a fresh namespace on the real server.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use serde_json::{Value, json};
use support::ApiServer;
use support::real::{RealCluster, run_scenarios};

/// One side of the comparison.
struct Side {
    name: &'static str,
    client: kube::Client,
}

/// An answer: status code and JSON body (`Null` when not JSON).
#[derive(Debug, Clone)]
struct Answer {
    code: u16,
    body: Value,
}

impl Side {
    async fn send(&self, method: Method, path: &str, content_type: &str, body: Option<&Value>) -> Answer {
        let bytes = body.map(|b| serde_json::to_vec(b).expect("a JSON body")).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(kube::client::Body::from(bytes))
            .expect("a request");
        let response = self.client.send(request).await.unwrap_or_else(|e| panic!("{}: {path}: {e}", self.name));
        let code = response.status().as_u16();
        let raw: Bytes = response.into_body().collect_bytes().await.expect("a body");
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Answer { code, body }
    }

    async fn run(&self, req: &Req) -> Answer {
        self.send(req.method.clone(), &req.path, req.content_type, req.body.as_ref()).await
    }
}

/// A request, sent the same way to both sides.
struct Req {
    method: Method,
    path: String,
    content_type: &'static str,
    body: Option<Value>,
}

fn get(path: &str) -> Req {
    Req { method: Method::GET, path: path.into(), content_type: "application/json", body: None }
}
fn post(path: &str, body: &Value) -> Req {
    Req { method: Method::POST, path: path.into(), content_type: "application/json", body: Some(body.clone()) }
}
fn put(path: &str, body: &Value) -> Req {
    Req { method: Method::PUT, path: path.into(), content_type: "application/json", body: Some(body.clone()) }
}
fn apply(path: &str, manager: &str, force: bool, body: &Value) -> Req {
    let sep = if path.contains('?') { '&' } else { '?' };
    let path = format!("{path}{sep}fieldManager={manager}{}", if force { "&force=true" } else { "" });
    Req { method: Method::PATCH, path, content_type: "application/apply-patch+yaml", body: Some(body.clone()) }
}
fn merge(path: &str, body: &Value) -> Req {
    Req {
        method: Method::PATCH,
        path: path.into(),
        content_type: "application/merge-patch+json",
        body: Some(body.clone()),
    }
}
fn delete(path: &str, body: Option<&Value>) -> Req {
    Req { method: Method::DELETE, path: path.into(), content_type: "application/json", body: body.cloned() }
}

/// The real server and a fresh double, each with the namespace `ns` and our CRDs.
async fn sides(c: &RealCluster, ns: &str) -> (Side, Side, ApiServer) {
    let double = ApiServer::start().await;
    for crd in clusterstack::api::all_crds() {
        double.put_object(serde_json::to_value(&crd).expect("a CRD"));
    }
    let real = Side { name: "kube-apiserver", client: c.cp.admin_client().await.expect("admin") };
    let fake = Side { name: "double", client: double.client() };
    for side in [&real, &fake] {
        let a = side
            .run(&post(
                "/api/v1/namespaces",
                &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            ))
            .await;
        assert!(a.code == 201, "{}: creating the namespace: {a:?}", side.name);
    }
    (real, fake, double)
}

/// Both answers, with the real one first; panics when the codes differ.
async fn both(real: &Side, fake: &Side, what: &str, req: Req) -> (Answer, Answer) {
    let r = real.run(&req).await;
    let d = fake.run(&req).await;
    assert_eq!(
        r.code, d.code,
        "{what}: kube-apiserver answered {} but the double {}\nreal: {:#}\ndouble: {:#}",
        r.code, d.code, r.body, d.body
    );
    (r, d)
}

/// `(manager, operation)` pairs of an object's managedFields, sorted.
fn managers(obj: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| (m["manager"].as_str().unwrap_or_default().into(), m["operation"].as_str().unwrap_or_default().into()))
        .collect();
    v.sort();
    v
}

/// The managers owning `f:data` key `key` of a ConfigMap.
fn owners_of_data_key(obj: &Value, key: &str) -> Vec<String> {
    let mut v: Vec<String> = obj["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["fieldsV1"]["f:data"].get(format!("f:{key}")).is_some())
        .map(|m| m["manager"].as_str().unwrap_or_default().to_string())
        .collect();
    v.sort();
    v
}

fn names(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().into())
        .collect();
    v.sort();
    v
}

fn cm(ns: &str, name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels}, "data": data})
}

fn main() -> std::process::ExitCode {
    let all = support::real::scenarios![
        server_side_apply_ownership_and_conflicts,
        status_is_a_subresource,
        lists_with_label_selectors,
        watches_from_an_old_version,
        deletes_with_preconditions,
        finalizers_hold_a_deletion,
    ];
    run_scenarios("apiserver_contract", &all, Duration::from_secs(120), None)
}

async fn server_side_apply_ownership_and_conflicts(c: Arc<RealCluster>) {
    let ns = "contract-ssa";
    let (real, fake, _double) = sides(&c, ns).await;
    let path = format!("/api/v1/namespaces/{ns}/configmaps/one");
    // An apply that creates: 201, one Apply manager.
    let (r, d) = both(
        &real,
        &fake,
        "apply (create)",
        apply(&path, "alice", false, &cm(ns, "one", json!({"team": "x"}), json!({"a": "1"}))),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(managers(&r.body), managers(&d.body), "managers after create");
    assert_eq!(r.body["data"], d.body["data"]);
    // The same apply again changes nothing: same resourceVersion.
    let (r2, d2) = both(
        &real,
        &fake,
        "apply (no-op)",
        apply(&path, "alice", false, &cm(ns, "one", json!({"team": "x"}), json!({"a": "1"}))),
    )
    .await;
    assert_eq!(
        r2.body["metadata"]["resourceVersion"], r.body["metadata"]["resourceVersion"],
        "real: a no-op apply keeps the version"
    );
    assert_eq!(
        d2.body["metadata"]["resourceVersion"], d.body["metadata"]["resourceVersion"],
        "double: a no-op apply keeps the version"
    );
    // Another manager setting the same field to another value: 409 naming the field and owner.
    let (r, d) = both(
        &real,
        &fake,
        "apply (conflict)",
        apply(&path, "bob", false, &cm(ns, "one", json!({}), json!({"a": "2"}))),
    )
    .await;
    assert_eq!(r.code, 409);
    assert_eq!((r.body["reason"].as_str(), d.body["reason"].as_str()), (Some("Conflict"), Some("Conflict")));
    for (side, body) in [("real", &r.body), ("double", &d.body)] {
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains("conflict with \"alice\"") && message.contains(".data.a"), "{side}: {message}");
    }
    // Forced, it takes the field; alice keeps the label she set.
    let (r, d) =
        both(&real, &fake, "apply (forced)", apply(&path, "bob", true, &cm(ns, "one", json!({}), json!({"a": "2"}))))
            .await;
    assert_eq!(r.code, 200);
    assert_eq!(owners_of_data_key(&r.body, "a"), vec!["bob"]);
    assert_eq!(owners_of_data_key(&d.body, "a"), vec!["bob"]);
    assert_eq!((r.body["data"]["a"].as_str(), d.body["data"]["a"].as_str()), (Some("2"), Some("2")));
    assert_eq!(r.body["metadata"]["labels"], d.body["metadata"]["labels"]);
    // alice applies without the label: she gave it up, and nobody else owned it, so it goes.
    let (r, d) =
        both(&real, &fake, "apply (field removed)", apply(&path, "alice", false, &cm(ns, "one", json!({}), json!({}))))
            .await;
    assert_eq!(
        r.body["metadata"]["labels"], d.body["metadata"]["labels"],
        "a field its only owner stops applying is removed"
    );
    // A stale update: 409.
    let mut stale = r.body.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    both(&real, &fake, "update with a stale resourceVersion", put(&path, &stale)).await;
}

async fn status_is_a_subresource(c: Arc<RealCluster>) {
    let ns = "contract-status";
    let (real, fake, _double) = sides(&c, ns).await;
    let base = format!("/apis/clusterstack.x-k8s.io/v1alpha1/namespaces/{ns}/clusterstacks");
    let stack = json!({"apiVersion": "clusterstack.x-k8s.io/v1alpha1", "kind": "ClusterStack", "metadata": {"name": "s", "namespace": ns},
                       "spec": {"provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27"}});
    let (r, _) = both(&real, &fake, "create a ClusterStack", post(&base, &stack)).await;
    assert_eq!(r.code, 201);
    let gen0 = r.body["metadata"]["generation"].clone();
    // A status patch through /status sets status, not spec, and keeps the generation.
    let patch = json!({"status": {"latestRelease": "x"}, "spec": {"autoSubscribe": false}});
    let (r, d) = both(&real, &fake, "status patch", merge(&format!("{base}/s/status"), &patch)).await;
    for (side, body) in [("real", &r.body), ("double", &d.body)] {
        assert_eq!(body["status"]["latestRelease"], "x", "{side}");
        assert_ne!(body["spec"]["autoSubscribe"], json!(false), "{side}: /status leaves spec alone");
        assert_eq!(body["metadata"]["generation"], gen0, "{side}: a status write keeps the generation");
    }
    // The main resource ignores status and bumps the generation for spec.
    let patch = json!({"status": {"latestRelease": "y"}, "spec": {"autoSubscribe": false}});
    let (r, d) = both(&real, &fake, "main-resource patch", merge(&format!("{base}/s"), &patch)).await;
    for (side, body) in [("real", &r.body), ("double", &d.body)] {
        assert_eq!(body["status"]["latestRelease"], "x", "{side}: the main resource leaves status alone");
        assert_eq!(body["spec"]["autoSubscribe"], false, "{side}");
        assert_eq!(body["metadata"]["generation"], json!(gen0.as_i64().unwrap_or_default() + 1), "{side}");
    }
}

async fn lists_with_label_selectors(c: Arc<RealCluster>) {
    let ns = "contract-list";
    let (real, fake, _double) = sides(&c, ns).await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    for (name, labels) in [("x1", json!({"team": "x"})), ("y1", json!({"team": "y", "tier": "a"})), ("none", json!({}))]
    {
        both(&real, &fake, "create", post(&base, &cm(ns, name, labels.clone(), json!({})))).await;
    }
    for selector in
        ["team=x", "team==x", "team!=x", "team in (x,y)", "team notin (x)", "team", "!team", "team=y,tier=a", "tier!=a"]
    {
        let path = format!("{base}?labelSelector={}", urlencode(selector));
        let (r, d) = both(&real, &fake, selector, get(&path)).await;
        // The real namespace also holds kube-root-ca.crt only with its controller; neither runs here.
        assert_eq!(names(&r.body), names(&d.body), "labelSelector={selector}");
    }
    let path = format!("{base}?fieldSelector={}", urlencode("metadata.name=y1"));
    let (r, d) = both(&real, &fake, "field selector", get(&path)).await;
    assert_eq!(names(&r.body), names(&d.body));
    // A selector the server cannot parse: 400 on both.
    both(&real, &fake, "a bad selector", get(&format!("{base}?labelSelector={}", urlencode("team in x")))).await;
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The `(type, name)` of the events of a watch that ends by its `timeoutSeconds`.
async fn watch_events(side: &Side, path: &str) -> (u16, Vec<(String, String)>) {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header("accept", "application/json")
        .body(kube::client::Body::from(Vec::new()))
        .expect("a request");
    let response = side.client.send(request).await.unwrap_or_else(|e| panic!("{}: {path}: {e}", side.name));
    let code = response.status().as_u16();
    let raw = response.into_body().collect_bytes().await.unwrap_or_default();
    let events = serde_json::Deserializer::from_slice(&raw)
        .into_iter::<Value>()
        .filter_map(Result::ok)
        .filter(|e| e["type"] != "BOOKMARK")
        .map(|e| {
            let name = e["object"]["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let code = e["object"]["code"].as_i64().map(|c| c.to_string()).unwrap_or_default();
            (e["type"].as_str().unwrap_or_default().to_string(), if name.is_empty() { code } else { name })
        })
        .collect();
    (code, events)
}

async fn watches_from_an_old_version(c: Arc<RealCluster>) {
    let ns = "contract-watch";
    let (real, fake, _double) = sides(&c, ns).await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let (r, d) = both(&real, &fake, "create a", post(&base, &cm(ns, "a", json!({}), json!({"v": "1"})))).await;
    let (rv_real, rv_fake) = (
        r.body["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
        d.body["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
    );
    both(&real, &fake, "create b", post(&base, &cm(ns, "b", json!({}), json!({})))).await;
    both(&real, &fake, "update a", merge(&format!("{base}/a"), &json!({"data": {"v": "2"}}))).await;
    both(&real, &fake, "delete b", delete(&format!("{base}/b"), None)).await;
    // From the version of a's creation: what came after, in order.
    let q = "watch=true&allowWatchBookmarks=true&timeoutSeconds=2";
    let (rc, re) = watch_events(&real, &format!("{base}?{q}&resourceVersion={rv_real}")).await;
    let (dc, de) = watch_events(&fake, &format!("{base}?{q}&resourceVersion={rv_fake}")).await;
    assert_eq!((rc, dc), (200, 200));
    assert_eq!(re, de, "events after an old version");
    assert_eq!(re, vec![("ADDED".into(), "b".into()), ("MODIFIED".into(), "a".into()), ("DELETED".into(), "b".into())]);
    // From version 0 ("any"): the current state as ADDED events.
    let (_, re) = watch_events(&real, &format!("{base}?{q}&resourceVersion=0")).await;
    let (_, de) = watch_events(&fake, &format!("{base}?{q}&resourceVersion=0")).await;
    assert_eq!(re, de, "a watch from 0 starts with the current objects");
}

async fn deletes_with_preconditions(c: Arc<RealCluster>) {
    let ns = "contract-delete";
    let (real, fake, _double) = sides(&c, ns).await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let (r, d) = both(&real, &fake, "create", post(&base, &cm(ns, "p", json!({}), json!({})))).await;
    let wrong_uid = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}});
    let (r2, d2) = both(&real, &fake, "delete with a wrong uid", delete(&format!("{base}/p"), Some(&wrong_uid))).await;
    assert_eq!(r2.code, 409);
    assert_eq!(r2.body["reason"], d2.body["reason"]);
    let (rr, dr) = (
        r.body["metadata"]["resourceVersion"].as_str().unwrap(),
        d.body["metadata"]["resourceVersion"].as_str().unwrap(),
    );
    let stale = |rv: &str| json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"resourceVersion": format!("{rv}9")}});
    let r3 = real.run(&delete(&format!("{base}/p"), Some(&stale(rr)))).await;
    let d3 = fake.run(&delete(&format!("{base}/p"), Some(&stale(dr)))).await;
    assert_eq!(
        (r3.code, d3.code),
        (409, 409),
        "a stale resourceVersion precondition\nreal: {:#}\ndouble: {:#}",
        r3.body,
        d3.body
    );
    let right = |uid: &Value, rv: &str| json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid, "resourceVersion": rv}});
    let r4 = real.run(&delete(&format!("{base}/p"), Some(&right(&r.body["metadata"]["uid"], rr)))).await;
    let d4 = fake.run(&delete(&format!("{base}/p"), Some(&right(&d.body["metadata"]["uid"], dr)))).await;
    assert_eq!((r4.code, d4.code), (200, 200), "matching preconditions\nreal: {:#}\ndouble: {:#}", r4.body, d4.body);
    both(&real, &fake, "get after delete", get(&format!("{base}/p"))).await;
}

async fn finalizers_hold_a_deletion(c: Arc<RealCluster>) {
    let ns = "contract-finalizers";
    let (real, fake, _double) = sides(&c, ns).await;
    let base = format!("/api/v1/namespaces/{ns}/configmaps");
    let mut held = cm(ns, "held", json!({}), json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    both(&real, &fake, "create with a finalizer", post(&base, &held)).await;
    let (r, d) = both(&real, &fake, "delete", delete(&format!("{base}/held"), None)).await;
    for (side, body) in [("real", &r.body), ("double", &d.body)] {
        assert!(
            body["metadata"]["deletionTimestamp"].is_string(),
            "{side}: the answer is the object, being deleted: {body:#}"
        );
    }
    let (r, _) = both(&real, &fake, "get while held", get(&format!("{base}/held"))).await;
    assert_eq!(r.code, 200);
    // A new finalizer on an object being deleted is refused.
    both(
        &real,
        &fake,
        "add a finalizer while deleting",
        merge(&format!("{base}/held"), &json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}})),
    )
    .await;
    // Removing the last finalizer ends the deletion.
    both(
        &real,
        &fake,
        "remove the finalizer",
        merge(&format!("{base}/held"), &json!({"metadata": {"finalizers": null}})),
    )
    .await;
    let (r, _) = both(&real, &fake, "get after release", get(&format!("{base}/held"))).await;
    assert_eq!(r.code, 404);
}
