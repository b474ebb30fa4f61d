//! The built-in plug-in of the `docker` provider (Cluster API's Docker provider, the sample
//! stack's): its nodes run container images such as `kindest/node:v1.27.3`, which it cannot build,
//! so its gate checks that every image of the release's `node-images.yaml` exists in its registry
//! and reports the missing ones.
//!
//! It is also the reference for plug-in authors: validation up front (a permanent failure), the
//! slow part (registry requests) as a tracked task polled with a short budget, the previous
//! per-image list reused while a check runs, and nothing held that a restart would need.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;

use super::{Cleanup, NodeImageProvider, Progress, ProviderError, ReleaseContext, Report, TaskTracker};
use crate::api::NodeImageStatus;
use crate::registry::{ImageRef, Presence, RegistryClient, RegistryConfig};

/// The provider name this plug-in serves.
pub const DOCKER: &str = "docker";

/// The result of checking one image: present, missing, or why it could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Checked {
    Present,
    Missing { registry: String },
    Error(String),
}

/// Settings of the docker plug-in.
#[derive(Debug, Clone)]
pub struct DockerSettings {
    /// Where registries are reached.
    pub registry: RegistryConfig,
    /// How long `ensure` waits for a running check before answering "in progress".
    pub wait_budget: Duration,
    /// When to ask again while a check runs.
    pub recheck_after: Duration,
    /// How many images are checked at the same time.
    pub concurrency: usize,
}

impl Default for DockerSettings {
    fn default() -> Self {
        Self {
            registry: RegistryConfig::default(),
            wait_budget: Duration::from_secs(3),
            recheck_after: Duration::from_secs(5),
            concurrency: 4,
        }
    }
}

/// The `docker` plug-in.
pub struct DockerProvider {
    client: Result<Arc<RegistryClient>, String>,
    settings: DockerSettings,
    tasks: TaskTracker<String, Vec<(String, Checked)>>,
}

impl DockerProvider {
    /// A plug-in reaching registries as `registry` says, with default timings.
    pub fn new(registry: RegistryConfig) -> Self {
        Self::with_settings(DockerSettings { registry, ..Default::default() })
    }

    /// A plug-in with these settings.
    pub fn with_settings(settings: DockerSettings) -> Self {
        crate::install_crypto_provider();
        let client = RegistryClient::new(settings.registry.clone()).map(Arc::new);
        Self { client, settings, tasks: TaskTracker::new() }
    }

    /// How many checks are tracked now.
    pub fn tracked_checks(&self) -> usize {
        self.tasks.len()
    }

    async fn ensure_images(&self, ctx: &ReleaseContext) -> Result<Report, ProviderError> {
        let Some(file) = &ctx.node_images else {
            return Ok(Report::new(Progress::Ready));
        };
        let fail = |reason: String| Ok(Report::new(Progress::Failed { reason, retryable: false }));
        let names = match file.images() {
            Ok(n) => n,
            Err(e) => return fail(e.to_string()),
        };
        let mut refs = Vec::with_capacity(names.len());
        for name in &names {
            match ImageRef::parse(name) {
                Ok(r) => refs.push((name.clone(), r)),
                Err(e) => return fail(format!("{}: {e}", file.file)),
            }
        }
        let client = self.client.clone().map_err(ProviderError::Other)?;
        let concurrency = self.settings.concurrency.max(1);
        let registry = self.settings.registry.clone();
        let checked = self
            .tasks
            .poll(ctx.key(), self.settings.wait_budget, move || check_all(client, registry, refs, concurrency))
            .await;
        let Some(checked) = checked else {
            // Still checking: show what the last pass saw, so the status does not flap.
            let images = names
                .iter()
                .map(|n| {
                    ctx.previous.iter().find(|p| &p.name == n).cloned().unwrap_or_else(|| NodeImageStatus {
                        name: n.clone(),
                        ready: false,
                        message: "checking".into(),
                    })
                })
                .collect();
            return Ok(Report::new(Progress::InProgress {
                message: format!("checking {} node image(s) in their registries", names.len()),
                recheck_after: self.settings.recheck_after,
            })
            .with_images(images));
        };
        Ok(summarise(checked))
    }
}

async fn check_all(
    client: Arc<RegistryClient>,
    registry: RegistryConfig,
    refs: Vec<(String, ImageRef)>,
    concurrency: usize,
) -> Vec<(String, Checked)> {
    futures::stream::iter(refs)
        .map(|(name, image)| {
            let client = client.clone();
            let registry = registry.base_url(&image.host);
            async move {
                let checked = match client.check(&image).await {
                    Ok(Presence::Present { .. }) => Checked::Present,
                    Ok(Presence::Missing) => Checked::Missing { registry },
                    Err(e) => Checked::Error(e.to_string()),
                };
                (name, checked)
            }
        })
        .buffered(concurrency)
        .collect()
        .await
}

/// The report for a finished check (pure).
fn summarise(checked: Vec<(String, Checked)>) -> Report {
    let mut missing = Vec::new();
    let mut errors = Vec::new();
    let images: Vec<NodeImageStatus> = checked
        .into_iter()
        .map(|(name, c)| {
            let (ready, message) = match c {
                Checked::Present => (true, String::new()),
                Checked::Missing { registry } => {
                    missing.push(name.clone());
                    (false, format!("not found in {registry}"))
                }
                Checked::Error(e) => {
                    errors.push(e.clone());
                    (false, e)
                }
            };
            NodeImageStatus { name, ready, message }
        })
        .collect();
    if missing.is_empty() && errors.is_empty() {
        return Report::new(Progress::Ready).with_images(images);
    }
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("{} of {} node image(s) missing: {}", missing.len(), images.len(), missing.join(", ")));
    }
    if !errors.is_empty() {
        parts.push(format!("{} could not be checked: {}", errors.len(), errors.join("; ")));
    }
    // Retryable: an image may be pushed later, a registry may come back.
    Report::new(Progress::Failed { reason: parts.join("; "), retryable: true }).with_images(images)
}

impl NodeImageProvider for DockerProvider {
    fn name(&self) -> &str {
        DOCKER
    }

    fn ensure<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Report, ProviderError>> {
        Box::pin(self.ensure_images(ctx))
    }

    fn cleanup<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Cleanup, ProviderError>> {
        // Nothing was created: the images belong to their registries. Only stop a running check.
        self.tasks.forget(&ctx.key());
        Box::pin(async { Ok(Cleanup::Done) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_missing_and_unchecked_images() {
        let r = summarise(vec![
            ("a".into(), Checked::Present),
            ("b".into(), Checked::Missing { registry: "http://r".into() }),
            ("c".into(), Checked::Error("c: registry down".into())),
        ]);
        assert_eq!(
            r.progress,
            Progress::Failed {
                reason: "1 of 3 node image(s) missing: b; 1 could not be checked: c: registry down".into(),
                retryable: true
            }
        );
        assert_eq!(
            r.images[1],
            NodeImageStatus { name: "b".into(), ready: false, message: "not found in http://r".into() }
        );
        assert!(r.images[0].ready && !r.images[2].ready);
        assert_eq!(summarise(vec![("a".into(), Checked::Present)]).progress, Progress::Ready);
    }
}
