//! The release cache: verification, atomicity, crash recovery, locking, prune.

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clusterstack::source::cache::{CLUSTER_CLASS_DIR, MANIFEST_FILE, TMP_DIR, VerifiedBy};
use clusterstack::source::{
    CacheError, DirSource, FetchPolicy, ReleaseCache, ReleaseSource, SourceError, Verification,
};
use support::releases::{CountingSource, ReleaseOpts, listed, sha256_hex, write_release};

const TAG: &str = "docker-ferrol-1-27-v2";
const VERIFIED: FetchPolicy = FetchPolicy { require_verified: true };

fn tmp_is_empty(cache: &std::path::Path) -> bool {
    std::fs::read_dir(cache.join(TMP_DIR)).unwrap().next().is_none()
}

#[tokio::test]
async fn fetch_verifies_extracts_and_writes_the_layout() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let release_dir = write_release(src.path(), &ReleaseOpts::default());
    let source = DirSource::new(src.path()).unwrap();
    let release = listed(&source, TAG).await;
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();

    let fetched = cache.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(fetched.downloaded);
    assert_eq!(fetched.verification, Verification::Verified);
    assert_eq!(fetched.dir, cache_dir.path().join(source.cache_key()).join(TAG));
    assert!(fetched.dir.join(MANIFEST_FILE).is_file());
    // Unknown assets are not fetched; known ones are, with their digests.
    let names: Vec<&str> = fetched.assets.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "SHA256SUMS",
            "metadata.yaml",
            "docker-ferrol-1-27-cluster-class-v2.tgz",
            "docker-ferrol-1-27-cluster-addon-v2.tgz",
            "clusteraddon.yaml",
            "hashes.json"
        ]
    );
    assert!(!fetched.dir.join("README.unknown").exists());
    let class_bytes = std::fs::read(release_dir.join("docker-ferrol-1-27-cluster-class-v2.tgz")).unwrap();
    assert_eq!(fetched.digest("docker-ferrol-1-27-cluster-class-v2.tgz"), Some(sha256_hex(&class_bytes).as_str()));
    assert!(
        fetched
            .assets
            .iter()
            .filter(|a| a.name != "SHA256SUMS")
            .all(|a| a.verified_by == VerifiedBy::DigestAndSha256sums)
    );

    let chart = fetched.cluster_class_chart_dir();
    assert_eq!(chart, fetched.dir.join(CLUSTER_CLASS_DIR).join("docker-ferrol-1-27-cluster-class"));
    assert_eq!(std::fs::read_to_string(chart.join("values.yaml")).unwrap(), "replicas: 1\n");
    assert!(chart.join("templates/cluster-class.yaml").is_file());
    assert!(fetched.cluster_addon_dir().unwrap().join("cni/Chart.yaml").is_file());
    let metadata = fetched.metadata().unwrap();
    assert_eq!(metadata.versions.cluster_stack.dotted(), "v2");
    assert_eq!(fetched.asset_path("clusteraddon.yaml"), Some(fetched.dir.join("clusteraddon.yaml")));
    assert!(tmp_is_empty(cache_dir.path()));

    // The second fetch uses the cache.
    let again = cache.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(!again.downloaded);
    assert_eq!(again.assets, fetched.assets);
}

#[tokio::test]
async fn the_addon_tarball_is_found_by_the_metadata_version() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts { version: "v3", addon_version: "v2", ..Default::default() });
    let source = DirSource::new(src.path()).unwrap();
    let release = listed(&source, "docker-ferrol-1-27-v3").await;
    let fetched = ReleaseCache::new(cache_dir.path()).unwrap().fetch(&source, &release, VERIFIED).await.unwrap();
    assert_eq!(fetched.manifest().cluster_addon_asset.as_deref(), Some("docker-ferrol-1-27-cluster-addon-v2.tgz"));
    assert!(fetched.cluster_addon_dir().unwrap().join("cni/values.yaml").is_file());
}

#[tokio::test]
async fn a_sha256sums_mismatch_names_the_asset_and_leaves_nothing() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = write_release(src.path(), &ReleaseOpts::default());
    let source = DirSource::new(src.path()).unwrap();
    let mut release = listed(&source, TAG).await;
    // Tamper after listing, same size: only the digest can tell.
    std::fs::write(dir.join("hashes.json"), b"{\"clusterStack\": \"xyz\"}").unwrap();
    let actual = sha256_hex(b"{\"clusterStack\": \"xyz\"}");
    // The listing carried the digest from SHA256SUMS; drop it so only the
    // downloaded SHA256SUMS asset can catch the change.
    for asset in &mut release.assets {
        asset.sha256 = None;
    }
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();
    let err = cache.fetch(&source, &release, FetchPolicy::default()).await.unwrap_err();
    match &err {
        CacheError::Source(SourceError::Integrity { release, asset, expected, actual: got, .. }) => {
            assert_eq!((release.as_str(), asset.as_str()), (TAG, "hashes.json"));
            assert_eq!(expected, &sha256_hex(b"{\"clusterStack\": \"abc\"}"));
            assert_eq!(got, &actual);
        }
        other => panic!("expected an integrity error, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("hashes.json") && message.contains(&actual), "{message}");
    assert!(!cache.release_dir(&source.cache_key(), TAG).exists());
    assert!(tmp_is_empty(cache_dir.path()));
}

#[tokio::test]
async fn an_announced_digest_or_size_mismatch_is_refused() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts { sha256sums: false, ..Default::default() });
    let source = DirSource::new(src.path()).unwrap();
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();

    let mut release = listed(&source, TAG).await;
    for asset in &mut release.assets {
        asset.sha256 = Some("0".repeat(64));
    }
    let err = cache.fetch(&source, &release, FetchPolicy::default()).await.unwrap_err();
    assert!(
        matches!(&err, CacheError::Source(SourceError::Integrity { asset, what: "sha256", .. }) if asset == "metadata.yaml"),
        "{err:?}"
    );

    let mut release = listed(&source, TAG).await;
    let class = release.assets.iter_mut().find(|a| a.name.contains("cluster-class")).unwrap();
    class.size += 1;
    let err = cache.fetch(&source, &release, FetchPolicy::default()).await.unwrap_err();
    assert!(
        matches!(&err, CacheError::Source(SourceError::Integrity { asset, what: "size", .. }) if asset.contains("cluster-class")),
        "{err:?}"
    );
    assert!(!cache.release_dir(&source.cache_key(), TAG).exists());
    assert!(tmp_is_empty(cache_dir.path()));
}

#[tokio::test]
async fn an_unverified_release_is_visible_and_refused_when_verification_is_required() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts { sha256sums: false, ..Default::default() });
    let source = DirSource::new(src.path()).unwrap();
    let release = listed(&source, TAG).await;
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();

    let err = cache.fetch(&source, &release, VERIFIED).await.unwrap_err();
    match &err {
        CacheError::Unverified { release, assets, .. } => {
            assert_eq!(release, TAG);
            assert!(assets.contains("metadata.yaml"), "{assets}");
        }
        other => panic!("expected Unverified, got {other:?}"),
    }
    assert!(!cache.release_dir(&source.cache_key(), TAG).exists());

    let fetched = cache.fetch(&source, &release, FetchPolicy::default()).await.unwrap();
    assert_eq!(fetched.verification, Verification::Unverified);
    assert!(fetched.assets.iter().all(|a| a.verified_by == VerifiedBy::None));
    let manifest = std::fs::read_to_string(fetched.dir.join(MANIFEST_FILE)).unwrap();
    assert!(manifest.contains("\"unverified\""), "{manifest}");
    // Cached but unverified is still refused under the policy.
    assert!(matches!(cache.fetch(&source, &release, VERIFIED).await, Err(CacheError::Unverified { .. })));
}

#[tokio::test]
async fn missing_metadata_or_cluster_class_is_a_clear_error() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts { metadata: false, ..Default::default() });
    write_release(src.path(), &ReleaseOpts { version: "v3", class: false, ..Default::default() });
    let source = DirSource::new(src.path()).unwrap();
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();

    let err = cache.fetch(&source, &listed(&source, TAG).await, FetchPolicy::default()).await.unwrap_err();
    assert!(matches!(&err, CacheError::MissingAsset { asset, .. } if asset == "metadata.yaml"), "{err:?}");
    let err = cache
        .fetch(&source, &listed(&source, "docker-ferrol-1-27-v3").await, FetchPolicy::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CacheError::MissingAsset { asset, .. } if asset == "docker-ferrol-1-27-cluster-class-v3.tgz"),
        "{err:?}"
    );
    assert!(err.to_string().contains("docker-ferrol-1-27-v3"), "{err}");
    assert!(tmp_is_empty(cache_dir.path()));
}

#[tokio::test]
async fn a_hostile_archive_caches_nothing() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let dir = write_release(src.path(), &ReleaseOpts { sha256sums: false, ..Default::default() });
    let evil = support::releases::raw_tar(&[support::releases::RawEntry {
        name: "../../escape",
        kind: tar::EntryType::Regular,
        link: None,
        data: b"x",
    }]);
    std::fs::write(dir.join("docker-ferrol-1-27-cluster-class-v2.tgz"), evil).unwrap();
    let source = DirSource::new(src.path()).unwrap();
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();
    let err = cache.fetch(&source, &listed(&source, TAG).await, FetchPolicy::default()).await.unwrap_err();
    assert!(matches!(&err, CacheError::Archive(e) if e.entry() == Some("../../escape")), "{err:?}");
    assert!(!cache.release_dir(&source.cache_key(), TAG).exists());
    assert!(tmp_is_empty(cache_dir.path()));
}

#[tokio::test]
async fn leftovers_of_a_crash_are_never_trusted() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts::default());
    let source = CountingSource::new(src.path(), Duration::ZERO);
    let release = listed(&source, TAG).await;
    let key = source.cache_key();

    // A crash during download leaves half a release in .tmp.
    let half = cache_dir.path().join(TMP_DIR).join(format!("{TAG}-0123"));
    std::fs::create_dir_all(&half).unwrap();
    std::fs::write(half.join("metadata.yaml"), "half").unwrap();
    // Something wrote a release directory without a manifest (not us: we
    // rename complete directories, but a crash of an older tool could).
    let planted = cache_dir.path().join(&key).join(TAG);
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("metadata.yaml"), "garbage").unwrap();

    let cache = ReleaseCache::new(cache_dir.path()).unwrap();
    assert!(tmp_is_empty(cache_dir.path()), ".tmp is cleaned at start");
    let fetched = cache.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(fetched.downloaded, "a release without a manifest is fetched again");
    assert_eq!(source.downloads(), 6);
    assert!(fetched.metadata().is_ok());

    // A corrupted cached asset (e.g. a torn write before a crash) is caught at restart.
    std::fs::write(fetched.dir.join("metadata.yaml"), "torn").unwrap();
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    let refetched = restarted.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(refetched.downloaded);
    assert_eq!(source.downloads(), 12);
    assert!(refetched.metadata().is_ok());

    // A manifest pointing the chart outside the release is not trusted.
    let manifest_path = refetched.dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&manifest_path).unwrap();
    std::fs::write(&manifest_path, text.replace("cluster-class/docker-ferrol-1-27-cluster-class", "../../../etc"))
        .unwrap();
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    let again = restarted.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(again.downloaded);
    assert!(again.cluster_class_chart_dir().starts_with(&again.dir));
    assert_eq!(source.downloads(), 18);

    // A manifest that is not JSON is not trusted either.
    std::fs::write(refetched.dir.join(MANIFEST_FILE), "{").unwrap();
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    assert!(restarted.fetch(&source, &release, VERIFIED).await.unwrap().downloaded);
    assert_eq!(source.downloads(), 24);
}

#[tokio::test]
async fn a_restart_re_verifies_extracted_files() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts::default());
    let source = CountingSource::new(src.path(), Duration::ZERO);
    let release = listed(&source, TAG).await;
    let fetched = ReleaseCache::new(cache_dir.path()).unwrap().fetch(&source, &release, VERIFIED).await.unwrap();
    assert_eq!(source.downloads(), 6);

    // An untouched cache survives a restart without downloading.
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    assert!(!restarted.fetch(&source, &release, VERIFIED).await.unwrap().downloaded);
    assert_eq!(source.downloads(), 6);

    // Tamper with an extracted file; a new cache (a restart) notices.
    let values = fetched.cluster_class_chart_dir().join("values.yaml");
    std::fs::write(&values, "replicas: 100\n").unwrap();
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    let again = restarted.fetch(&source, &release, VERIFIED).await.unwrap();
    assert!(again.downloaded);
    assert_eq!(source.downloads(), 12);
    assert_eq!(std::fs::read_to_string(&values).unwrap(), "replicas: 1\n");

    // An extra file planted in the extracted tree counts as tampering too.
    std::fs::write(fetched.cluster_class_chart_dir().join("templates/extra.yaml"), "kind: Evil\n").unwrap();
    let restarted = ReleaseCache::new(cache_dir.path()).unwrap();
    assert!(restarted.fetch(&source, &release, VERIFIED).await.unwrap().downloaded);
    assert!(!fetched.cluster_class_chart_dir().join("templates/extra.yaml").exists());
}

#[tokio::test]
async fn the_same_release_is_downloaded_once_under_concurrency() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts::default());
    let source = Arc::new(CountingSource::new(src.path(), Duration::from_millis(20)));
    let release = listed(source.as_ref(), TAG).await;
    let cache = Arc::new(ReleaseCache::new(cache_dir.path()).unwrap());

    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (source, cache, release) = (source.clone(), cache.clone(), release.clone());
            tokio::spawn(async move { cache.fetch(source.as_ref(), &release, VERIFIED).await })
        })
        .collect();
    let mut downloaded = 0;
    for task in tasks {
        let fetched = task.await.unwrap().unwrap();
        downloaded += usize::from(fetched.downloaded);
        assert!(fetched.metadata().is_ok());
    }
    assert_eq!(downloaded, 1, "exactly one fetch downloads");
    assert_eq!(source.downloads(), 6, "each asset downloaded once: {:?}", source.downloaded_names.lock().unwrap());
}

#[tokio::test]
async fn different_releases_download_in_parallel() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    write_release(src.path(), &ReleaseOpts::default());
    write_release(src.path(), &ReleaseOpts { version: "v3", ..Default::default() });
    let source = CountingSource::new(src.path(), Duration::from_millis(50));
    let v2 = listed(&source, TAG).await;
    let v3 = listed(&source, "docker-ferrol-1-27-v3").await;
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();

    let (a, b) = tokio::join!(cache.fetch(&source, &v2, VERIFIED), cache.fetch(&source, &v3, VERIFIED));
    assert!(a.unwrap().downloaded && b.unwrap().downloaded);
    assert_eq!(source.downloads(), 12);
    // With one global lock at most one download would ever be in flight.
    assert_eq!(source.max_in_flight.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn prune_keeps_what_is_asked() {
    let src = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    for version in ["v1", "v2", "v3"] {
        write_release(src.path(), &ReleaseOpts { version, addon_version: "v1", ..Default::default() });
    }
    let source = DirSource::new(src.path()).unwrap();
    let cache = ReleaseCache::new(cache_dir.path()).unwrap();
    let listing = source.list().await.unwrap();
    for release in &listing.releases {
        cache.fetch(&source, release, VERIFIED).await.unwrap();
    }
    let key = source.cache_key();
    let keep = vec!["docker-ferrol-1-27-v2".to_string(), "docker-ferrol-1-27-v9".to_string()];
    let removed = cache.prune(&key, &keep).await.unwrap();
    assert_eq!(removed, ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v3"]);
    assert!(cache.release_dir(&key, "docker-ferrol-1-27-v2").join(MANIFEST_FILE).is_file());
    assert!(!cache.release_dir(&key, "docker-ferrol-1-27-v1").exists());
    assert!(!cache.release_dir(&key, "docker-ferrol-1-27-v3").exists());
    // A pruned release is fetched again when wanted again.
    let v1 = listing.releases.iter().find(|r| r.tag == "docker-ferrol-1-27-v1").unwrap();
    assert!(cache.fetch(&source, v1, VERIFIED).await.unwrap().downloaded);
    assert!(cache.prune("github/nobody/nothing", &[]).await.unwrap().is_empty());
    assert!(cache.prune("../escape", &[]).await.is_err());
}
