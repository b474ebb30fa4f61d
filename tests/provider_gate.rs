//! The node-image gate with a scripted plug-in: progress, failures, the deadline, a restart that
//! resumes from the status alone, plug-in selection and cleanup.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clusterstack::api::conditions::{FALSE, TRUE, find};
use clusterstack::api::{ClusterStackReleaseStatus, NodeImageStatus, ObjectRef};
use clusterstack::provider::{
    Cleanup, Gate, GateConfig, GateState, NODE_IMAGES_READY, NodeImageProvider, NodeImagesFile, Progress,
    ProviderError, ProviderRegistry, ReleaseContext, Report, reason,
};
use clusterstack::release::{ReleaseId, ReleaseMetadata};
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const NS: &str = "cluster-stacks";

/// The "other system" a scripted plug-in drives: it builds one image per pass and remembers what
/// it built, like an image service would. It outlives plug-in instances (a restart of the operator).
#[derive(Default)]
struct BuildService {
    builds: Mutex<BTreeMap<String, usize>>,
}

impl BuildService {
    fn build(&self, image: &str) {
        *self.builds.lock().unwrap().entry(image.to_string()).or_insert(0) += 1;
    }
    fn builds(&self) -> BTreeMap<String, usize> {
        self.builds.lock().unwrap().clone()
    }
}

/// A plug-in that knows nothing itself: from `ctx.previous` (the status) it sees which images are
/// done, builds the next one and answers in progress, or ready when all are done.
struct Scripted {
    name: String,
    service: Arc<BuildService>,
    calls: AtomicUsize,
    cleanups: AtomicUsize,
    /// Answer this instead, when set.
    fixed: Option<Progress>,
    /// Sleep this long before answering.
    delay: Duration,
}

impl Scripted {
    fn new(name: &str, service: Arc<BuildService>) -> Self {
        Self {
            name: name.into(),
            service,
            calls: AtomicUsize::new(0),
            cleanups: AtomicUsize::new(0),
            fixed: None,
            delay: Duration::ZERO,
        }
    }
    fn answering(mut self, p: Progress) -> Self {
        self.fixed = Some(p);
        self
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl NodeImageProvider for Scripted {
    fn name(&self) -> &str {
        &self.name
    }

    fn ensure<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Report, ProviderError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.delay).await;
            if let Some(p) = &self.fixed {
                return Ok(Report::new(p.clone()));
            }
            let wanted = ctx.node_images.as_ref().map(|f| f.images()).transpose().unwrap().unwrap_or_default();
            let done = |n: &String| ctx.previous.iter().any(|p| &p.name == n && p.ready);
            let mut images: Vec<NodeImageStatus> = wanted
                .iter()
                .map(|n| NodeImageStatus { name: n.clone(), ready: done(n), message: String::new() })
                .collect();
            if let Some(next) = images.iter_mut().find(|i| !i.ready) {
                self.service.build(&next.name);
                next.ready = true;
            }
            let ready = images.iter().filter(|i| i.ready).count();
            let progress = if ready == images.len() {
                Progress::Ready
            } else {
                Progress::InProgress {
                    message: format!("built {ready} of {} image(s)", images.len()),
                    recheck_after: Duration::from_secs(2),
                }
            };
            Ok(Report::new(progress).with_images(images))
        })
    }

    fn cleanup<'a>(&'a self, _ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Cleanup, ProviderError>> {
        self.cleanups.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Cleanup::Done) })
    }
}

fn client() -> kube::Client {
    clusterstack::install_crypto_provider();
    // Never contacted: the scripted plug-ins do not use it.
    kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap()
}

fn metadata() -> ReleaseMetadata {
    ReleaseMetadata::parse(
        "metadata.yaml",
        "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: v2\n  kubernetes: v1.27.3\n  components:\n    clusterAddon: v1\n    nodeImage: v2\n",
    )
    .unwrap()
}

fn ctx(provider: &str, status: &ClusterStackReleaseStatus) -> ReleaseContext {
    let id = ReleaseId::from_tag(&format!("{provider}-ferrol-1-27-v2")).unwrap();
    let file = NodeImagesFile::parse("node-images.yaml", "- img/a:1\n- img/b:1\n- img/c:1\n").unwrap();
    ReleaseContext::new(id, NS, metadata(), client())
        .with_node_images(Some(file))
        .with_previous(status.node_images.clone())
}

fn time(s: &str) -> Time {
    Time(s.parse().unwrap())
}

fn at(minutes: i64) -> Time {
    Time(time("2026-01-01T00:00:00Z").0 + jiff::SignedDuration::from_mins(minutes))
}

fn gate_with(plugin: Arc<dyn NodeImageProvider>, config: GateConfig) -> Gate {
    let mut registry = ProviderRegistry::empty();
    registry.register(plugin);
    Gate::new(registry, config)
}

/// One pass: ask the gate and record the outcome in the status, as the controller does.
async fn pass(gate: &Gate, status: &mut ClusterStackReleaseStatus, now: &Time) -> clusterstack::provider::GateOutcome {
    let out = gate.check(&ctx("scripted", status), false, Some(status), Some(1), now).await;
    out.record(status, now);
    out
}

fn cond(status: &ClusterStackReleaseStatus) -> (String, String, String) {
    let c = find(&status.conditions, NODE_IMAGES_READY).expect("NodeImagesReady is set");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[tokio::test]
async fn in_progress_then_ready() {
    let service = Arc::new(BuildService::default());
    let gate = gate_with(Arc::new(Scripted::new("scripted", service.clone())), GateConfig::default());
    let mut status = ClusterStackReleaseStatus::default();

    let out = pass(&gate, &mut status, &at(0)).await;
    assert_eq!(out.state, GateState::Waiting);
    assert!(!out.passed());
    assert_eq!(out.requeue_after, Some(Duration::from_secs(2)));
    assert_eq!(cond(&status), (FALSE.into(), reason::PROGRESSING.into(), "built 1 of 3 image(s)".into()));
    assert_eq!(status.node_images.iter().map(|i| i.ready).collect::<Vec<_>>(), [true, false, false]);

    pass(&gate, &mut status, &at(1)).await;
    let out = pass(&gate, &mut status, &at(2)).await;
    assert_eq!(out.state, GateState::Passed);
    assert!(out.passed());
    assert_eq!(cond(&status).0, TRUE);
    assert_eq!(cond(&status).1, reason::READY);
    assert!(status.node_images.iter().all(|i| i.ready));
    assert_eq!(service.builds().values().copied().collect::<Vec<_>>(), [1, 1, 1]);
    // The transition to True is stamped with the pass that saw it.
    assert_eq!(find(&status.conditions, NODE_IMAGES_READY).unwrap().last_transition_time, Some(at(2)));

    // A pass that observes nothing new changes nothing (no status write).
    let before = status.clone();
    let out = pass(&gate, &mut status, &at(3)).await;
    assert!(!out.record(&mut status, &at(3)));
    assert_eq!(status, before);
}

#[tokio::test]
async fn failures_retryable_and_permanent() {
    let service = Arc::new(BuildService::default());
    let retryable = Scripted::new("scripted", service.clone())
        .answering(Progress::Failed { reason: "quota exceeded building img/a:1".into(), retryable: true });
    let gate = gate_with(Arc::new(retryable), GateConfig::default());
    let mut status = ClusterStackReleaseStatus::default();
    let out = pass(&gate, &mut status, &at(0)).await;
    assert_eq!(out.state, GateState::Failed { retryable: true });
    assert_eq!(out.requeue_after, Some(GateConfig::default().retry_after));
    assert_eq!(cond(&status), (FALSE.into(), reason::FAILED.into(), "quota exceeded building img/a:1".into()));

    let permanent = Scripted::new("scripted", service)
        .answering(Progress::Failed { reason: "node-images.yaml: bad".into(), retryable: false });
    let gate = gate_with(Arc::new(permanent), GateConfig::default());
    let out = pass(&gate, &mut status, &at(90)).await;
    assert_eq!(out.state, GateState::Failed { retryable: false });
    assert_eq!(out.requeue_after, None);
    // Permanent failures have no deadline: they say why, not that time ran out.
    assert_eq!(cond(&status).1, reason::FAILED_PERMANENTLY);
}

#[tokio::test]
async fn times_out_past_the_deadline_and_recovers_when_ready() {
    let service = Arc::new(BuildService::default());
    let stuck = Arc::new(Scripted::new("scripted", service.clone()).answering(Progress::InProgress {
        message: "image build queued".into(),
        recheck_after: Duration::from_secs(5),
    }));
    let config = GateConfig { deadline: Duration::from_secs(30 * 60), ..Default::default() };
    let gate = gate_with(stuck, config.clone());
    let mut status = ClusterStackReleaseStatus::default();
    assert_eq!(pass(&gate, &mut status, &at(0)).await.state, GateState::Waiting);
    assert_eq!(pass(&gate, &mut status, &at(29)).await.state, GateState::Waiting);
    let out = pass(&gate, &mut status, &at(30)).await;
    assert_eq!(out.state, GateState::TimedOut);
    assert!(!out.passed());
    let (s, r, m) = cond(&status);
    assert_eq!((s.as_str(), r.as_str()), (FALSE, reason::TIMED_OUT));
    assert_eq!(m, "node images not ready after 30m: image build queued");
    // Timed out is still asked again, and turns ready when the plug-in is.
    assert_eq!(out.requeue_after, Some(config.retry_after));
    let gate = gate_with(Arc::new(Scripted::new("scripted", service).answering(Progress::Ready)), config);
    assert_eq!(pass(&gate, &mut status, &at(45)).await.state, GateState::Passed);
    assert_eq!(cond(&status).0, TRUE);
}

/// What the API server keeps of a status: its JSON.
fn stored(status: &ClusterStackReleaseStatus) -> ClusterStackReleaseStatus {
    serde_json::from_value(serde_json::to_value(status).unwrap()).unwrap()
}

#[tokio::test]
async fn a_restart_resumes_from_the_status_alone() {
    let service = Arc::new(BuildService::default());
    let mut status = ClusterStackReleaseStatus::default();
    {
        let gate = gate_with(Arc::new(Scripted::new("scripted", service.clone())), GateConfig::default());
        assert_eq!(pass(&gate, &mut status, &at(0)).await.message, "built 1 of 3 image(s)");
    }
    // The operator restarts: a fresh plug-in, registry and gate; only the stored status is left.
    let mut status = stored(&status);
    let plugin = Arc::new(Scripted::new("scripted", service.clone()));
    let gate = gate_with(plugin.clone(), GateConfig::default());
    assert_eq!(pass(&gate, &mut status, &at(4)).await.message, "built 2 of 3 image(s)");
    assert_eq!(pass(&gate, &mut status, &at(5)).await.state, GateState::Passed);
    assert!(status.node_images.iter().all(|i| i.ready));
    // Nothing was built twice.
    assert_eq!(service.builds().values().copied().collect::<Vec<_>>(), [1, 1, 1]);
    assert_eq!(plugin.calls(), 2);
}

#[tokio::test]
async fn the_deadline_survives_a_restart() {
    let stuck = || {
        Arc::new(Scripted::new("scripted", Arc::new(BuildService::default())).answering(Progress::InProgress {
            message: "image build queued".into(),
            recheck_after: Duration::from_secs(5),
        }))
    };
    let config = GateConfig { deadline: Duration::from_secs(10 * 60), ..Default::default() };
    let mut status = ClusterStackReleaseStatus::default();
    assert_eq!(pass(&gate_with(stuck(), config.clone()), &mut status, &at(0)).await.state, GateState::Waiting);
    // Restarted at minute 8: the clock still counts from minute 0.
    let mut status = stored(&status);
    let gate = gate_with(stuck(), config);
    assert_eq!(pass(&gate, &mut status, &at(9)).await.state, GateState::Waiting);
    assert_eq!(pass(&gate, &mut status, &at(10)).await.state, GateState::TimedOut);
}

#[tokio::test]
async fn selection_no_provider_unknown_provider_and_provider_ref() {
    let service = Arc::new(BuildService::default());
    let named = Arc::new(Scripted::new("scripted", service.clone()).answering(Progress::Ready));
    let external = Arc::new(Scripted::new("external", service).answering(Progress::InProgress {
        message: "waiting for the provider object".into(),
        recheck_after: Duration::from_secs(30),
    }));
    let mut registry = ProviderRegistry::empty();
    registry.register(named.clone());
    registry.set_external(external.clone());
    let gate = Gate::new(registry, GateConfig::default());
    let status = ClusterStackReleaseStatus::default();

    // noProvider: no gate, the plug-in is not asked, the condition is removed.
    let out = gate.check(&ctx("scripted", &status), true, None, None, &at(0)).await;
    assert_eq!(out.state, GateState::NoGate);
    assert!(out.passed() && out.condition.is_none());
    assert_eq!(named.calls(), 0);

    // A provider without a plug-in and without providerRef: no gate.
    let out = gate.check(&ctx("openstack", &status), false, None, None, &at(0)).await;
    assert_eq!(out.state, GateState::NoGate);

    // A providerRef: the external-operator plug-in, even where a named plug-in exists.
    let with_ref = ctx("scripted", &status).with_provider_ref(Some(ObjectRef {
        api_version: Some("infrastructure.clusterstack.x-k8s.io/v1alpha1".into()),
        kind: Some("DockerClusterStackReleaseTemplate".into()),
        name: Some("tpl".into()),
        ..Default::default()
    }));
    let out = gate.check(&with_ref, false, None, None, &at(0)).await;
    assert_eq!(out.state, GateState::Waiting);
    assert_eq!((named.calls(), external.calls()), (0, 1));
    // But noProvider wins over providerRef.
    assert_eq!(gate.check(&with_ref, true, None, None, &at(0)).await.state, GateState::NoGate);

    let out = gate.check(&ctx("scripted", &status), false, None, None, &at(0)).await;
    assert_eq!(out.state, GateState::Passed);
    assert_eq!(named.calls(), 1);
}

#[tokio::test]
async fn a_slow_plugin_does_not_block_the_reconcile() {
    let mut slow = Scripted::new("scripted", Arc::new(BuildService::default())).answering(Progress::Ready);
    slow.delay = Duration::from_secs(30);
    let config = GateConfig { call_timeout: Duration::from_millis(50), ..Default::default() };
    let gate = gate_with(Arc::new(slow), config.clone());
    let started = std::time::Instant::now();
    let mut status = ClusterStackReleaseStatus::default();
    let out = pass(&gate, &mut status, &at(0)).await;
    assert!(started.elapsed() < Duration::from_secs(10), "the gate waited for the plug-in");
    assert_eq!(out.state, GateState::Waiting);
    assert!(out.message.contains("did not answer within 50ms"), "{}", out.message);
    assert_eq!(out.requeue_after, Some(config.retry_after));
}

#[tokio::test]
async fn cleanup_asks_the_plugin_unless_there_is_no_gate() {
    let plugin = Arc::new(Scripted::new("scripted", Arc::new(BuildService::default())));
    let gate = gate_with(plugin.clone(), GateConfig::default());
    let status = ClusterStackReleaseStatus::default();
    assert_eq!(gate.cleanup(&ctx("scripted", &status), true).await, Cleanup::Done);
    assert_eq!(plugin.cleanups.load(Ordering::SeqCst), 0);
    assert_eq!(gate.cleanup(&ctx("scripted", &status), false).await, Cleanup::Done);
    assert_eq!(plugin.cleanups.load(Ordering::SeqCst), 1);
}
