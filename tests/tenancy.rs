//! What one namespace can make the operator do to another (`docs/security.md`), tried against
//! the whole operator on the API server double: directory sources outside the allowed roots, in
//! the release cache, relative, or escaping through a symlink; a Secret of another namespace; a
//! ClusterStack whose class or release names collide with another stack's.

mod support;

use std::path::{Path, PathBuf};

use clusterstack::controller::runtime::tenancy::DirectoryRoots;
use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use serde_json::{Value, json};
use support::ApiServer;
use support::github::{FakeGitHub, Route};
use support::operator::{
    CC, CS, Operator, capi_server, condition, publish, ready_in, release_in, releases_dir, settings, stack_in, wait_for,
};

const TEAM_A: &str = "team-a";
const TEAM_B: &str = "team-b";

/// A ferrol stack in `ns` following `source` (`spec.source`), or the default source.
fn stack_with(ns: &str, name: &str, source: Option<Value>) -> Value {
    let mut body = stack_in(ns, name, &[], true, "1s");
    if let Some(source) = source {
        body["spec"]["source"] = source;
    }
    body
}

fn synced(server: &ApiServer, ns: &str, name: &str) -> Option<Value> {
    server.get_object(CS, "ClusterStack", Some(ns), name).and_then(|s| condition(&s, "ReleasesSynced"))
}

/// Waits until the stack's `ReleasesSynced` is `SourceUnavailable` with a message containing
/// `needle`; returns the message.
async fn wait_refused(server: &ApiServer, ns: &str, name: &str, needle: &str) -> String {
    wait_for(&format!("{ns}/{name} refused with {needle:?}"), || {
        synced(server, ns, name).is_some_and(|c| {
            c["reason"] == "SourceUnavailable" && c["message"].as_str().unwrap_or_default().contains(needle)
        })
    })
    .await;
    synced(server, ns, name).unwrap()["message"].as_str().unwrap_or_default().to_string()
}

fn releases_in(server: &ApiServer, ns: &str) -> Vec<String> {
    server
        .list_objects(CS, "ClusterStackRelease")
        .iter()
        .filter(|r| r["metadata"]["namespace"] == ns)
        .map(|r| r["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn events(server: &ApiServer, reason: &str, regarding: &str) -> Vec<Value> {
    server
        .list_objects("events.k8s.io/v1", "Event")
        .into_iter()
        .filter(|e| e["reason"] == reason && e["regarding"]["name"] == regarding)
        .collect()
}

/// Copies the release `tag` of `releases/` into `dir/<tag>`.
fn copy_release(tag: &str, dir: &Path) -> PathBuf {
    let to = dir.join(tag);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(releases_dir().join(tag)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

#[tokio::test]
async fn directory_sources_are_off_without_allowed_roots() {
    let server = capi_server(&[TEAM_B]).await;
    let cache = tempfile::tempdir().unwrap();
    // The operator's own default source is a directory: that is its administrator's choice.
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    let dir = releases_dir().display().to_string();
    server.put_object(stack_with(TEAM_B, "ferrol", Some(json!({"directory": {"path": dir}}))));
    let message = wait_refused(&server, TEAM_B, "ferrol", "--allowed-directory-roots is empty").await;
    assert!(message.contains("nothing was deleted"), "{message}");
    wait_for("a SourceRefused event", || !events(&server, "SourceRefused", "ferrol").is_empty()).await;
    assert!(releases_in(&server, TEAM_B).is_empty());
    // Told once, not every pass.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(events(&server, "SourceRefused", "ferrol").len(), 1);
    op.stop().await;
}

#[tokio::test]
async fn a_directory_outside_the_roots_relative_or_in_the_cache_is_refused() {
    let server = capi_server(&[TEAM_A, TEAM_B]).await;
    let root = tempfile::tempdir().unwrap();
    // The worst case: the cache inside an allowed root.
    let cache = root.path().join("cache");
    let allowed = root.path().join("teams");
    copy_release("docker-ferrol-1-27-v3", &allowed.join("b"));
    let outside = tempfile::tempdir().unwrap();
    copy_release("docker-ferrol-1-27-v3", outside.path());
    let mut s = settings(SourceSpec::dir(releases_dir()), &cache);
    s.directory_roots = DirectoryRoots::new(&[root.path().to_path_buf()], &cache);
    let op = Operator::start(&server, s);

    // team-a follows the operator's default source: its release lands in the cache.
    server.put_object(stack_with(TEAM_A, "ferrol", None));
    wait_for("team-a's v3 ready", || ready_in(&server, TEAM_A, "docker-ferrol-1-27-v3")).await;
    let cached = std::fs::read_dir(cache.join("dir")).unwrap().next().unwrap().unwrap().path();
    assert!(cached.join("docker-ferrol-1-27-v3").is_dir(), "{}", cached.display());

    // team-b points at team-a's cache entry, at a directory outside the roots, at a relative path.
    let cases = [
        ("cache", cached.display().to_string(), "inside the operator's release cache"),
        ("outside", outside.path().display().to_string(), "not an accessible directory inside the allowed roots"),
        ("relative", "teams/b".to_string(), "must be absolute"),
        ("dotdot", format!("{}/teams/../../", root.path().display()), "is refused"),
    ];
    for (name, path, _) in &cases {
        server.put_object(stack_with(TEAM_B, name, Some(json!({"directory": {"path": path}}))));
    }
    // And one inside the roots that works.
    let good = allowed.join("b").display().to_string();
    server.put_object(stack_with(TEAM_B, "good", Some(json!({"directory": {"path": good}}))));
    for (name, _, needle) in &cases {
        wait_refused(&server, TEAM_B, name, needle).await;
    }
    wait_for("team-b's own v3 ready", || ready_in(&server, TEAM_B, "docker-ferrol-1-27-v3")).await;
    // The only release in team-b is the good stack's.
    assert_eq!(releases_in(&server, TEAM_B), ["docker-ferrol-1-27-v3"]);
    let owner = &release_in(&server, TEAM_B, "docker-ferrol-1-27-v3").unwrap()["metadata"]["ownerReferences"][0];
    assert_eq!(owner["name"], "good");
    op.stop().await;
}

#[tokio::test]
async fn a_secret_of_another_namespace_is_never_read() {
    let server = capi_server(&[TEAM_A, TEAM_B]).await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, "docker-ferrol-1-27-v1");
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s);
    // team-a's token; team-b names a Secret of that name, and tries a namespace too (the
    // reference has no such field: it is ignored, the Secret is read in team-b).
    server.put_object(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gh", "namespace": TEAM_A},
        "data": {"token": "dGVhbS1hLXRva2Vu"} // "team-a-token"
    }));
    let source = json!({"github": {"owner": "acme", "repository": "stacks",
        "tokenSecretRef": {"name": "gh", "namespace": TEAM_A}}});
    server.put_object(stack_with(TEAM_B, "ferrol", Some(source)));
    let message = wait_refused(&server, TEAM_B, "ferrol", "Secret team-b/gh").await;
    assert!(message.contains("does not exist"), "{message}");
    assert!(!message.contains("team-a-token"), "{message}");
    assert!(releases_in(&server, TEAM_B).is_empty());
    // GitHub never saw team-a's token.
    assert!(
        fake.requests().iter().all(|r| !r.authorization.as_deref().unwrap_or_default().contains("team-a-token")),
        "{:?}",
        fake.requests()
    );
    // The Secret reads were in team-b only.
    let secret_reads: Vec<_> =
        server.requests().into_iter().filter(|r| r.resource == "secrets").map(|r| r.namespace).collect();
    assert!(!secret_reads.is_empty() && secret_reads.iter().all(|ns| ns == TEAM_B), "{secret_reads:?}");
    assert_eq!(fake.count(Route::Releases), 0);
    op.stop().await;
}

#[tokio::test]
async fn the_same_class_in_two_namespaces_stays_two_classes() {
    let server = capi_server(&[TEAM_A, TEAM_B]).await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack_with(TEAM_A, "ferrol", None));
    server.put_object(stack_with(TEAM_B, "ferrol", None));
    for ns in [TEAM_A, TEAM_B] {
        wait_for(&format!("{ns} v3 ready"), || ready_in(&server, ns, "docker-ferrol-1-27-v3")).await;
    }
    let class = |ns: &str| server.get_object(CC, "ClusterClass", Some(ns), "docker-ferrol-1-27-v3").unwrap();
    for ns in [TEAM_A, TEAM_B] {
        assert_eq!(class(ns)["metadata"]["labels"]["clusterstack.x-k8s.io/release-namespace"], ns);
    }
    // Deleting team-a's stack removes team-a's class only.
    let stacks: kube::Api<clusterstack::api::ClusterStack> = kube::Api::namespaced(server.client(), TEAM_A);
    stacks.delete("ferrol", &kube::api::DeleteParams::background()).await.unwrap();
    wait_for("team-a's class gone", || {
        server.get_object(CC, "ClusterClass", Some(TEAM_A), "docker-ferrol-1-27-v3").is_none()
    })
    .await;
    assert!(ready_in(&server, TEAM_B, "docker-ferrol-1-27-v3"));
    assert!(server.get_object(CC, "ClusterClass", Some(TEAM_B), "docker-ferrol-1-27-v3").is_some());
    op.stop().await;
}

#[tokio::test]
async fn a_symlink_out_of_an_allowed_directory_reads_nothing() {
    let server = capi_server(&[TEAM_B]).await;
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let secret_dir = tempfile::tempdir().unwrap();
    let passwd = secret_dir.path().join("passwd");
    std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/bash\n").unwrap();
    // team-b's directory: v3 with its metadata.yaml a link to the "passwd" file, and v2 a link
    // to a release directory outside the roots.
    let dir = root.path().join("team-b");
    let v3 = copy_release("docker-ferrol-1-27-v3", &dir);
    std::fs::remove_file(v3.join("metadata.yaml")).unwrap();
    std::os::unix::fs::symlink(&passwd, v3.join("metadata.yaml")).unwrap();
    let elsewhere = copy_release("docker-ferrol-1-27-v2", secret_dir.path());
    std::os::unix::fs::symlink(&elsewhere, dir.join("docker-ferrol-1-27-v2")).unwrap();
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.directory_roots = DirectoryRoots::new(&[root.path().to_path_buf()], cache.path());
    let op = Operator::start(&server, s);
    let mut body = stack_with(TEAM_B, "ferrol", Some(json!({"directory": {"path": dir.display().to_string()}})));
    body["spec"]["versions"] = json!(["v2", "v3"]);
    server.put_object(body);

    let refused = |r: &Value| {
        r["status"]["conditions"].as_array().into_iter().flatten().any(|c| {
            c["message"]
                .as_str()
                .unwrap_or_default()
                .contains("metadata.yaml of docker-ferrol-1-27-v3 resolves outside")
        })
    };
    wait_for("v3 refused naming the link", || {
        release_in(&server, TEAM_B, "docker-ferrol-1-27-v3").is_some_and(|r| refused(&r))
    })
    .await;
    // v2 (a linked directory) is not listed at all: pinned, not published.
    wait_for("v2 not published", || {
        synced(&server, TEAM_B, "ferrol")
            .is_some_and(|c| c["message"].as_str().unwrap_or_default().contains("pinned version v2 is not published"))
    })
    .await;
    assert!(release_in(&server, TEAM_B, "docker-ferrol-1-27-v2").is_none());
    // Nothing of the file reached any object, status or Event.
    let everything = serde_json::to_string(&server.requests().iter().map(|r| r.body.clone()).collect::<Vec<_>>())
        .unwrap()
        + &serde_json::to_string(&server.list_objects("events.k8s.io/v1", "Event")).unwrap()
        + &serde_json::to_string(&server.list_objects(CS, "ClusterStackRelease")).unwrap();
    assert!(!everything.contains("root:x") && !everything.contains("/bin/bash"));
    op.stop().await;
}

#[tokio::test]
async fn what_one_team_reads_with_its_token_is_not_served_to_another() {
    let server = capi_server(&[TEAM_A, TEAM_B]).await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, "docker-ferrol-1-27-v1");
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s);
    server.put_object(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gh", "namespace": TEAM_A},
        "data": {"token": "dGVhbS1hLXRva2Vu"} // "team-a-token"
    }));
    let with_token = json!({"github": {"owner": "acme", "repository": "stacks", "tokenSecretRef": {"name": "gh"}}});
    server.put_object(stack_with(TEAM_A, "ferrol", Some(with_token)));
    wait_for("team-a's v1 ready", || ready_in(&server, TEAM_A, "docker-ferrol-1-27-v1")).await;
    // team-b names the same repository without a token: it gets its own listing and download,
    // made without team-a's token (were the repository private, GitHub would refuse it).
    server.put_object(stack_with(TEAM_B, "ferrol", Some(json!({"github": {"owner": "acme", "repository": "stacks"}}))));
    wait_for("team-b's v1 ready", || ready_in(&server, TEAM_B, "docker-ferrol-1-27-v1")).await;
    let listed = fake.requests_to(Route::Releases);
    let token =
        |r: &support::github::RecordedRequest| r.authorization.as_deref().is_some_and(|a| a.contains("team-a-token"));
    assert!(listed.iter().any(token), "{listed:?}");
    assert!(listed.iter().any(|r| r.authorization.is_none()), "team-b was served team-a's listing: {listed:?}");
    // Two cache entries: team-a's alone, and the anonymous one.
    assert!(cache.path().join("github/acme/stacks@team-a/docker-ferrol-1-27-v1").is_dir());
    assert!(cache.path().join("github/acme/stacks/docker-ferrol-1-27-v1").is_dir());
    op.stop().await;
}

#[tokio::test]
async fn a_second_stack_of_the_same_class_in_a_namespace_takes_nothing_from_the_first() {
    let server = capi_server(&[TEAM_A]).await;
    let cache = tempfile::tempdir().unwrap();
    let op = Operator::start(&server, settings(SourceSpec::dir(releases_dir()), cache.path()));
    server.put_object(stack_with(TEAM_A, "first", None));
    wait_for("first's v3 ready", || ready_in(&server, TEAM_A, "docker-ferrol-1-27-v3")).await;
    // From here on, an apply of the release can only be the second stack's. (Before, the first
    // stack may apply it twice: a pass whose store has not yet seen its own create.)
    server.clear_requests();
    // The same provider, name and Kubernetes version: the same release and class names.
    server.put_object(stack_with(TEAM_A, "second", None));
    wait_for("second told the name is taken", || {
        synced(&server, TEAM_A, "second").is_some_and(|c| {
            c["message"]
                .as_str()
                .unwrap_or_default()
                .contains("ClusterStackRelease docker-ferrol-1-27-v3 belongs to ClusterStack first of this namespace")
        })
    })
    .await;
    // Several passes later the release is still the first stack's, never handed over.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let owner = |server: &ApiServer| {
        release_in(server, TEAM_A, "docker-ferrol-1-27-v3").unwrap()["metadata"]["ownerReferences"].clone()
    };
    let refs = owner(&server);
    assert_eq!(refs.as_array().map(Vec::len), Some(1), "{refs:#}");
    assert_eq!(refs[0]["name"], "first");
    let handed_over = server
        .requests()
        .iter()
        .filter(|r| {
            r.resource == "clusterstackreleases" && r.subresource.is_empty() && r.content_type.contains("apply-patch")
        })
        .count();
    assert_eq!(handed_over, 0, "the second stack applies nothing to the first's release");
    assert!(ready_in(&server, TEAM_A, "docker-ferrol-1-27-v3"));
    op.stop().await;
}
