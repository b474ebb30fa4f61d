//! Events through a real `kube::Client` against the API server double, which checks what the
//! real server checks on a new Event (required fields, the 1 kB note limit).

mod support;

use clusterstack::controller::runtime::events::{EventRecorder, NOTE_LIMIT};
use k8s_openapi::api::core::v1::ObjectReference;
use serde_json::Value;
use support::ApiServer;

fn stack_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("clusterstack.x-k8s.io/v1alpha1".into()),
        kind: Some("ClusterStack".into()),
        name: Some("ferrol".into()),
        namespace: Some("default".into()),
        uid: Some("u-1".into()),
        ..Default::default()
    }
}

fn events(server: &ApiServer) -> Vec<Value> {
    server.list_objects("events.k8s.io/v1", "Event")
}

fn with_note<'a>(events: &'a [Value], note: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["note"] == note).collect()
}

#[tokio::test]
async fn different_notes_are_different_events_and_a_repeat_is_counted_on_the_first() {
    let server = ApiServer::start().await;
    let recorder = EventRecorder::new(server.client(), "clusterstack", Some("clusterstack-0".into()));
    let r = stack_ref();
    let v1 = "created ClusterStackRelease docker-ferrol-1-27-v1";
    let v3 = "created ClusterStackRelease docker-ferrol-1-27-v3";
    recorder.publish(&r, false, "ReleaseCreated", "Create", v1.into()).await.unwrap();
    recorder.publish(&r, false, "ReleaseCreated", "Create", v3.into()).await.unwrap();
    let all = events(&server);
    assert_eq!(all.len(), 2, "{all:#?}");
    assert_eq!(with_note(&all, v1).len(), 1, "{all:#?}");
    assert_eq!(with_note(&all, v3).len(), 1, "{all:#?}");
    let e = with_note(&all, v1)[0];
    assert_eq!(e["regarding"]["name"], "ferrol");
    assert_eq!(e["reportingController"], "clusterstack");
    assert_eq!(e["reportingInstance"], "clusterstack-0");
    assert_eq!(e["type"], "Normal");
    assert!(e["series"].is_null());

    // The same event again, twice: the first Event's series counts it.
    recorder.publish(&r, false, "ReleaseCreated", "Create", v3.into()).await.unwrap();
    recorder.publish(&r, false, "ReleaseCreated", "Create", v3.into()).await.unwrap();
    let all = events(&server);
    assert_eq!(all.len(), 2, "{all:#?}");
    let e = with_note(&all, v3)[0];
    assert_eq!(e["series"]["count"], 3, "{e:#}");
    assert!(e["series"]["lastObservedTime"].is_string(), "{e:#}");
    assert!(with_note(&all, v1)[0]["series"].is_null(), "the other series is untouched");

    // A warning with the same reason is another series.
    recorder.publish(&r, true, "ReleaseCreated", "Create", v3.into()).await.unwrap();
    assert_eq!(events(&server).len(), 3);
}

#[tokio::test]
async fn a_long_note_is_cut_to_the_limit_instead_of_losing_the_event() {
    let server = ApiServer::start().await;
    let recorder = EventRecorder::new(server.client(), "clusterstack", None);
    // What ApplyForbidden says when many objects are forbidden.
    let note: String = (0..100)
        .map(|i| {
            format!("KubeadmControlPlaneTemplate tmpl-{i}: forbidden: grant patch on controlplane.cluster.x-k8s.io")
        })
        .collect::<Vec<_>>()
        .join("; ");
    assert!(note.len() > NOTE_LIMIT);
    recorder.publish(&stack_ref(), true, "ApplyForbidden", "Apply", note.clone()).await.unwrap();
    let all = events(&server);
    assert_eq!(all.len(), 1);
    let stored = all[0]["note"].as_str().unwrap();
    assert!(stored.len() <= NOTE_LIMIT, "{}", stored.len());
    assert!(note.starts_with(stored.trim_end_matches(" …")));
    // Without an instance the controller's name reports (the field is required).
    assert_eq!(all[0]["reportingInstance"], "clusterstack");
}

#[tokio::test]
async fn a_series_whose_event_expired_on_the_server_starts_a_new_event() {
    let server = ApiServer::start().await;
    let recorder = EventRecorder::new(server.client(), "clusterstack", None);
    let r = stack_ref();
    recorder.publish(&r, false, "ReleaseDeleted", "Delete", "deleting v1".into()).await.unwrap();
    let name = events(&server)[0]["metadata"]["name"].as_str().unwrap().to_string();
    // The server's event TTL removes it.
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(server.client(), "default");
    api.delete(&name, &Default::default()).await.unwrap();
    recorder.publish(&r, false, "ReleaseDeleted", "Delete", "deleting v1".into()).await.unwrap();
    let all = events(&server);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_ne!(all[0]["metadata"]["name"], name.as_str());
    assert!(all[0]["series"].is_null());
}
