//! Writing to an OCI registry: `publish` pushes a release as an ORAS-style artifact, and
//! `publish_chart` a packaged Helm chart as `helm push` lays it out. Blobs first, the manifest
//! last, so a reader never sees half a release.

use std::path::Path;

use reqwest::StatusCode;
use reqwest::header::CONTENT_TYPE;
use sha2::{Digest, Sha256};

use super::{
    ARTIFACT_TYPE, Descriptor, EMPTY_CONFIG, OCI_MANIFEST, TITLE_ANNOTATION, hex, protocol, registry_error, resolve,
    unexpected_status,
};
use crate::registry::{RegistryClient, Target};
use crate::source::{Progress, SourceError};

/// The media type `publish` gives the files (what `oras push` gives files by default).
pub const FILE_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";

/// The form of the artifact `publish` writes: its `artifactType` and its layers' media types.
/// The manifest is the same OCI image manifest (v1.1, an empty config) in every form, as `oras
/// push --artifact-type` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ArtifactForm {
    /// The stack repository's build script's ([`ARTIFACT_TYPE`]); files as `oras push` types them.
    #[default]
    ClusterStack,
    /// csctl's ([`super::CSCTL_ARTIFACT_TYPE`]), with its media type per file (`metadata.yaml`,
    /// the cluster-class and cluster-addon archives...).
    Csctl,
    /// Any other artifact type; files as `oras push` types them.
    Other(String),
}

impl ArtifactForm {
    /// `clusterstack`, `csctl`, or a media type (`type/subtype`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "clusterstack" | ARTIFACT_TYPE => Ok(ArtifactForm::ClusterStack),
            "csctl" | super::CSCTL_ARTIFACT_TYPE => Ok(ArtifactForm::Csctl),
            other
                if other.split_once('/').is_some_and(|(t, st)| {
                    !t.is_empty() && !st.is_empty() && other.bytes().all(|b| b.is_ascii_graphic() && b != b'"')
                }) =>
            {
                Ok(ArtifactForm::Other(other.to_string()))
            }
            other => Err(format!("{other:?} is not clusterstack, csctl or a media type (type/subtype)")),
        }
    }

    /// The manifest's `artifactType`.
    pub fn artifact_type(&self) -> &str {
        match self {
            ArtifactForm::ClusterStack => ARTIFACT_TYPE,
            ArtifactForm::Csctl => super::CSCTL_ARTIFACT_TYPE,
            ArtifactForm::Other(t) => t,
        }
    }

    /// The media type of the layer of file `name` (csctl's `getMediaType`; otherwise oras').
    pub fn layer_media_type(&self, name: &str) -> &'static str {
        if *self != ArtifactForm::Csctl {
            return FILE_MEDIA_TYPE;
        }
        let tgz = name.ends_with(".tgz");
        match name {
            "clusteraddon.yaml" => "application/vnd.scs.cluster-addon.config.layer.v1+yaml",
            "metadata.yaml" => "application/vnd.scs.metadata.layer.v1+yaml",
            "node-images.yaml" => "application/vnd.scs.node-image.config.layer.v1+yaml",
            "hashes.json" => "application/vnd.scs.hashes.layer.v1+yaml",
            n if tgz && n.contains("cluster-addon") => "application/vnd.scs.cluster-addon.layer.v1.tar+gzip",
            n if tgz && n.contains("cluster-class") => "application/vnd.scs.cluster-class.v1.tar+gzip",
            n if tgz && n.contains("node-image") => "application/vnd.scs.node-image.layer.v1.tar+gzip",
            _ => FILE_MEDIA_TYPE,
        }
    }
}

/// [`publish_as`] in the default form ([`ArtifactForm::ClusterStack`]).
pub async fn publish(
    client: &RegistryClient,
    host: &str,
    repository: &str,
    base_url: &str,
    tag: &str,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<String, SourceError> {
    publish_as(client, host, repository, base_url, tag, dir, progress, &ArtifactForm::default()).await
}

/// Pushes the files of `dir` (regular files at its top level) as an ORAS-style artifact tagged
/// `tag`, in `form`: every blob the registry lacks is uploaded (a `HEAD` first, so existing ones
/// are not sent again), then the manifest, last, so a reader never sees half a release. Returns
/// the manifest's digest. Blobs stream from their files (hashed in a first pass), so memory stays
/// flat whatever their size.
#[allow(clippy::too_many_arguments)]
pub async fn publish_as(
    client: &RegistryClient,
    host: &str,
    repository: &str,
    base_url: &str,
    tag: &str,
    dir: &Path,
    progress: &dyn Progress,
    form: &ArtifactForm,
) -> Result<String, SourceError> {
    let source = format!("oci://{host}/{repository}");
    let what = format!("{source}:{tag}");
    let base = base_url.trim_end_matches('/');
    let mut names = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| SourceError::io("reading", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io("reading", dir, e))?;
        let file_type = entry.file_type().map_err(|e| SourceError::io("reading", &entry.path(), e))?;
        if file_type.is_file() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    if names.is_empty() {
        return Err(SourceError::Other(format!("{}: no files to publish", dir.display())));
    }
    let target = Target { what: &what, host, repository, push: true };
    let mut layers = Vec::new();
    for name in names {
        let path = dir.join(&name);
        let hashed = path.clone();
        let (size, digest) = tokio::task::spawn_blocking(move || crate::source::cache::hash_file(&hashed))
            .await
            .map_err(|e| SourceError::Other(format!("{what}: hashing {name}: {e}")))?
            .map_err(|e| SourceError::io("reading", &path, e))?;
        progress.start(&name, Some(size));
        let digest = format!("sha256:{digest}");
        push_blob(client, &target, base, repository, &digest, BlobBody::File { path, size }).await?;
        progress.advance(size);
        progress.finish(&name);
        let media_type = form.layer_media_type(&name).to_string();
        let annotations = std::collections::BTreeMap::from([(TITLE_ANNOTATION.to_string(), name)]);
        layers.push(Descriptor { media_type, digest, size, annotations });
    }
    let config = bytes::Bytes::from_static(b"{}");
    let config_digest = format!("sha256:{}", hex(&Sha256::digest(&config)));
    push_blob(client, &target, base, repository, &config_digest, BlobBody::Bytes(config.clone())).await?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": form.artifact_type(),
        "config": Descriptor {
            media_type: EMPTY_CONFIG.into(),
            digest: config_digest,
            size: config.len() as u64,
            annotations: Default::default(),
        },
        "layers": layers,
    });
    put_manifest(client, &target, base, tag, &manifest).await
}

/// Helm's media type of a chart's config blob (its `Chart.yaml` as JSON).
pub const HELM_CONFIG: &str = "application/vnd.cncf.helm.config.v1+json";
/// Helm's media type of the chart archive layer.
pub const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// Pushes a packaged Helm chart as `helm push` lays it out (Helm's `pkg/registry`): an OCI image
/// manifest whose config is the chart's metadata as JSON ([`HELM_CONFIG`]) and whose one layer
/// is the chart archive ([`HELM_CHART_LAYER`]), tagged `tag` (the chart version), so that
/// `helm pull oci://HOST/REPOSITORY --version TAG` and `helm install` take it. Returns the
/// manifest's digest.
#[allow(clippy::too_many_arguments)]
pub async fn publish_chart(
    client: &RegistryClient,
    host: &str,
    repository: &str,
    base_url: &str,
    tag: &str,
    metadata: &serde_json::Value,
    archive: bytes::Bytes,
    annotations: std::collections::BTreeMap<String, String>,
) -> Result<String, SourceError> {
    let what = format!("oci://{host}/{repository}:{tag}");
    let base = base_url.trim_end_matches('/');
    let target = Target { what: &what, host, repository, push: true };
    let config = bytes::Bytes::from(
        serde_json::to_vec(metadata).map_err(|e| SourceError::Other(format!("{what}: chart metadata: {e}")))?,
    );
    let mut descriptors = Vec::new();
    for (media_type, blob) in [(HELM_CONFIG, config), (HELM_CHART_LAYER, archive)] {
        let digest = format!("sha256:{}", hex(&Sha256::digest(&blob)));
        let size = blob.len() as u64;
        push_blob(client, &target, base, repository, &digest, BlobBody::Bytes(blob)).await?;
        descriptors.push(Descriptor { media_type: media_type.into(), digest, size, annotations: Default::default() });
    }
    let layer = descriptors.pop();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptors.pop(),
        "layers": [layer],
        "annotations": annotations,
    });
    put_manifest(client, &target, base, tag, &manifest).await
}

/// PUTs a manifest under `tag` (written last, once its blobs are there); returns its digest.
pub(super) async fn put_manifest(
    client: &RegistryClient,
    target: &Target<'_>,
    base: &str,
    tag: &str,
    manifest: &serde_json::Value,
) -> Result<String, SourceError> {
    let what = target.what;
    let body = bytes::Bytes::from(
        serde_json::to_vec(manifest).map_err(|e| SourceError::Other(format!("{what}: manifest: {e}")))?,
    );
    let digest = format!("sha256:{}", hex(&Sha256::digest(&body)));
    let url = format!("{base}/v2/{}/manifests/{tag}", target.repository);
    let resp = client
        .send(target, &url, |http| http.put(&url).header(CONTENT_TYPE, OCI_MANIFEST).body(body.clone()))
        .await
        .map_err(|e| registry_error(what, e))?;
    if !resp.status().is_success() {
        return Err(unexpected_status(what, &url, resp.status()));
    }
    Ok(digest)
}

/// What a blob upload sends.
pub(super) enum BlobBody {
    Bytes(bytes::Bytes),
    /// Streamed from the file; opened anew for each attempt (an authentication retry sends again).
    File {
        path: std::path::PathBuf,
        size: u64,
    },
}

impl BlobBody {
    fn len(&self) -> u64 {
        match self {
            BlobBody::Bytes(b) => b.len() as u64,
            BlobBody::File { size, .. } => *size,
        }
    }

    fn body(&self) -> reqwest::Body {
        match self {
            BlobBody::Bytes(b) => reqwest::Body::from(b.clone()),
            BlobBody::File { path, .. } => {
                // A file that cannot be opened fails the request with the I/O error.
                let file = std::fs::File::open(path).map(tokio::fs::File::from_std);
                let chunks = futures::stream::try_unfold(Some(file), |state| async move {
                    use tokio::io::AsyncReadExt;
                    let mut file = match state {
                        Some(Ok(f)) => f,
                        Some(Err(e)) => return Err(e),
                        None => return Ok(None),
                    };
                    let mut buf = vec![0u8; 256 * 1024];
                    let n = file.read(&mut buf).await?;
                    if n == 0 {
                        return Ok(None);
                    }
                    buf.truncate(n);
                    Ok(Some((bytes::Bytes::from(buf), Some(Ok(file)))))
                });
                reqwest::Body::wrap_stream(chunks)
            }
        }
    }
}

/// Uploads one blob unless the registry has it (monolithic upload: `POST` then `PUT ?digest=`).
pub(super) async fn push_blob(
    client: &RegistryClient,
    target: &Target<'_>,
    base: &str,
    repository: &str,
    digest: &str,
    blob: BlobBody,
) -> Result<(), SourceError> {
    let what = format!("{} blob {digest}", target.what);
    let url = format!("{base}/v2/{repository}/blobs/{digest}");
    let head = client.send(target, &url, |http| http.head(&url)).await.map_err(|e| registry_error(&what, e))?;
    if head.status().is_success() {
        tracing::debug!(blob = digest, "already in the registry");
        return Ok(());
    }
    let start = format!("{base}/v2/{repository}/blobs/uploads/");
    let resp = client.send(target, &start, |http| http.post(&start)).await.map_err(|e| registry_error(&what, e))?;
    if resp.status() != StatusCode::ACCEPTED {
        return Err(unexpected_status(&what, &start, resp.status()));
    }
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| protocol(&what, format!("{start}: the upload has no Location")))?;
    let mut put = reqwest::Url::parse(
        &resolve(base, location).ok_or_else(|| protocol(&what, format!("bad upload Location {location:?}")))?,
    )
    .map_err(|e| protocol(&what, format!("bad upload Location {location:?}: {e}")))?;
    put.query_pairs_mut().append_pair("digest", digest);
    let put = put.to_string();
    let resp = client
        .send(target, &put, |http| {
            http.put(&put)
                .header(CONTENT_TYPE, "application/octet-stream")
                .header(reqwest::header::CONTENT_LENGTH, blob.len())
                .body(blob.body())
        })
        .await
        .map_err(|e| registry_error(&what, e))?;
    if resp.status() != StatusCode::CREATED {
        return Err(unexpected_status(&what, &put, resp.status()));
    }
    Ok(())
}
