//! The operator's Helm chart (`charts/clusterstack`) against `clusterstack install --export`:
//! for the same settings (namespace, image, shards, monitoring, cache, default source) the real
//! `helm template` and our in-process Helm renderer each render exactly the objects the binary
//! prints, compared object by object (key `apiVersion/kind/namespace/name`; a mismatch prints a
//! line diff per object). This is what keeps the chart and `install --export` from drifting.
//!
//! Without helm the helm half prints a SKIPPED line (and fails when `CI=true`); our renderer's
//! half always runs.

#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;
#[path = "support/registry.rs"]
mod registry;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use helm_render::{HelmOptions, load_chart, render_chart};
use registry::Registry;
use serde_json::{Value as Json, json};

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/clusterstack")
}

/// One setting of both: the `install` flags and the chart values that mean the same.
struct Setting {
    name: &'static str,
    namespace: &'static str,
    install_args: Vec<&'static str>,
    values: Json,
}

fn settings() -> Vec<Setting> {
    vec![
        // Every default: the chart's appVersion image is install's default image.
        Setting {
            name: "defaults",
            namespace: "clusterstack-system",
            install_args: vec![],
            values: json!({"createNamespace": true}),
        },
        Setting {
            name: "everything set",
            namespace: "ops",
            install_args: vec![
                "--image",
                "registry.example/cs:1",
                "--shards",
                "3",
                "--monitoring",
                "--storage-class",
                "fast",
                "--cache-size",
                "10Gi",
                "--default-source",
                "github:acme/stacks",
                "--max-objects-per-release",
                "800",
            ],
            values: json!({
                "createNamespace": true,
                "image": "registry.example/cs:1",
                "shards": 3,
                "monitoring": {"enabled": true},
                "cache": {"storageClass": "fast", "size": "10Gi"},
                "defaultSource": "github:acme/stacks",
                "maxObjectsPerRelease": 800,
            }),
        },
        Setting {
            name: "two shards, monitoring",
            namespace: "cs",
            install_args: vec!["--shards", "2", "--monitoring"],
            values: json!({"createNamespace": true, "shards": 2, "monitoring": {"enabled": true}}),
        },
    ]
}

/// `clusterstack install --export --namespace NS ARGS...`, by object.
fn install(setting: &Setting) -> BTreeMap<String, Json> {
    let out = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["install", "--export", "--namespace", setting.namespace])
        .args(&setting.install_args)
        .output()
        .expect("run clusterstack");
    assert!(out.status.success(), "install --export: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    helm::parse_docs([("install --export", text.as_str())]).expect("install's YAML parses")
}

fn check(what: &str, setting: &Setting, expected: &BTreeMap<String, Json>, got: &BTreeMap<String, Json>) {
    if let Some(diff) = helm::diff_objects(got, expected) {
        panic!("{what} of the chart differs from install --export ({}); - chart, + install:\n{diff}", setting.name);
    }
}

#[test]
fn helm_template_renders_what_install_export_prints() {
    let Some(helm_bin) = helm::require_helm("helm_template_renders_what_install_export_prints") else { return };
    let dir = tempfile::tempdir().unwrap();
    for setting in settings() {
        let expected = install(&setting);
        let values = dir.path().join("values.yaml");
        std::fs::write(&values, setting.values.to_string()).unwrap();
        let mut args = helm::TemplateArgs::new("clusterstack", setting.namespace);
        args.include_crds = true;
        args.values_files.push(values);
        let text = helm::helm_template(&helm_bin, &chart_dir(), &args)
            .unwrap_or_else(|e| panic!("helm template ({}): {e}", setting.name));
        let docs = helm::split_helm_output(&text);
        let got = helm::parse_docs(docs.iter().map(|d| (d.source.as_str(), d.content.as_str()))).unwrap();
        check("helm template", &setting, &expected, &got);
    }
}

#[test]
fn our_renderer_renders_the_chart_as_install_export_prints() {
    let chart = load_chart(&chart_dir()).expect("the chart loads");
    for setting in settings() {
        let expected = install(&setting);
        let opts = HelmOptions {
            include_crds: true,
            values: setting.values.clone(),
            ..HelmOptions::new("clusterstack", setting.namespace)
        };
        let manifests = render_chart(&chart, &opts).unwrap_or_else(|e| panic!("render ({}): {e}", setting.name));
        let got = helm::parse_docs(manifests.iter().map(|m| (m.source.as_str(), m.content.as_str()))).unwrap();
        check("our render", &setting, &expected, &got);
    }
}

#[test]
fn the_settings_reach_the_objects() {
    // The comparison above is only as good as what install prints for each setting.
    let all = settings();
    let plain = install(&all[0]);
    let full = install(&all[1]);
    let kinds = |objs: &BTreeMap<String, Json>, kind: &str| objs.values().filter(|o| o["kind"] == kind).count();
    assert_eq!(kinds(&plain, "Deployment"), 1);
    assert_eq!(kinds(&full, "Deployment"), 3);
    assert_eq!(kinds(&plain, "ServiceMonitor") + kinds(&plain, "PrometheusRule"), 0);
    assert_eq!(kinds(&full, "ServiceMonitor") + kinds(&full, "PrometheusRule"), 2);
    assert_eq!(kinds(&full, "CustomResourceDefinition"), clusterstack::api::all_crds().len());
    let deployment = &full["apps/v1/Deployment/ops/clusterstack-operator-shard-2"];
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example/cs:1");
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap();
    let cap = env.iter().find(|e| e["name"] == "CLUSTERSTACK_MAX_OBJECTS_PER_RELEASE").expect("the object cap is set");
    assert_eq!(cap["value"], "800");
    let chart: Json =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap()).unwrap();
    let default_image = &plain["apps/v1/Deployment/clusterstack-system/clusterstack-operator"]["spec"]["template"]["spec"]
        ["containers"][0]["image"];
    assert_eq!(default_image.as_str().unwrap().rsplit(':').next(), chart["appVersion"].as_str());
}

/// The chart's files (hidden ones left out, as `publish --chart` packs them).
fn chart_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    clusterstack::package::build::collect_files(dir)
        .unwrap()
        .into_iter()
        .filter(|(p, _)| !p.split('/').any(|part| part.starts_with('.')))
        .collect()
}

#[test]
fn publish_chart_is_pulled_by_the_real_helm_and_renders_as_install_export() {
    let test = "publish_chart_is_pulled_by_the_real_helm_and_renders_as_install_export";
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let Some(registry) = Registry::start(test) else { return };
    let target = format!("oci://127.0.0.1:{}/charts", registry.port());
    let publish = || {
        let out = Command::new(env!("CARGO_BIN_EXE_clusterstack"))
            .args(["publish", "--chart"])
            .arg(chart_dir())
            .arg(&target)
            .output()
            .expect("run clusterstack publish");
        assert!(out.status.success(), "publish --chart: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let printed = publish();
    let chart: Json =
        serde_saphyr::from_str(&std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap()).unwrap();
    let version = chart["version"].as_str().unwrap();
    assert!(printed.starts_with(&format!("{target}/clusterstack:{version}@sha256:")), "{printed}");
    // Reproducible: the same chart gives the same manifest.
    assert_eq!(publish(), printed);

    let dest = tempfile::tempdir().unwrap();
    let mut pull = Command::new(&helm_bin);
    pull.args(["pull", &format!("{target}/clusterstack"), "--version", version, "--plain-http", "--untar"])
        .arg("--destination")
        .arg(dest.path());
    helm::isolate(&mut pull);
    let out = pull.output().expect("run helm pull");
    assert!(
        out.status.success(),
        "helm pull: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let pulled = dest.path().join("clusterstack");
    assert_eq!(chart_files(&pulled), chart_files(&chart_dir()), "helm pulled other files than the chart's");

    // And what helm pulled installs what install --export prints.
    let setting = &settings()[1];
    let values = dest.path().join("values.json");
    std::fs::write(&values, setting.values.to_string()).unwrap();
    let mut args = helm::TemplateArgs::new("clusterstack", setting.namespace);
    args.include_crds = true;
    args.values_files.push(values);
    let text = helm::helm_template(&helm_bin, &pulled, &args).unwrap_or_else(|e| panic!("helm template: {e}"));
    let docs = helm::split_helm_output(&text);
    let got = helm::parse_docs(docs.iter().map(|d| (d.source.as_str(), d.content.as_str()))).unwrap();
    check("helm template of the pulled chart", setting, &install(setting), &got);
}

/// On the cluster of the kubeconfig (needs cert-manager, Cluster API and the Prometheus
/// Operator's CRDs): the chart installs with monitoring, the operator becomes ready, and
/// uninstalling removes it. `cargo test --test operator_chart -- --ignored`.
#[test]
#[ignore = "needs a real cluster"]
fn the_chart_installs_into_a_real_cluster() {
    let helm_bin = helm::find_helm().expect("helm");
    let ns = "clusterstack-chart-test";
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("run");
        assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    run(Command::new(&helm_bin).args(["upgrade", "--install", "clusterstack"]).arg(chart_dir()).args([
        "-n",
        ns,
        "--create-namespace",
        "--set",
        "monitoring.enabled=true",
        "--wait",
        "--timeout",
        "5m",
    ]));
    run(Command::new("kubectl").args(["-n", ns, "rollout", "status", "deployment/clusterstack-operator"]));
    run(Command::new("kubectl").args(["-n", ns, "get", "servicemonitor,prometheusrule", "clusterstack-operator"]));
    run(Command::new(&helm_bin).args(["uninstall", "clusterstack", "-n", ns, "--wait"]));
}
