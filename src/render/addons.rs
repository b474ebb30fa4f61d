//! An addon bundle rendered for one workload cluster, addon by addon, each with the digest of the
//! values its chart is rendered with, so that a caller that already holds the render of the same
//! values (another Cluster of the release, an earlier pass) is not sent it again.
//!
//! A Helm addon's objects are a function of the release (its charts, Kubernetes version, limits)
//! and of its values, unless the render drew on randomness (random strings, generated keys and
//! certificates): such a render is never shared, since another Cluster would get the same
//! secrets. The project's Jinja bundles are rendered every time.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use super::{
    CHART_FILE, Engine, RenderContext, RenderError, RenderedChart, addon_names, addon_values, chart_engine,
    check_addon_value_names, jinja, objects, render_helm_with,
};

/// One addon of a bundle as the render of a workload cluster's addons gives it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AddonRender {
    /// Rendered: the addon's key (its directory's name), the chart (named after its addon), the
    /// digest of its values (`None`: a Jinja bundle, never reused), whether another render of the
    /// same values gives the same objects, and the size of the documents it was read from.
    Rendered { key: String, chart: RenderedChart, values: Option<String>, shareable: bool, bytes: usize },
    /// Not rendered: the caller holds the render of these values of the addon `key`.
    Reused { key: String, values: String },
}

/// Renders every addon of a bundle (as [`super::render_addons`]) but those whose values digest
/// `reuse(key, digest)` accepts (`key`: the addon's directory name), which come back as
/// [`AddonRender::Reused`]. Objects rendered twice by different addons are checked by the
/// caller ([`check_addons`]), which alone has every addon's objects.
pub fn render_addons_reusing(
    bundle_dir: &Path,
    ctx: &RenderContext,
    reuse: &dyn Fn(&str, &str) -> bool,
) -> Result<Vec<AddonRender>, RenderError> {
    if ctx.cluster.is_none() {
        return Err(RenderError::NoCluster(bundle_dir.display().to_string()));
    }
    if bundle_dir.join(CHART_FILE).is_file() {
        check_addon_value_names(bundle_dir, &[bundle_dir.to_path_buf()], ctx)?;
        let key = bundle_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        // A bundle that is one chart keeps its chart's name.
        return Ok(vec![render_one(bundle_dir, key, None, ctx, reuse)?]);
    }
    let names = addon_names(bundle_dir)?;
    let dirs: Vec<_> = names.iter().map(|n| bundle_dir.join(n)).collect();
    check_addon_value_names(bundle_dir, &dirs, ctx)?;
    names
        .into_iter()
        .zip(dirs)
        // An addon is its directory, as `clusteraddon.yaml` and the Go operator name it (scs2's
        // `cni/` holds the chart `CNI`).
        .map(|(name, dir)| render_one(&dir, name.clone(), Some(name), ctx, reuse))
        .collect()
}

fn render_one(
    dir: &Path,
    key: String,
    name: Option<String>,
    ctx: &RenderContext,
    reuse: &dyn Fn(&str, &str) -> bool,
) -> Result<AddonRender, RenderError> {
    let (mut chart, values, shareable, bytes) = match chart_engine(dir)? {
        Engine::Jinja => (jinja::render_jinja_chart(dir, ctx)?, None, false, 0),
        Engine::Helm => {
            let values = addon_values(dir, ctx)?;
            let digest = values_digest(&values);
            if reuse(&key, &digest) {
                return Ok(AddonRender::Reused { key, values: digest });
            }
            let mut env = helm_render::RenderEnv::default();
            let (chart, bytes) = render_helm_with(dir, ctx, values, &mut env)?;
            (chart, Some(digest), !env.drew_randomness(), bytes)
        }
    };
    if !ctx.keep_unaccepted && !chart.unaccepted.is_empty() {
        return Err(RenderError::Unaccepted(chart.unaccepted));
    }
    if let Some(name) = name {
        chart.name = name;
    }
    Ok(AddonRender::Rendered { key, chart, values, shareable, bytes })
}

/// The digest of an addon's values: SHA-256 of their JSON (keys sorted, so equal values give
/// equal text).
pub fn values_digest(values: &serde_json::Value) -> String {
    let mut hasher = sha2::Sha256::new();
    // Writing JSON into a hasher cannot fail.
    let _ = serde_json::to_writer(HashWriter(&mut hasher), values);
    hex::encode(hasher.finalize())
}

struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Fails when two addons render the same object (the render of one addon checks its own).
pub fn check_addons<'a>(charts: impl IntoIterator<Item = &'a RenderedChart>) -> Result<(), RenderError> {
    let charts: Vec<(&RenderedChart, String)> = charts.into_iter().map(|c| (c, format!("addon {}", c.name))).collect();
    objects::check_duplicates_of(
        charts.iter().flat_map(|(c, source)| c.objects.iter().map(move |o| (o, source.as_str()))),
    )
}
