//! Cosign signatures of OCI releases (see [`crate::source::verify::cosign`] for the layout):
//! reading them for a listed release, and pushing them for `publish --sign`.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use sha2::{Digest, Sha256};

use super::publish::{BlobBody, push_blob, put_manifest};
use super::{
    ImageManifest, MAX_MANIFEST_BYTES, OCI_MANIFEST, OciSource, artifact_assets, hex, protocol, read_bounded,
    registry_error, unexpected_status,
};
use crate::registry::{RegistryClient, Target};
use crate::source::verify::cosign::{SIMPLE_SIGNING, SignatureLayer, signature_tag};
use crate::source::{ListedRelease, ReleaseSource, SourceError};

/// A signature payload is a small JSON document; anything larger is not one.
const MAX_PAYLOAD_BYTES: usize = 64 << 10;
/// At most this many signature layers are read.
const MAX_SIGNATURES: usize = 32;

/// What the registry holds for a release: the manifest's digest now, and the signature layers
/// tagged for it.
#[derive(Debug, Clone)]
pub struct CosignSignatures {
    /// `sha256:<hex>` of the release's manifest as the tag names it now.
    pub manifest_digest: String,
    /// `HOST/REPOSITORY`, the reference the payload names.
    pub reference: String,
    pub layers: Vec<SignatureLayer>,
}

impl OciSource {
    /// The cosign signatures of `release`: its tag is resolved again, and the manifest it names
    /// must still list exactly the listed assets (so the signature over that manifest covers the
    /// bytes the cache downloaded by digest); then the `sha256-<hex>.sig` manifest's layers are
    /// read (none when there is no such tag).
    pub async fn cosign_signatures(&self, release: &ListedRelease) -> Result<CosignSignatures, SourceError> {
        let source = self.name();
        let what = format!("{source}:{}", release.tag);
        let (body, content_type) = self
            .manifest(&what, &release.tag)
            .await?
            .ok_or_else(|| protocol(&what, format!("the tag {} is gone", release.tag)))?;
        let manifest_digest = format!("sha256:{}", hex(&Sha256::digest(&body)));
        let assets = artifact_assets(&body, content_type.as_deref()).map_err(|m| protocol(&what, m))?;
        let same = assets.len() == release.assets.len()
            && assets.iter().all(|a| release.assets.iter().any(|l| l.name == a.name && l.locator == a.locator));
        if !same {
            return Err(protocol(&what, "the tag was moved to another manifest while the release was fetched".into()));
        }
        let reference = format!("{}/{}", self.inner.host, self.inner.repository);
        let mut layers = Vec::new();
        let sig_tag = signature_tag(&manifest_digest);
        if let Some((body, _)) = self.manifest(&what, &sig_tag).await? {
            let manifest: ImageManifest = serde_json::from_slice(&body)
                .map_err(|e| protocol(&what, format!("{sig_tag}: not an OCI image manifest: {e}")))?;
            for layer in manifest.layers.iter().filter(|l| l.media_type == SIMPLE_SIGNING).take(MAX_SIGNATURES) {
                let payload = self.small_blob(&what, &layer.digest).await?;
                layers.push(SignatureLayer { payload, annotations: layer.annotations.clone() });
            }
        }
        Ok(CosignSignatures { manifest_digest, reference, layers })
    }

    /// A manifest's bytes and content type, `None` when the registry has no such tag.
    async fn manifest(&self, what: &str, reference: &str) -> Result<Option<(Vec<u8>, Option<String>)>, SourceError> {
        let url = self.url(&format!("manifests/{reference}"));
        let resp = self
            .inner
            .client
            .send(&self.target(what), &url, |http| {
                http.get(&url).header(ACCEPT, format!("{OCI_MANIFEST}, {}", crate::registry::MANIFEST_ACCEPT))
            })
            .await
            .map_err(|e| registry_error(what, e))?;
        match resp.status() {
            StatusCode::NOT_FOUND => return Ok(None),
            s if !s.is_success() => return Err(unexpected_status(what, &url, s)),
            _ => {}
        }
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body =
            read_bounded(resp, MAX_MANIFEST_BYTES).await.map_err(|m| protocol(what, format!("manifest: {m}")))?;
        Ok(Some((body, content_type)))
    }

    /// A small blob, checked against its digest.
    async fn small_blob(&self, what: &str, digest: &str) -> Result<Vec<u8>, SourceError> {
        let url = self.url(&format!("blobs/{digest}"));
        let resp = self
            .inner
            .client
            .send(&self.target(what), &url, |http| http.get(&url))
            .await
            .map_err(|e| registry_error(what, e))?;
        if !resp.status().is_success() {
            return Err(unexpected_status(what, &url, resp.status()));
        }
        let body =
            read_bounded(resp, MAX_PAYLOAD_BYTES).await.map_err(|m| protocol(what, format!("blob {digest}: {m}")))?;
        if format!("sha256:{}", hex(&Sha256::digest(&body))) != digest {
            return Err(protocol(what, format!("blob {digest}: the content does not match its digest")));
        }
        Ok(body)
    }
}

/// Pushes signature layers for the manifest `digest` where cosign looks: the manifest tagged
/// `sha256-<hex>.sig` in the same repository (layers of [`SIMPLE_SIGNING`], a config as cosign
/// writes it). Replaces what that tag held. Returns the tag.
pub async fn push_cosign_signatures(
    client: &RegistryClient,
    host: &str,
    repository: &str,
    base_url: &str,
    digest: &str,
    layers: &[SignatureLayer],
) -> Result<String, SourceError> {
    let tag = signature_tag(digest);
    let what = format!("oci://{host}/{repository}:{tag}");
    let base = base_url.trim_end_matches('/');
    let target = Target { what: &what, host, repository, push: true };
    let mut descriptors = Vec::new();
    let mut diff_ids = Vec::new();
    for layer in layers {
        let blob = bytes::Bytes::from(layer.payload.clone());
        let layer_digest = format!("sha256:{}", hex(&Sha256::digest(&blob)));
        let size = blob.len() as u64;
        push_blob(client, &target, base, repository, &layer_digest, BlobBody::Bytes(blob)).await?;
        diff_ids.push(layer_digest.clone());
        descriptors.push(super::Descriptor {
            media_type: SIMPLE_SIGNING.into(),
            digest: layer_digest,
            size,
            annotations: layer.annotations.clone(),
        });
    }
    // cosign's config: an image config whose rootfs lists the payloads.
    let config = bytes::Bytes::from(
        serde_json::to_vec(&serde_json::json!({
            "architecture": "", "created": "0001-01-01T00:00:00Z", "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "", "rootfs": {"type": "layers", "diff_ids": diff_ids}, "config": {},
        }))
        .map_err(|e| SourceError::Other(format!("{what}: config: {e}")))?,
    );
    let config_digest = format!("sha256:{}", hex(&Sha256::digest(&config)));
    let config_size = config.len() as u64;
    push_blob(client, &target, base, repository, &config_digest, BlobBody::Bytes(config)).await?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": super::Descriptor {
            media_type: "application/vnd.oci.image.config.v1+json".into(),
            digest: config_digest,
            size: config_size,
            annotations: BTreeMap::new(),
        },
        "layers": descriptors,
    });
    put_manifest(client, &target, base, &tag, &manifest).await?;
    Ok(tag)
}
