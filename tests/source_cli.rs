//! `clusterstack releases` and `clusterstack pull` against a directory source.

mod support;

use std::process::{Command, Output};

use support::releases::{ReleaseOpts, sha256_hex, write_release};

/// The binary with a clean environment for source selection.
fn clusterstack(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(args)
        .current_dir(cwd)
        .env_remove("GIT_ORG_NAME")
        .env_remove("GIT_REPOSITORY_NAME")
        .env_remove("GIT_ACCESS_TOKEN")
        .env_remove("GITHUB_TOKEN")
        .env_remove("CLUSTERSTACK_SOURCE")
        .env_remove("CLUSTERSTACK_CACHE")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn fixture() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let releases = tmp.path().join("releases");
    write_release(&releases, &ReleaseOpts::default());
    write_release(&releases, &ReleaseOpts { version: "v0-sha.abc123", sha256sums: false, ..Default::default() });
    write_release(&releases, &ReleaseOpts { k8s: (1, 28), version: "v1", addon_version: "v1", ..Default::default() });
    std::fs::create_dir(releases.join("openstack-csp-helper-v0.2.0")).unwrap();
    tmp
}

#[test]
fn releases_prints_a_table() {
    let tmp = fixture();
    let out = stdout(&clusterstack(&["releases", "--source", "dir:releases"], tmp.path()));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["TAG", "KUBERNETES", "VERSION", "CHANNEL", "ASSETS", "VERIFIED"]);
    let row = |tag: &str| -> Vec<String> {
        lines
            .iter()
            .find(|l| l.starts_with(tag))
            .unwrap_or_else(|| panic!("{tag} missing:\n{out}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("docker-ferrol-1-27-v2 "), ["docker-ferrol-1-27-v2", "1.27", "v2", "stable", "7", "yes"]);
    assert_eq!(
        row("docker-ferrol-1-27-v0-sha-abc123"),
        ["docker-ferrol-1-27-v0-sha-abc123", "1.27", "v0-sha.abc123", "sha", "6", "no"]
    );
    assert!(!out.contains("csp-helper"));
}

#[test]
fn releases_defaults_to_the_releases_directory_and_filters() {
    let tmp = fixture();
    // No --source and no GIT_* variables: dir:releases.
    let out = stdout(&clusterstack(&["releases", "--kubernetes", "1.28", "-o", "json"], tmp.path()));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{out}");
    assert_eq!(rows[0]["tag"], "docker-ferrol-1-28-v1");
    assert_eq!(rows[0]["kubernetes"], "1.28");
    assert_eq!(rows[0]["verified"], "yes");

    let out = stdout(&clusterstack(&["releases", "--channel", "stable", "-o", "yaml"], tmp.path()));
    assert!(out.contains("tag: docker-ferrol-1-27-v2") && out.contains("tag: docker-ferrol-1-28-v1"), "{out}");
    assert!(!out.contains("sha-abc123"), "{out}");
    let out = stdout(&clusterstack(
        &["releases", "--channel", "custom", "--provider", "docker", "--name", "ferrol", "-o", "json"],
        tmp.path(),
    ));
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 1);
    assert_eq!(rows[0]["channel"], "sha");
    let out = stdout(&clusterstack(&["releases", "--provider", "openstack", "-o", "json"], tmp.path()));
    assert_eq!(out.trim(), "[]");
}

#[test]
fn pull_fetches_and_prints_the_verified_digests() {
    let tmp = fixture();
    let cache = tmp.path().join("cache");
    let args = ["pull", "docker-ferrol-1-27-v2", "--source", "dir:releases", "--cache", "cache", "--require-verified"];
    let out = clusterstack(&args, tmp.path());
    let text = stdout(&out);
    assert!(text.contains("state     verified\n"), "{text}");
    let metadata = std::fs::read(tmp.path().join("releases/docker-ferrol-1-27-v2/metadata.yaml")).unwrap();
    assert!(text.contains(&format!("sha256:{}  metadata.yaml", sha256_hex(&metadata))), "{text}");
    // Not a terminal: plain progress lines.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("downloading metadata.yaml"), "{stderr}");
    let dir_line = text.lines().find_map(|l| l.strip_prefix("directory ")).unwrap();
    let dir = std::path::Path::new(dir_line.trim());
    assert!(dir.starts_with(&cache) || dir.starts_with("cache"), "{dir:?}");
    assert!(tmp.path().join(dir).join("cluster-class/docker-ferrol-1-27-cluster-class/Chart.yaml").is_file());

    // Again: from the cache.
    let text = stdout(&clusterstack(&args, tmp.path()));
    assert!(text.contains("state     verified (cached)"), "{text}");
}

#[test]
fn pull_refuses_an_unverified_release_when_asked_and_unknown_tags() {
    let tmp = fixture();
    let tag = "docker-ferrol-1-27-v0-sha-abc123";
    let out =
        clusterstack(&["pull", tag, "--source", "dir:releases", "--cache", "cache", "--require-verified"], tmp.path());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unverified") && stderr.contains(tag), "{stderr}");

    let text = stdout(&clusterstack(&["pull", tag, "--source", "dir:releases", "--cache", "cache"], tmp.path()));
    assert!(text.contains("state     unverified"), "{text}");
    assert!(text.contains("unverified)"), "{text}");

    let out = clusterstack(
        &["pull", "openstack-csp-helper-v0.2.0", "--source", "dir:releases", "--cache", "cache"],
        tmp.path(),
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a cluster-stack release"), "{stderr}");

    let out = clusterstack(&["releases", "--source", "gitlab:a/b"], tmp.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("github:OWNER/REPO, dir:PATH or oci://HOST/REPOSITORY"));
}
