//! Building releases: the committed sample releases are rebuilt byte for byte
//! from their source history, and the version bump rules hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clusterstack::package::build::{BuildError, BuildOptions, build_release};
use clusterstack::release::{ReleaseMetadata, StackVersion};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The source states of the sample, oldest first: what `releases/` was built from.
fn history() -> Vec<PathBuf> {
    vec![
        root().join("tests/fixtures/sample-history/v1"),
        root().join("tests/fixtures/sample-history/v2"),
        root().join("templates/docker-ferrol-1-27"),
    ]
}

fn build(source: &Path, out: &Path, version: Option<StackVersion>) -> Result<PathBuf, BuildError> {
    build_release(&BuildOptions { source_dir: source.to_path_buf(), out_dir: out.to_path_buf(), version })
        .map(|b| b.dir)
}

fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect()
}

fn metadata(dir: &Path) -> ReleaseMetadata {
    ReleaseMetadata::parse("metadata.yaml", &std::fs::read_to_string(dir.join("metadata.yaml")).unwrap()).unwrap()
}

/// Copies a source tree (for tests that change it).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

#[test]
fn committed_releases_rebuild_byte_for_byte() {
    let out = tempfile::tempdir().unwrap();
    let mut built = Vec::new();
    for source in history() {
        built.push(build(&source, out.path(), None).unwrap());
    }
    let tags: Vec<String> = built.iter().map(|d| d.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(tags, ["docker-ferrol-1-27-v1", "docker-ferrol-1-27-v2", "docker-ferrol-1-27-v3"]);
    for (dir, tag) in built.iter().zip(&tags) {
        let committed = files(&root().join("releases").join(tag));
        let rebuilt = files(dir);
        assert_eq!(committed.keys().collect::<Vec<_>>(), rebuilt.keys().collect::<Vec<_>>(), "{tag}: asset names");
        for (name, bytes) in &committed {
            assert!(&rebuilt[name] == bytes, "{tag}/{name} differs from the committed release; rebuild releases/");
        }
    }
    // Only the releases are left behind, no temp directories.
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 3);
}

#[test]
fn the_same_source_gives_the_same_bytes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let source = &history()[0];
    let one = files(&build(source, a.path(), None).unwrap());
    let two = files(&build(source, b.path(), None).unwrap());
    assert_eq!(one, two);
}

#[test]
fn addon_version_bumps_only_when_addons_change() {
    let out = tempfile::tempdir().unwrap();
    let dirs: Vec<PathBuf> = history().iter().map(|s| build(s, out.path(), None).unwrap()).collect();
    let (m1, m2, m3) = (metadata(&dirs[0]), metadata(&dirs[1]), metadata(&dirs[2]));

    // v1 → v2: metrics-server changed.
    assert_eq!(m1.versions.components.cluster_addon, StackVersion::Stable(1));
    assert_eq!(m2.versions.components.cluster_addon, StackVersion::Stable(2));
    // ...but the node images did not.
    assert_eq!(m2.versions.components.node_image, Some(StackVersion::Stable(1)));

    // v2 → v3: a Kubernetes patch bump; addons unchanged, the same asset byte for byte.
    assert_eq!(m3.versions.cluster_stack, StackVersion::Stable(3));
    assert_eq!(m3.versions.kubernetes.to_string(), "v1.27.11");
    assert_eq!(m3.versions.components.cluster_addon, StackVersion::Stable(2));
    assert_eq!(m3.versions.components.node_image, Some(StackVersion::Stable(3)));
    let asset = "docker-ferrol-1-27-cluster-addon-v2.tgz";
    assert_eq!(std::fs::read(dirs[1].join(asset)).unwrap(), std::fs::read(dirs[2].join(asset)).unwrap());
    assert!(!dirs[2].join("docker-ferrol-1-27-cluster-addon-v3.tgz").exists());
    assert!(dirs[2].join("docker-ferrol-1-27-cluster-class-v3.tgz").exists());
}

#[test]
fn sha256sums_cover_every_other_asset() {
    let out = tempfile::tempdir().unwrap();
    let dir = build(&history()[0], out.path(), None).unwrap();
    let all = files(&dir);
    let sums = String::from_utf8(all["SHA256SUMS"].clone()).unwrap();
    let mut listed = Vec::new();
    for line in sums.lines() {
        let (hex, name) = line.split_once("  ").unwrap();
        use sha2::Digest;
        assert_eq!(hex, hex::encode(sha2::Sha256::digest(&all[name])), "{name}");
        listed.push(name.to_string());
    }
    let mut expected: Vec<String> = all.keys().filter(|n| *n != "SHA256SUMS").cloned().collect();
    expected.sort();
    assert_eq!(listed, expected);
}

#[test]
fn next_version_follows_the_newest_numerically_and_explicit_versions_work() {
    let out = tempfile::tempdir().unwrap();
    let source = &history()[0];
    build(source, out.path(), Some(StackVersion::Stable(9))).unwrap();
    // Not a release of this stack: ignored.
    std::fs::create_dir(out.path().join("docker-other-1-27-v40")).unwrap();
    std::fs::create_dir(out.path().join("notes")).unwrap();
    let dir = build(source, out.path(), None).unwrap();
    assert!(dir.ends_with("docker-ferrol-1-27-v10"), "{}", dir.display());
    // Unchanged addons keep v9's version.
    assert_eq!(metadata(&dir).versions.components.cluster_addon, StackVersion::Stable(9));

    let err = build(source, out.path(), Some(StackVersion::Stable(9))).unwrap_err();
    assert!(matches!(err, BuildError::Exists { .. }), "{err}");
}

#[test]
fn a_release_that_does_not_render_is_never_written() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&history()[2], src.path());
    std::fs::write(
        src.path().join("cluster-addon/metrics-server/templates/broken.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ values.nope }}\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = build(src.path(), out.path(), None).unwrap_err().to_string();
    assert!(err.contains("broken.yaml:4") && err.contains("values.nope"), "{err}");
    assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0, "nothing may be written");
}

#[cfg(unix)]
#[test]
fn symlinks_in_the_source_are_refused() {
    let src = tempfile::tempdir().unwrap();
    copy_tree(&history()[2], src.path());
    std::os::unix::fs::symlink("/etc/hostname", src.path().join("cluster-class/templates/_x.j2")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = build(src.path(), out.path(), None).unwrap_err();
    assert!(matches!(err, BuildError::Symlink { .. }), "{err}");
}
