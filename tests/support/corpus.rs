//! The helm corpus (`../shared/helm-corpus`, or `CLUSTERSTACK_HELM_CORPUS`) for the differential
//! tests that read it: where it is, and its charts. Included by path, so each test binary takes
//! only this file.

// Each test binary uses a different part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The corpus, or `None` (skipped loudly) when it is missing; with `CI=true` a missing corpus
/// fails `test`.
pub fn require_corpus(test: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = match std::env::var_os("CLUSTERSTACK_HELM_CORPUS").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        // `<repo>/../shared`; from a worktree under `<root>/wt/<branch>`, `<root>/shared`.
        None => {
            let near = root.join("../shared/helm-corpus");
            if near.is_dir() { near } else { root.join("../../shared/helm-corpus") }
        }
    };
    if dir.join("README.md").is_file() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: the helm corpus is not at ../shared/helm-corpus and CLUSTERSTACK_HELM_CORPUS is not set");
    }
    eprintln!(
        "\n*** SKIPPED: {test}: no helm corpus (../shared/helm-corpus beside the workspace, \
         or set CLUSTERSTACK_HELM_CORPUS) ***\n"
    );
    None
}

/// The names of the corpus's charts (`charts/*/Chart.yaml`), sorted.
pub fn chart_names(corpus: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus.join("charts"))
        .expect("corpus charts")
        .flatten()
        .filter(|e| e.path().join("Chart.yaml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
