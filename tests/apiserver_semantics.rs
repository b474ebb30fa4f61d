//! The API server test double honours the semantics the controllers rely on.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::Discovery;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use support::{ApiServer, RequestMatch};

fn cm(name: &str, labels: serde_json::Value, data: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "data": data})).unwrap()
}

async fn eventually<F: Fn() -> bool>(what: &str, f: F) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn discovery_serves_builtins_and_applied_crds() {
    let server = ApiServer::start().await;
    let client = server.client();
    for aggregated in [true, false] {
        let d = if aggregated {
            Discovery::new(client.clone()).run_aggregated().await.unwrap()
        } else {
            Discovery::new(client.clone()).run().await.unwrap()
        };
        let (ar, caps) = d.resolve_gvk(&kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap")).unwrap();
        assert_eq!(ar.plural, "configmaps");
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
        let (lease, _) =
            d.resolve_gvk(&kube::api::GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease")).unwrap();
        assert_eq!(lease.plural, "leases");
        assert!(d.resolve_gvk(&kube::api::GroupVersionKind::gvk("events.k8s.io", "v1", "Event")).is_some());
        assert!(
            d.resolve_gvk(&kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "ClusterClass")).is_none()
        );
    }
    // Applying a CRD makes its kind servable, with the CRD's own plural.
    for crd in support::fixtures::capi_crds() {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    let crd = server
        .get_object("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "clusterclasses.cluster.x-k8s.io")
        .unwrap();
    let established = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established, "{crd}");
    let d = Discovery::new(client.clone()).run_aggregated().await.unwrap();
    let (ar, caps) =
        d.resolve_gvk(&kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "ClusterClass")).unwrap();
    assert_eq!(ar.plural, "clusterclasses");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural.ends_with("status")), "{:?}", caps.subresources);
}

#[tokio::test]
async fn stale_update_conflicts_and_generation_tracks_spec() {
    let server = ApiServer::start().await;
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let created = api.create(&PostParams::default(), &cm("a", json!({}), json!({"k": "1"}))).await.unwrap();
    assert!(created.uid().is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    let mut first = created.clone();
    let mut second = created.clone();
    first.data = Some([("k".to_string(), "2".to_string())].into());
    let updated = api.replace("a", &PostParams::default(), &first).await.unwrap();
    assert_ne!(updated.resource_version(), created.resource_version());
    assert_eq!(updated.metadata.generation, Some(2));
    // The second writer still holds the old resourceVersion.
    second.data = Some([("k".to_string(), "3".to_string())].into());
    let err = api.replace("a", &PostParams::default(), &second).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err:?}");
    // A metadata-only change does not bump the generation.
    let labelled = api
        .patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2));
    // A patch that changes nothing keeps the resourceVersion.
    let same = api
        .patch("a", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert_eq!(same.resource_version(), labelled.resource_version());
    let err = api.create(&PostParams::default(), &cm("a", json!({}), json!({}))).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"));
    // Namespaced objects need their namespace.
    let missing: Api<ConfigMap> = Api::namespaced(client, "nope");
    let err = missing.create(&PostParams::default(), &cm("a", json!({}), json!({}))).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 404), "{err:?}");
}

#[tokio::test]
async fn status_subresource_and_spec_are_written_separately() {
    let server = ApiServer::start().await;
    let client = server.client();
    for crd in support::fixtures::capi_crds() {
        server.put_object(serde_json::to_value(&crd).unwrap());
    }
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "ClusterClass"),
        "clusterclasses",
    );
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let pp = PatchParams::apply("test").force();
    let obj = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass", "metadata": {"name": "c"},
                     "spec": {"a": 1}, "status": {"ignored": true}});
    let created = api.patch("c", &pp, &Patch::Apply(&obj)).await.unwrap();
    assert!(created.data.get("status").is_none(), "status set through the main resource: {:?}", created.data);
    assert_eq!(created.metadata.generation, Some(1));
    let st = api
        .patch_status("c", &PatchParams::default(), &Patch::Merge(json!({"status": {"ready": true}, "spec": {"a": 2}})))
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    assert_eq!(st.data["spec"]["a"], 1, "a status write changed spec");
    assert_eq!(st.metadata.generation, Some(1), "a status write bumped the generation");
    let spec = api
        .patch("c", &PatchParams::default(), &Patch::Merge(json!({"spec": {"a": 3}, "status": {"ready": false}})))
        .await
        .unwrap();
    assert_eq!(spec.data["status"]["ready"], true, "a spec write changed status");
    assert_eq!(spec.metadata.generation, Some(2));
}

#[tokio::test]
async fn server_side_apply_tracks_fields_per_manager() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let apply = |data: serde_json::Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s"}, "data": data});
    let a =
        api.patch("s", &PatchParams::apply("one"), &Patch::Apply(apply(json!({"x": "1", "y": "1"})))).await.unwrap();
    let b = api.patch("s", &PatchParams::apply("two"), &Patch::Apply(apply(json!({"z": "2"})))).await.unwrap();
    assert_eq!(b.data.as_ref().unwrap().len(), 3);
    assert_eq!(b.metadata.managed_fields.as_ref().map(Vec::len), Some(2));
    // Manager "one" stops applying y: y goes, z (owned by "two") stays.
    let c = api.patch("s", &PatchParams::apply("one"), &Patch::Apply(apply(json!({"x": "1"})))).await.unwrap();
    let data = c.data.unwrap();
    assert!(!data.contains_key("y") && data.contains_key("x") && data.contains_key("z"), "{data:?}");
    // Re-applying the same configuration changes nothing.
    let d = api.patch("s", &PatchParams::apply("one"), &Patch::Apply(apply(json!({"x": "1"})))).await.unwrap();
    assert_eq!(d.resource_version(), c.metadata.resource_version);
    // Another manager changing x conflicts, unless forced.
    let err = api
        .patch("s", &PatchParams::apply("two"), &Patch::Apply(apply(json!({"z": "2", "x": "9"}))))
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 409), "{err:?}");
    let e = api
        .patch("s", &PatchParams::apply("two").force(), &Patch::Apply(apply(json!({"z": "2", "x": "9"}))))
        .await
        .unwrap();
    assert_eq!(e.data.unwrap()["x"], "9");
    assert_ne!(e.metadata.resource_version, a.metadata.resource_version);
}

#[tokio::test]
async fn label_selectors_filter_lists() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    for (n, l) in [("a", json!({"app": "x", "tier": "1"})), ("b", json!({"app": "y"})), ("c", json!({}))] {
        api.create(&PostParams::default(), &cm(n, l, json!({}))).await.unwrap();
    }
    let names = |l: kube::api::ObjectList<ConfigMap>| l.items.iter().map(|c| c.name_any()).collect::<Vec<_>>();
    assert_eq!(names(api.list(&ListParams::default().labels("app=x")).await.unwrap()), ["a"]);
    assert_eq!(names(api.list(&ListParams::default().labels("app!=x")).await.unwrap()), ["b", "c"]);
    assert_eq!(names(api.list(&ListParams::default().labels("app")).await.unwrap()), ["a", "b"]);
    assert_eq!(names(api.list(&ListParams::default().labels("!app")).await.unwrap()), ["c"]);
    assert_eq!(names(api.list(&ListParams::default().labels("app in (x,y),tier")).await.unwrap()), ["a"]);
    let list = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.metadata.resource_version, Some(server.resource_version().to_string()));
    // Namespaces sorting before and after `default`: a list sees its own namespace only.
    for ns in ["a-first", "z-last"] {
        let nss: Api<Namespace> = Api::all(server.client());
        nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap())
            .await
            .unwrap();
        let other: Api<ConfigMap> = Api::namespaced(server.client(), ns);
        other.create(&PostParams::default(), &cm("a", json!({"app": "x"}), json!({}))).await.unwrap();
    }
    assert_eq!(names(api.list(&ListParams::default().labels("app=x")).await.unwrap()), ["a"]);
    let all: Api<ConfigMap> = Api::all(server.client());
    let everywhere = all.list(&ListParams::default().labels("app=x")).await.unwrap();
    let found: Vec<String> =
        everywhere.items.iter().map(|c| format!("{}/{}", c.namespace().unwrap(), c.name_any())).collect();
    assert_eq!(found, ["a-first/a", "default/a", "z-last/a"]);
}

#[tokio::test]
async fn watch_sees_changes_and_deletions() {
    let server = ApiServer::start().await;
    let client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    api.create(&PostParams::default(), &cm("before", json!({}), json!({}))).await.unwrap();
    let stream = watcher(api.clone(), watcher::Config::default()).boxed();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen2 = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = stream;
        while let Ok(Some(ev)) = stream.try_next().await {
            let s = match ev {
                watcher::Event::Apply(o) => format!("apply {} {:?}", o.name_any(), o.data.unwrap_or_default().get("k")),
                watcher::Event::Delete(o) => format!("delete {}", o.name_any()),
                watcher::Event::InitApply(o) => format!("init {}", o.name_any()),
                _ => continue,
            };
            seen2.lock().unwrap().push(s);
        }
    });
    eventually("the initial list", || seen.lock().unwrap().contains(&"init before".to_string())).await;
    api.create(&PostParams::default(), &cm("new", json!({}), json!({"k": "1"}))).await.unwrap();
    server.edit_object("v1", "ConfigMap", Some("default"), "new", |o| o["data"]["k"] = json!("2"));
    api.delete("before", &DeleteParams::default()).await.unwrap();
    eventually("watch events", || {
        let s = seen.lock().unwrap();
        s.contains(&"apply new Some(\"1\")".to_string())
            && s.contains(&"apply new Some(\"2\")".to_string())
            && s.contains(&"delete before".to_string())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn finalizers_block_deletion_and_owners_collect_dependents() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut owner = cm("owner", json!({}), json!({}));
    owner.metadata.finalizers = Some(vec!["test/hold".into()]);
    let owner = api.create(&PostParams::default(), &owner).await.unwrap();
    let mut child = cm("child", json!({}), json!({}));
    child.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.uid().unwrap(),
        ..Default::default()
    }]);
    api.create(&PostParams::default(), &child).await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    let held = api.get("owner").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(api.get_opt("child").await.unwrap().is_some(), "the owner still exists");
    // Removing the last finalizer (a JSON patch with a test op, as kube-runtime does) deletes it.
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers/0", "value": "test/hold"},
        {"op": "remove", "path": "/metadata/finalizers/0"}
    ]))
    .unwrap();
    api.patch("owner", &PatchParams::default(), &Patch::Json::<()>(patch)).await.unwrap();
    assert!(api.get_opt("owner").await.unwrap().is_none());
    assert!(api.get_opt("child").await.unwrap().is_none(), "the dependent of a deleted owner is collected");
    // A failed test op leaves the object alone.
    let mut other = cm("other", json!({}), json!({}));
    other.metadata.finalizers = Some(vec!["a".into()]);
    api.create(&PostParams::default(), &other).await.unwrap();
    let bad: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "b"}, {"op": "remove", "path": "/metadata/finalizers/0"}])).unwrap();
    assert!(api.patch("other", &PatchParams::default(), &Patch::Json::<()>(bad)).await.is_err());
    assert_eq!(api.get("other").await.unwrap().finalizers(), ["a"]);
}

/// An owner reference to `owner`.
fn owned_by(owner: &ConfigMap) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.name_any(),
        uid: owner.uid().unwrap(),
        ..Default::default()
    }
}

#[tokio::test]
async fn garbage_collection_follows_chains_and_spares_what_a_living_owner_holds() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let create = |name: &str, owners: Vec<&ConfigMap>| {
        let mut c = cm(name, json!({}), json!({}));
        c.metadata.owner_references = (!owners.is_empty()).then(|| owners.into_iter().map(owned_by).collect());
        let api = api.clone();
        async move { api.create(&PostParams::default(), &c).await.unwrap() }
    };
    let root = create("root", vec![]).await;
    let other = create("other", vec![]).await;
    let child = create("child", vec![&root]).await;
    create("grandchild", vec![&child]).await;
    create("shared", vec![&root, &other]).await;
    // Released by its owner before the owner goes: no longer its dependent.
    let freed = create("freed", vec![&root]).await;
    let patch =
        json!({"metadata": {"ownerReferences": [owned_by(&other)], "resourceVersion": freed.resource_version()}});
    api.patch("freed", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    // Naming only an owner that does not exist: collected at once.
    let mut ghost = cm("ghost", json!({}), json!({}));
    ghost.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        uid: "no-such-uid".into(),
        ..owned_by(&root)
    }]);
    api.create(&PostParams::default(), &ghost).await.unwrap();
    assert!(api.get_opt("ghost").await.unwrap().is_none(), "an object whose owners are all missing is collected");

    api.delete("root", &DeleteParams::default()).await.unwrap();
    let exists = |name: &'static str| {
        let api = api.clone();
        async move { api.get_opt(name).await.unwrap().is_some() }
    };
    assert!(!exists("child").await, "the dependent of a deleted owner is collected");
    assert!(!exists("grandchild").await, "and the dependent of that dependent");
    assert!(exists("shared").await, "an object with another owner that exists stays");
    assert!(exists("freed").await, "an object no longer naming the deleted owner stays");
    api.delete("other", &DeleteParams::default()).await.unwrap();
    assert!(!exists("shared").await && !exists("freed").await, "their last owner gone, they go");
}

#[tokio::test]
async fn namespace_deletion_removes_its_contents() {
    let server = ApiServer::start().await;
    let client = server.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "gone"}})).unwrap())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client, "gone");
    api.create(&PostParams::default(), &cm("x", json!({}), json!({}))).await.unwrap();
    nss.delete("gone", &DeleteParams::default()).await.unwrap();
    assert!(nss.get_opt("gone").await.unwrap().is_none());
    assert!(server.get_object("v1", "ConfigMap", Some("gone"), "x").is_none());
}

#[tokio::test]
async fn faults_latency_and_request_counts() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    server.fail_next(RequestMatch::any().verb("create").resource("configmaps").name("x"), 500, 1);
    let err = api.create(&PostParams::default(), &cm("x", json!({}), json!({}))).await.unwrap_err();
    assert!(matches!(err, kube::Error::Api(ref s) if s.code == 500), "{err:?}");
    api.create(&PostParams::default(), &cm("x", json!({}), json!({}))).await.unwrap();
    assert_eq!(server.count(&RequestMatch::any().verb("create").resource("configmaps")), 2);
    assert_eq!(server.counters()["create configmaps"], 2);
    server.set_latency(Duration::from_millis(50));
    let start = std::time::Instant::now();
    api.get("x").await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(50));
    let last = server.requests().pop().unwrap();
    assert_eq!((last.verb.as_str(), last.name.as_str(), last.status), ("get", "x", 200));
}

#[derive(Default)]
struct Seen {
    reconciled: AtomicUsize,
    cleaned: AtomicUsize,
}

/// A tiny kube-runtime controller with a finalizer runs unmodified against the double.
#[tokio::test]
async fn a_controller_with_a_finalizer_runs_end_to_end() {
    let server = ApiServer::start().await;
    let client: Client = server.client();
    let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let seen = Arc::new(Seen::default());
    let ctl = Controller::new(api.clone(), watcher::Config::default())
        .run(
            |cm: Arc<ConfigMap>, ctx: Arc<(Api<ConfigMap>, Arc<Seen>)>| async move {
                let (fin_api, api, seen) = (ctx.0.clone(), ctx.0.clone(), ctx.1.clone());
                finalizer(&fin_api, "test.clusterstack.x-k8s.io/cleanup", cm, |ev| async move {
                    match ev {
                        Finalizer::Apply(cm) => {
                            seen.reconciled.fetch_add(1, Ordering::SeqCst);
                            let status = json!({"data": {"seen": "yes"}});
                            if cm.data.as_ref().and_then(|d| d.get("seen")).is_none() {
                                api.patch(&cm.name_any(), &PatchParams::default(), &Patch::Merge(status)).await?;
                            }
                        }
                        Finalizer::Cleanup(_) => {
                            seen.cleaned.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    Ok::<_, kube::Error>(Action::await_change())
                })
                .await
            },
            |_, _: &kube::runtime::finalizer::Error<kube::Error>, _| Action::requeue(Duration::from_millis(100)),
            Arc::new((api.clone(), seen.clone())),
        )
        .for_each(|_| async {});
    let task = tokio::spawn(ctl);
    api.create(&PostParams::default(), &cm("watched", json!({}), json!({}))).await.unwrap();
    eventually("the finalizer and the reconcile's write", || {
        server.get_object("v1", "ConfigMap", Some("default"), "watched").is_some_and(|o| {
            o["metadata"]["finalizers"][0] == "test.clusterstack.x-k8s.io/cleanup" && o["data"]["seen"] == "yes"
        })
    })
    .await;
    api.delete("watched", &DeleteParams::default()).await.unwrap();
    eventually("cleanup and deletion", || server.get_object("v1", "ConfigMap", Some("default"), "watched").is_none())
        .await;
    assert_eq!(seen.cleaned.load(Ordering::SeqCst), 1);
    assert!(seen.reconciled.load(Ordering::SeqCst) >= 1);
    task.abort();
}

#[tokio::test]
async fn streaming_list_watch_and_resume_from_a_version() {
    let server = ApiServer::start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    api.create(&PostParams::default(), &cm("one", json!({}), json!({}))).await.unwrap();
    // sendInitialEvents: the current state, then the initial-events-end bookmark, then changes.
    let mut stream = watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut names = Vec::new();
    loop {
        match stream.try_next().await.unwrap().unwrap() {
            watcher::Event::InitApply(o) => names.push(o.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(names, ["one"]);
    let created = api.create(&PostParams::default(), &cm("two", json!({}), json!({}))).await.unwrap();
    loop {
        if let watcher::Event::Apply(o) = stream.try_next().await.unwrap().unwrap() {
            assert_eq!(o.name_any(), "two");
            break;
        }
    }
    // A watch from a known version replays what happened after it.
    api.delete("one", &DeleteParams::default()).await.unwrap();
    let wp = kube::api::WatchParams::default();
    let rv = created.resource_version().unwrap();
    let mut events = api.watch(&wp, &rv).await.unwrap().boxed();
    match events.try_next().await.unwrap().unwrap() {
        kube::api::WatchEvent::Deleted(o) => assert_eq!(o.name_any(), "one"),
        other => panic!("expected the deletion, got {other:?}"),
    }
}

#[tokio::test]
async fn secret_string_data_is_stored_encoded() {
    let server = ApiServer::start().await;
    let api: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(server.client());
    let secret =
        serde_json::from_value(json!({"metadata": {"name": "token"}, "stringData": {"token": "abc"}})).unwrap();
    let created = api.create(&PostParams::default(), &secret).await.unwrap();
    assert_eq!(created.data.unwrap()["token"].0, b"abc");
    assert!(created.string_data.is_none());
}

#[tokio::test]
async fn dry_run_writes_are_validated_and_answered_but_never_stored() {
    let server = ApiServer::start().await;
    let client = server.client();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let applied = PatchParams::apply("m").force();
    let live = api.patch("a", &applied, &Patch::Apply(cm("a", json!({"x": "1"}), json!({"k": "v"})))).await.unwrap();
    let rv = server.resource_version();
    let (mut watch, _) = {
        let stream = watcher(api.clone(), watcher::Config::default()).boxed();
        (stream, ())
    };
    // Drain the initial events so a later one would be the dry run's.
    while let Some(ev) = watch.try_next().await.unwrap() {
        if matches!(ev, watcher::Event::InitDone) {
            break;
        }
    }

    let mut dry = applied.clone();
    dry.dry_run = true;
    // Apply: the merged object, with the live resourceVersion and uid, another manager's field kept.
    let merged = api.patch("a", &dry, &Patch::Apply(cm("a", json!({"x": "1"}), json!({"k": "w"})))).await.unwrap();
    assert_eq!(merged.data.as_ref().unwrap()["k"], "w");
    assert_eq!(merged.resource_version(), live.resource_version());
    assert_eq!(merged.uid(), live.uid());
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");
    // An apply that would create: no resourceVersion, nothing stored.
    let created = api.patch("b", &dry, &Patch::Apply(cm("b", json!({}), json!({"k": "v"})))).await.unwrap();
    assert_eq!(created.resource_version(), None);
    assert!(created.uid().is_some());
    assert!(api.get_opt("b").await.unwrap().is_none());
    // A conflict is still a conflict.
    let other = PatchParams { dry_run: true, ..PatchParams::apply("other") };
    let e = api.patch("a", &other, &Patch::Apply(cm("a", json!({}), json!({"k": "z"})))).await.unwrap_err();
    assert!(matches!(e, kube::Error::Api(ref s) if s.code == 409), "{e:?}");
    // Create, merge patch and delete as dry runs.
    let pp = PostParams { dry_run: true, ..Default::default() };
    api.create(&pp, &cm("c", json!({}), json!({}))).await.unwrap();
    let mp = PatchParams { dry_run: true, ..Default::default() };
    api.patch("a", &mp, &Patch::Merge(json!({"data": {"k": "q"}}))).await.unwrap();
    api.delete("a", &DeleteParams { dry_run: true, ..Default::default() }).await.unwrap();
    assert!(api.get_opt("c").await.unwrap().is_none());
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");
    assert_eq!(server.resource_version(), rv, "a dry run moved the store");
    // No watch event came of any of it.
    let quiet = tokio::time::timeout(Duration::from_millis(300), watch.try_next()).await;
    assert!(quiet.is_err(), "a watch saw a dry run: {quiet:?}");

    // Only `All` is a dry-run value.
    let url = format!("{}/api/v1/namespaces/default/configmaps/a?fieldManager=m&dryRun=Some", server.url());
    let answer = reqwest::Client::new()
        .patch(url)
        .header("content-type", "application/apply-patch+yaml")
        .body(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 400);
}
