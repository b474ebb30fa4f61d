//! The signature-policy flags of `pull`, `render` and `plan`: the same check the operator makes
//! before it extracts a release, offline. A policy's ConfigMap and Secret references cannot be
//! read from here: the files they hold are given with `--verify-key` and `--verify-trusted-root`.

use std::path::PathBuf;

use super::source_args::SourceCliError;
use crate::api::VerifySpec;
use crate::source::verify::policy::{ReleasePolicy, Resolved};

#[derive(Debug, Clone, Default, clap::Args)]
pub struct VerifyArgs {
    /// Verify the release's signatures before it is extracted, under this policy (YAML, the
    /// shape of `ClusterStack.spec.verify`). `plan` also takes the stack's own `spec.verify`.
    #[arg(long, value_name = "FILE")]
    pub verify_policy: Option<PathBuf>,
    /// The PEM public key the policy's `key` refers to.
    #[arg(long, value_name = "FILE")]
    pub verify_key: Option<PathBuf>,
    /// The `trusted_root.json` the policy's `trustedRoot` ConfigMap or Secret refers to.
    #[arg(long, value_name = "FILE")]
    pub verify_trusted_root: Option<PathBuf>,
}

impl VerifyArgs {
    /// The policy: `--verify-policy`, else `fallback` (a stack's `spec.verify`); `None` without.
    pub fn policy(&self, fallback: Option<&VerifySpec>) -> Result<Option<ReleasePolicy>, SourceCliError> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|e| SourceCliError::Usage(format!("{}: {e}", path.display())))
        };
        let from_file;
        let spec = match &self.verify_policy {
            Some(path) => {
                from_file = serde_saphyr::from_str::<VerifySpec>(&read(path)?)
                    .map_err(|e| SourceCliError::Usage(format!("--verify-policy {}: {e}", path.display())))?;
                &from_file
            }
            None => match fallback {
                Some(spec) => spec,
                None => return Ok(None),
            },
        };
        let mut resolved = Resolved::default();
        if let Some(path) = &self.verify_key {
            resolved.key_pem = Some(read(path)?);
        }
        if let Some(path) = &self.verify_trusted_root {
            resolved.trusted_root = Some((path.display().to_string(), read(path)?));
        }
        ReleasePolicy::new(spec, &resolved)
            .map(Some)
            .map_err(|f| SourceCliError::Verification(format!("the signature policy: {f}")))
    }
}
