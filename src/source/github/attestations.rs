//! GitHub's artifact attestations of one repository: `GET /repos/{owner}/{repo}/attestations/
//! sha256:<hex>`, the Sigstore bundles GitHub Actions' `attest-build-provenance` (and `gh
//! attestation`) stored for an artifact digest.
//!
//! The answer of the API version we pin (`2022-11-28`) is `{"attestations": [{"bundle": {...},
//! "repository_id": N, "bundle_url": "..."}]}`, paged with `Link: rel="next"` (cursors), `404`
//! when no attestation names that digest. Only the inlined `bundle` is read: `bundle_url` points
//! to another host (storage, snappy-compressed) where the token must not go, and under the pinned
//! version the bundle is always inlined; an entry without one is logged and skipped. Requests go
//! through the client's [`send`](super::ClientInner::send): the same retries of 5xx and transport
//! errors, the same rate-limit bookkeeping (nothing is sent while the limit is exhausted) as the
//! release listing.

use std::collections::HashSet;

use reqwest::{StatusCode, Url};
use serde::Deserialize;

use super::{ACCEPT_JSON, GitHubSource, PER_PAGE, Request, unexpected, wire};
use crate::source::SourceError;

/// A guard against a server whose pages never end: 1,000 attestations of one digest.
const MAX_PAGES: usize = 10;

#[derive(Debug, Deserialize)]
struct Page {
    #[serde(default)]
    attestations: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(default)]
    bundle: Option<serde_json::Value>,
    #[serde(default)]
    bundle_url: Option<String>,
}

impl GitHubSource {
    /// The attestation bundles (JSON) GitHub holds for the artifact whose sha256 is `sha256_hex`
    /// in this repository; empty when there are none (`404`).
    pub async fn fetch_attestations(&self, sha256_hex: &str) -> Result<Vec<Vec<u8>>, SourceError> {
        use crate::source::ReleaseSource;
        self.check_names()?;
        let source = self.name();
        if sha256_hex.len() != 64 || !sha256_hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(SourceError::Other(format!("{source}: {sha256_hex:?} is not a sha256")));
        }
        let inner = &self.client.inner;
        let mut url = inner.api_url(&format!(
            "/repos/{}/{}/attestations/sha256:{}?per_page={PER_PAGE}",
            self.owner,
            self.repository,
            sha256_hex.to_ascii_lowercase()
        ))?;
        let mut bundles = Vec::new();
        let mut visited = HashSet::new();
        loop {
            if visited.len() >= MAX_PAGES || !visited.insert(url.to_string()) {
                return Err(SourceError::Protocol {
                    source_name: source.clone(),
                    message: format!("the attestation pages do not end (at {url})"),
                });
            }
            let request = Request { url: &url, accept: ACCEPT_JSON, if_none_match: None, bounded: true };
            let response = inner.send(&source, request).await?;
            match response.status() {
                // GitHub's answer when no attestation names the digest.
                StatusCode::NOT_FOUND => break,
                StatusCode::OK => {}
                _ => return Err(unexpected(&source, &url, response).await),
            }
            let next =
                response.headers().get(reqwest::header::LINK).and_then(|v| v.to_str().ok()).and_then(wire::next_link);
            let body = response.bytes().await.map_err(|e| SourceError::Unavailable {
                source_name: source.clone(),
                message: format!("reading {url}: {e}"),
            })?;
            let page: Page = serde_json::from_slice(&body).map_err(|e| SourceError::Protocol {
                source_name: source.clone(),
                message: format!("{url} did not answer a list of attestations: {e}"),
            })?;
            for entry in page.attestations {
                match entry.bundle {
                    Some(bundle) if !bundle.is_null() => bundles.push(serde_json::to_vec(&bundle).unwrap_or_default()),
                    _ => tracing::warn!(
                        source,
                        bundle_url = entry.bundle_url.as_deref().unwrap_or(""),
                        "an attestation without an inlined bundle is skipped"
                    ),
                }
            }
            let Some(next) = next else { break };
            let next = Url::parse(&next).map_err(|e| SourceError::Protocol {
                source_name: source.clone(),
                message: format!("bad next-page link {next:?}: {e}"),
            })?;
            // The token goes with the request: never to a host the API did not start on.
            if !inner.is_api(&next) {
                return Err(SourceError::Protocol {
                    source_name: source.clone(),
                    message: format!("next-page link {next} leaves the API host {}", inner.api_base),
                });
            }
            url = next;
        }
        tracing::debug!(source, sha256 = sha256_hex, bundles = bundles.len(), "GitHub attestations");
        Ok(bundles)
    }
}
