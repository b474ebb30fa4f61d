//! The whole operator, in-process, against the API server double and releases published on
//! the fake GitHub (127.0.0.1): conditional polls, new releases within one poll, a token read
//! from the stack's Secret.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use serde_json::json;
use support::github::{FakeGitHub, Route};
use support::operator::{CS, NS, Operator, condition, publish, ready, releases_dir, server, settings, stack, wait_for};

#[tokio::test]
async fn a_release_published_on_github_appears_within_one_poll_and_polls_are_conditional() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, "docker-ferrol-1-27-v1");
    let v2 = publish(&fake, "docker-ferrol-1-27-v2");
    let mut s = settings(SourceSpec::github("acme", "stacks"), cache.path());
    s.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s.clone());
    server.put_object(stack("ferrol", &[], true));
    wait_for("v2 ready", || ready(&server, "docker-ferrol-1-27-v2")).await;
    // Later polls are conditional and answered 304 (free of rate limit).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let polls = fake.requests_to(Route::Releases);
    assert!(polls.len() >= 2, "{polls:?}");
    assert!(polls.iter().skip(1).all(|r| r.if_none_match.is_some()), "{polls:?}");

    let v3 = publish(&fake, "docker-ferrol-1-27-v3");
    let published = tokio::time::Instant::now();
    wait_for("v3 ready", || ready(&server, "docker-ferrol-1-27-v3")).await;
    assert!(published.elapsed() < Duration::from_secs(10), "took {:?}", published.elapsed());
    let text = op.metrics.encode().unwrap();
    assert!(text.contains("clusterstack_github_not_modified_total"), "{text}");
    assert!(!text.contains("clusterstack_github_not_modified_total 0"), "304s are counted: {text}");

    // A restarted operator applies v3 again in full (its memos are gone), from the cache.
    op.stop().await;
    server.clear_requests();
    let op = Operator::start(&server, s);
    wait_for("v3 applied again after the restart", || {
        server.requests().iter().any(|r| r.verb == "patch" && r.resource == "clusterclasses")
    })
    .await;
    // Downloaded once each: every asset of the two releases applied (v2, then v3), each by one
    // request; the cache served the pass after the restart. v1, never wanted (only the latest
    // is), is never downloaded.
    let mut downloads: BTreeMap<u64, usize> = BTreeMap::new();
    for r in fake.requests_to(Route::Asset) {
        let id = r.uri.rsplit('/').next().and_then(|id| id.parse().ok()).expect("an asset id in the path");
        *downloads.entry(id).or_default() += 1;
    }
    let once_each: BTreeMap<u64, usize> = v2.iter().chain(&v3).map(|id| (*id, 1)).collect();
    assert_eq!(downloads, once_each, "downloads per asset id (v2: {v2:?}, v3: {v3:?})");
    op.stop().await;
}

#[tokio::test]
async fn a_github_source_with_a_token_secret_uses_that_token() {
    let server = server().await;
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeGitHub::start().await;
    publish(&fake, "docker-ferrol-1-27-v1");
    let mut s = settings(SourceSpec::dir(releases_dir()), cache.path());
    s.github = GitHubConfig { api_url: fake.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s);
    let mut body = stack("ferrol", &[], true);
    body["spec"]["source"] =
        json!({"github": {"owner": "acme", "repository": "stacks", "tokenSecretRef": {"name": "gh"}}});
    server.put_object(body);
    // No Secret yet: the source is unavailable and the message names the Secret.
    wait_for("SourceUnavailable naming the Secret", || {
        server
            .get_object(CS, "ClusterStack", Some(NS), "ferrol")
            .and_then(|s| condition(&s, "ReleasesSynced"))
            .is_some_and(|c| {
                c["reason"] == "SourceUnavailable" && c["message"].as_str().unwrap_or_default().contains("stacks/gh")
            })
    })
    .await;
    server.put_object(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "gh", "namespace": NS},
        "data": {"token": "c2VjcmV0LXRva2Vu"} // "secret-token"
    }));
    wait_for("v1 ready", || ready(&server, "docker-ferrol-1-27-v1")).await;
    let listed = fake.requests_to(Route::Releases);
    assert!(!listed.is_empty());
    assert!(
        listed.iter().all(|r| r.authorization.as_deref().is_some_and(|a| a.contains("secret-token"))),
        "{listed:?}"
    );
    op.stop().await;
}
