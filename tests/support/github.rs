//! A fake GitHub for tests: the releases API and a separate asset-storage host, both on
//! 127.0.0.1 with an ephemeral port, sharing one state that tests change at runtime.
//!
//! Part of the test support (`support::github`). What it does like GitHub: paging (`per_page`, `page`,
//! `Link: rel="next"`), `ETag`/`If-None-Match` → 304, `x-ratelimit-*` headers, asset downloads
//! that answer bytes only to `Accept: application/octet-stream`, optionally through a 302 to the
//! storage host, which (like S3 with a signed URL) refuses requests carrying `Authorization`.
//! What it adds for tests: a log of every request, injected failures and rate-limit answers,
//! latency, truncated bodies.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use sha2::{Digest, Sha256};

/// Which endpoint a request reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /repos/{owner}/{repo}/releases`
    Releases,
    /// `GET /repos/{owner}/{repo}/releases/assets/{id}`
    Asset,
    /// `GET /download/{id}` on the storage host.
    Storage,
    /// `GET /repos/{owner}/{repo}/attestations/{subject_digest}`
    Attestations,
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub route: Route,
    /// Path and query, e.g. `/repos/o/r/releases?per_page=100&page=2`.
    pub uri: String,
    pub authorization: Option<String>,
    pub accept: Option<String>,
    pub if_none_match: Option<String>,
    pub api_version: Option<String>,
    pub user_agent: Option<String>,
}

/// An asset to publish. `digest` defaults to the real `sha256:<hex>` of `content`.
#[derive(Debug, Clone)]
pub struct FakeAsset {
    pub name: String,
    pub content: Bytes,
    pub digest: Option<String>,
}

impl FakeAsset {
    pub fn new(name: &str, content: impl Into<Bytes>) -> Self {
        let content = content.into();
        let digest = Some(format!("sha256:{}", hex::encode(Sha256::digest(&content))));
        Self { name: name.to_string(), content, digest }
    }

    /// Like an asset uploaded before GitHub computed digests.
    pub fn without_digest(mut self) -> Self {
        self.digest = None;
        self
    }
}

/// A release to publish.
#[derive(Debug, Clone)]
pub struct FakeRelease {
    pub tag: String,
    pub draft: bool,
    pub prerelease: bool,
    pub assets: Vec<FakeAsset>,
}

impl FakeRelease {
    pub fn new(tag: &str) -> Self {
        Self { tag: tag.to_string(), draft: false, prerelease: false, assets: Vec::new() }
    }
    pub fn draft(mut self) -> Self {
        self.draft = true;
        self
    }
    pub fn prerelease(mut self) -> Self {
        self.prerelease = true;
        self
    }
    pub fn asset(mut self, asset: FakeAsset) -> Self {
        self.assets.push(asset);
        self
    }
}

#[derive(Debug, Clone)]
struct StoredAsset {
    id: u64,
    asset: FakeAsset,
}

#[derive(Debug, Clone)]
struct StoredRelease {
    id: u64,
    release: FakeRelease,
    assets: Vec<StoredAsset>,
}

/// An injected rate-limit answer for API requests.
#[derive(Debug, Clone, Copy)]
enum RateLimit {
    /// 403, `x-ratelimit-remaining: 0`, `x-ratelimit-reset: reset` until that epoch second.
    Exhausted { reset: i64 },
    /// 429 with `retry-after: seconds` until the instant.
    RetryAfter { seconds: u64, until: tokio::time::Instant },
}

#[derive(Debug)]
struct State {
    api_url: String,
    storage_url: String,
    /// Newest first, as GitHub lists them.
    repos: HashMap<(String, String), Vec<StoredRelease>>,
    next_id: u64,
    requests: Vec<RecordedRequest>,
    failures: HashMap<Route, VecDeque<StatusCode>>,
    rate_limit: Option<RateLimit>,
    remaining: u64,
    latency: Duration,
    max_per_page: usize,
    redirect_downloads: bool,
    truncate_downloads: bool,
    /// Attestation bundles by repository and subject digest (`sha256:<hex>`), oldest first.
    attestations: HashMap<(String, String, String), Vec<serde_json::Value>>,
}

/// The running fake; its servers stop when it is dropped.
pub struct FakeGitHub {
    state: Arc<Mutex<State>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

const RATE_LIMIT: u64 = 5000;

impl FakeGitHub {
    /// Starts the API and the storage host on 127.0.0.1, ephemeral ports.
    pub async fn start() -> Self {
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake API");
        let storage = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the fake storage");
        let state = Arc::new(Mutex::new(State {
            api_url: format!("http://{}", api.local_addr().expect("address")),
            storage_url: format!("http://{}", storage.local_addr().expect("address")),
            repos: HashMap::new(),
            next_id: 1,
            requests: Vec::new(),
            failures: HashMap::new(),
            rate_limit: None,
            remaining: RATE_LIMIT,
            latency: Duration::ZERO,
            max_per_page: 100,
            redirect_downloads: false,
            truncate_downloads: false,
            attestations: HashMap::new(),
        }));
        let api_app = Router::new()
            .route("/repos/{owner}/{repo}/releases", get(releases))
            .route("/repos/{owner}/{repo}/releases/assets/{id}", get(asset))
            .route("/repos/{owner}/{repo}/attestations/{digest}", get(attestations))
            .with_state(state.clone());
        let storage_app = Router::new().route("/download/{id}", get(storage_download)).with_state(state.clone());
        let tasks = vec![
            tokio::spawn(async move {
                let _ = axum::serve(api, api_app).await;
            }),
            tokio::spawn(async move {
                let _ = axum::serve(storage, storage_app).await;
            }),
        ];
        Self { state, tasks }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The API base URL, to use as `GitHubConfig::api_url`.
    pub fn api_url(&self) -> String {
        self.state().api_url.clone()
    }

    /// The storage host's base URL.
    pub fn storage_url(&self) -> String {
        self.state().storage_url.clone()
    }

    /// The address of the API server.
    pub fn api_addr(&self) -> SocketAddr {
        self.api_url().trim_start_matches("http://").parse().expect("address")
    }

    /// Publishes a release as the newest one; returns the ids of its assets, in order.
    pub fn add_release(&self, owner: &str, repo: &str, release: FakeRelease) -> Vec<u64> {
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        let assets: Vec<StoredAsset> = release
            .assets
            .iter()
            .map(|asset| {
                let id = state.next_id;
                state.next_id += 1;
                StoredAsset { id, asset: asset.clone() }
            })
            .collect();
        let ids = assets.iter().map(|a| a.id).collect();
        state
            .repos
            .entry((owner.to_string(), repo.to_string()))
            .or_default()
            .insert(0, StoredRelease { id, release, assets });
        ids
    }

    /// Creates an empty repository (listing it answers `[]` instead of 404).
    pub fn add_repository(&self, owner: &str, repo: &str) {
        self.state().repos.entry((owner.to_string(), repo.to_string())).or_default();
    }

    /// Deletes a release; false when there was none with that tag.
    pub fn remove_release(&self, owner: &str, repo: &str, tag: &str) -> bool {
        let mut state = self.state();
        let Some(releases) = state.repos.get_mut(&(owner.to_string(), repo.to_string())) else { return false };
        let before = releases.len();
        releases.retain(|r| r.release.tag != tag);
        releases.len() != before
    }

    /// Adds an asset to a release; returns its id, None when the release does not exist.
    pub fn add_asset(&self, owner: &str, repo: &str, tag: &str, asset: FakeAsset) -> Option<u64> {
        let mut state = self.state();
        let id = state.next_id;
        let release =
            state.repos.get_mut(&(owner.to_string(), repo.to_string()))?.iter_mut().find(|r| r.release.tag == tag)?;
        release.release.assets.push(asset.clone());
        release.assets.push(StoredAsset { id, asset });
        state.next_id += 1;
        Some(id)
    }

    /// Deletes an asset by id; false when there was none.
    pub fn remove_asset(&self, owner: &str, repo: &str, id: u64) -> bool {
        let mut state = self.state();
        let Some(releases) = state.repos.get_mut(&(owner.to_string(), repo.to_string())) else { return false };
        for release in releases {
            if let Some(pos) = release.assets.iter().position(|a| a.id == id) {
                release.assets.remove(pos);
                release.release.assets.remove(pos);
                return true;
            }
        }
        false
    }

    /// Stores an attestation (a Sigstore bundle) in a repository for each of the artifact
    /// digests it names (`sha256:<hex>`), as GitHub's attestations API stores one per subject.
    pub fn add_attestation(&self, owner: &str, repo: &str, subjects: &[String], bundle: serde_json::Value) {
        let mut state = self.state();
        for subject in subjects {
            let key = (owner.to_string(), repo.to_string(), subject.clone());
            state.attestations.entry(key).or_default().push(bundle.clone());
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state().requests.clone()
    }

    /// The requests that reached `route`.
    pub fn requests_to(&self, route: Route) -> Vec<RecordedRequest> {
        self.state().requests.iter().filter(|r| r.route == route).cloned().collect()
    }

    /// How many requests reached `route`.
    pub fn count(&self, route: Route) -> usize {
        self.state().requests.iter().filter(|r| r.route == route).count()
    }

    /// The next `times` requests to `route` answer `status` (after being counted).
    pub fn fail_next(&self, route: Route, status: u16, times: usize) {
        let status = StatusCode::from_u16(status).expect("a valid status");
        self.state().failures.entry(route).or_default().extend(std::iter::repeat_n(status, times));
    }

    /// API requests answer 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset: reset`
    /// until that epoch second has passed.
    pub fn exhaust_rate_limit_until(&self, reset: i64) {
        self.state().rate_limit = Some(RateLimit::Exhausted { reset });
    }

    /// Sets the `x-ratelimit-remaining` the next counted answer starts from (it is decremented
    /// before answering, so 1 makes the next answer say 0).
    pub fn set_remaining(&self, remaining: u64) {
        self.state().remaining = remaining;
    }

    /// API requests answer 429 with `retry-after: seconds` for that long.
    pub fn retry_after(&self, seconds: u64) {
        let until = tokio::time::Instant::now() + Duration::from_secs(seconds);
        self.state().rate_limit = Some(RateLimit::RetryAfter { seconds, until });
    }

    /// Every API answer is delayed this long (after the request is counted).
    pub fn set_latency(&self, latency: Duration) {
        self.state().latency = latency;
    }

    /// The largest page served, whatever `per_page` asks (GitHub's is 100).
    pub fn set_max_per_page(&self, max: usize) {
        self.state().max_per_page = max.max(1);
    }

    /// Asset downloads answer 302 to the storage host instead of the bytes.
    pub fn redirect_downloads(&self, on: bool) {
        self.state().redirect_downloads = on;
    }

    /// Downloads announce the full `Content-Length`, send half the bytes and drop the connection.
    pub fn truncate_downloads(&self, on: bool) {
        self.state().truncate_downloads = on;
    }
}

fn header_string(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// Records the request, then answers an injected rate limit or failure if one applies.
fn intercept(
    state: &Arc<Mutex<State>>,
    route: Route,
    uri: String,
    headers: &HeaderMap,
) -> (Option<Response>, Duration) {
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    state.requests.push(RecordedRequest {
        route,
        uri,
        authorization: header_string(headers, header::AUTHORIZATION),
        accept: header_string(headers, header::ACCEPT),
        if_none_match: header_string(headers, header::IF_NONE_MATCH),
        api_version: headers.get("x-github-api-version").and_then(|v| v.to_str().ok()).map(str::to_string),
        user_agent: header_string(headers, header::USER_AGENT),
    });
    let latency = if route == Route::Storage { Duration::ZERO } else { state.latency };
    if route != Route::Storage {
        match state.rate_limit {
            Some(RateLimit::Exhausted { reset }) if jiff::Timestamp::now().as_second() < reset => {
                let response = (
                    StatusCode::FORBIDDEN,
                    [
                        ("x-ratelimit-limit", RATE_LIMIT.to_string()),
                        ("x-ratelimit-remaining", "0".to_string()),
                        ("x-ratelimit-reset", reset.to_string()),
                    ],
                    r#"{"message":"API rate limit exceeded"}"#,
                );
                return (Some(response.into_response()), latency);
            }
            Some(RateLimit::RetryAfter { seconds, until }) if tokio::time::Instant::now() < until => {
                let response = (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", seconds.to_string())],
                    r#"{"message":"You have exceeded a secondary rate limit"}"#,
                );
                return (Some(response.into_response()), latency);
            }
            Some(_) => {
                state.rate_limit = None;
                state.remaining = RATE_LIMIT;
            }
            None => {}
        }
    }
    if let Some(status) = state.failures.get_mut(&route).and_then(VecDeque::pop_front) {
        return (Some((status, "injected failure").into_response()), latency);
    }
    (None, latency)
}

fn rate_headers(state: &mut State, counted: bool) -> [(&'static str, String); 3] {
    if counted {
        state.remaining = state.remaining.saturating_sub(1);
    }
    let reset = jiff::Timestamp::now().as_second() + 3600;
    [
        ("x-ratelimit-limit", RATE_LIMIT.to_string()),
        ("x-ratelimit-remaining", state.remaining.to_string()),
        ("x-ratelimit-reset", reset.to_string()),
    ]
}

fn query_param(query: &Option<String>, key: &str) -> Option<usize> {
    query.as_deref()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

async fn releases(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    Path((owner, repo)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let path = format!("/repos/{owner}/{repo}/releases");
    let uri = match &query {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let (answer, latency) = intercept(&state, Route::Releases, uri, &headers);
    tokio::time::sleep(latency).await;
    if let Some(answer) = answer {
        return answer;
    }
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let Some(all) = state.repos.get(&(owner, repo)).cloned() else {
        let rate = rate_headers(&mut state, true);
        return (StatusCode::NOT_FOUND, rate, r#"{"message":"Not Found"}"#).into_response();
    };
    let per_page = query_param(&query, "per_page").unwrap_or(30).clamp(1, state.max_per_page);
    let page = query_param(&query, "page").unwrap_or(1).max(1);
    let items: Vec<serde_json::Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|r| {
            serde_json::json!({
                "id": r.id,
                "tag_name": r.release.tag,
                "name": format!("Release {}", r.release.tag),
                "draft": r.release.draft,
                "prerelease": r.release.prerelease,
                "assets": r.assets.iter().map(|a| serde_json::json!({
                    "id": a.id,
                    "name": a.asset.name,
                    "size": a.asset.content.len(),
                    "digest": a.asset.digest,
                    "content_type": "application/octet-stream",
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let has_next = all.len() > page * per_page;
    let body = serde_json::to_vec(&items).expect("JSON");
    let etag = format!("\"{}\"", &hex::encode(Sha256::digest(&body))[..20]);
    if headers.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) == Some(etag.as_str()) {
        let rate = rate_headers(&mut state, false);
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)], rate).into_response();
    }
    let rate = rate_headers(&mut state, true);
    let mut response = (StatusCode::OK, rate, [(header::ETAG, etag)], body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if has_next {
        let base = &state.api_url;
        let link = format!(
            "<{base}{path}?per_page={per_page}&page={}>; rel=\"next\", <{base}{path}?per_page={per_page}&page={}>; rel=\"last\"",
            page + 1,
            all.len().div_ceil(per_page)
        );
        response.headers_mut().insert(header::LINK, HeaderValue::from_str(&link).expect("a header"));
    }
    response
}

fn find_asset(state: &State, owner: Option<(&str, &str)>, id: u64) -> Option<FakeAsset> {
    state
        .repos
        .iter()
        .filter(|((o, r), _)| owner.is_none_or(|(owner, repo)| owner == o && repo == r))
        .flat_map(|(_, releases)| releases.iter().flat_map(|r| r.assets.iter()))
        .find(|a| a.id == id)
        .map(|a| a.asset.clone())
}

/// The bytes of an asset; when truncating, half of them and then a broken connection.
fn serve_bytes(content: Bytes, truncate: bool) -> Response {
    let length = content.len();
    let body = if truncate {
        let half = content.slice(..length / 2);
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            vec![Ok(half), Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "truncated by the fake"))];
        // The pause lets the headers and the first half go out before the connection breaks.
        let stream = futures::StreamExt::then(futures::stream::iter(chunks), |chunk| async move {
            if chunk.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            chunk
        });
        Body::from_stream(stream)
    } else {
        Body::from(content)
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    response
}

async fn asset(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    Path((owner, repo, id)): Path<(String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let uri = format!("/repos/{owner}/{repo}/releases/assets/{id}");
    let (answer, latency) = intercept(&state, Route::Asset, uri, &headers);
    tokio::time::sleep(latency).await;
    if let Some(answer) = answer {
        return answer;
    }
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let rate = rate_headers(&mut state, true);
    let Some(asset) = find_asset(&state, Some((&owner, &repo)), id) else {
        return (StatusCode::NOT_FOUND, rate, r#"{"message":"Not Found"}"#).into_response();
    };
    if headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) != Some("application/octet-stream") {
        let json = serde_json::json!({"id": id, "name": asset.name, "size": asset.content.len()});
        return (StatusCode::OK, rate, axum::Json(json)).into_response();
    }
    if state.redirect_downloads {
        let location = format!("{}/download/{id}?signature=fake", state.storage_url);
        return (StatusCode::FOUND, rate, [(header::LOCATION, location)]).into_response();
    }
    let mut response = serve_bytes(asset.content, state.truncate_downloads);
    for (name, value) in rate {
        response.headers_mut().insert(name, HeaderValue::from_str(&value).expect("a header"));
    }
    response
}

async fn storage_download(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    Path(id): Path<u64>,
    headers: HeaderMap,
) -> Response {
    let (answer, _) = intercept(&state, Route::Storage, format!("/download/{id}"), &headers);
    if let Some(answer) = answer {
        return answer;
    }
    // Like a signed storage URL: a second credential is refused.
    if headers.contains_key(header::AUTHORIZATION) {
        return (StatusCode::BAD_REQUEST, "Only one auth mechanism allowed").into_response();
    }
    let state = state.lock().unwrap_or_else(|e| e.into_inner());
    match find_asset(&state, None, id) {
        Some(asset) => serve_bytes(asset.content, state.truncate_downloads),
        None => (StatusCode::NOT_FOUND, "no such blob").into_response(),
    }
}

/// `GET /repos/{owner}/{repo}/attestations/{subject_digest}` as GitHub answers it (API version
/// 2022-11-28): the bundles inlined, newest first, paged with `Link: rel="next"`; `404` when none.
async fn attestations(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    Path((owner, repo, digest)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let path = format!("/repos/{owner}/{repo}/attestations/{digest}");
    let uri = match &query {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let (answer, latency) = intercept(&state, Route::Attestations, uri, &headers);
    tokio::time::sleep(latency).await;
    if let Some(answer) = answer {
        return answer;
    }
    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
    let rate = rate_headers(&mut state, true);
    let mut all = state.attestations.get(&(owner, repo, digest)).cloned().unwrap_or_default();
    if all.is_empty() {
        return (StatusCode::NOT_FOUND, rate, r#"{"message":"Not Found"}"#).into_response();
    }
    all.reverse();
    let per_page = query_param(&query, "per_page").unwrap_or(30).clamp(1, state.max_per_page);
    let page = query_param(&query, "page").unwrap_or(1).max(1);
    let items: Vec<serde_json::Value> = all
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|bundle| serde_json::json!({"bundle": bundle, "repository_id": 1, "bundle_url": "https://storage.invalid/x"}))
        .collect();
    let mut response = (StatusCode::OK, rate, axum::Json(serde_json::json!({"attestations": items}))).into_response();
    if all.len() > page * per_page {
        let link = format!("<{}{path}?per_page={per_page}&page={}>; rel=\"next\"", state.api_url, page + 1);
        response.headers_mut().insert(header::LINK, HeaderValue::from_str(&link).expect("a header"));
    }
    response
}
