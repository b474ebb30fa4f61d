//! The `docker` plug-in against a loopback fake OCI registry (axum on 127.0.0.1, port 0):
//! present, missing, the bearer-token dance, registry down, slow checks as tracked tasks.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use clusterstack::api::NodeImageStatus;
use clusterstack::provider::docker::DockerSettings;
use clusterstack::provider::{
    DockerProvider, Gate, GateConfig, GateState, NodeImageProvider, NodeImagesFile, Progress, ProviderRegistry,
    ReleaseContext,
};
use clusterstack::registry::{Credentials, RegistryConfig};
use clusterstack::release::{ReleaseId, ReleaseMetadata};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const TOKEN: &str = "fake-registry-token";

/// One request the fake registry answered.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: String,
    accept: String,
    authorization: String,
}

#[derive(Default)]
struct FakeState {
    /// `repository:reference` present in the registry.
    manifests: BTreeSet<String>,
    /// Require a bearer token on manifests (the Docker Hub way).
    bearer: bool,
    /// Basic credentials the token service wants (`None`: anonymous tokens).
    token_credentials: Option<String>,
    latency: Duration,
    /// The token the token service hands out and manifests accept.
    token: String,
    seen: Vec<Seen>,
    addr: Option<SocketAddr>,
}

#[derive(Clone)]
struct FakeRegistry {
    state: Arc<Mutex<FakeState>>,
    addr: SocketAddr,
}

impl FakeRegistry {
    async fn start(manifests: &[&str]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(FakeState {
            manifests: manifests.iter().map(|s| s.to_string()).collect(),
            addr: Some(addr),
            token: TOKEN.into(),
            ..Default::default()
        }));
        let app = axum::Router::new().fallback(handle).with_state(state.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { state, addr }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn with(&self, f: impl FnOnce(&mut FakeState)) -> &Self {
        f(&mut self.state.lock().unwrap());
        self
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn count(&self, method: &str, path_prefix: &str) -> usize {
        self.seen().iter().filter(|s| s.method == method && s.path.starts_with(path_prefix)).count()
    }
}

async fn handle(State(state): State<Arc<Mutex<FakeState>>>, req: Request) -> Response {
    let header =
        |h: &HeaderMap, n: header::HeaderName| h.get(n).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let seen = Seen {
        method: req.method().to_string(),
        path: req.uri().path().to_string(),
        query: req.uri().query().unwrap_or_default().to_string(),
        accept: header(req.headers(), header::ACCEPT),
        authorization: header(req.headers(), header::AUTHORIZATION),
    };
    let latency = {
        let mut s = state.lock().unwrap();
        s.seen.push(seen.clone());
        s.latency
    };
    tokio::time::sleep(latency).await;
    let s = state.lock().unwrap();
    if seen.path == "/token" {
        if let Some(expected) = &s.token_credentials
            && seen.authorization != *expected
        {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        return (
            [(header::CONTENT_TYPE, "application/json")],
            format!(r#"{{"token":"{}","expires_in":300}}"#, s.token),
        )
            .into_response();
    }
    let Some(rest) = seen.path.strip_prefix("/v2/") else { return StatusCode::NOT_FOUND.into_response() };
    let Some((repo, reference)) = rest.rsplit_once("/manifests/") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if s.bearer && seen.authorization != format!("Bearer {}", s.token) {
        let realm = format!("http://{}/token", s.addr.unwrap());
        let challenge = format!(r#"Bearer realm="{realm}",service="fake-registry",scope="repository:{repo}:pull""#);
        return (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, challenge)]).into_response();
    }
    if req.method() != Method::HEAD {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if s.manifests.contains(&format!("{repo}:{reference}")) {
        (
            [
                (header::CONTENT_TYPE, "application/vnd.oci.image.index.v1+json"),
                (header::HeaderName::from_static("docker-content-digest"), "sha256:0123"),
            ],
            "",
        )
            .into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}

fn metadata() -> ReleaseMetadata {
    ReleaseMetadata::parse(
        "metadata.yaml",
        "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: v2\n  kubernetes: v1.27.3\n  components:\n    clusterAddon: v1\n    nodeImage: v2\n",
    )
    .unwrap()
}

fn ctx(node_images: &str) -> ReleaseContext {
    clusterstack::install_crypto_provider();
    // The docker plug-in does not talk to the API server.
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let file = NodeImagesFile::parse("docker-ferrol-1-27-v2/node-images.yaml", node_images).unwrap();
    ReleaseContext::new(ReleaseId::from_tag("docker-ferrol-1-27-v2").unwrap(), "cluster-stacks", metadata(), client)
        .with_node_images(Some(file))
}

fn plugin(registry: RegistryConfig) -> DockerProvider {
    DockerProvider::with_settings(DockerSettings {
        registry,
        wait_budget: Duration::from_secs(10),
        ..Default::default()
    })
}

fn override_to(fake: &FakeRegistry) -> RegistryConfig {
    RegistryConfig { override_url: Some(fake.url()), ..Default::default() }
}

fn image(name: &str, ready: bool, message: &str) -> NodeImageStatus {
    NodeImageStatus { name: name.into(), ready, message: message.into() }
}

#[tokio::test]
async fn present_images_pass_and_missing_ones_are_named() {
    let fake = FakeRegistry::start(&["kindest/node:v1.27.3", "library/ubuntu:22.04"]).await;
    let p = plugin(override_to(&fake));

    let report = p.ensure(&ctx("- kindest/node:v1.27.3\n- ubuntu:22.04\n")).await.unwrap();
    assert_eq!(report.progress, Progress::Ready);
    assert_eq!(report.images, [image("kindest/node:v1.27.3", true, ""), image("ubuntu:22.04", true, "")]);
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    for s in &seen {
        assert_eq!(s.method, "HEAD");
        for media in [
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        ] {
            assert!(s.accept.contains(media), "Accept {:?} lacks {media}", s.accept);
        }
    }
    assert_eq!(fake.count("HEAD", "/v2/library/ubuntu/manifests/22.04"), 1);

    let report = p.ensure(&ctx("images:\n  - kindest/node:v1.27.3\n  - name: kindest/node:v1.99.0\n")).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::Failed { reason: "1 of 2 node image(s) missing: kindest/node:v1.99.0".into(), retryable: true }
    );
    assert_eq!(report.images[1], image("kindest/node:v1.99.0", false, &format!("not found in {}", fake.url())));
    assert!(report.images[0].ready);
}

#[tokio::test]
async fn the_samples_own_node_images_file_passes_the_gate() {
    // The sample release's file as published (`nodeImages:` with `kubernetesVersion`), not
    // rewritten to the list form: the docker plug-in must gate it without `noProvider: true`.
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("releases/docker-ferrol-1-27-v3/node-images.yaml"),
    )
    .unwrap();
    let fake = FakeRegistry::start(&["kindest/node:v1.27.11"]).await;
    let p = plugin(override_to(&fake));
    let report = p.ensure(&ctx(&text)).await.unwrap();
    assert_eq!(report.progress, Progress::Ready);
    assert_eq!(report.images, [image("kindest/node:v1.27.11", true, "")]);
    assert_eq!(fake.count("HEAD", "/v2/kindest/node/manifests/v1.27.11"), 1);
}

#[tokio::test]
async fn the_bearer_token_dance() {
    let fake = FakeRegistry::start(&["kindest/node:v1.27.3"]).await;
    fake.with(|s| s.bearer = true);
    let p = plugin(override_to(&fake));
    let c = ctx("- kindest/node:v1.27.3\n");

    assert_eq!(p.ensure(&c).await.unwrap().progress, Progress::Ready);
    let seen = fake.seen();
    let paths: Vec<(&str, &str)> = seen.iter().map(|s| (s.method.as_str(), s.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            ("HEAD", "/v2/kindest/node/manifests/v1.27.3"),
            ("GET", "/token"),
            ("HEAD", "/v2/kindest/node/manifests/v1.27.3")
        ]
    );
    // The token request carries the challenge's service and scope, anonymously.
    assert_eq!(seen[1].query, "service=fake-registry&scope=repository%3Akindest%2Fnode%3Apull");
    assert_eq!(seen[1].authorization, "");
    assert_eq!(seen[2].authorization, format!("Bearer {TOKEN}"));

    // A second check sends the cached token up front: one request, no new token.
    fake.with(|s| s.seen.clear());
    assert_eq!(p.ensure(&c).await.unwrap().progress, Progress::Ready);
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].authorization.as_str()), ("HEAD", format!("Bearer {TOKEN}").as_str()));

    // The registry stops accepting that token (rotated): a new one is fetched and the check passes.
    fake.with(|s| s.token = "rotated-token".into());
    let r = p.ensure(&c).await.unwrap();
    assert_eq!(r.progress, Progress::Ready, "{:#?}", fake.seen());
    assert_eq!(fake.count("GET", "/token"), 1, "one new token since the log was cleared");
    assert_eq!(fake.seen().last().unwrap().authorization, "Bearer rotated-token");
}

#[tokio::test]
async fn the_token_service_with_credentials_and_refusing_them() {
    let fake = FakeRegistry::start(&["org/private:1"]).await;
    // "user:pass" in base64.
    fake.with(|s| {
        s.bearer = true;
        s.token_credentials = Some("Basic dXNlcjpwYXNz".into());
    });
    let anonymous = plugin(override_to(&fake));
    let report = anonymous.ensure(&ctx("- example.com/org/private:1\n")).await.unwrap();
    let Progress::Failed { reason, retryable: true } = &report.progress else { panic!("{report:?}") };
    assert!(
        reason.contains("example.com/org/private:1")
            && reason.contains("getting a token from")
            && reason.contains("401"),
        "{reason}"
    );
    assert!(!report.images[0].ready);

    let mut config = override_to(&fake);
    config.credentials.insert("example.com".into(), Credentials { username: "user".into(), password: "pass".into() });
    let report = plugin(config).ensure(&ctx("- example.com/org/private:1\n")).await.unwrap();
    assert_eq!(report.progress, Progress::Ready);
}

#[tokio::test]
async fn a_registry_that_is_down_is_a_retryable_failure_naming_it() {
    // A port that was just free: nothing listens there.
    let addr = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
    let p = plugin(RegistryConfig { override_url: Some(format!("http://{addr}")), ..Default::default() });
    let report = p.ensure(&ctx("- kindest/node:v1.27.3\n")).await.unwrap();
    let Progress::Failed { reason, retryable: true } = &report.progress else { panic!("{report:?}") };
    assert!(reason.starts_with("1 could not be checked: docker.io/kindest/node:v1.27.3: registry"), "{reason}");
    assert!(reason.contains(&addr.to_string()) && reason.contains("unreachable"), "{reason}");
    // Through the gate: a retryable failure, asked again later.
    let mut registry = ProviderRegistry::empty();
    registry.register(Arc::new(p));
    let gate = Gate::new(registry, GateConfig::default());
    let out = gate
        .check(&ctx("- kindest/node:v1.27.3\n"), false, None, None, &Time("2026-01-01T00:00:00Z".parse().unwrap()))
        .await;
    assert_eq!(out.state, GateState::Failed { retryable: true });
    assert_eq!(out.requeue_after, Some(GateConfig::default().retry_after));
}

#[tokio::test]
async fn per_host_endpoints_route_each_image_to_its_registry() {
    let hub = FakeRegistry::start(&["kindest/node:v1.27.3"]).await;
    let ghcr = FakeRegistry::start(&["org/node:v2"]).await;
    let config = RegistryConfig {
        endpoints: BTreeMap::from([("docker.io".into(), hub.url()), ("ghcr.io".into(), ghcr.url())]),
        ..Default::default()
    };
    let report = plugin(config).ensure(&ctx("- kindest/node:v1.27.3\n- ghcr.io/org/node:v2\n")).await.unwrap();
    assert_eq!(report.progress, Progress::Ready);
    assert_eq!(hub.count("HEAD", "/v2/kindest/node/manifests/v1.27.3"), 1);
    assert_eq!(ghcr.count("HEAD", "/v2/org/node/manifests/v2"), 1);
    assert_eq!((hub.seen().len(), ghcr.seen().len()), (1, 1));
}

#[tokio::test]
async fn a_slow_registry_is_checked_in_a_tracked_task_without_blocking() {
    let fake = FakeRegistry::start(&["kindest/node:v1.27.3"]).await;
    fake.with(|s| s.latency = Duration::from_millis(400));
    let p = DockerProvider::with_settings(DockerSettings {
        registry: override_to(&fake),
        wait_budget: Duration::from_millis(20),
        recheck_after: Duration::from_secs(1),
        ..Default::default()
    });
    let mut c = ctx("- kindest/node:v1.27.3\n");
    let report = p.ensure(&c).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::InProgress {
            message: "checking 1 node image(s) in their registries".into(),
            recheck_after: Duration::from_secs(1)
        }
    );
    assert_eq!(report.images, [image("kindest/node:v1.27.3", false, "checking")]);
    assert_eq!(p.tracked_checks(), 1);
    // While it runs, the previous status is shown as it was.
    c = c.with_previous(vec![image("kindest/node:v1.27.3", true, "")]);
    let again = p.ensure(&c).await.unwrap();
    assert_eq!(again.images, [image("kindest/node:v1.27.3", true, "")]);
    // Polling finds the result; the check ran once.
    let mut progress = again.progress;
    for _ in 0..200 {
        if progress == Progress::Ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        progress = p.ensure(&c).await.unwrap().progress;
    }
    assert_eq!(progress, Progress::Ready);
    assert_eq!(fake.count("HEAD", "/v2/"), 1);
    assert_eq!(p.tracked_checks(), 0);
}

#[tokio::test]
async fn an_invalid_list_fails_permanently_without_requests() {
    let fake = FakeRegistry::start(&[]).await;
    let p = plugin(override_to(&fake));
    let report = p.ensure(&ctx("- Kindest/Node:v1\n")).await.unwrap();
    assert_eq!(
        report.progress,
        Progress::Failed {
            reason: "docker-ferrol-1-27-v2/node-images.yaml: invalid image reference \"Kindest/Node:v1\": \
                     the repository must be lower-case path components"
                .into(),
            retryable: false
        }
    );
    let report = p.ensure(&ctx("images: 3\n")).await.unwrap();
    assert!(matches!(report.progress, Progress::Failed { retryable: false, .. }), "{report:?}");
    assert!(fake.seen().is_empty());

    // No node-images.yaml at all: nothing to check.
    let mut c = ctx("[]");
    c.node_images = None;
    let report = p.ensure(&c).await.unwrap();
    assert_eq!((report.progress, report.images), (Progress::Ready, vec![]));
    assert!(fake.seen().is_empty());
}
