//! `clusterstack verify-bundle`: one Sigstore bundle against one artifact, offline, speaking the
//! Sigstore conformance suite's CLI protocol:
//!
//! ```text
//! clusterstack verify-bundle --bundle B --certificate-identity I --certificate-oidc-issuer O [--trusted-root R] FILE_OR_DIGEST
//! clusterstack verify-bundle --bundle B --key K [--trusted-root R] FILE_OR_DIGEST
//! ```
//!
//! `FILE_OR_DIGEST` is a path, or `sha256:<64 hex>`. Without `--trusted-root` the built-in
//! public-good root is used (`--trusted-root github` and `public-good` name the built-in ones).
//! Exit status 0 only when the bundle is valid; the reason is printed otherwise.

use std::path::PathBuf;

use super::source_args::SourceCliError;
use crate::source::verify::{self, BuiltInRoot, Identity, Signer, Trust, TrustRoot};

#[derive(Debug, clap::Args)]
pub struct VerifyBundleArgs {
    /// The Sigstore bundle (JSON).
    #[arg(long)]
    pub bundle: PathBuf,
    /// The certificate's identity (SAN) required, exactly.
    #[arg(long, required_unless_present = "key", conflicts_with = "key")]
    pub certificate_identity: Option<String>,
    /// The certificate's OIDC issuer required, exactly.
    #[arg(long, required_unless_present = "key", conflicts_with = "key")]
    pub certificate_oidc_issuer: Option<String>,
    /// A PEM public key: the bundle must be signed with it (managed key) instead of a certificate.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// A `trusted_root.json`, or `public-good` / `github` for a built-in one. Default: public-good.
    #[arg(long)]
    pub trusted_root: Option<String>,
    /// Accept a managed-key bundle without a transparency-log entry (air-gapped signing).
    #[arg(long, requires = "key")]
    pub insecure_ignore_tlog: bool,
    /// Sigstore's staging instance (the conformance suite's `--staging`): not built in, refused.
    #[arg(long, hide = true)]
    pub staging: bool,
    /// The artifact: a file, or `sha256:<64 hex>`.
    pub artifact: String,
}

pub fn run(args: VerifyBundleArgs) -> Result<(), SourceCliError> {
    let usage = SourceCliError::Usage;
    if args.staging {
        return Err(usage("--staging: the staging instance's root is not built in; pass --trusted-root".into()));
    }
    let root = match args.trusted_root.as_deref() {
        None => BuiltInRoot::PublicGood.root().map_err(usage)?,
        Some(name) => match BuiltInRoot::parse(name) {
            Some(built_in) => built_in.root().map_err(usage)?,
            None => {
                let json = std::fs::read_to_string(name).map_err(|e| usage(format!("{name}: {e}")))?;
                TrustRoot::from_json(name, &json).map_err(usage)?
            }
        },
    };
    let signer = match &args.key {
        Some(path) => {
            let pem = std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
            let key = verify::public_key_from_pem(&pem).map_err(|e| usage(format!("{}: {e}", path.display())))?;
            Signer::Key { key, require_tlog: !args.insecure_ignore_tlog }
        }
        None => Signer::Keyless(Identity {
            subject: args.certificate_identity.clone(),
            issuer: args.certificate_oidc_issuer.clone(),
            ..Identity::default()
        }),
    };
    // The protocol: exactly `sha256:<64 hex>` is a digest, anything else a path.
    let (digest, bytes) = match verify::parse_digest(&args.artifact) {
        Some(digest) => (digest, None),
        None => {
            let bytes = std::fs::read(&args.artifact).map_err(|e| usage(format!("{}: {e}", args.artifact)))?;
            (verify::sha256_of(&bytes), Some(bytes))
        }
    };
    let bundle = std::fs::read(&args.bundle).map_err(|e| usage(format!("{}: {e}", args.bundle.display())))?;
    let trust = Trust { roots: vec![root], signer };
    let verified = trust
        .verify_subject(&bundle, &digest, bytes.as_deref())
        .map_err(|f| SourceCliError::Verification(format!("{}: {f}", args.bundle.display())))?;
    println!("OK: {} (signer {}, trusted root {})", args.bundle.display(), verified.signer, verified.root);
    Ok(())
}
