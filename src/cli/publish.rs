//! `clusterstack publish RELEASE_DIR oci://HOST/REPOSITORY`: pushes a built release as an
//! ORAS-style artifact (one layer per file, named by `org.opencontainers.image.title`), blobs the
//! registry already has skipped, the tag written last.
//!
//! `clusterstack publish --chart CHART_DIR oci://HOST/REPOSITORY`: packs a Helm chart (as `helm
//! package` does, reproducibly) and pushes it as `helm push` does, to `REPOSITORY/NAME:VERSION`,
//! for `helm install oci://HOST/REPOSITORY/NAME --version VERSION` (e.g. `charts/clusterstack`).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use super::pull::BarProgress;
use super::source_args::SourceCliError;
use crate::registry::RegistryClient;
use crate::source::oci::{self, OciOptions};
use crate::source::verify::cosign;
use crate::source::verify::keyless::{self, KeylessSigner};
use crate::source::verify::sign::{KeySigner, sign_release_dir, sign_release_dir_keyless};
use crate::source::{NoProgress, Progress, SourceError, SourceSpec};

#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The release directory (as `clusterstack build` writes it: metadata.yaml, the chart
    /// archives...); with `--chart`, a Helm chart directory.
    pub release_dir: PathBuf,
    /// Where to: `oci://HOST[:PORT]/REPOSITORY`. Credentials come from env OCI_USERNAME +
    /// OCI_PASSWORD or OCI_ACCESS_TOKEN.
    pub target: String,
    /// The tag; default: the release directory's name (e.g. `docker-ferrol-1-27-v1`).
    #[arg(long)]
    pub tag: Option<String>,
    /// Reach this registry host over plain http:// (loopback hosts always are). Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST")]
    pub insecure_registries: Vec<String>,
    /// Publish a Helm chart directory instead of a release, as `helm push` does: to
    /// `REPOSITORY/<chart name>`, tagged with the chart version (default of `--tag`).
    #[arg(long)]
    pub chart: bool,
    /// The artifact's form: `clusterstack` (the default: `application/vnd.clusterstack.release`,
    /// as Sovereign Cloud Stack's stack repository pushes releases with oras), `csctl`
    /// (`application/vnd.scs.cluster-stacks.v1` with csctl's media type per file), or another
    /// artifact type. The operator reads each.
    #[arg(long, default_value = "clusterstack", value_parser = oci::ArtifactForm::parse)]
    pub artifact_type: oci::ArtifactForm,
    /// Sign what is published: a Sigstore bundle `<file>.sigstore.json` for every file (pushed
    /// with the release), and a cosign signature of the release's manifest where cosign looks
    /// (the tag `sha256-<digest>.sig`). With `--key`, signed by that key; otherwise keyless, with
    /// an OIDC token (`--identity-token`, or the CI's own: GitHub Actions with `id-token: write`).
    #[arg(long)]
    pub sign: bool,
    /// The signing key: an unencrypted PKCS#8 PEM ECDSA P-256 key (`clusterstack keygen`). No
    /// transparency log is written to (air-gapped): verifiers set `ignoreTransparencyLog: true`.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Keyless signing: the OIDC identity token (a JWT) Fulcio certifies. Default: the CI's
    /// ambient token, when there is one. Not used with `--key`.
    #[arg(long, env = "SIGSTORE_ID_TOKEN", value_name = "JWT", hide_env_values = true)]
    pub identity_token: Option<String>,
    /// Keyless signing: the Fulcio that issues the certificate.
    #[arg(long, value_name = "URL", default_value = keyless::PUBLIC_GOOD_FULCIO)]
    pub fulcio_url: String,
    /// Keyless signing: the Rekor (v1 API) that logs the signatures.
    #[arg(long, value_name = "URL", default_value = keyless::PUBLIC_GOOD_REKOR)]
    pub rekor_url: String,
}

/// Who signs: a key, or Fulcio's certificate for an OIDC identity.
enum Signing {
    Key(KeySigner),
    Keyless(Box<KeylessSigner>),
}

impl Signing {
    async fn new(args: &PublishArgs) -> Result<Self, SourceCliError> {
        if let Some(path) = &args.key {
            let pem =
                std::fs::read_to_string(path).map_err(|e| SourceCliError::Usage(format!("{}: {e}", path.display())))?;
            let signer =
                KeySigner::from_pem(&pem).map_err(|e| SourceCliError::Usage(format!("{}: {e}", path.display())))?;
            return Ok(Signing::Key(signer));
        }
        let token = match &args.identity_token {
            Some(token) => token.clone(),
            None => KeylessSigner::ambient_token().await.map_err(SourceCliError::Usage)?.ok_or_else(|| {
                SourceCliError::Usage(
                    "--sign needs --key, or an OIDC token for keyless signing (--identity-token, \
                     SIGSTORE_ID_TOKEN, or a CI job allowed to ask for one)"
                        .into(),
                )
            })?,
        };
        let signer = KeylessSigner::new(&token, &args.fulcio_url, &args.rekor_url).map_err(SourceCliError::Usage)?;
        Ok(Signing::Keyless(Box::new(signer)))
    }

    /// Writes the bundles of every file of the release directory.
    async fn sign_dir(&self, dir: &std::path::Path) -> Result<usize, SourceCliError> {
        let written = match self {
            Signing::Key(signer) => sign_release_dir(dir, signer),
            Signing::Keyless(signer) => sign_release_dir_keyless(dir, signer).await,
        };
        written.map(|w| w.len()).map_err(SourceCliError::Output)
    }

    /// The cosign signature layer of `payload`.
    async fn cosign_layer(&self, payload: Vec<u8>) -> Result<cosign::SignatureLayer, SourceCliError> {
        let annotations = match self {
            Signing::Key(signer) => cosign::keyed_annotations(signer, &payload),
            Signing::Keyless(signer) => match signer.sign_payload(&payload).await {
                Ok(bundle) => keyless::cosign_annotations(&bundle),
                Err(e) => Err(e),
            },
        };
        Ok(cosign::SignatureLayer { payload, annotations: annotations.map_err(SourceCliError::Output)? })
    }
}

pub async fn run(args: PublishArgs) -> Result<(), SourceCliError> {
    let spec: SourceSpec = SourceSpec::oci(&args.target)?;
    let SourceSpec::Oci { host, repository, .. } = &spec else {
        return Err(SourceCliError::Usage(format!("{}: expected oci://HOST/REPOSITORY", args.target)));
    };
    if args.chart {
        return publish_chart(&args, host, repository).await;
    }
    let tag = match &args.tag {
        Some(t) => t.clone(),
        None => args
            .release_dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .ok_or_else(|| SourceCliError::Usage("cannot derive a tag from the directory: pass --tag".into()))?,
    };
    let mut options = OciOptions::from_env(host, |k| std::env::var(k).ok());
    options.insecure.extend(args.insecure_registries.iter().cloned());
    crate::install_crypto_provider();
    let client = Arc::new(RegistryClient::new(options.registry.clone()).map_err(SourceError::Other)?);
    let base = oci::registry_base_url(host, &options.insecure);
    let progress: Box<dyn Progress> =
        if std::io::stderr().is_terminal() { Box::new(BarProgress::default()) } else { Box::new(NoProgress) };
    let mut signer = None;
    if args.sign {
        let signing = Signing::new(&args).await?;
        // The bundles are files of the release, pushed with it.
        let count = signing.sign_dir(&args.release_dir).await?;
        match &signing {
            Signing::Key(_) => eprintln!("signed {count} file(s) of {}", args.release_dir.display()),
            Signing::Keyless(k) => eprintln!(
                "signed {count} file(s) of {} as {} ({}), logged to {}",
                args.release_dir.display(),
                k.identity(),
                k.issuer(),
                args.rekor_url
            ),
        }
        signer = Some(signing);
    }
    let digest = oci::publish_as(
        &client,
        host,
        repository,
        &base,
        &tag,
        &args.release_dir,
        progress.as_ref(),
        &args.artifact_type,
    )
    .await?;
    println!("{spec}:{tag}@{digest}");
    if let Some(signer) = signer {
        let payload = cosign::payload(&format!("{host}/{repository}"), &digest);
        let layer = signer.cosign_layer(payload).await?;
        let sig_tag = oci::push_cosign_signatures(&client, host, repository, &base, &digest, &[layer]).await?;
        println!("{spec}:{sig_tag}");
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct KeygenArgs {
    /// Writes PREFIX.key (the private key, PKCS#8 PEM, mode 0600) and PREFIX.pub (the public key).
    #[arg(default_value = "cosign")]
    pub prefix: PathBuf,
}

/// `clusterstack keygen`: a key pair for `publish --sign --key` (ECDSA P-256).
pub fn keygen(args: KeygenArgs) -> Result<(), SourceCliError> {
    let generated = KeySigner::generate().map_err(SourceCliError::Output)?;
    let private = args.prefix.with_extension("key");
    let public = args.prefix.with_extension("pub");
    for path in [&private, &public] {
        if path.exists() {
            return Err(SourceCliError::Usage(format!("{} exists; not overwritten", path.display())));
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let write = |path: &std::path::Path, text: &str, options: &std::fs::OpenOptions| {
        use std::io::Write;
        options
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| SourceCliError::Output(format!("{}: {e}", path.display())))
    };
    write(&private, &generated.private_pem, &options)?;
    let mut public_options = std::fs::OpenOptions::new();
    public_options.write(true).create_new(true);
    write(&public, &generated.public_pem, &public_options)?;
    println!("private key {} (keep it secret), public key {}", private.display(), public.display());
    Ok(())
}

/// A chart directory packed as `helm package` packs it (one top directory named by the chart),
/// with its metadata (`Chart.yaml` as JSON, Helm's config blob).
pub struct PackedChart {
    pub name: String,
    pub version: String,
    pub metadata: serde_json::Value,
    pub archive: Vec<u8>,
}

/// Packs `dir`: every file but hidden ones (`.helmignore`, editor files), in a reproducible
/// archive (sorted entries, fixed times), so publishing the same chart twice gives one digest.
pub fn pack_chart(dir: &std::path::Path) -> Result<PackedChart, SourceCliError> {
    let files = crate::package::build::collect_files(dir)
        .map_err(|e| SourceCliError::Usage(format!("{}: {e}", dir.display())))?;
    let files: std::collections::BTreeMap<String, Vec<u8>> =
        files.into_iter().filter(|(path, _)| !path.split('/').any(|part| part.starts_with('.'))).collect();
    let chart_yaml = files
        .get("Chart.yaml")
        .ok_or_else(|| SourceCliError::Usage(format!("{}: no Chart.yaml: not a Helm chart", dir.display())))?;
    let (_, metadata) = helm_render::chart_yaml::read(chart_yaml)
        .map_err(|e| SourceCliError::Usage(format!("{}/Chart.yaml: {e}", dir.display())))?;
    let field = |key: &str| {
        metadata[key]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or_else(|| SourceCliError::Usage(format!("{}/Chart.yaml: no {key}", dir.display())))
    };
    let (name, version) = (field("name")?, field("version")?);
    let archive = crate::package::build::tarball(&files, &format!("{name}/"))
        .map_err(|e| SourceCliError::Output(format!("packing {}: {e}", dir.display())))?;
    Ok(PackedChart { name, version, metadata, archive })
}

async fn publish_chart(args: &PublishArgs, host: &str, repository: &str) -> Result<(), SourceCliError> {
    let chart = pack_chart(&args.release_dir)?;
    // OCI tags have no `+`: Helm writes a SemVer build suffix with `_` instead.
    let tag = args.tag.clone().unwrap_or_else(|| chart.version.replace('+', "_"));
    let repository = format!("{}/{}", repository.trim_end_matches('/'), chart.name);
    let mut options = OciOptions::from_env(host, |k| std::env::var(k).ok());
    options.insecure.extend(args.insecure_registries.iter().cloned());
    crate::install_crypto_provider();
    let client = Arc::new(RegistryClient::new(options.registry.clone()).map_err(SourceError::Other)?);
    let base = oci::registry_base_url(host, &options.insecure);
    let mut annotations = std::collections::BTreeMap::from([
        ("org.opencontainers.image.title".to_string(), chart.name.clone()),
        ("org.opencontainers.image.version".to_string(), chart.version.clone()),
    ]);
    if let Some(d) = chart.metadata["description"].as_str() {
        annotations.insert("org.opencontainers.image.description".into(), d.to_string());
    }
    let archive = bytes::Bytes::from(chart.archive);
    let digest =
        oci::publish_chart(&client, host, &repository, &base, &tag, &chart.metadata, archive, annotations).await?;
    println!("oci://{host}/{repository}:{tag}@{digest}");
    Ok(())
}
