//! Releases of a GitHub repository.
//!
//! One [`GitHubClient`] per process holds what makes polling cheap and polite: the `ETag` of every
//! listing page (a `304 Not Modified` costs no rate limit), the listings in flight (N sources of one
//! repository asking at once share one request), and the rate-limit state (nothing is sent while
//! the limit is exhausted). Assets are streamed to disk while hashed, following the storage
//! redirect by hand so the token never leaves the API host.

mod attestations;
mod source;
mod wire;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::{BoxFuture, Shared};
use jiff::{SignedDuration, Timestamp};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{StatusCode, Url};

use crate::util::lock;

use super::{Listing, SourceError};
use wire::{RawRelease, Sorted};

pub use source::GitHubSource;

/// The public GitHub API.
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// The REST API version we are written against.
const API_VERSION: &str = "2022-11-28";
const ACCEPT_JSON: &str = "application/vnd.github+json";
const ACCEPT_BYTES: &str = "application/octet-stream";
/// GitHub's largest page.
const PER_PAGE: u32 = 100;
/// A guard against a server whose `next` links never end (100,000 releases).
const MAX_PAGES: usize = 1000;
/// Chunks queued between the network and the disk writer: enough to smooth out a slow write,
/// few enough that memory stays a few MiB whatever the asset size.
const CHANNEL_CHUNKS: usize = 8;

/// An access token. Never printed: `Debug` and `Display` redact it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    pub fn new(secret: impl Into<String>) -> Self {
        Token(secret.into().trim().to_string())
    }

    /// The secret itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(***)")
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Settings of the GitHub client.
#[derive(Debug, Clone)]
pub struct GitHubConfig {
    /// API base URL, e.g. `https://api.github.com` or a GitHub Enterprise URL.
    pub api_url: String,
    pub token: Option<Token>,
    /// List releases marked as pre-release too.
    pub include_prereleases: bool,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        Self { api_url: DEFAULT_API_URL.to_string(), token: None, include_prereleases: false }
    }
}

/// How transient failures (5xx, timeouts, connection errors) are retried: capped exponential
/// backoff with jitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt; 0 disables retrying.
    pub max_retries: u32,
    /// The delay before the first retry (before jitter); doubled for every further retry.
    pub base: Duration,
    /// The longest delay between two attempts.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_retries: 4, base: Duration::from_millis(500), cap: Duration::from_secs(30) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (0-based): `min(cap, base * 2^retry)`, of which the
    /// upper half is random so that many clients failing together do not retry in lockstep.
    pub fn delay(&self, retry: u32) -> Duration {
        let exponential = self.base.saturating_mul(2u32.saturating_pow(retry)).min(self.cap);
        let half = exponential / 2;
        let jitter = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(rand::random_range(0..=jitter))
    }
}

/// Transport settings of a [`GitHubClient`]; the defaults suit production.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub retry: RetryPolicy,
    /// Limit on establishing a connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Limit on waiting for the next bytes of a response, so a stalled download fails
    /// while a slow but moving one continues.
    pub read_timeout: Duration,
    /// Limit on a whole API request (listing pages; not asset downloads, which may be large).
    pub request_timeout: Duration,
    /// Redirects followed for one asset download.
    pub max_redirects: usize,
    pub user_agent: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            max_redirects: 5,
            user_agent: concat!("clusterstack/", env!("CARGO_PKG_VERSION")).to_string(),
        }
    }
}

/// Counters for the operator's metrics, see [`GitHubClient::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitHubStats {
    /// Responses received, by HTTP status (API and storage hosts, every attempt).
    pub requests_by_status: BTreeMap<u16, u64>,
    /// Requests that got no response (connection error, timeout).
    pub transport_errors: u64,
    /// Listing pages answered `304 Not Modified` (free of rate limit).
    pub not_modified: u64,
    /// Attempts repeated after a transient failure.
    pub retries: u64,
    /// The last `x-ratelimit-limit` seen.
    pub rate_limit_limit: Option<u64>,
    /// The last `x-ratelimit-remaining` seen.
    pub rate_limit_remaining: Option<u64>,
    /// The last `x-ratelimit-reset` seen.
    pub rate_limit_reset: Option<Timestamp>,
    /// While set and in the future, no API request is sent.
    pub rate_limited_until: Option<Timestamp>,
}

/// A GitHub API client shared by every source of one process, so that
/// conditional-request state, rate limits and in-flight listings are shared.
#[derive(Debug, Clone)]
pub struct GitHubClient {
    inner: Arc<ClientInner>,
}

/// A listing in flight, awaited by every caller of the same repository.
type SharedListing = Shared<BoxFuture<'static, Result<Listing, Arc<SourceError>>>>;

struct ClientInner {
    config: GitHubConfig,
    options: ClientOptions,
    /// `api_url` parsed, without a trailing `/`.
    api_base: Url,
    http: reqwest::Client,
    /// `Bearer <token>`, marked sensitive.
    authorization: Option<HeaderValue>,
    /// Listing pages by URL, with their `ETag`.
    pages: Mutex<HashMap<String, Arc<CachedPage>>>,
    /// Listings in flight by `owner/repository`.
    in_flight: Mutex<HashMap<String, SharedListing>>,
    stats: Mutex<GitHubStats>,
}

impl fmt::Debug for ClientInner {
    // Only the settings: the caches are large and the token is redacted by `Token` itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GitHubClient").field("config", &self.config).field("options", &self.options).finish()
    }
}

/// One listing page as last received.
#[derive(Debug)]
struct CachedPage {
    etag: String,
    releases: Vec<RawRelease>,
    next: Option<String>,
}

impl GitHubClient {
    /// A client with the default [`ClientOptions`].
    pub fn new(config: GitHubConfig) -> Result<Self, SourceError> {
        Self::with_options(config, ClientOptions::default())
    }

    /// A client with explicit transport settings (tests use short backoffs).
    pub fn with_options(config: GitHubConfig, options: ClientOptions) -> Result<Self, SourceError> {
        let trimmed = config.api_url.trim().trim_end_matches('/');
        let api_base = Url::parse(trimmed)
            .map_err(|e| SourceError::Other(format!("invalid GitHub API URL {:?}: {e}", config.api_url)))?;
        if !matches!(api_base.scheme(), "http" | "https") || api_base.host().is_none() {
            return Err(SourceError::Other(format!(
                "invalid GitHub API URL {:?}: expected http(s)://host[/path]",
                config.api_url
            )));
        }
        let authorization = match &config.token {
            Some(token) if !token.expose().is_empty() => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
                    SourceError::Other("the GitHub token contains characters not allowed in an HTTP header".into())
                })?;
                value.set_sensitive(true);
                Some(value)
            }
            _ => None,
        };
        let http = reqwest::Client::builder()
            // Bytes as served: an asset stored with `Content-Encoding: gzip` is still the asset
            // whose digest GitHub announced (sigstore-sign's dependencies enable reqwest's decoders).
            .no_gzip()
            .no_deflate()
            // Redirects are followed by hand, so `Authorization` goes to the API host only.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .user_agent(options.user_agent.clone())
            .build()
            .map_err(|e| SourceError::Other(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            inner: Arc::new(ClientInner {
                config,
                options,
                api_base,
                http,
                authorization,
                pages: Mutex::default(),
                in_flight: Mutex::default(),
                stats: Mutex::default(),
            }),
        })
    }

    /// A source for one repository, sharing this client.
    pub fn repository(&self, owner: &str, repository: &str) -> GitHubSource {
        GitHubSource { client: self.clone(), owner: owner.to_string(), repository: repository.to_string() }
    }

    pub fn config(&self) -> &GitHubConfig {
        &self.inner.config
    }

    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// A snapshot of the request counters and the rate-limit state.
    pub fn stats(&self) -> GitHubStats {
        lock(&self.inner.stats).clone()
    }
}

/// What one request is.
struct Request<'a> {
    url: &'a Url,
    accept: &'static str,
    if_none_match: Option<&'a str>,
    /// Apply `request_timeout` (API calls, not downloads).
    bounded: bool,
}

impl ClientInner {
    fn api_url(&self, path: &str) -> Result<Url, SourceError> {
        let base = self.api_base.as_str().trim_end_matches('/');
        Url::parse(&format!("{base}{path}"))
            .map_err(|e| SourceError::Other(format!("cannot build a GitHub URL for {path}: {e}")))
    }

    /// Whether `url` is on the API host, i.e. gets the token and obeys the API rate limit.
    fn is_api(&self, url: &Url) -> bool {
        url.origin() == self.api_base.origin()
    }

    /// Sends one request, retrying transient failures. Returns any response that is neither a
    /// server error nor a rate-limit answer; the caller interprets the status.
    async fn send(&self, source: &str, request: Request<'_>) -> Result<reqwest::Response, SourceError> {
        let api = self.is_api(request.url);
        let mut retry = 0;
        loop {
            if api && let Some(until) = self.blocked_until() {
                return Err(SourceError::RateLimited { source_name: source.to_string(), until });
            }
            let mut builder = self.http.get(request.url.clone()).header(header::ACCEPT, request.accept);
            if api {
                builder = builder.header("X-GitHub-Api-Version", API_VERSION);
                if let Some(authorization) = &self.authorization {
                    builder = builder.header(header::AUTHORIZATION, authorization.clone());
                }
                if let Some(etag) = request.if_none_match {
                    builder = builder.header(header::IF_NONE_MATCH, etag);
                }
            }
            if request.bounded {
                builder = builder.timeout(self.options.request_timeout);
            }
            tracing::debug!(source, url = %request.url, attempt = retry + 1, "GitHub request");
            let failure = match builder.send().await {
                Ok(response) => {
                    let status = response.status();
                    self.record(status, api.then(|| response.headers()));
                    if api && let Some(until) = rate_limited_until(status, response.headers()) {
                        self.block_until(until);
                        tracing::warn!(source, %until, "GitHub rate limit exhausted");
                        return Err(SourceError::RateLimited { source_name: source.to_string(), until });
                    }
                    if !status.is_server_error() {
                        return Ok(response);
                    }
                    format!("{} answered {status}", request.url)
                }
                Err(error) => {
                    lock(&self.stats).transport_errors += 1;
                    if !(error.is_timeout() || error.is_connect() || error.is_request()) {
                        return Err(SourceError::Unavailable {
                            source_name: source.to_string(),
                            message: format!("{}: {error}", request.url),
                        });
                    }
                    format!("{}: {error}", request.url)
                }
            };
            if retry >= self.options.retry.max_retries {
                return Err(SourceError::Unavailable {
                    source_name: source.to_string(),
                    message: format!("{failure} (gave up after {} attempts)", retry + 1),
                });
            }
            let delay = self.options.retry.delay(retry);
            tracing::warn!(source, %failure, retry_in = ?delay, "transient GitHub failure, retrying");
            lock(&self.stats).retries += 1;
            tokio::time::sleep(delay).await;
            retry += 1;
        }
    }

    fn blocked_until(&self) -> Option<Timestamp> {
        let mut stats = lock(&self.stats);
        match stats.rate_limited_until {
            Some(until) if until > Timestamp::now() => Some(until),
            Some(_) => {
                stats.rate_limited_until = None;
                None
            }
            None => None,
        }
    }

    fn block_until(&self, until: Timestamp) {
        let mut stats = lock(&self.stats);
        stats.rate_limited_until = Some(stats.rate_limited_until.map_or(until, |t| t.max(until)));
    }

    /// Counts a response and, for the API host, remembers its rate-limit headers.
    fn record(&self, status: StatusCode, headers: Option<&HeaderMap>) {
        let mut stats = lock(&self.stats);
        *stats.requests_by_status.entry(status.as_u16()).or_default() += 1;
        if status == StatusCode::NOT_MODIFIED {
            stats.not_modified += 1;
        }
        let Some(headers) = headers else { return };
        if let Some(limit) = header_u64(headers, "x-ratelimit-limit") {
            stats.rate_limit_limit = Some(limit);
        }
        let remaining = header_u64(headers, "x-ratelimit-remaining");
        if remaining.is_some() {
            stats.rate_limit_remaining = remaining;
        }
        let reset = reset_time(headers);
        if reset.is_some() {
            stats.rate_limit_reset = reset;
        }
        // The last request used the last unit: the next one would be refused, so don't send it.
        if remaining == Some(0)
            && let Some(reset) = reset
            && reset > Timestamp::now()
        {
            stats.rate_limited_until = Some(stats.rate_limited_until.map_or(reset, |t| t.max(reset)));
        }
    }

    /// One listing page, from the network or, on `304`, from the cache.
    async fn page(&self, source: &str, url: &Url) -> Result<Arc<CachedPage>, SourceError> {
        let cached = lock(&self.pages).get(url.as_str()).cloned();
        let request = Request {
            url,
            accept: ACCEPT_JSON,
            if_none_match: cached.as_ref().map(|p| p.etag.as_str()),
            bounded: true,
        };
        let response = self.send(source, request).await?;
        match response.status() {
            StatusCode::NOT_MODIFIED => cached.ok_or_else(|| SourceError::Protocol {
                source_name: source.to_string(),
                message: format!("{url} answered 304 Not Modified to a request without If-None-Match"),
            }),
            StatusCode::OK => {
                let etag = header_str(response.headers(), header::ETAG.as_str()).map(str::to_string);
                let next = response.headers().get(header::LINK).and_then(|v| v.to_str().ok()).and_then(wire::next_link);
                let body = response.bytes().await.map_err(|e| SourceError::Unavailable {
                    source_name: source.to_string(),
                    message: format!("reading {url}: {e}"),
                })?;
                let releases: Vec<RawRelease> = serde_json::from_slice(&body).map_err(|e| SourceError::Protocol {
                    source_name: source.to_string(),
                    message: format!("{url} did not answer a list of releases: {e}"),
                })?;
                let page = Arc::new(CachedPage { etag: etag.clone().unwrap_or_default(), releases, next });
                let mut pages = lock(&self.pages);
                match etag {
                    Some(_) => pages.insert(url.to_string(), page.clone()),
                    None => pages.remove(url.as_str()),
                };
                Ok(page)
            }
            _ => Err(unexpected(source, url, response).await),
        }
    }

    /// Every page of a repository's releases, sorted into a [`Listing`].
    async fn list_pages(&self, source: &str, owner: &str, repository: &str) -> Result<Listing, SourceError> {
        let mut url = self.api_url(&format!("/repos/{owner}/{repository}/releases?per_page={PER_PAGE}"))?;
        let mut listing = Listing::default();
        let mut tags = HashSet::new();
        let mut visited = HashSet::new();
        loop {
            if visited.len() >= MAX_PAGES || !visited.insert(url.to_string()) {
                return Err(SourceError::Protocol {
                    source_name: source.to_string(),
                    message: format!("the release pages do not end (at {url})"),
                });
            }
            let page = self.page(source, &url).await?;
            for raw in &page.releases {
                // Releases created while we page shift the pages: a tag may come twice.
                if !tags.insert(raw.tag_name.clone()) {
                    continue;
                }
                match wire::sort_release(raw, self.config.include_prereleases) {
                    Ok(Sorted::Release(release)) => listing.releases.push(release),
                    Ok(Sorted::Foreign(tag)) => listing.skipped.push(tag),
                    Ok(Sorted::Ignored) => {}
                    Err(message) => return Err(SourceError::Protocol { source_name: source.to_string(), message }),
                }
            }
            let Some(next) = &page.next else { break };
            let next = Url::parse(next).map_err(|e| SourceError::Protocol {
                source_name: source.to_string(),
                message: format!("bad next-page link {next:?}: {e}"),
            })?;
            // The token goes with the request: never to a host the API did not start on.
            if !self.is_api(&next) {
                return Err(SourceError::Protocol {
                    source_name: source.to_string(),
                    message: format!("next-page link {next} leaves the API host {}", self.api_base),
                });
            }
            url = next;
        }
        tracing::debug!(
            source,
            releases = listing.releases.len(),
            skipped = listing.skipped.len(),
            "listed GitHub releases"
        );
        Ok(listing)
    }
}

/// A non-success answer as an error a user can act on, with GitHub's `message` when present.
async fn unexpected(source: &str, url: &Url, response: reqwest::Response) -> SourceError {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let detail = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
        .unwrap_or_else(|| body.chars().take(200).collect());
    let hint = match status {
        StatusCode::UNAUTHORIZED => " (the token is invalid or expired)",
        StatusCode::NOT_FOUND => " (does it exist? a private repository needs a token with read access)",
        StatusCode::FORBIDDEN => " (the token lacks permission)",
        _ => "",
    };
    SourceError::Protocol {
        source_name: source.to_string(),
        message: format!("{url} answered {status}{hint}: {detail}"),
    }
}

/// When a response says the rate limit is exhausted: `403`/`429` with `retry-after` or with
/// `x-ratelimit-remaining: 0`. A `429` without either still means "slow down" (one minute,
/// as GitHub documents for secondary limits).
fn rate_limited_until(status: StatusCode, headers: &HeaderMap) -> Option<Timestamp> {
    if status != StatusCode::FORBIDDEN && status != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let now = Timestamp::now();
    if let Some(until) = retry_after(headers, now) {
        return Some(until);
    }
    if header_u64(headers, "x-ratelimit-remaining") == Some(0) {
        return Some(reset_time(headers).filter(|t| *t > now).unwrap_or(now + SignedDuration::from_secs(60)));
    }
    (status == StatusCode::TOO_MANY_REQUESTS).then(|| now + SignedDuration::from_secs(60))
}

/// `retry-after` as delay seconds or an HTTP date.
fn retry_after(headers: &HeaderMap, now: Timestamp) -> Option<Timestamp> {
    let value = header_str(headers, header::RETRY_AFTER.as_str())?;
    if let Ok(seconds) = value.parse::<i64>() {
        return now.checked_add(SignedDuration::from_secs(seconds.max(0))).ok();
    }
    jiff::fmt::rfc2822::DateTimeParser::new().parse_timestamp(value).ok()
}

fn reset_time(headers: &HeaderMap) -> Option<Timestamp> {
    let seconds = i64::try_from(header_u64(headers, "x-ratelimit-reset")?).ok()?;
    Timestamp::from_second(seconds).ok()
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    header_str(headers, name)?.parse().ok()
}

#[cfg(test)]
mod tests;
