//! A client of the OCI distribution API, shared by the `docker` node-image plug-in (does an image
//! exist: `HEAD /v2/<name>/manifests/<reference>`) and the OCI release source (tags, manifests,
//! blobs, uploads). Requests are anonymous, `Basic`, or go through the bearer-token dance Docker
//! Hub uses (a `401` with `WWW-Authenticate: Bearer realm=...,service=...,scope=...`, a token
//! fetched from the realm, the request repeated with it): [`RegistryClient::send`].
//!
//! A `HEAD` on a manifest does not count against Docker Hub's pull rate limit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderMap, WWW_AUTHENTICATE};
use serde::Deserialize;

/// Docker Hub's name in image references.
pub const DOCKER_HUB: &str = "docker.io";
/// Where Docker Hub's registry API answers.
pub const DOCKER_HUB_API: &str = "https://registry-1.docker.io";

/// The manifest media types we accept: a single-platform image or a multi-platform index, in the
/// OCI and the Docker flavour.
pub const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// A parsed image reference, e.g. `kindest/node:v1.27.3` is host `docker.io`, repository
/// `kindest/node`, reference `v1.27.3`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    /// Registry host (with port), `docker.io` when the reference names none.
    pub host: String,
    /// Repository path; Docker Hub's one-part names get `library/`.
    pub repository: String,
    /// A tag or a digest (`sha256:...`); `latest` when the reference names neither.
    pub reference: String,
}

/// Why an image reference cannot be parsed.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("invalid image reference {image:?}: {message}")]
pub struct ImageRefError {
    /// The reference as written.
    pub image: String,
    /// What is wrong.
    pub message: String,
}

impl ImageRef {
    /// Parses `[host[:port]/]path[:tag][@digest]`.
    pub fn parse(image: &str) -> Result<Self, ImageRefError> {
        let err = |message: &str| ImageRefError { image: image.to_string(), message: message.to_string() };
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return Err(err("it is empty or contains whitespace"));
        }
        let (name, digest) = match image.split_once('@') {
            Some((n, d)) => {
                let valid = d.split_once(':').is_some_and(|(alg, hex)| !alg.is_empty() && !hex.is_empty());
                if !valid {
                    return Err(err("the digest must look like sha256:<hex>"));
                }
                (n, Some(d))
            }
            None => (image, None),
        };
        // A tag is after the last ':' that comes after the last '/' (a ':' before it is a port).
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(&name[last_slash + i + 1..])),
            None => (name, None),
        };
        if tag.is_some_and(str::is_empty) {
            return Err(err("the tag is empty"));
        }
        let (host, repository) = match path.split_once('/') {
            Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => {
                (first.to_string(), rest.to_string())
            }
            _ => (DOCKER_HUB.to_string(), path.to_string()),
        };
        let repository =
            if host == DOCKER_HUB && !repository.contains('/') { format!("library/{repository}") } else { repository };
        let valid_path = !repository.is_empty()
            && repository.split('/').all(|c| {
                !c.is_empty() && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            });
        if !valid_path {
            return Err(err("the repository must be lower-case path components"));
        }
        let reference = digest.or(tag).unwrap_or("latest").to_string();
        Ok(Self { host, repository, reference })
    }
}

impl std::fmt::Display for ImageRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sep = if self.reference.contains(':') { '@' } else { ':' };
        write!(f, "{}/{}{sep}{}", self.host, self.repository, self.reference)
    }
}

/// Basic credentials for a registry (used for the token request, or directly for `Basic`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User name.
    pub username: String,
    /// Password or access token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// Where registries are reached and how.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// Base URL per registry host, e.g. `docker.io` → `http://127.0.0.1:5000` (a mirror or a test
    /// double). Hosts not listed are reached at `https://<host>` (Docker Hub at
    /// [`DOCKER_HUB_API`]).
    pub endpoints: BTreeMap<String, String>,
    /// One base URL for every registry (takes precedence over `endpoints`).
    pub override_url: Option<String>,
    /// Credentials per registry host.
    pub credentials: BTreeMap<String, Credentials>,
    /// Bearer access tokens per registry host, sent as they are (the Go operator's
    /// `OCI_ACCESS_TOKEN`).
    pub access_tokens: BTreeMap<String, String>,
    /// The longest one request may take.
    pub request_timeout: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            endpoints: BTreeMap::new(),
            override_url: None,
            credentials: BTreeMap::new(),
            access_tokens: BTreeMap::new(),
            request_timeout: Duration::from_secs(15),
        }
    }
}

impl RegistryConfig {
    /// Parses a list of registry endpoints, `host=url` separated by commas, e.g.
    /// `docker.io=http://mirror.local:5000,ghcr.io=https://ghcr.example.com` (for a command-line
    /// flag or an environment variable).
    pub fn parse_endpoints(list: &str) -> Result<BTreeMap<String, String>, String> {
        let mut out = BTreeMap::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, url) = entry
                .split_once('=')
                .map(|(h, u)| (h.trim(), u.trim()))
                .filter(|(h, u)| !h.is_empty() && !u.is_empty())
                .ok_or_else(|| format!("registry endpoint {entry:?} is not host=url"))?;
            reqwest::Url::parse(url).map_err(|e| format!("registry endpoint {entry:?}: {url:?} is not a URL: {e}"))?;
            out.insert(host.to_string(), url.to_string());
        }
        Ok(out)
    }

    /// The base URL of a registry host, without a trailing `/`.
    pub fn base_url(&self, host: &str) -> String {
        let url = match (&self.override_url, self.endpoints.get(host)) {
            (Some(u), _) | (None, Some(u)) => u.clone(),
            (None, None) if host == DOCKER_HUB => DOCKER_HUB_API.to_string(),
            (None, None) => format!("https://{host}"),
        };
        url.trim_end_matches('/').to_string()
    }
}

/// Whether an image is in its registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presence {
    /// The manifest exists; its digest when the registry said it.
    Present {
        /// `Docker-Content-Digest` of the answer.
        digest: Option<String>,
    },
    /// The registry says there is no such manifest (or repository).
    Missing,
}

/// Why an image could not be checked. Every variant names the image.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    /// The registry could not be reached.
    #[error("{image}: registry {url} unreachable: {message}")]
    Unreachable {
        /// The image.
        image: String,
        /// The URL asked.
        url: String,
        /// The transport error.
        message: String,
    },
    /// The registry refused access even after authenticating.
    #[error("{image}: access denied by {url} (status {status}){hint}")]
    Unauthorized {
        /// The image.
        image: String,
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What to do about it.
        hint: String,
    },
    /// The token service failed.
    #[error("{image}: getting a token from {realm} failed: {message}")]
    Token {
        /// The image.
        image: String,
        /// The token service.
        realm: String,
        /// What went wrong.
        message: String,
    },
    /// The registry answered something else.
    #[error("{image}: unexpected answer from {url}: status {status}")]
    Unexpected {
        /// The image.
        image: String,
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
    },
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// `bearer` or `basic`, lower-cased.
    pub scheme: String,
    /// The parameters (`realm`, `service`, `scope`, ...), names lower-cased.
    pub params: BTreeMap<String, String>,
}

/// Parses a `WWW-Authenticate` header with one challenge: `Bearer realm="...",service="..."`.
/// Quoted values may contain commas and escaped quotes.
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(char::is_whitespace).unwrap_or((header, ""));
    if scheme.is_empty() {
        return None;
    }
    let mut params = BTreeMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            chars.next();
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c == ',' {
                break;
            }
            name.push(c);
            chars.next();
        }
        if name.trim().is_empty() {
            break;
        }
        if chars.next() != Some('=') {
            return None;
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => value.extend(chars.next()),
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return None,
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == ',' {
                    break;
                }
                value.push(c);
                chars.next();
            }
        }
        params.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    Some(Challenge { scheme: scheme.to_ascii_lowercase(), params })
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// A token's realm, service and scope.
type TokenKey = (String, String, String);

/// A client checking images in registries; tokens are cached per realm, service and scope until
/// they expire.
pub struct RegistryClient {
    http: reqwest::Client,
    config: RegistryConfig,
    tokens: Mutex<HashMap<TokenKey, (String, Instant)>>,
    /// The `Authorization` that last worked per registry host and repository, sent up front next
    /// time so a check costs one request instead of three.
    known_auth: Mutex<HashMap<(String, String, bool), KnownAuth>>,
}

/// How a repository was last authenticated.
#[derive(Clone)]
enum KnownAuth {
    Bearer(TokenKey),
    Basic(String),
}

/// How long a token is used when the token service does not say (the distribution spec's default).
const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);

impl RegistryClient {
    /// A client with these settings. Call `clusterstack::install_crypto_provider()` first.
    pub fn new(config: RegistryConfig) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            // Blobs as served, whatever decoders another crate enables: their digest is of these bytes.
            .no_gzip()
            .no_deflate()
            .timeout(config.request_timeout)
            .user_agent(concat!("clusterstack/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("building the registry HTTP client failed: {e}"))?;
        Ok(Self { http, config, tokens: Mutex::new(HashMap::new()), known_auth: Mutex::new(HashMap::new()) })
    }

    /// The settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    fn cached_token(&self, key: &TokenKey) -> Option<String> {
        let tokens = self.tokens.lock().unwrap_or_else(|e| e.into_inner());
        tokens.get(key).filter(|(_, until)| Instant::now() < *until).map(|(t, _)| t.clone())
    }

    /// Fetches a bearer token for a challenge.
    async fn token(&self, target: &Target<'_>, challenge: &Challenge) -> Result<(TokenKey, String), RegistryError> {
        let realm = challenge.params.get("realm").cloned().unwrap_or_default();
        let token_err =
            |message: String| RegistryError::Token { image: target.what.to_string(), realm: realm.clone(), message };
        if realm.is_empty() {
            return Err(token_err("the challenge names no realm".into()));
        }
        let service = challenge.params.get("service").cloned().unwrap_or_default();
        let actions = if target.push { "pull,push" } else { "pull" };
        let scope = match challenge.params.get("scope") {
            Some(s) if !target.push || s.contains("push") => s.clone(),
            _ => format!("repository:{}:{actions}", target.repository),
        };
        let key = (realm.clone(), service.clone(), scope.clone());
        if let Some(t) = self.cached_token(&key) {
            return Ok((key, t));
        }
        let mut url = reqwest::Url::parse(&realm).map_err(|e| token_err(format!("the realm is not a URL: {e}")))?;
        {
            let mut query = url.query_pairs_mut();
            if !service.is_empty() {
                query.append_pair("service", &service);
            }
            query.append_pair("scope", &scope);
        }
        let mut req = self.http.get(url);
        if let Some(c) = self.config.credentials.get(target.host) {
            req = req.basic_auth(&c.username, Some(&c.password));
        }
        let resp = req.send().await.map_err(|e| token_err(error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(token_err(format!("status {}", resp.status().as_u16())));
        }
        let answer: TokenAnswer = resp.json().await.map_err(|e| token_err(format!("not a token answer: {e}")))?;
        let token = answer
            .token
            .or(answer.access_token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| token_err("the answer holds no token".into()))?;
        let lifetime = answer.expires_in.map(Duration::from_secs).unwrap_or(DEFAULT_TOKEN_LIFETIME);
        // Renew a little early so a token does not expire between the cache and the registry.
        let until = Instant::now() + lifetime.saturating_sub(Duration::from_secs(5));
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone(), (token.clone(), until));
        Ok((key, token))
    }

    /// Sends the request `build` makes, authenticated for `target`: with the `Authorization`
    /// that last worked for its repository, else anonymously; on a `401` it answers the
    /// challenge (a bearer token from the realm, or `Basic` with the configured credentials) and
    /// sends once more. `build` is called once per attempt, so its body must be re-creatable.
    /// Any status but a final `401`/`403` is returned to the caller.
    pub async fn send(
        &self,
        target: &Target<'_>,
        url: &str,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, RegistryError> {
        let repo_key = (target.host.to_string(), target.repository.to_string(), target.push);
        let known = self.known_auth.lock().unwrap_or_else(|e| e.into_inner()).get(&repo_key).cloned();
        let up_front = match &known {
            Some(KnownAuth::Bearer(key)) => self.cached_token(key).map(|t| format!("Bearer {t}")),
            Some(KnownAuth::Basic(value)) => Some(value.clone()),
            None => self.config.access_tokens.get(target.host).map(|t| format!("Bearer {t}")),
        };
        let attempt = |auth: Option<String>| {
            let mut req = build(&self.http);
            if let Some(a) = auth {
                req = req.header(AUTHORIZATION, a);
            }
            async move {
                req.send().await.map_err(|e| RegistryError::Unreachable {
                    image: target.what.to_string(),
                    url: url.to_string(),
                    message: error_chain(&e),
                })
            }
        };
        let mut resp = attempt(up_front).await?;
        if resp.status() == StatusCode::UNAUTHORIZED {
            // A token the registry no longer accepts (revoked, expired early) is fetched anew.
            if let Some(KnownAuth::Bearer(key)) = &known {
                self.tokens.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
            }
            let challenge = challenge_of(resp.headers());
            let auth = match challenge {
                Some(c) if c.scheme == "bearer" => {
                    let (key, token) = self.token(target, &c).await?;
                    Some((KnownAuth::Bearer(key), format!("Bearer {token}")))
                }
                Some(c) if c.scheme == "basic" => self.config.credentials.get(target.host).map(|cred| {
                    let value = basic_value(cred);
                    (KnownAuth::Basic(value.clone()), value)
                }),
                _ => None,
            };
            if let Some((known, auth)) = auth {
                resp = attempt(Some(auth)).await?;
                if resp.status() != StatusCode::UNAUTHORIZED {
                    self.known_auth.lock().unwrap_or_else(|e| e.into_inner()).insert(repo_key, known);
                }
            }
        }
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(RegistryError::Unauthorized {
                image: target.what.to_string(),
                url: url.to_string(),
                status: status.as_u16(),
                hint: if self.config.credentials.contains_key(target.host) {
                    ": check the credentials configured for this registry".into()
                } else {
                    format!(": the repository may be private; configure credentials for {}", target.host)
                },
            });
        }
        Ok(resp)
    }

    /// Whether the image's manifest exists.
    pub async fn check(&self, image: &ImageRef) -> Result<Presence, RegistryError> {
        let url =
            format!("{}/v2/{}/manifests/{}", self.config.base_url(&image.host), image.repository, image.reference);
        let what = image.to_string();
        let target = Target { what: &what, host: &image.host, repository: &image.repository, push: false };
        let resp = self.send(&target, &url, |http| http.head(&url).header(ACCEPT, MANIFEST_ACCEPT)).await?;
        let status = resp.status();
        tracing::debug!(image = %image, %url, status = status.as_u16(), "checked image manifest");
        match status {
            s if s.is_success() => Ok(Presence::Present {
                digest: resp.headers().get("docker-content-digest").and_then(|v| v.to_str().ok()).map(str::to_string),
            }),
            StatusCode::NOT_FOUND => Ok(Presence::Missing),
            s => Err(RegistryError::Unexpected { image: what, url, status: s.as_u16() }),
        }
    }
}

/// What a request is for: names it in errors (`what`, e.g. an image or `oci://host/repo:tag`) and
/// selects the credentials (`host`) and the token scope (`repository`, pull or push).
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// How errors name the object.
    pub what: &'a str,
    /// The registry host (with port) as configured in [`RegistryConfig::credentials`].
    pub host: &'a str,
    /// The repository.
    pub repository: &'a str,
    /// Whether the request writes (token scope `pull,push`).
    pub push: bool,
}

/// The `Authorization` value for basic credentials.
fn basic_value(cred: &Credentials) -> String {
    use base64::Engine;
    let raw = format!("{}:{}", cred.username, cred.password);
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(raw))
}

fn challenge_of(headers: &HeaderMap) -> Option<Challenge> {
    headers.get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).find_map(parse_challenge)
}

/// An error with its sources, on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> (String, String, String) {
        let r = ImageRef::parse(s).unwrap();
        (r.host, r.repository, r.reference)
    }

    fn t(a: &str, b: &str, c: &str) -> (String, String, String) {
        (a.into(), b.into(), c.into())
    }

    #[test]
    fn image_references() {
        assert_eq!(parsed("kindest/node:v1.27.3"), t("docker.io", "kindest/node", "v1.27.3"));
        assert_eq!(parsed("ubuntu"), t("docker.io", "library/ubuntu", "latest"));
        assert_eq!(parsed("docker.io/ubuntu:22.04"), t("docker.io", "library/ubuntu", "22.04"));
        assert_eq!(parsed("localhost:5000/a/b"), t("localhost:5000", "a/b", "latest"));
        assert_eq!(parsed("ghcr.io/o/img:1@sha256:abc"), t("ghcr.io", "o/img", "sha256:abc"));
        assert_eq!(parsed("registry.k8s.io/pause:3.9"), t("registry.k8s.io", "pause", "3.9"));
        assert_eq!(ImageRef::parse("ghcr.io/o/img@sha256:abc").unwrap().to_string(), "ghcr.io/o/img@sha256:abc");
        assert_eq!(ImageRef::parse("kindest/node:v1").unwrap().to_string(), "docker.io/kindest/node:v1");
        for bad in ["", "a b", "Upper/case", "a:", "a@sha256", "a//b", "x.io/"] {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn challenges() {
        let c = parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#,
        )
        .unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.params["realm"], "https://auth.docker.io/token");
        assert_eq!(c.params["service"], "registry.docker.io");
        assert_eq!(c.params["scope"], "repository:a/b:pull,push");
        let c = parse_challenge(r#"Basic realm="x \"y\"""#).unwrap();
        assert_eq!((c.scheme.as_str(), c.params["realm"].as_str()), ("basic", r#"x "y""#));
        assert!(parse_challenge(r#"Bearer realm="unterminated"#).is_none());
    }

    #[test]
    fn endpoint_lists() {
        let m =
            RegistryConfig::parse_endpoints(" docker.io=http://127.0.0.1:5000 , ghcr.io=https://g.example ").unwrap();
        assert_eq!(m["docker.io"], "http://127.0.0.1:5000");
        assert_eq!(m["ghcr.io"], "https://g.example");
        assert!(RegistryConfig::parse_endpoints("").unwrap().is_empty());
        assert!(RegistryConfig::parse_endpoints("docker.io").unwrap_err().contains("not host=url"));
        assert!(RegistryConfig::parse_endpoints("docker.io=not a url").unwrap_err().contains("not a URL"));
    }

    #[test]
    fn base_urls() {
        let mut cfg = RegistryConfig::default();
        assert_eq!(cfg.base_url("docker.io"), DOCKER_HUB_API);
        assert_eq!(cfg.base_url("ghcr.io"), "https://ghcr.io");
        cfg.endpoints.insert("ghcr.io".into(), "http://127.0.0.1:1/".into());
        assert_eq!(cfg.base_url("ghcr.io"), "http://127.0.0.1:1");
        cfg.override_url = Some("http://127.0.0.1:2".into());
        assert_eq!(cfg.base_url("ghcr.io"), "http://127.0.0.1:2");
        assert_eq!(cfg.base_url("docker.io"), "http://127.0.0.1:2");
    }
}
