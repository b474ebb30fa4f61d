//! The directory source: both layouts, foreign tags, SHA256SUMS digests.

mod support;

use clusterstack::source::github::{GitHubClient, GitHubConfig};
use clusterstack::source::{self, AnySource, DigestCoverage, DirSource, NoProgress, ReleaseSource, SourceSpec};
use support::releases::{ReleaseOpts, sha256_hex, write_release};

#[tokio::test]
async fn lists_releases_and_counts_foreign_tags() {
    let tmp = tempfile::tempdir().unwrap();
    write_release(tmp.path(), &ReleaseOpts::default());
    write_release(
        tmp.path(),
        &ReleaseOpts { version: "v0-sha.abc123", addon_version: "v0-sha.abc123", ..Default::default() },
    );
    std::fs::create_dir(tmp.path().join("openstack-csp-helper-v0.2.0")).unwrap();
    std::fs::create_dir(tmp.path().join("notes")).unwrap();
    std::fs::write(tmp.path().join("README.md"), "a file, not a release").unwrap();

    let source = DirSource::new(tmp.path()).unwrap();
    let listing = source.list().await.unwrap();
    let tags: Vec<&str> = listing.releases.iter().map(|r| r.tag.as_str()).collect();
    assert_eq!(tags, ["docker-ferrol-1-27-v0-sha-abc123", "docker-ferrol-1-27-v2"]);
    assert_eq!(listing.skipped, ["notes", "openstack-csp-helper-v0.2.0"]);
    let v2 = &listing.releases[1];
    assert_eq!(v2.id.version.dotted(), "v2");
    assert_eq!(v2.id.kubernetes.to_string(), "1.27");
    let names: Vec<&str> = v2.assets.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "README.unknown",
            "SHA256SUMS",
            "clusteraddon.yaml",
            "docker-ferrol-1-27-cluster-addon-v2.tgz",
            "docker-ferrol-1-27-cluster-class-v2.tgz",
            "hashes.json",
            "metadata.yaml"
        ]
    );
}

#[tokio::test]
async fn accepts_the_go_operator_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("cluster-stacks");
    write_release(&go, &ReleaseOpts::default());
    write_release(&go, &ReleaseOpts { version: "v3", addon_version: "v2", ..Default::default() });
    std::fs::create_dir(go.join("not-a-stack")).unwrap();
    let listing = DirSource::new(tmp.path()).unwrap().list().await.unwrap();
    let tags: Vec<&str> = listing.releases.iter().map(|r| r.tag.as_str()).collect();
    assert_eq!(tags, ["docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    assert_eq!(listing.skipped, ["not-a-stack"], "cluster-stacks itself is a layout, not a skipped tag");
}

#[tokio::test]
async fn sha256sums_gives_the_digests() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_release(tmp.path(), &ReleaseOpts::default());
    let listing = DirSource::new(tmp.path()).unwrap().list().await.unwrap();
    let release = &listing.releases[0];
    let metadata = release.asset("metadata.yaml").unwrap();
    let bytes = std::fs::read(dir.join("metadata.yaml")).unwrap();
    assert_eq!(metadata.sha256.as_deref(), Some(sha256_hex(&bytes).as_str()));
    assert_eq!(metadata.size, bytes.len() as u64);
    assert_eq!(release.asset("SHA256SUMS").unwrap().sha256, None);
    assert_eq!(release.digest_coverage(), DigestCoverage::Complete);
}

#[tokio::test]
async fn without_sha256sums_there_are_no_digests() {
    let tmp = tempfile::tempdir().unwrap();
    write_release(tmp.path(), &ReleaseOpts { sha256sums: false, ..Default::default() });
    let listing = DirSource::new(tmp.path()).unwrap().list().await.unwrap();
    assert!(listing.releases[0].assets.iter().all(|a| a.sha256.is_none()));
    assert_eq!(listing.releases[0].digest_coverage(), DigestCoverage::Missing);
}

#[tokio::test]
async fn a_malformed_sha256sums_spoils_only_its_release() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = write_release(tmp.path(), &ReleaseOpts::default());
    write_release(tmp.path(), &ReleaseOpts { version: "v3", ..Default::default() });
    std::fs::write(bad.join("SHA256SUMS"), "not a checksum line\n").unwrap();
    let source = DirSource::new(tmp.path()).unwrap();
    let listing = source.list().await.unwrap();
    assert_eq!(listing.releases.len(), 2);
    assert_eq!(listing.releases[0].digest_coverage(), DigestCoverage::Sha256Sums);
    assert_eq!(listing.releases[1].digest_coverage(), DigestCoverage::Complete);
    let cache_dir = tempfile::tempdir().unwrap();
    let cache = clusterstack::source::ReleaseCache::new(cache_dir.path()).unwrap();
    let err = cache.fetch(&source, &listing.releases[0], Default::default()).await.unwrap_err();
    assert!(matches!(err, clusterstack::source::CacheError::BadSha256Sums { .. }), "{err:?}");
    assert!(err.to_string().contains("line 1"), "{err}");
}

#[tokio::test]
async fn download_copies_and_hashes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = write_release(tmp.path(), &ReleaseOpts::default());
    let source = DirSource::new(tmp.path()).unwrap();
    let release = source.list().await.unwrap().releases.remove(0);
    let asset = release.asset("docker-ferrol-1-27-cluster-class-v2.tgz").unwrap();
    let dest = tmp.path().join("copy.tgz");
    let got = source.download(&release, asset, &dest, &NoProgress).await.unwrap();
    let original = std::fs::read(dir.join(&asset.name)).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), original);
    assert_eq!(got.size, original.len() as u64);
    assert_eq!(got.sha256, sha256_hex(&original));
}

#[tokio::test]
async fn open_turns_a_user_string_into_a_source() {
    clusterstack::install_crypto_provider();
    let tmp = tempfile::tempdir().unwrap();
    write_release(tmp.path(), &ReleaseOpts::default());
    let client = GitHubClient::new(GitHubConfig::default()).unwrap();
    let spec: SourceSpec = format!("dir:{}", tmp.path().display()).parse().unwrap();
    let opened = source::open(&spec, &client).unwrap();
    assert!(matches!(opened, AnySource::Dir(_)));
    assert_eq!(opened.list().await.unwrap().releases.len(), 1);
    // The key is the same however the path is spelled.
    let dotted = source::open(&format!("dir:{}/.", tmp.path().display()).parse().unwrap(), &client).unwrap();
    assert_eq!(opened.cache_key(), dotted.cache_key());
    assert!(opened.cache_key().starts_with("dir/"), "{}", opened.cache_key());

    let gh = source::open(&"github:SovereignCloudStack/cluster-stacks".parse().unwrap(), &client).unwrap();
    assert!(matches!(gh, AnySource::GitHub(_)));
    assert_eq!(gh.name(), "github:SovereignCloudStack/cluster-stacks");
    assert_eq!(gh.cache_key(), "github/SovereignCloudStack/cluster-stacks");

    let missing = source::open(&SourceSpec::dir(tmp.path().join("nope")), &client).unwrap_err();
    assert!(missing.to_string().contains("nope"), "{missing}");
}
