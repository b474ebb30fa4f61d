//! The operator's side of `bench_helm_real`: kube-prometheus-stack as an addon bundle, and the
//! child process that renders it as the ClusterAddon controller does.

use std::path::{Path, PathBuf};

use clusterstack::release::ReleaseId;
use clusterstack::render::cache::{ReleaseKey, RenderCache};
use clusterstack::render::worker::{SandboxConfig, enable, render_addons_isolated};
use clusterstack::render::{ClusterObjects, RenderContext};
use futures::StreamExt as _;

/// The release the bundle belongs to, and the Kubernetes version its `metadata.yaml` would say.
pub const TAG: &str = "docker-kps-1-30-v1";
pub const KUBE_VERSION: &str = "v1.30.4";
/// The argument that makes this example the operator's child.
pub const CHILD: &str = "--operator-render";

/// An addon bundle of one addon, kube-prometheus-stack, in a temp dir.
pub struct Bundle {
    _tmp: tempfile::TempDir,
    /// The bundle (`<tmp>/bundle`, holding `kube-prometheus-stack/`).
    pub dir: PathBuf,
    /// The addon's chart directory, which helm renders.
    pub chart: PathBuf,
    /// The Cluster `wl-0` as `render --cluster` reads it.
    pub cluster: PathBuf,
}

/// The values template of the bundle: `named` labels every object with the Cluster's name (a
/// render per Cluster); else the same values for every Cluster. Both set Grafana's admin password:
/// with the chart's defaults Grafana draws a random one, and a render that drew on randomness is
/// never shared between Clusters (each would get the other's secret), so no render would be.
fn overwrite(named: bool) -> &'static str {
    if named {
        "values: |\n  commonLabels:\n    cluster: \"{{ .Cluster.metadata.name }}\"\n  grafana:\n    adminPassword: fleet\n"
    } else {
        "values: |\n  commonLabels:\n    stack: \"{{ .Cluster.spec.topology.class }}\"\n  grafana:\n    adminPassword: fleet\n"
    }
}

/// What the values template renders to for Cluster `name`: the `-f` file helm gets.
pub fn rendered_values(named: bool, name: &str) -> String {
    let grafana = "grafana:\n  adminPassword: fleet\n";
    if named {
        format!("commonLabels:\n  cluster: \"{name}\"\n{grafana}")
    } else {
        format!("commonLabels:\n  stack: \"docker-kps-1-30-v1\"\n{grafana}")
    }
}

/// Copies the corpus chart into a temp dir as the one addon of a bundle, with its values template.
pub fn bundle(corpus_chart: &Path, named: bool) -> std::io::Result<Bundle> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("bundle");
    let chart = dir.join("kube-prometheus-stack");
    copy_dir(corpus_chart, &chart)?;
    std::fs::write(chart.join("overwrite.yaml"), overwrite(named))?;
    let cluster = tmp.path().join("cluster.yaml");
    std::fs::write(&cluster, serde_json::to_string(&cluster_json(0))?)?;
    Ok(Bundle { _tmp: tmp, dir, chart, cluster })
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Cluster `wl-<i>` of the fleet.
fn cluster_json(i: usize) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Cluster",
        "metadata": {"name": format!("wl-{i}"), "namespace": "team"},
        "spec": {
            "controlPlaneEndpoint": {"host": format!("10.0.{}.{}", i / 250, i % 250 + 1), "port": 6443},
            "topology": {"class": TAG, "version": KUBE_VERSION},
        },
    })
}

/// The child: `CHILD OURS BUNDLE CLUSTERS STATS_FILE`. Renders the addons of `CLUSTERS` Clusters
/// as the ClusterAddon controller does (`render_addons_isolated` with the sandbox on: two render
/// workers of the binary OURS at a time, one render cache), each render dropped once checked as
/// a pass drops it; writes `<reused> <rendered> <objects>` to STATS_FILE.
pub fn child(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let [ours, bundle, clusters, stats] = args else { return Err(format!("{CHILD}: four arguments").into()) };
    let (bundle, clusters) = (PathBuf::from(bundle), clusters.parse::<usize>()?);
    enable(SandboxConfig::new(PathBuf::from(ours)));
    let cache = RenderCache::new(clusterstack::controller::addon::RENDER_CACHE_BYTES);
    let id = ReleaseId::from_tag(TAG)?;
    let ctx = |i: usize| {
        let objects = ClusterObjects { cluster: cluster_json(i), ..Default::default() };
        RenderContext::new(&id, "team").with_cluster(objects).with_kube_version(KUBE_VERSION)
    };
    let key = ReleaseKey::new(&bundle, &["bench"], &ctx(0));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let objects: Vec<Result<usize, String>> = runtime.block_on(
        futures::stream::iter(0..clusters)
            .map(|i| {
                let (cache, key, bundle) = (&cache, &key, bundle.clone());
                let ctx = ctx(i);
                async move {
                    let charts = render_addons_isolated(TAG, bundle, ctx, Some((cache, key)))
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(charts.iter().map(|c| c.objects.len()).sum())
                }
            })
            .buffer_unordered(2)
            .collect(),
    );
    let objects = objects.into_iter().collect::<Result<Vec<usize>, String>>()?;
    let counts = cache.stats();
    std::fs::write(stats, format!("{} {} {}", counts.hits, counts.renders, objects.iter().sum::<usize>()))?;
    // The operator keeps the renders in its cache for the next pass and the next Cluster: freeing
    // them (a tenth of this process's time on kube-prometheus-stack) is no part of a render, and
    // the process ends here, as helm's does without freeing.
    std::mem::forget(cache);
    Ok(())
}
