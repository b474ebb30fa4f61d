//! The external-operator plug-in (the Go operator's provider contract) against the API server
//! test double: template → provider object created and owned; readiness gates; a regression
//! closes the gate again; cleanup.

mod support;

use std::sync::Arc;

use clusterstack::api::conditions::{FALSE, TRUE, find};
use clusterstack::api::{ClusterStackRelease, ClusterStackReleaseStatus, ObjectRef};
use clusterstack::apply::{FIELD_MANAGER, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL};
use clusterstack::provider::{
    Cleanup, ExternalOperator, Gate, GateConfig, GateState, NODE_IMAGES_READY, NodeImageProvider, Progress,
    ProviderRegistry, ReleaseContext, reason,
};
use clusterstack::release::ReleaseMetadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use support::ApiServer;
use support::fixtures::load_yaml;

const NS: &str = "cluster-stacks";
const TAG: &str = "docker-ferrol-1-27-v2";
const INFRA: &str = "infrastructure.clusterstack.x-k8s.io/v1alpha1";
const KIND: &str = "DockerClusterStackRelease";

fn metadata() -> ReleaseMetadata {
    ReleaseMetadata::parse(
        "metadata.yaml",
        "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: v2\n  kubernetes: v1.27.3\n  components:\n    clusterAddon: v1\n",
    )
    .unwrap()
}

fn template_ref() -> ObjectRef {
    ObjectRef {
        api_version: Some(INFRA.into()),
        kind: Some("DockerClusterStackReleaseTemplate".into()),
        name: Some("docker-template".into()),
        ..Default::default()
    }
}

/// A server with the namespace, our CRDs, the provider CRDs and a ClusterStackRelease; the
/// context a controller would build for that release.
async fn setup(with_provider_crds: bool, with_template: bool) -> (ApiServer, ReleaseContext, ClusterStackRelease) {
    let server = ApiServer::start().await;
    server.put_object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    for crd in clusterstack::api::all_crds() {
        server.put_object(serde_json::to_value(crd).unwrap());
    }
    if with_provider_crds {
        for crd in load_yaml("provider/provider-crds.yaml") {
            server.put_object(serde_json::to_value(crd).unwrap());
        }
    }
    if with_template {
        for t in load_yaml("provider/template.yaml") {
            server.put_object(serde_json::to_value(t).unwrap());
        }
    }
    let release = server.put_object(json!({
        "apiVersion": "clusterstack.x-k8s.io/v1alpha1",
        "kind": "ClusterStackRelease",
        "metadata": {"name": TAG, "namespace": NS},
        "spec": {},
    }));
    let release: ClusterStackRelease = serde_json::from_value(release).unwrap();
    // As the controller builds it, from the object it reconciles.
    let ctx = ReleaseContext::for_release(&release, metadata(), server.client())
        .unwrap()
        .with_provider_ref(Some(template_ref()));
    (server, ctx, release)
}

fn provider_object(server: &ApiServer) -> Option<Value> {
    server.get_object(INFRA, KIND, Some(NS), TAG)
}

fn set_ready(server: &ApiServer, ready: bool) {
    server.edit_object(INFRA, KIND, Some(NS), TAG, |o| o["status"] = json!({"ready": ready}));
}

#[tokio::test]
async fn template_creates_an_owned_provider_object_and_its_ready_gates() {
    let (server, ctx, release) = setup(true, true).await;
    let plugin = ExternalOperator::new();

    let report = plugin.ensure(&ctx).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::InProgress {
            message: format!("waiting for {KIND} {NS}/{TAG} to report status.ready"),
            recheck_after: plugin.recheck_after
        }
    );
    let obj = provider_object(&server).expect("the provider object was created");
    assert_eq!(obj["spec"], json!({"nodeImageRegistry": "registry.example.com/nodes", "retries": 3}));
    let owner = &obj["metadata"]["ownerReferences"][0];
    assert_eq!(owner["kind"], "ClusterStackRelease");
    assert_eq!(owner["name"], TAG);
    assert_eq!(owner["uid"].as_str(), release.metadata.uid.as_deref());
    assert_eq!(owner["controller"], true);
    assert_eq!(obj["metadata"]["labels"][RELEASE_LABEL], TAG);
    assert_eq!(obj["metadata"]["labels"][RELEASE_NAMESPACE_LABEL], NS);
    assert_eq!(obj["metadata"]["managedFields"][0]["manager"], FIELD_MANAGER);

    // Still not ready on the next pass; ready once the provider's operator says so.
    assert!(matches!(plugin.ensure(&ctx).await.unwrap().progress, Progress::InProgress { .. }));
    set_ready(&server, true);
    assert_eq!(plugin.ensure(&ctx).await.unwrap().progress, Progress::Ready);
    // Our apply left the provider operator's status alone.
    assert_eq!(provider_object(&server).unwrap()["status"]["ready"], true);

    // Deleting the release garbage-collects the provider object through the owner reference.
    let releases: kube::Api<ClusterStackRelease> = kube::Api::namespaced(server.client(), NS);
    releases.delete(TAG, &Default::default()).await.unwrap();
    assert!(provider_object(&server).is_none());
}

#[tokio::test]
async fn a_regression_turns_the_gate_and_the_condition_false_again() {
    let (server, ctx, _) = setup(true, true).await;
    let mut registry = ProviderRegistry::empty();
    registry.set_external(Arc::new(ExternalOperator::new()));
    let gate = Gate::new(registry, GateConfig::default());
    let mut status = ClusterStackReleaseStatus::default();
    let now = Time("2026-01-01T00:00:00Z".parse().unwrap());

    let out = gate.check(&ctx, false, Some(&status), Some(1), &now).await;
    assert_eq!(out.state, GateState::Waiting);
    out.record(&mut status, &now);

    set_ready(&server, true);
    let out = gate.check(&ctx, false, Some(&status), Some(1), &now).await;
    assert_eq!(out.state, GateState::Passed);
    // Its objects are watched: a passed gate is not asked again on a timer.
    assert_eq!(out.requeue_after, None);
    out.record(&mut status, &now);
    assert_eq!(find(&status.conditions, NODE_IMAGES_READY).unwrap().status, TRUE);

    set_ready(&server, false);
    let out = gate.check(&ctx, false, Some(&status), Some(1), &now).await;
    assert_eq!(out.state, GateState::Waiting);
    assert!(!out.passed());
    out.record(&mut status, &now);
    let c = find(&status.conditions, NODE_IMAGES_READY).unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), (FALSE, reason::PROGRESSING));
}

#[tokio::test]
async fn a_changed_template_or_a_hand_edit_is_corrected() {
    let (server, ctx, _) = setup(true, true).await;
    let plugin = ExternalOperator::new();
    plugin.ensure(&ctx).await.unwrap();
    server.edit_object(INFRA, "DockerClusterStackReleaseTemplate", Some(NS), "docker-template", |t| {
        t["spec"]["template"]["spec"]["retries"] = json!(5);
    });
    server.edit_object(INFRA, KIND, Some(NS), TAG, |o| o["spec"]["nodeImageRegistry"] = json!("edited"));
    plugin.ensure(&ctx).await.unwrap();
    let obj = provider_object(&server).unwrap();
    assert_eq!(obj["spec"], json!({"nodeImageRegistry": "registry.example.com/nodes", "retries": 5}));
}

#[tokio::test]
async fn a_missing_template_or_kind_is_a_retryable_failure_naming_it() {
    let (_server, ctx, _) = setup(true, false).await;
    let report = ExternalOperator::new().ensure(&ctx).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::Failed {
            reason: format!("provider template DockerClusterStackReleaseTemplate {NS}/docker-template not found"),
            retryable: true
        }
    );

    let (server, ctx, _) = setup(false, false).await;
    let report = ExternalOperator::new().ensure(&ctx).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::Failed {
            reason: format!(
                "kind DockerClusterStackReleaseTemplate ({INFRA}) is not served by the cluster: \
                 is the provider's operator installed?"
            ),
            retryable: true
        }
    );
    assert!(provider_object(&server).is_none());
}

#[tokio::test]
async fn a_ref_that_is_not_a_template_fails_permanently() {
    let (_server, ctx, _) = setup(true, true).await;
    let ctx = ctx.with_provider_ref(Some(ObjectRef { kind: Some(KIND.into()), ..template_ref() }));
    let report = ExternalOperator::new().ensure(&ctx).await.unwrap();
    assert!(
        matches!(&report.progress, Progress::Failed { retryable: false, reason } if reason.contains("<Kind>Template")),
        "{report:?}"
    );
}

#[tokio::test]
async fn cleanup_deletes_our_object_and_leaves_others_alone() {
    let (server, ctx, _) = setup(true, true).await;
    let plugin = ExternalOperator::new();
    plugin.ensure(&ctx).await.unwrap();
    assert_eq!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::Done);
    assert!(provider_object(&server).is_none());
    // Again: nothing left, still done.
    assert_eq!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::Done);

    // An object of the same name that this release did not create is not deleted.
    server
        .put_object(json!({"apiVersion": INFRA, "kind": KIND, "metadata": {"name": TAG, "namespace": NS}, "spec": {}}));
    assert_eq!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::Done);
    assert!(provider_object(&server).is_some());

    // A finalizer held by the provider's operator: in progress until it is gone.
    server.edit_object(INFRA, KIND, Some(NS), TAG, |o| {
        o["metadata"]["labels"] = json!({RELEASE_LABEL: TAG, RELEASE_NAMESPACE_LABEL: NS});
        o["metadata"]["finalizers"] = json!(["provider.example.com/images"]);
    });
    assert!(matches!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::InProgress { .. }));
    assert!(matches!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::InProgress { .. }));
    server.edit_object(INFRA, KIND, Some(NS), TAG, |o| o["metadata"]["finalizers"] = json!([]));
    assert_eq!(plugin.cleanup(&ctx).await.unwrap(), Cleanup::Done);
}
