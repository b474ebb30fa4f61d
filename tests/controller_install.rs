//! `clusterstack install --export` through the real binary.

use std::process::Command;

use serde_json::Value;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args).output().expect("run clusterstack")
}

#[test]
fn install_export_prints_applicable_manifests() {
    let out = run(&["install", "--export", "--namespace", "cs-test"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "CustomResourceDefinition").count(), clusterstack::api::all_crds().len());
    for kind in ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service"] {
        assert!(kinds.contains(&kind), "missing {kind}: {kinds:?}");
    }
    // CRDs come first so that a single `kubectl apply` knows them before anything uses them.
    let first_other = kinds.iter().position(|k| *k != "CustomResourceDefinition").unwrap();
    assert!(kinds[first_other..].iter().all(|k| *k != "CustomResourceDefinition"));
    // Every object carries apiVersion, kind and a name.
    for d in &docs {
        assert!(d["apiVersion"].is_string() && d["metadata"]["name"].is_string(), "{d}");
    }
}

#[test]
fn install_without_export_is_refused_with_a_hint() {
    let out = run(&["install"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--export"));
}
