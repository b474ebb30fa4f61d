//! Interactive commands print their result and warnings, never INFO log lines, unless asked
//! with `-v` (or `RUST_LOG`); errors are one readable line per cause.

use std::path::PathBuf;
use std::process::Output;

fn release(tag: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("releases").join(tag).display().to_string()
}

fn clusterstack(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("CLUSTERSTACK_LOG_FORMAT")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn releases_dir() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("releases").display().to_string()
}

#[test]
fn render_prints_its_objects_and_no_log_line() {
    // By tag: the release goes through the verified cache, which logs "release cached" at info.
    let cache = tempfile::tempdir().unwrap();
    let source = format!("dir:{}", releases_dir());
    let cache_dir = cache.path().to_str().unwrap();
    let args = ["render", "docker-ferrol-1-27-v1", "--source", &source, "--cache", cache_dir, "--namespace", "team-a"];
    let out = clusterstack(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "log lines on stderr");
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("---\napiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\n"), "{stdout}");
    for level in ["INFO", "WARN", "DEBUG", "\u{1b}["] {
        assert!(!stdout.contains(level), "{level} in stdout");
    }
    // `-v` shows our info lines, without timestamps or colour codes on a pipe; stdout is the same.
    let cache = tempfile::tempdir().unwrap();
    let cache_dir = cache.path().to_str().unwrap();
    let mut verbose = vec!["-v"];
    verbose.extend([
        "render",
        "docker-ferrol-1-27-v1",
        "--source",
        &source,
        "--cache",
        cache_dir,
        "--namespace",
        "team-a",
    ]);
    let out = clusterstack(&verbose);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("INFO"), "{stderr}");
    assert!(stderr.contains("release cached"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!stderr.contains("2026-") && !stderr.contains("Z "), "no timestamps: {stderr}");
    assert_eq!(text(&out.stdout), stdout);
}

#[test]
fn an_error_is_one_line_per_cause_without_log_lines() {
    let out = clusterstack(&["render", "/nonexistent/release", "--source", "dir:/nonexistent"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.lines().all(|l| l.starts_with("error: ") || l.starts_with("  caused by: ")), "{stderr}");
    assert!(!stderr.contains("INFO") && !stderr.contains('\u{1b}'), "{stderr}");
}

#[test]
fn verbosity_is_a_global_flag() {
    assert_eq!(clusterstack::cli::interactive_filter(0), "clusterstack=warn,off");
    assert_eq!(clusterstack::cli::interactive_filter(1), "clusterstack=info,warn");
    assert_eq!(clusterstack::cli::interactive_filter(5), "trace");
    // `-vv` is accepted by every command (a global flag) and changes nothing on stdout.
    let quiet = clusterstack(&["render", &release("docker-ferrol-1-27-v1")]);
    let verbose = clusterstack(&["render", "-vv", &release("docker-ferrol-1-27-v1")]);
    assert!(verbose.status.success(), "{}", text(&verbose.stderr));
    assert_eq!(quiet.stdout, verbose.stdout);
}
