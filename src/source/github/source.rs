//! [`GitHubSource`]: one repository's releases through the shared [`GitHubClient`]. Listings
//! of one repository asked for at once share one request; assets stream to disk while hashed.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use reqwest::StatusCode;
use reqwest::header;
use sha2::{Digest, Sha256};

use super::{ACCEPT_BYTES, CHANNEL_CHUNKS, GitHubClient, Request, header_str, unexpected};
use crate::source::{
    AssetInfo, AssetLocator, DownloadedAsset, ListedRelease, Listing, Progress, ReleaseSource, SourceError,
};
use crate::util::lock;

/// The releases of one GitHub repository.
#[derive(Debug, Clone)]
pub struct GitHubSource {
    pub(super) client: GitHubClient,
    pub(super) owner: String,
    pub(super) repository: String,
}

impl GitHubSource {
    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn client(&self) -> &GitHubClient {
        &self.client
    }

    /// Owner and repository go into URL paths: only GitHub's own alphabet is allowed.
    pub(super) fn check_names(&self) -> Result<(), SourceError> {
        let valid = |s: &str| {
            !s.is_empty()
                && s != "."
                && s != ".."
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        };
        if valid(&self.owner) && valid(&self.repository) {
            Ok(())
        } else {
            Err(SourceError::Other(format!(
                "{:?}/{:?} is not a valid GitHub owner/repository name",
                self.owner, self.repository
            )))
        }
    }
}

impl ReleaseSource for GitHubSource {
    fn name(&self) -> String {
        format!("github:{}/{}", self.owner, self.repository)
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        self.check_names()?;
        let inner = &self.client.inner;
        let key = format!("{}/{}", self.owner.to_ascii_lowercase(), self.repository.to_ascii_lowercase());
        let shared = lock(&inner.in_flight)
            .entry(key.clone())
            .or_insert_with(|| {
                let inner = Arc::clone(inner);
                let (source, owner, repository) = (self.name(), self.owner.clone(), self.repository.clone());
                async move {
                    let result = inner.list_pages(&source, &owner, &repository).await.map_err(Arc::new);
                    // Done: the next caller starts a fresh (conditional) listing.
                    lock(&inner.in_flight).remove(&key);
                    result
                }
                .boxed()
                .shared()
            })
            .clone();
        shared.await.map_err(|e| duplicate(&e))
    }

    async fn attestations(&self, sha256_hex: &str) -> Result<Option<Vec<Vec<u8>>>, SourceError> {
        self.fetch_attestations(sha256_hex).await.map(Some)
    }

    async fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        self.check_names()?;
        let source = self.name();
        let AssetLocator::GitHub { id } = asset.locator else {
            return Err(SourceError::Other(format!(
                "{source}: asset {} of {} is not a GitHub asset ({:?})",
                asset.name, release.tag, asset.locator
            )));
        };
        let inner = &self.client.inner;
        let mut url = inner.api_url(&format!("/repos/{}/{}/releases/assets/{id}", self.owner, self.repository))?;
        let mut hops = 0;
        let response = loop {
            let response = inner
                .send(&source, Request { url: &url, accept: ACCEPT_BYTES, if_none_match: None, bounded: false })
                .await?;
            let status = response.status();
            if status.is_redirection() {
                hops += 1;
                let location =
                    header_str(response.headers(), header::LOCATION.as_str()).ok_or_else(|| SourceError::Protocol {
                        source_name: source.clone(),
                        message: format!("{url} redirected without a Location"),
                    })?;
                let next = url.join(location).map_err(|e| SourceError::Protocol {
                    source_name: source.clone(),
                    message: format!("{url} redirected to a bad Location {location:?}: {e}"),
                })?;
                if hops > inner.options.max_redirects {
                    return Err(SourceError::Protocol {
                        source_name: source.clone(),
                        message: format!("asset {} of {}: more than {} redirects", asset.name, release.tag, hops - 1),
                    });
                }
                tracing::debug!(source, asset = asset.name, to_api_host = inner.is_api(&next), "following redirect");
                url = next;
                continue;
            }
            if status == StatusCode::OK {
                break response;
            }
            return Err(unexpected(&source, &url, response).await);
        };
        let result = stream_to_file(&source, release, asset, response, dest, progress).await;
        if result.is_err() {
            // A partial file is worthless; the caller may not know it exists.
            let _ = tokio::fs::remove_file(dest).await;
        }
        result
    }
}

/// Streams a response body into `dest` while hashing it, on a blocking thread so that network,
/// hashing and disk overlap; memory stays bounded by the channel.
async fn stream_to_file(
    source: &str,
    release: &ListedRelease,
    asset: &AssetInfo,
    mut response: reqwest::Response,
    dest: &Path,
    progress: &dyn Progress,
) -> Result<DownloadedAsset, SourceError> {
    let content_length = response.content_length();
    progress.start(&asset.name, Some(asset.size));
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Bytes>(CHANNEL_CHUNKS);
    let path = dest.to_path_buf();
    let writer = tokio::task::spawn_blocking(move || -> std::io::Result<(u64, String)> {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&path)?);
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        while let Some(chunk) = receiver.blocking_recv() {
            hasher.update(&chunk);
            out.write_all(&chunk)?;
            size += chunk.len() as u64;
        }
        out.into_inner().map_err(|e| e.into_error())?;
        Ok((size, hex::encode(hasher.finalize())))
    });
    let what = || format!("asset {} of {}", asset.name, release.tag);
    let mut received = 0u64;
    let streamed = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                received += chunk.len() as u64;
                if received > asset.size {
                    // Stop early: a body larger than announced could fill the disk.
                    break Err(SourceError::Integrity {
                        release: release.tag.clone(),
                        asset: asset.name.clone(),
                        what: "size",
                        expected: asset.size.to_string(),
                        actual: format!("more than {}", asset.size),
                    });
                }
                progress.advance(chunk.len() as u64);
                if sender.send(chunk).await.is_err() {
                    // The writer stopped on an I/O error, reported below.
                    break Ok(());
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => {
                let total = content_length.unwrap_or(asset.size);
                break Err(SourceError::Unavailable {
                    source_name: source.to_string(),
                    message: format!(
                        "{} truncated: the download broke off after {received} of {total} bytes: {e}",
                        what()
                    ),
                });
            }
        }
    };
    drop(sender);
    let written = writer.await.map_err(|e| SourceError::Other(format!("{}: the writer task failed: {e}", what())))?;
    streamed?;
    let (size, sha256) = written.map_err(|e| SourceError::io("cannot write the downloaded asset", dest, e))?;
    if let Some(length) = content_length
        && size != length
    {
        return Err(SourceError::Unavailable {
            source_name: source.to_string(),
            message: format!("{} truncated: {size} of {length} bytes (Content-Length)", what()),
        });
    }
    if size != asset.size {
        return Err(SourceError::Integrity {
            release: release.tag.clone(),
            asset: asset.name.clone(),
            what: "size",
            expected: asset.size.to_string(),
            actual: size.to_string(),
        });
    }
    progress.finish(&asset.name);
    Ok(DownloadedAsset { path: dest.to_path_buf(), size, sha256 })
}

/// A copy of a shared listing's error for each caller. `io::Error` is not `Clone`: its kind and
/// message are kept.
fn duplicate(error: &SourceError) -> SourceError {
    #[allow(unreachable_patterns)] // variants added to `SourceError` later fall back to `Other`
    match error {
        SourceError::RateLimited { source_name, until } => {
            SourceError::RateLimited { source_name: source_name.clone(), until: *until }
        }
        SourceError::Unavailable { source_name, message } => {
            SourceError::Unavailable { source_name: source_name.clone(), message: message.clone() }
        }
        SourceError::Protocol { source_name, message } => {
            SourceError::Protocol { source_name: source_name.clone(), message: message.clone() }
        }
        SourceError::Integrity { release, asset, what, expected, actual } => SourceError::Integrity {
            release: release.clone(),
            asset: asset.clone(),
            what,
            expected: expected.clone(),
            actual: actual.clone(),
        },
        SourceError::Io { context, path, source } => SourceError::Io {
            context,
            path: path.clone(),
            source: std::io::Error::new(source.kind(), source.to_string()),
        },
        SourceError::Other(message) => SourceError::Other(message.clone()),
        other => SourceError::Other(other.to_string()),
    }
}
