//! The exact requests the apply engine sends, checked request by request with `tower-test`.

use clusterstack::apply::{
    Action, Applier, ApplyOptions, FIELD_MANAGER, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner,
};
use http::{Method, Request, Response};
use kube::Client;
use kube::api::DynamicObject;
use kube::client::Body;
use serde_json::{Value, json};

/// Aggregated discovery answers: ConfigMap (namespaced) and ClusterRole (cluster-scoped).
fn discovery(path: &str) -> Value {
    let res = |group: &str, plural: &str, kind: &str, scope: &str| {
        json!({"resource": plural, "responseKind": {"group": group, "version": "v1", "kind": kind}, "scope": scope,
               "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
    };
    let items = if path == "/api" {
        json!([{"metadata": {"name": ""}, "versions": [{"version": "v1", "resources": [
            res("", "configmaps", "ConfigMap", "Namespaced"), res("", "namespaces", "Namespace", "Cluster")]}]}])
    } else {
        json!([{"metadata": {"name": "rbac.authorization.k8s.io"}, "versions": [{"version": "v1", "resources": [
            res("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", "Cluster")]}]}])
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": items})
}

struct Seen {
    method: Method,
    path: String,
    query: String,
    content_type: String,
    body: Value,
}

/// Serves `n` requests: discovery, 404 on reads, the applied body echoed back on patches.
async fn serve(mut handle: tower_test::mock::Handle<Request<Body>, Response<Body>>, n: usize) -> Vec<Seen> {
    let mut seen = Vec::new();
    for _ in 0..n {
        let Some((req, send)) = handle.next_request().await else { break };
        let (parts, body) = req.into_parts();
        let bytes = body.collect_bytes().await.unwrap();
        let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
        let path = parts.uri.path().to_string();
        let (code, reply) = match (&parts.method, path.as_str()) {
            (&Method::GET, "/api" | "/apis") => (200, discovery(&path)),
            (&Method::GET, _) => (
                404,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}),
            ),
            (&Method::PATCH, _) => {
                let mut b = body.clone();
                b["metadata"]["resourceVersion"] = json!("7");
                (201, b)
            }
            _ => (500, json!({})),
        };
        seen.push(Seen {
            method: parts.method.clone(),
            path,
            query: parts.uri.query().unwrap_or_default().to_string(),
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string())
                .unwrap_or_default(),
            body,
        });
        send.send_response(
            Response::builder().status(code).body(Body::from(serde_json::to_vec(&reply).unwrap())).unwrap(),
        );
    }
    seen
}

fn object(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn server_side_apply_request_is_exact() {
    clusterstack::install_crypto_provider();
    let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(svc, "default");
    // A fetched object with server-owned metadata, as a careless caller might pass it.
    let cm = object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "resourceVersion": "99", "uid": "abc", "labels": {"app": "x"},
                     "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
        "data": {"k": "v"}
    }));
    let role = object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                             "metadata": {"name": "reader", "namespace": "should-not-be-used"}, "rules": []}));
    let server = tokio::spawn(serve(handle, 4));
    let applier = Applier::new(client).with_concurrency(1);
    let owner = ReleaseOwner::new("docker-ferrol-1-27-v2", "stacks");
    let report = applier.apply(&[role, cm], &ApplyOptions::new(owner)).await.unwrap();
    assert!(report.all_ok(), "{:?}", report);
    assert_eq!(report.with(Action::Created).len(), 2);
    let seen = server.await.unwrap();
    let paths: Vec<String> = seen.iter().map(|s| format!("{} {}", s.method, s.path)).collect();
    assert_eq!(
        paths,
        [
            // Discovery once, then one server-side apply per object: nothing is read first.
            "GET /apis",
            "GET /api",
            "PATCH /apis/rbac.authorization.k8s.io/v1/clusterroles/reader",
            "PATCH /api/v1/namespaces/stacks/configmaps/settings",
        ]
    );
    for patch in seen.iter().filter(|s| s.method == Method::PATCH) {
        assert_eq!(patch.content_type, "application/apply-patch+yaml");
        let query: Vec<&str> = patch.query.split('&').collect();
        assert!(query.contains(&format!("fieldManager={FIELD_MANAGER}").as_str()), "{}", patch.query);
        assert!(query.contains(&"force=true"), "{}", patch.query);
        let meta = &patch.body["metadata"];
        assert!(patch.body["apiVersion"].is_string() && patch.body["kind"].is_string());
        assert_eq!(meta["labels"][RELEASE_LABEL], "docker-ferrol-1-27-v2");
        assert_eq!(meta["labels"][RELEASE_NAMESPACE_LABEL], "stacks");
        for server_owned in ["managedFields", "resourceVersion", "uid", "creationTimestamp"] {
            assert!(meta.get(server_owned).is_none(), "{server_owned} sent: {meta}");
        }
    }
    let role_body = &seen[2].body;
    assert!(role_body["metadata"].get("namespace").is_none(), "a cluster-scoped object got a namespace");
    let cm_body = &seen[3].body;
    assert_eq!(cm_body["metadata"]["namespace"], "stacks");
    assert_eq!(cm_body["metadata"]["labels"]["app"], "x", "the object's own labels were lost");
    assert_eq!(cm_body["data"]["k"], "v");
}
