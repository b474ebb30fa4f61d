//! The render worker (issue 20): the operator's own binary, re-executed with
//! resource limits, renders a release; a hostile one ends in an error naming
//! the release and the budget, while the operator process lives on.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clusterstack::release::ReleaseId;
use std::collections::BTreeMap;

use clusterstack::render::addons::AddonRender;
use clusterstack::render::worker::{AddonsJob, Reply, Request, SandboxConfig, run_worker};
use clusterstack::render::{ClusterObjects, RenderContext, RenderedChart, render_addons, render_cluster_class};

fn config() -> SandboxConfig {
    let mut c = SandboxConfig::new(PathBuf::from(env!("CARGO_BIN_EXE_clusterstack")));
    c.address_space = 512 * 1024 * 1024;
    c.cpu_seconds = 2;
    c.wall = Duration::from_secs(20);
    c
}

fn request(chart_dir: &Path) -> Request {
    Request {
        chart_dir: chart_dir.to_path_buf(),
        release_name: "docker-ferrol-1-27".into(),
        namespace: "capi-stacks".into(),
        chart_version: "v3".into(),
        kube_version: None,
        fuel: 50_000_000,
        max_output_bytes: 16 * 1024 * 1024,
        addons: None,
    }
}

/// The example workload cluster of `templates/` (Cluster, control plane, infrastructure cluster).
fn example_cluster() -> ClusterObjects {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    ClusterObjects { cluster: docs[0].clone(), control_plane: docs[1].clone(), infra_cluster: docs[2].clone() }
}

fn addons_request(bundle: &Path) -> Request {
    let values = BTreeMap::from([("cni".to_string(), serde_json::json!({"extra": "platform"}))]);
    Request {
        addons: Some(AddonsJob {
            cluster: example_cluster(),
            addon_values: values,
            release_values: None,
            reuse: Vec::new(),
        }),
        ..request(bundle)
    }
}

fn hostile_chart(dir: &Path, template: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), "apiVersion: v2\nname: hostile\nversion: 0.1.0\n").unwrap();
    std::fs::write(dir.join("templates/cm.yaml"), template).unwrap();
    dir.to_path_buf()
}

#[tokio::test]
async fn a_real_release_renders_the_same_through_the_worker() {
    let chart = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm-stack/cluster-class");
    let ctx = RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(), "capi-stacks");
    let local = render_cluster_class(&chart, &ctx).unwrap();
    let Reply::Objects(remote) = run_worker(&config(), &request(&chart)).await.unwrap() else {
        panic!("the worker failed")
    };
    assert!(!local.is_empty());
    assert_eq!(serde_json::to_value(&local).unwrap(), serde_json::to_value(&remote).unwrap());
}

#[tokio::test]
async fn addons_render_the_same_through_the_worker() {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm-stack/cluster-addon");
    let request = addons_request(&bundle);
    let job = request.addons.as_ref().unwrap();
    let ctx = RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(), "capi-stacks")
        .with_cluster(job.cluster.clone())
        .with_addon_values(job.addon_values.clone());
    let local = render_addons(&bundle, &ctx).unwrap();
    let Reply::Addons(remote) = run_worker(&config(), &request).await.unwrap() else { panic!("the worker failed") };
    let remote: Vec<RenderedChart> = remote
        .into_iter()
        .map(|a| match a {
            AddonRender::Rendered { chart, .. } => chart,
            AddonRender::Reused { .. } => panic!("nothing was offered for reuse"),
        })
        .collect();
    assert!(local.len() >= 2 && local.iter().all(|c| !c.objects.is_empty()), "{local:?}");
    assert_eq!(serde_json::to_value(&local).unwrap(), serde_json::to_value(&remote).unwrap());
}

/// An addon whose values digest the parent offers is not rendered by the worker; the others are.
#[tokio::test]
async fn the_worker_skips_the_addons_the_parent_holds() {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/helm-stack/cluster-addon");
    let Reply::Addons(first) = run_worker(&config(), &addons_request(&bundle)).await.unwrap() else {
        panic!("the worker failed")
    };
    let (key, digest) = match &first[0] {
        AddonRender::Rendered { key, values: Some(digest), shareable: true, .. } => (key.clone(), digest.clone()),
        other => panic!("a plain chart renders shareable, with a digest: {other:?}"),
    };
    let mut request = addons_request(&bundle);
    request.addons.as_mut().unwrap().reuse = vec![(key.clone(), digest.clone()), ("other".into(), "x".into())];
    let Reply::Addons(second) = run_worker(&config(), &request).await.unwrap() else { panic!("the worker failed") };
    assert_eq!(second.len(), first.len());
    assert!(matches!(&second[0], AddonRender::Reused { key: k, values } if *k == key && *values == digest));
    assert!(second[1..].iter().all(|a| matches!(a, AddonRender::Rendered { .. })));
}

#[tokio::test]
async fn a_hostile_addon_values_template_stops_the_worker_not_the_operator() {
    // An addon whose chart allocates past the worker's address space (each string within the
    // engine's size limit): the worker dies, the caller gets the memory budget named.
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("bomb");
    hostile_chart(
        &addon,
        "{{ $a := list }}{{ range until 40 }}{{ $a = append $a (repeat 10000000 \"x\") }}{{ end }}x: {{ len $a }}\n",
    );
    let mut config = config();
    config.address_space = 256 * 1024 * 1024;
    let mut request = addons_request(dir.path());
    request.addons.as_mut().unwrap().addon_values.clear();
    let e = run_worker(&config, &request).await.expect_err("stopped");
    assert!(e.contains("memory budget") && e.contains("256 MiB"), "{e}");
}

#[tokio::test]
async fn an_engine_error_comes_back_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let chart = hostile_chart(dir.path(), "x: {{ repeat 100000000000 \"x\" }}\n");
    let Reply::Failed(message) = run_worker(&config(), &request(&chart)).await.unwrap() else { panic!("rendered") };
    assert!(message.contains("templates/cm.yaml:1") && message.contains("size limit"), "{message}");
}

#[tokio::test]
async fn a_render_past_its_cpu_seconds_is_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    // Within the step budget for many seconds of CPU: only RLIMIT_CPU ends it.
    let chart = hostile_chart(dir.path(), "{{ range until 30 }}{{ genPrivateKey \"rsa\" | len }}{{ end }}\n");
    let mut request = request(&chart);
    request.fuel = u64::MAX / 2;
    let mut config = config();
    config.cpu_seconds = 1;
    let started = std::time::Instant::now();
    let e = run_worker(&config, &request).await.expect_err("stopped");
    assert!(e.contains("CPU budget") && e.contains("1 CPU seconds"), "{e}");
    eprintln!("stopped after {:?}", started.elapsed());
}

#[tokio::test]
async fn a_render_past_its_memory_is_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    // 10 MB strings are within the engine's size limit; a few of them held
    // at once are not within 128 MiB of address space.
    let chart = hostile_chart(
        dir.path(),
        "{{ $a := list }}{{ range until 40 }}{{ $a = append $a (repeat 10000000 \"x\") }}{{ end }}{{ len $a }}\n",
    );
    let mut config = config();
    config.address_space = 256 * 1024 * 1024;
    let e = run_worker(&config, &request(&chart)).await.expect_err("stopped");
    assert!(e.contains("memory budget") && e.contains("256 MiB"), "{e}");
}

#[tokio::test]
async fn a_render_past_its_wall_time_is_stopped_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let chart = hostile_chart(dir.path(), "{{ range until 30 }}{{ genPrivateKey \"rsa\" | len }}{{ end }}\n");
    let mut request = request(&chart);
    request.fuel = u64::MAX / 2;
    let mut config = config();
    config.cpu_seconds = 60;
    config.wall = Duration::from_millis(300);
    let e = run_worker(&config, &request).await.expect_err("stopped");
    assert!(e.contains("wall-time budget"), "{e}");
}

/// Writes a Helm addon `name` into `bundle` whose ConfigMap holds `data` (a template line).
fn helm_addon(bundle: &Path, name: &str, overwrite: Option<&str>, data: &str) {
    let dir = bundle.join(name);
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n")).unwrap();
    if let Some(overwrite) = overwrite {
        std::fs::write(dir.join("overwrite.yaml"), format!("values: |\n  {overwrite}\n")).unwrap();
    }
    let cm = format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: {data}\n");
    std::fs::write(dir.join("templates/cm.yaml"), cm).unwrap();
}

fn cluster_named(name: &str) -> ClusterObjects {
    ClusterObjects { cluster: serde_json::json!({"metadata": {"name": name}}), ..Default::default() }
}

/// The operator's addon render through its cache: an addon is rendered once per distinct values
/// of a release (its values are still rendered per Cluster), never shared when its render drew
/// on randomness, and never across releases.
#[tokio::test]
async fn addon_renders_are_shared_per_release_and_values_but_never_random_ones() {
    use clusterstack::render::cache::{ReleaseKey, RenderCache};
    use clusterstack::render::worker::render_addons_isolated;
    let dir = tempfile::tempdir().unwrap();
    helm_addon(dir.path(), "fixed", None, r#"{{ .Values.x | default "same" | quote }}"#);
    helm_addon(dir.path(), "named", Some("name: {{ .Cluster.metadata.name }}"), "{{ .Values.name | quote }}");
    helm_addon(dir.path(), "secret", None, "{{ randAlphaNum 16 | quote }}");
    let cache = RenderCache::new(1 << 20);
    let id = ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap();
    let ctx = |cluster: &str| RenderContext::new(&id, "ns").with_cluster(cluster_named(cluster));
    let key = ReleaseKey::new(dir.path(), &["digest-1"], &ctx("a"));
    let render = |cluster: &'static str, key: ReleaseKey| {
        let (cache, path) = (&cache, dir.path().to_path_buf());
        async move { render_addons_isolated("r", path, ctx(cluster), Some((cache, &key))).await.unwrap() }
    };
    let value = |charts: &[std::sync::Arc<RenderedChart>], i: usize| charts[i].objects[0].data["data"]["v"].clone();

    let a1 = render("a", key.clone()).await;
    assert_eq!(a1.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["fixed", "named", "secret"]);
    let a2 = render("a", key.clone()).await;
    let b = render("b", key.clone()).await;
    // `fixed` renders once for all; `named` once per Cluster; `secret` on every render.
    assert!(std::sync::Arc::ptr_eq(&a1[0], &a2[0]) && std::sync::Arc::ptr_eq(&a1[0], &b[0]));
    assert!(std::sync::Arc::ptr_eq(&a1[1], &a2[1]));
    assert!(!std::sync::Arc::ptr_eq(&a1[1], &b[1]));
    assert_eq!((value(&a1, 1), value(&b, 1)), (serde_json::json!("a"), serde_json::json!("b")));
    assert_ne!(value(&a1, 2), value(&a2, 2), "a random value is drawn anew for each render");
    assert!(!std::sync::Arc::ptr_eq(&a1[2], &a2[2]));
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.renders), (3, 6), "{stats:?}");

    // Another release (or its assets changed) shares nothing.
    let other = ReleaseKey::new(dir.path(), &["digest-2"], &ctx("a"));
    let c = render("a", other).await;
    assert!(!std::sync::Arc::ptr_eq(&a1[0], &c[0]));
    assert_eq!(value(&a1, 0), value(&c, 0));
}

/// An addon whose CRD (streamed to the parent as soon as it is read, before any template runs)
/// is followed by `template`.
fn streaming_addon(bundle: &Path, template: &str) {
    let dir = bundle.join("crdful");
    std::fs::create_dir_all(dir.join("crds")).unwrap();
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), "apiVersion: v2\nname: crdful\nversion: 0.1.0\n").unwrap();
    let description = "d".repeat(4096);
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\nspec:\n  group: example.com\n  description: {description}\n"
    );
    std::fs::write(dir.join("crds/crd.yaml"), crd).unwrap();
    std::fs::write(dir.join("templates/cm.yaml"), template).unwrap();
}

fn bare_addons_request(bundle: &Path) -> Request {
    let mut request = addons_request(bundle);
    request.addons.as_mut().unwrap().addon_values.clear();
    request
}

/// Objects streamed ahead of the reply count only with it: an addon whose CRD was streamed and
/// whose template then fails gives the template's error and no objects; one whose worker then
/// runs out of memory gives the memory budget, not a reply cut short.
#[tokio::test]
async fn objects_streamed_before_a_failure_count_for_nothing() {
    let dir = tempfile::tempdir().unwrap();
    streaming_addon(dir.path(), "x: {{ fail \"no\" }}\n");
    let Reply::Failed(message) = run_worker(&config(), &bare_addons_request(dir.path())).await.unwrap() else {
        panic!("rendered")
    };
    assert!(message.contains("templates/cm.yaml") && message.contains("no"), "{message}");

    let dir = tempfile::tempdir().unwrap();
    streaming_addon(
        dir.path(),
        "{{ $a := list }}{{ range until 40 }}{{ $a = append $a (repeat 10000000 \"x\") }}{{ end }}x: {{ len $a }}\n",
    );
    let mut config = config();
    config.address_space = 256 * 1024 * 1024;
    let e = run_worker(&config, &bare_addons_request(dir.path())).await.expect_err("stopped");
    assert!(e.contains("memory budget") && e.contains("256 MiB"), "{e}");
}

/// A reply over the parent's limit stops the worker at once (it would otherwise wait on a pipe
/// nobody reads until the wall-time budget), whether the excess is a streamed object or the reply.
#[tokio::test]
async fn a_reply_over_the_limit_is_stopped_at_once_and_named() {
    let dir = tempfile::tempdir().unwrap();
    // Past the pipe's capacity, so that the worker blocks writing unless it is stopped.
    streaming_addon(
        dir.path(),
        "{{ range until 400 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{{ . }}\ndata:\n  v: {{ repeat 8000 \"y\" }}\n{{ end }}",
    );
    let mut config = config();
    config.wall = Duration::from_secs(30);
    for max in [1000, 100_000] {
        config.max_reply_bytes = max;
        let started = std::time::Instant::now();
        let e = run_worker(&config, &bare_addons_request(dir.path())).await.expect_err("over the limit");
        assert!(e.contains("output budget") && e.contains(&format!("{max} bytes")), "{e}");
        assert!(started.elapsed() < Duration::from_secs(10), "stopped after {:?}", started.elapsed());
    }
    config.max_reply_bytes = 64 * 1024 * 1024;
    let Reply::Addons(addons) = run_worker(&config, &bare_addons_request(dir.path())).await.unwrap() else {
        panic!("the worker failed")
    };
    let AddonRender::Rendered { chart, .. } = &addons[0] else { panic!("nothing was offered for reuse") };
    assert_eq!(chart.objects.len(), 401);
    assert_eq!(chart.objects[0].data["spec"]["description"].as_str().map(str::len), Some(4096));
}
