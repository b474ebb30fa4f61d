//! The GitHub release source against a loopback fake GitHub (no test contacts GitHub).

mod support;

use std::time::Duration;

use clusterstack::release::ReleaseId;
use clusterstack::source::github::{ClientOptions, GitHubClient, GitHubConfig, GitHubSource, RetryPolicy, Token};
use clusterstack::source::{AssetLocator, ListedRelease, NoProgress, ReleaseSource, SourceError};
use sha2::{Digest, Sha256};
use support::github::{FakeAsset, FakeGitHub, FakeRelease, Route};

const SECRET: &str = "ghp_TopSecretTokenValue123";

fn fast_options() -> ClientOptions {
    ClientOptions {
        retry: RetryPolicy { max_retries: 3, base: Duration::from_millis(5), cap: Duration::from_millis(20) },
        ..ClientOptions::default()
    }
}

fn client_for(fake: &FakeGitHub, include_prereleases: bool) -> GitHubClient {
    clusterstack::install_crypto_provider();
    let config = GitHubConfig { api_url: fake.api_url(), token: Some(Token::new(SECRET)), include_prereleases };
    GitHubClient::with_options(config, fast_options()).expect("client")
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A repository with one release holding `content` as `metadata.yaml`.
async fn one_release(content: &[u8]) -> (FakeGitHub, GitHubSource, ListedRelease) {
    let fake = FakeGitHub::start().await;
    fake.add_release(
        "o",
        "r",
        FakeRelease::new("docker-ferrol-1-27-v1").asset(FakeAsset::new("metadata.yaml", content.to_vec())),
    );
    let source = client_for(&fake, false).repository("o", "r");
    let listing = source.list().await.expect("listing");
    let release = listing.releases.into_iter().next().expect("one release");
    (fake, source, release)
}

#[tokio::test]
async fn lists_every_page_skipping_drafts_prereleases_and_foreign_tags() {
    let fake = FakeGitHub::start().await;
    // 130 releases, added oldest first; the fake lists newest first, like GitHub.
    let mut published = Vec::new();
    for i in 0..130u32 {
        let release = if i % 13 == 0 {
            FakeRelease::new(&format!("openstack-csp-helper-v0.{i}.0"))
        } else if i % 10 == 0 {
            FakeRelease::new(&format!("docker-ferrol-1-27-v{i}")).draft()
        } else if i % 7 == 0 {
            FakeRelease::new(&format!("docker-ferrol-1-27-v{i}-sha-abc{i}")).prerelease()
        } else {
            FakeRelease::new(&format!("docker-ferrol-1-27-v{i}"))
        };
        let release = release
            .asset(FakeAsset::new("metadata.yaml", format!("versions for {i}")))
            .asset(FakeAsset::new("cluster-class.tgz", vec![i as u8; 100 + i as usize]).without_digest());
        let ids = fake.add_release("o", "r", release.clone());
        published.push((release, ids));
    }
    published.reverse();

    let stable = client_for(&fake, false).repository("o", "r").list().await.expect("listing");
    let with_pre = client_for(&fake, true).repository("o", "r").list().await.expect("listing");

    // Two pages of 100, following the Link header; headers as GitHub wants them.
    let requests = fake.requests_to(Route::Releases);
    assert_eq!(requests.len(), 4, "two pages per listing: {requests:#?}");
    assert_eq!(requests[0].uri, "/repos/o/r/releases?per_page=100");
    assert_eq!(requests[1].uri, "/repos/o/r/releases?per_page=100&page=2");
    for request in &requests {
        assert_eq!(request.authorization.as_deref(), Some(format!("Bearer {SECRET}").as_str()));
        assert_eq!(request.accept.as_deref(), Some("application/vnd.github+json"));
        assert_eq!(request.api_version.as_deref(), Some("2022-11-28"));
        assert!(request.user_agent.as_deref().is_some_and(|ua| ua.starts_with("clusterstack/")));
    }

    let expect = |with_prereleases: bool| -> Vec<(String, bool)> {
        published
            .iter()
            .filter(|(r, _)| !r.draft && (with_prereleases || !r.prerelease) && !r.tag.starts_with("openstack"))
            .map(|(r, _)| (r.tag.clone(), r.prerelease))
            .collect()
    };
    let tags = |releases: &[ListedRelease]| releases.iter().map(|r| (r.tag.clone(), r.prerelease)).collect::<Vec<_>>();
    assert_eq!(tags(&stable.releases), expect(false));
    assert_eq!(tags(&with_pre.releases), expect(true));
    assert!(with_pre.releases.len() > stable.releases.len());
    let foreign: Vec<String> =
        published.iter().filter(|(r, _)| r.tag.starts_with("openstack")).map(|(r, _)| r.tag.clone()).collect();
    assert_eq!(stable.skipped, foreign);
    assert!(!foreign.is_empty());

    // Identity from the tag; assets mapped with id, size and digest.
    for listed in &with_pre.releases {
        assert_eq!(listed.id, ReleaseId::from_tag(&listed.tag).expect("a cluster-stack tag"));
        let (release, ids) = published.iter().find(|(r, _)| r.tag == listed.tag).expect("published");
        assert_eq!(listed.assets.len(), 2);
        for ((asset, fake_asset), id) in listed.assets.iter().zip(&release.assets).zip(ids) {
            assert_eq!(asset.name, fake_asset.name);
            assert_eq!(asset.size, fake_asset.content.len() as u64);
            assert_eq!(asset.locator, AssetLocator::GitHub { id: *id });
            let expected = fake_asset.digest.as_ref().map(|_| sha256(&fake_asset.content));
            assert_eq!(asset.sha256, expected);
        }
        assert!(listed.asset("metadata.yaml").is_some_and(|a| a.sha256.is_some()));
        assert!(listed.asset("cluster-class.tgz").is_some_and(|a| a.sha256.is_none()));
    }
}

#[tokio::test]
async fn an_unchanged_listing_costs_only_304s_and_a_change_is_seen() {
    let fake = FakeGitHub::start().await;
    fake.set_max_per_page(2);
    for v in 1..=3 {
        fake.add_release("o", "r", FakeRelease::new(&format!("docker-ferrol-1-27-v{v}")));
    }
    let client = client_for(&fake, false);
    let source = client.repository("o", "r");
    let first = source.list().await.expect("first listing");
    assert_eq!(fake.count(Route::Releases), 2, "two pages of two");
    assert!(fake.requests_to(Route::Releases).iter().all(|r| r.if_none_match.is_none()));

    let second = source.list().await.expect("second listing");
    assert_eq!(second, first);
    let requests = fake.requests_to(Route::Releases);
    assert_eq!(requests.len(), 4);
    assert!(requests[2..].iter().all(|r| r.if_none_match.is_some()), "{requests:#?}");
    let stats = client.stats();
    assert_eq!(stats.not_modified, 2);
    assert_eq!(stats.requests_by_status.get(&304), Some(&2));
    assert_eq!(stats.requests_by_status.get(&200), Some(&2));
    assert_eq!(stats.rate_limit_remaining, Some(4998), "a 304 costs nothing");
    assert_eq!(stats.rate_limit_limit, Some(5000));
    assert!(stats.rate_limit_reset.is_some());

    // A new release changes both pages: the ETags no longer match and the listing is fresh.
    fake.add_release("o", "r", FakeRelease::new("docker-ferrol-1-27-v4"));
    let third = source.list().await.expect("third listing");
    let tags: Vec<&str> = third.releases.iter().map(|r| r.tag.as_str()).collect();
    assert_eq!(
        tags,
        ["docker-ferrol-1-27-v4", "docker-ferrol-1-27-v3", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v1"]
    );
    assert_eq!(client.stats().not_modified, 2);
}

#[tokio::test]
async fn concurrent_listings_of_one_repository_share_one_request() {
    let fake = FakeGitHub::start().await;
    fake.add_release("o", "r", FakeRelease::new("docker-ferrol-1-27-v1"));
    fake.add_release("other", "r", FakeRelease::new("docker-ferrol-1-28-v1"));
    fake.set_latency(Duration::from_millis(300));
    let client = client_for(&fake, false);
    let sources: Vec<GitHubSource> = (0..10).map(|_| client.repository("o", "r")).collect();
    let other = client.repository("other", "r");
    let (listings, other_listing) =
        tokio::join!(futures::future::join_all(sources.iter().map(|s| s.list())), other.list());
    assert_eq!(fake.count(Route::Releases), 2, "one request per repository");
    let first = listings[0].as_ref().expect("listing");
    assert_eq!(first.releases[0].tag, "docker-ferrol-1-27-v1");
    for listing in &listings {
        assert_eq!(listing.as_ref().expect("listing"), first);
    }
    assert_eq!(other_listing.expect("listing").releases[0].tag, "docker-ferrol-1-28-v1");

    // Once done, the next poll asks again (conditionally).
    sources[3].list().await.expect("listing");
    assert_eq!(fake.count(Route::Releases), 3);
}

#[tokio::test]
async fn an_exhausted_rate_limit_stops_all_requests_until_the_reset() {
    let (fake, source, release) = one_release(b"metadata").await;
    let reset = jiff::Timestamp::now().as_second() + 2;
    fake.exhaust_rate_limit_until(reset);
    let before = fake.count(Route::Releases);

    let err = source.list().await.expect_err("rate limited");
    let SourceError::RateLimited { until, .. } = &err else { panic!("not RateLimited: {err:?}") };
    assert_eq!(until.as_second(), reset);
    assert!(err.to_string().contains("rate limited until"), "{err}");
    assert_eq!(fake.count(Route::Releases), before + 1);
    let stats = source.client().stats();
    assert_eq!(stats.rate_limit_remaining, Some(0));
    assert_eq!(stats.rate_limited_until.map(|t| t.as_second()), Some(reset));
    assert_eq!(stats.requests_by_status.get(&403), Some(&1));

    // Nothing is sent before the reset: neither listings nor downloads.
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..3 {
        let err = source.list().await.expect_err("still limited");
        assert!(matches!(err, SourceError::RateLimited { until, .. } if until.as_second() == reset), "{err:?}");
        let err = source
            .download(&release, &release.assets[0], &dir.path().join("m"), &NoProgress)
            .await
            .expect_err("limited");
        assert!(matches!(err, SourceError::RateLimited { .. }), "{err:?}");
    }
    assert_eq!(fake.count(Route::Releases), before + 1);
    assert_eq!(fake.count(Route::Asset), 0);

    // After the reset, requests flow again.
    let wait = jiff::Timestamp::from_second(reset).unwrap().duration_since(jiff::Timestamp::now());
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default() + Duration::from_millis(100)).await;
    let listing = source.list().await.expect("listing after the reset");
    assert_eq!(listing.releases.len(), 1);
    assert_eq!(fake.count(Route::Releases), before + 2);
}

#[tokio::test]
async fn the_last_unit_of_the_rate_limit_is_not_overspent() {
    let (fake, source, _) = one_release(b"metadata").await;
    fake.set_remaining(1);
    // A change, so that the listing is a counted 200 rather than a free 304.
    fake.add_release("o", "r", FakeRelease::new("docker-ferrol-1-27-v2"));
    // Answered 200, but with `x-ratelimit-remaining: 0`: the next request would be refused.
    source.list().await.expect("the last allowed listing");
    let before = fake.count(Route::Releases);
    let err = source.list().await.expect_err("nothing left");
    let SourceError::RateLimited { until, .. } = err else { panic!("not RateLimited: {err:?}") };
    assert_eq!(Some(until), source.client().stats().rate_limit_reset);
    assert!(until > jiff::Timestamp::now());
    assert_eq!(fake.count(Route::Releases), before, "no request was sent");
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (fake, source, _) = one_release(b"metadata").await;
    fake.retry_after(1);
    let asked = jiff::Timestamp::now();
    let err = source.list().await.expect_err("rate limited");
    let SourceError::RateLimited { until, .. } = err else { panic!("not RateLimited: {err:?}") };
    let wait = until.duration_since(asked).as_millis();
    // At least the second asked for; the upper bound only allows for a slow, loaded machine.
    assert!((1000..=3000).contains(&wait), "retry-after 1s, got {wait}ms");
    assert!(matches!(source.list().await, Err(SourceError::RateLimited { .. })));
    assert_eq!(fake.count(Route::Releases), 2, "the first listing and the limited one");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    source.list().await.expect("listing after retry-after");
    assert_eq!(fake.count(Route::Releases), 3);
}

#[tokio::test]
async fn download_follows_the_storage_redirect_without_the_token() {
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let (fake, source, release) = one_release(&content).await;
    fake.redirect_downloads(true);
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("metadata.yaml");
    let downloaded = source.download(&release, &release.assets[0], &dest, &NoProgress).await.expect("download");
    assert_eq!(downloaded.path, dest);
    assert_eq!(downloaded.size, content.len() as u64);
    assert_eq!(downloaded.sha256, sha256(&content));
    assert_eq!(std::fs::read(&dest).expect("the file"), content);

    let api = fake.requests_to(Route::Asset);
    assert_eq!(api.len(), 1);
    assert_eq!(api[0].authorization.as_deref(), Some(format!("Bearer {SECRET}").as_str()));
    assert_eq!(api[0].accept.as_deref(), Some("application/octet-stream"));
    let storage = fake.requests_to(Route::Storage);
    assert_eq!(storage.len(), 1);
    assert_eq!(storage[0].authorization, None);

    // The storage host really refuses the token (so the assertion above means something).
    let refused = reqwest::Client::new()
        .get(format!("{}/download/{}", fake.storage_url(), 2))
        .bearer_auth("x")
        .send()
        .await
        .expect("answer");
    assert_eq!(refused.status(), 400);
}

#[tokio::test]
async fn download_without_redirect_reports_progress() {
    #[derive(Default)]
    struct Count(std::sync::Mutex<(Option<u64>, u64, bool)>);
    impl clusterstack::source::Progress for Count {
        fn start(&self, _: &str, total: Option<u64>) {
            self.0.lock().unwrap().0 = total;
        }
        fn advance(&self, bytes: u64) {
            self.0.lock().unwrap().1 += bytes;
        }
        fn finish(&self, _: &str) {
            self.0.lock().unwrap().2 = true;
        }
    }
    let content = vec![7u8; 70_000];
    let (fake, source, release) = one_release(&content).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let progress = Count::default();
    let downloaded =
        source.download(&release, &release.assets[0], &dir.path().join("m"), &progress).await.expect("download");
    assert_eq!(downloaded.sha256, sha256(&content));
    assert_eq!(*progress.0.lock().unwrap(), (Some(70_000), 70_000, true));
    assert_eq!(fake.count(Route::Storage), 0);
}

#[tokio::test]
async fn a_truncated_body_is_an_error() {
    let content = vec![1u8; 200_000];
    let (fake, source, release) = one_release(&content).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("metadata.yaml");

    fake.truncate_downloads(true);
    let err = source.download(&release, &release.assets[0], &dest, &NoProgress).await.expect_err("truncated");
    assert!(matches!(&err, SourceError::Unavailable { message, .. } if message.contains("truncated")), "{err:?}");
    assert!(!dest.exists(), "no partial file is left");

    // A complete response shorter than the listing announced.
    fake.truncate_downloads(false);
    let mut asset = release.assets[0].clone();
    asset.size += 10;
    let err = source.download(&release, &asset, &dest, &NoProgress).await.expect_err("too short");
    assert!(matches!(&err, SourceError::Integrity { what: "size", .. }), "{err:?}");
    assert!(!dest.exists());

    // And one longer than announced.
    asset.size -= 20;
    let err = source.download(&release, &asset, &dest, &NoProgress).await.expect_err("too long");
    assert!(matches!(&err, SourceError::Integrity { what: "size", .. }), "{err:?}");
}

#[tokio::test]
async fn server_errors_are_retried_until_they_recover() {
    let content = b"some bytes".to_vec();
    let (fake, source, release) = one_release(&content).await;
    let listed = fake.count(Route::Releases);
    fake.fail_next(Route::Releases, 500, 2);
    source.list().await.expect("recovered listing");
    assert_eq!(fake.count(Route::Releases), listed + 3);
    let stats = source.client().stats();
    assert_eq!(stats.requests_by_status.get(&500), Some(&2));
    assert_eq!(stats.retries, 2);

    fake.redirect_downloads(true);
    fake.fail_next(Route::Asset, 502, 1);
    fake.fail_next(Route::Storage, 503, 1);
    let dir = tempfile::tempdir().expect("tempdir");
    let got =
        source.download(&release, &release.assets[0], &dir.path().join("x"), &NoProgress).await.expect("download");
    assert_eq!(got.sha256, sha256(&content));
    assert_eq!(fake.count(Route::Asset), 2);
    assert_eq!(fake.count(Route::Storage), 2);

    // Retries are bounded: 1 + max_retries (3) attempts, then a typed error.
    fake.fail_next(Route::Releases, 503, 10);
    let before = fake.count(Route::Releases);
    let err = source.list().await.expect_err("gives up");
    assert!(matches!(&err, SourceError::Unavailable { message, .. } if message.contains("503")), "{err:?}");
    assert_eq!(fake.count(Route::Releases), before + 4);
}

#[tokio::test]
async fn connection_errors_are_retried_then_reported() {
    clusterstack::install_crypto_provider();
    // A port that was just free: nothing listens.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = GitHubConfig { api_url: format!("http://127.0.0.1:{port}"), ..GitHubConfig::default() };
    let client = GitHubClient::with_options(config, fast_options()).unwrap();
    let err = client.repository("o", "r").list().await.expect_err("nothing listens");
    assert!(matches!(err, SourceError::Unavailable { .. }), "{err:?}");
    assert_eq!(client.stats().transport_errors, 4);
    assert_eq!(client.stats().retries, 3);
}

#[tokio::test]
async fn not_found_is_not_retried() {
    let (fake, source, release) = one_release(b"bytes").await;
    let missing = source.client().repository("o", "missing");
    let err = missing.list().await.expect_err("404");
    assert!(matches!(&err, SourceError::Protocol { message, .. } if message.contains("404")), "{err:?}");
    assert_eq!(fake.requests_to(Route::Releases).iter().filter(|r| r.uri.contains("missing")).count(), 1);

    let id = match release.assets[0].locator {
        AssetLocator::GitHub { id } => id,
        AssetLocator::File(_) | AssetLocator::Oci { .. } => unreachable!(),
    };
    assert!(fake.remove_asset("o", "r", id));
    let dir = tempfile::tempdir().expect("tempdir");
    let err = source.download(&release, &release.assets[0], &dir.path().join("x"), &NoProgress).await.expect_err("404");
    assert!(matches!(&err, SourceError::Protocol { message, .. } if message.contains("404")), "{err:?}");
    assert_eq!(fake.count(Route::Asset), 1);
    assert_eq!(source.client().stats().retries, 0);
}

#[tokio::test]
async fn the_token_never_shows() {
    let (fake, source, release) = one_release(b"bytes").await;
    let client = source.client().clone();
    let mut shown = vec![format!("{client:?}"), format!("{source:?}"), format!("{:?}", client.config())];
    shown.push(format!("{}", Token::new(SECRET)));

    let mut errors = vec![client.repository("o", "missing").list().await.expect_err("404")];
    fake.fail_next(Route::Releases, 500, 10);
    errors.push(source.list().await.expect_err("500"));
    fake.truncate_downloads(true);
    let dir = tempfile::tempdir().expect("tempdir");
    errors.push(
        source.download(&release, &release.assets[0], &dir.path().join("x"), &NoProgress).await.expect_err("cut"),
    );
    fake.exhaust_rate_limit_until(jiff::Timestamp::now().as_second() + 60);
    fake.fail_next(Route::Releases, 500, 0);
    let fresh = client_for(&fake, false).repository("o", "r");
    errors.push(fresh.list().await.expect_err("limited"));
    for err in &errors {
        shown.push(format!("{err:?}"));
        shown.push(err.to_string());
    }
    assert!(shown.iter().any(|s| s.contains("Token(***)")), "{shown:#?}");
    for text in &shown {
        assert!(!text.contains(SECRET) && !text.contains("TopSecret"), "token leaked in: {text}");
    }
}

#[tokio::test]
async fn attestations_are_read_page_by_page_with_the_token_and_none_is_an_empty_list() {
    let fake = FakeGitHub::start().await;
    fake.add_repository("o", "r");
    fake.set_max_per_page(2);
    let digest = "ab".repeat(32);
    let subjects = [format!("sha256:{digest}")];
    for n in 0..3 {
        fake.add_attestation("o", "r", &subjects, serde_json::json!({"n": n}));
    }
    let source = client_for(&fake, false).repository("o", "r");
    let bundles = source.fetch_attestations(&digest).await.expect("attestations");
    let seen: Vec<serde_json::Value> = bundles.iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
    assert_eq!(seen, vec![serde_json::json!({"n": 2}), serde_json::json!({"n": 1}), serde_json::json!({"n": 0})]);
    let requests = fake.requests_to(Route::Attestations);
    assert_eq!(requests.len(), 2, "two pages: {requests:?}");
    assert!(requests[0].uri.starts_with(&format!("/repos/o/r/attestations/sha256:{digest}?")), "{requests:?}");
    assert!(requests.iter().all(|r| r.authorization.as_deref() == Some(&format!("Bearer {SECRET}")[..])));
    assert!(requests.iter().all(|r| r.api_version.as_deref() == Some("2022-11-28")));

    // No attestation of a digest: GitHub answers 404, which is "none".
    assert!(source.fetch_attestations(&"cd".repeat(32)).await.expect("404 is no attestation").is_empty());
    // Server errors are retried as listings are.
    fake.fail_next(Route::Attestations, 502, 2);
    assert_eq!(source.fetch_attestations(&digest).await.expect("retried").len(), 3);
    // An exhausted rate limit is the source's RateLimited, and nothing more is sent until reset.
    fake.exhaust_rate_limit_until(jiff::Timestamp::now().as_second() + 3600);
    let error = source.fetch_attestations(&digest).await.unwrap_err();
    assert!(matches!(error, SourceError::RateLimited { .. }), "{error}");
    let before = fake.count(Route::Attestations);
    assert!(matches!(source.fetch_attestations(&digest).await, Err(SourceError::RateLimited { .. })));
    assert_eq!(fake.count(Route::Attestations), before, "nothing sent while the limit is exhausted");
    // Not a digest: refused before any request.
    assert!(source.fetch_attestations("../releases").await.is_err());
    assert_eq!(fake.count(Route::Attestations), before);
}
