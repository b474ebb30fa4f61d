//! `clusterstack publish RELEASE_DIR oci://HOST/REPOSITORY`: pushes a built release as an
//! ORAS-style artifact (one layer per file, named by `org.opencontainers.image.title`), blobs the
//! registry already has skipped, the tag written last.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use super::pull::BarProgress;
use super::source_args::SourceCliError;
use crate::registry::RegistryClient;
use crate::source::oci::{self, OciOptions};
use crate::source::{NoProgress, Progress, SourceError, SourceSpec};

#[derive(Debug, clap::Args)]
pub struct PublishArgs {
    /// The release directory (as `clusterstack build` writes it: metadata.yaml, the chart archives...).
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
}

pub async fn run(args: PublishArgs) -> Result<(), SourceCliError> {
    let spec: SourceSpec = SourceSpec::oci(&args.target)?;
    let SourceSpec::Oci { host, repository, .. } = &spec else {
        return Err(SourceCliError::Usage(format!("{}: expected oci://HOST/REPOSITORY", args.target)));
    };
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
    let digest = oci::publish(&client, host, repository, &base, &tag, &args.release_dir, progress.as_ref()).await?;
    println!("{spec}:{tag}@{digest}");
    Ok(())
}
