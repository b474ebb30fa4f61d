//! One bad release hurts no one else (issue 20, items 3 and 4): the whole operator in-process
//! against the API server double, each attack a small release written here. A release over the
//! object cap is refused before anything is applied while a healthy stack beside it becomes
//! ready; broken releases (no `metadata.yaml`, an apply the server refuses, a status write the
//! server refuses) back off, and the API write rate counted on the double stays bounded;
//! deleting a release finds by label what its status does not list.
//!
//! Rates are asserted as upper bounds on request counts over a window, with the backoff
//! shortened by the settings: a loaded machine only makes the counts smaller.

mod support;

use std::path::Path;
use std::time::Duration;

use clusterstack::api::ClusterStack;
use clusterstack::source::SourceSpec;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use support::operator::{
    CC, CS, NS, Operator, WAIT, condition, ready, release, release_names, releases_dir, server, settings, stack,
    stack_in, wait_for, wait_within,
};
use support::releases::{ReleaseOpts, write_release};
use support::{ApiServer, RequestMatch, RequestRecord};

/// The healthy release every scenario has beside the hostile one.
const V3: &str = "docker-ferrol-1-27-v3";
/// How long the write rate is counted.
const WINDOW: Duration = Duration::from_secs(4);

fn copy_release(repo: &Path, tag: &str) {
    let dest = repo.join(tag);
    std::fs::create_dir_all(&dest).unwrap();
    for f in std::fs::read_dir(releases_dir().join(tag)).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), dest.join(f.file_name())).unwrap();
    }
}

/// A stack named `name` (docker, 1.27) subscribing to its latest release.
fn stack_named(name: &str) -> Value {
    let mut s = stack_in(NS, name, &[], true, "1h");
    s["spec"]["name"] = json!(name);
    s
}

fn is_write(r: &RequestRecord) -> bool {
    matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete")
}

/// The writes answered since the log was cleared, as `verb resource/subresource name`.
fn writes(server: &ApiServer) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| is_write(r))
        .map(|r| format!("{} {}/{} {}", r.verb, r.resource, r.subresource, r.name))
        .collect()
}

/// Settings with a backoff short enough to count many retries in [`WINDOW`].
fn fast_backoff(repo: &Path, cache: &Path) -> clusterstack::controller::runtime::context::Settings {
    let mut s = settings(SourceSpec::dir(repo), cache);
    s.backoff.base = Duration::from_millis(100);
    s.backoff.cap = Duration::from_millis(400);
    s
}

fn ready_reason(server: &ApiServer, tag: &str) -> Option<String> {
    release(server, tag).and_then(|r| condition(&r, "Ready")).and_then(|c| c["reason"].as_str().map(str::to_string))
}

#[tokio::test]
async fn a_release_over_the_object_cap_is_refused_before_apply_and_the_stack_beside_it_becomes_ready() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    copy_release(repo.path(), V3);
    let huge = ReleaseOpts {
        name: "huge",
        version: "v1",
        class_template: "{{- range $i := until 25000 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{{ $i }}\n{{- end }}\n".into(),
        ..ReleaseOpts::default()
    };
    let tag = huge.tag();
    write_release(repo.path(), &huge);
    let op = Operator::start(&server, fast_backoff(repo.path(), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    server.put_object(stack_named("huge"));

    // Rendering 25,000 objects takes a while in a debug build on a loaded machine.
    wait_within("the huge release refused", WAIT * 4, || {
        ready_reason(&server, &tag).as_deref() == Some("TooManyObjects")
    })
    .await;
    wait_for("the healthy release ready", || ready(&server, V3)).await;
    let r = release(&server, &tag).unwrap();
    let c = condition(&r, "Ready").unwrap();
    let message = c["message"].as_str().unwrap();
    assert!(message.contains("25000") && message.contains("5000"), "the count and the cap: {message}");
    assert_eq!(condition(&r, "Stalled").unwrap()["status"], "True", "{r:#}");
    assert!(r["status"].get("inventory").is_none(), "nothing applied, nothing listed: {r:#}");
    // Nothing of it was applied, nor even sent.
    let sent = server.requests().iter().filter(|r| r.resource == "configmaps" && r.name.starts_with("big-")).count();
    assert_eq!(sent, 0);
    assert!(
        server
            .list_objects("v1", "ConfigMap")
            .iter()
            .all(|c| c["metadata"]["labels"]["clusterstack.x-k8s.io/release"] != tag.as_str())
    );
    wait_for("a TooManyObjects event", || {
        server.list_objects("events.k8s.io/v1", "Event").iter().any(|e| e["reason"] == "TooManyObjects")
    })
    .await;
    op.stop().await;
}

#[tokio::test]
async fn broken_releases_back_off_and_write_a_few_times_not_hundreds() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    copy_release(repo.path(), V3);
    // A release that cannot be read: no metadata.yaml.
    let unreadable = ReleaseOpts { name: "nometa", metadata: false, ..ReleaseOpts::default() };
    write_release(repo.path(), &unreadable);
    // A release whose one object the server refuses to apply, every time.
    let refused = ReleaseOpts {
        name: "refused",
        version: "v1",
        class_template: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: refused-cm\n".into(),
        ..ReleaseOpts::default()
    };
    write_release(repo.path(), &refused);
    server.fail_next(RequestMatch::any().verb("patch").resource("configmaps").name("refused-cm"), 500, 1_000_000);

    let op = Operator::start(&server, fast_backoff(repo.path(), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    server.put_object(stack_named("nometa"));
    server.put_object(stack_named("refused"));
    wait_for("the healthy release ready", || ready(&server, V3)).await;
    wait_for("both broken releases report it", || {
        ready_reason(&server, &unreadable.tag()).as_deref() == Some("DownloadFailed")
            && ready_reason(&server, &refused.tag()).as_deref() == Some("ApplyFailed")
    })
    .await;
    // The backoff has reached its cap (400 ms) after five failures; count a quiet window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    tokio::time::sleep(WINDOW).await;
    let writes = writes(&server);
    let attempts = server.count(&RequestMatch::any().verb("patch").resource("configmaps").name("refused-cm"));
    let status_writes = server.count(&RequestMatch::any().verb("patch").resource("clusterstackreleases"));
    println!(
        "in {WINDOW:?}: {} writes ({attempts} apply attempts of the refused object, {status_writes} release status writes): {writes:?}",
        writes.len()
    );
    // At most one attempt per 360 ms (the capped delay less its jitter), plus the one in flight.
    assert!(attempts <= 13, "{attempts} apply attempts in {WINDOW:?}");
    assert!(attempts >= 1, "the refused release is still retried");
    // Nothing changes, so nothing is written: no Downloading/DownloadFailed flip-flop.
    assert_eq!(status_writes, 0, "{writes:?}");
    assert!(writes.len() <= attempts + 2, "{writes:?}");
    assert_eq!(ready_reason(&server, &unreadable.tag()).as_deref(), Some("DownloadFailed"));
    op.stop().await;
}

#[tokio::test]
async fn a_refused_status_write_backs_off_and_nothing_is_applied_in_a_loop() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    // Every status write of the release fails, as a status too large for the server would.
    let status_of_v3 =
        || RequestMatch::any().verb("patch").resource("clusterstackreleases").name(V3).subresource("status");
    server.fail_next(status_of_v3(), 422, 1_000_000);
    let op = Operator::start(&server, fast_backoff(&releases_dir(), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    wait_for("the release tried", || server.count(&status_of_v3()) >= 3).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    tokio::time::sleep(WINDOW).await;
    let tried = server.count(&status_of_v3());
    let applied = server
        .requests()
        .iter()
        .filter(|r| r.verb == "patch" && r.resource != "clusterstackreleases")
        .filter(|r| r.query.get("fieldManager").is_some_and(|m| m == "clusterstack"))
        .count();
    println!("in {WINDOW:?}: {tried} refused status writes, {applied} applies");
    assert!(tried <= 13, "{tried} status writes in {WINDOW:?}");
    // The inventory is written ahead of the apply: refused, nothing is applied at all.
    assert_eq!(applied, 0, "{:?}", writes(&server));
    assert!(server.list_objects(CC, "ClusterClass").is_empty());
    assert!(server.list_objects("events.k8s.io/v1", "Event").iter().any(|e| e["reason"] == "StatusWriteFailed"));

    // The server accepts writes again: the release converges at its next attempt.
    server.clear_faults();
    wait_for("ready once the status fits", || ready(&server, V3)).await;

    // After the apply: one object refused, and the status write that would report it refused
    // too. The error backs off; triggers in between (our own applies' watch events) do not
    // re-apply the release in a loop.
    let dct = "infrastructure.cluster.x-k8s.io/v1beta1";
    let dct_name = server
        .list_objects(dct, "DockerClusterTemplate")
        .first()
        .and_then(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .expect("a DockerClusterTemplate applied");
    server.fail_next(RequestMatch::any().verb("patch").resource("dockerclustertemplates"), 500, 1_000_000);
    server.fail_next(status_of_v3(), 422, 1_000_000);
    server.clear_requests();
    // A hand edit makes the release re-apply.
    server.edit_object(dct, "DockerClusterTemplate", Some(NS), &dct_name, |o| {
        o["metadata"]["annotations"] = json!({"edited": "by hand"});
    });
    wait_for("the re-apply refused", || server.count(&status_of_v3()) >= 2).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    tokio::time::sleep(WINDOW).await;
    let class_applies = server.count(&RequestMatch::any().verb("patch").resource("clusterclasses"));
    println!("in {WINDOW:?}: {class_applies} re-applies of the ClusterClass while its status is refused");
    assert!(class_applies <= 13, "{class_applies} re-applies in {WINDOW:?}");
    server.clear_faults();
    op.stop().await;
}

/// Deletes the stack `ferrol` and waits until its releases are gone; the cluster-wide
/// lists by the release's labels sent meanwhile.
async fn delete_ferrol(server: &ApiServer) -> usize {
    server.clear_requests();
    let stacks: Api<ClusterStack> = Api::namespaced(server.client(), NS);
    stacks.delete("ferrol", &DeleteParams::background()).await.unwrap();
    wait_for("the release gone", || release_names(server).is_empty()).await;
    server
        .requests()
        .iter()
        .filter(|r| {
            r.verb == "list" && r.namespace.is_empty() && r.query.get("labelSelector").is_some_and(|l| l.contains(V3))
        })
        .count()
}

#[tokio::test]
async fn deleting_a_release_finds_by_label_what_an_older_status_does_not_list() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    wait_for("v3 ready", || ready(&server, V3)).await;
    // Applied from an empty status, every object recorded ahead: complete.
    assert_eq!(release(&server, V3).unwrap()["status"]["inventoryComplete"], json!(true));
    // As an older version left it: without the mark.
    server.edit_object(CS, "ClusterStackRelease", Some(NS), V3, |r| {
        r["status"].as_object_mut().unwrap().remove("inventoryComplete");
    });

    // Objects of a kind the release applied, that its status does not list: one applied by our
    // field manager with the release's labels (ours: a status that could not hold it), one
    // with the labels but applied by someone else, one of another release.
    let dmt = "infrastructure.cluster.x-k8s.io/v1beta1";
    let labels = |release: &str| json!({"clusterstack.x-k8s.io/release": release, "clusterstack.x-k8s.io/release-namespace": NS});
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "DockerMachineTemplate",
    ));
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), NS, &resource);
    for (name, release, manager) in [
        ("stray", V3, "clusterstack"),
        ("foreign", V3, "someone-else"),
        ("other", "docker-ferrol-1-27-v9", "clusterstack"),
    ] {
        let body = json!({"apiVersion": dmt, "kind": "DockerMachineTemplate",
                          "metadata": {"name": name, "namespace": NS, "labels": labels(release)},
                          "spec": {"template": {"spec": {}}}});
        api.patch(name, &PatchParams::apply(manager), &Patch::Apply(&body)).await.unwrap();
    }
    let listed = release(&server, V3).unwrap()["status"]["inventory"].to_string();
    assert!(!listed.contains("\"stray\""), "the status does not list it: {listed}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(release(&server, V3).unwrap()["status"].get("inventoryComplete"), None, "a pass does not mark it");
    assert!(delete_ferrol(&server).await > 0, "searched by label");
    let left: Vec<String> = server
        .list_objects(dmt, "DockerMachineTemplate")
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(!left.contains(&"stray".to_string()), "ours, found by label, deleted: {left:?}");
    assert!(left.contains(&"foreign".to_string()), "not applied by us: kept: {left:?}");
    assert!(left.contains(&"other".to_string()), "another release's: kept: {left:?}");
    assert!(server.list_objects(CC, "ClusterClass").is_empty());
    op.stop().await;
}

#[tokio::test]
async fn deleting_a_release_with_a_complete_inventory_lists_nothing_cluster_wide() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    wait_for("v3 ready", || ready(&server, V3)).await;
    let status = release(&server, V3).unwrap()["status"].clone();
    assert_eq!(status["inventoryComplete"], json!(true), "{status}");
    let listed = status["inventory"].as_array().map_or(0, Vec::len);
    assert!(listed > 0, "{status}");
    assert_eq!(delete_ferrol(&server).await, 0, "a complete inventory needs no search by label");
    assert!(server.list_objects(CC, "ClusterClass").is_empty(), "what it lists is deleted");
    op.stop().await;
}

#[tokio::test]
async fn hostile_templates_fail_their_release_naming_the_budget_and_the_stack_beside_it_becomes_ready() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    copy_release(repo.path(), V3);
    let cm = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{{{{ .Chart.Name }}}}\ndata:\n  x: {data}\n")
    };
    // Each of these aborted the operator before the budgets (allocation failure, stack overflow).
    let hostile = [
        ReleaseOpts { name: "repeat", class_template: cm(r#"{{ repeat 100000000000 "x" | len | quote }}"#), ..ReleaseOpts::default() },
        ReleaseOpts { name: "until", class_template: cm(r#"{{ until 2000000000 | len | quote }}"#), ..ReleaseOpts::default() },
        ReleaseOpts {
            name: "aliases",
            values: "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n".into(),
            class_template: cm(r#""{{ len .Values.h }}""#),
            ..ReleaseOpts::default()
        },
    ];
    // A dict that holds itself prints "" in toJson, as helm prints it: that release is fine.
    let self_holding = ReleaseOpts {
        name: "selfdict",
        class_template: cm(r#"{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ toJson $d | quote }}"#),
        ..ReleaseOpts::default()
    };
    for r in hostile.iter().chain([&self_holding]) {
        write_release(repo.path(), r);
    }
    let op = Operator::start(&server, fast_backoff(repo.path(), cache.path()));
    server.put_object(stack("ferrol", &["v3"], false));
    for r in hostile.iter().chain([&self_holding]) {
        server.put_object(stack_named(r.name));
    }
    wait_for("the healthy release ready", || ready(&server, V3)).await;
    wait_for("the self-holding dict's release ready", || ready(&server, &self_holding.tag())).await;
    let printed = server
        .list_objects("v1", "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["labels"]["clusterstack.x-k8s.io/release"] == self_holding.tag().as_str())
        .expect("applied");
    assert_eq!(printed["data"]["x"], "", "toJson of a dict holding itself is empty, as in helm");
    for (r, budget) in hostile.iter().zip(["size limit", "size limit", "excessive aliasing"]) {
        let tag = r.tag();
        wait_for(&format!("{tag} refused"), || ready_reason(&server, &tag).as_deref() == Some("RenderFailed")).await;
        let release = release(&server, &tag).unwrap();
        let message = condition(&release, "Ready").unwrap()["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains(budget), "{tag} names the budget {budget:?}: {message}");
    }
    // The operator lives on and the failures back off: nothing is written while they stay.
    tokio::time::sleep(Duration::from_secs(2)).await;
    server.clear_requests();
    tokio::time::sleep(WINDOW).await;
    let hostile_writes: Vec<String> =
        writes(&server).into_iter().filter(|w| hostile.iter().any(|r| w.contains(&r.tag()))).collect();
    assert!(hostile_writes.is_empty(), "{hostile_writes:?}");
    assert!(ready(&server, V3));
    op.stop().await;
}
