//! Who made a release: Sigstore bundles verified offline against a trusted root.
//!
//! Digests and `SHA256SUMS` (the cache's checks) prove a release is intact; a signature proves who
//! made it. This module verifies Sigstore bundles (v0.1–v0.3: message signatures and DSSE in-toto
//! attestations, Fulcio certificates, Rekor inclusion proofs, checkpoints and signed entry
//! timestamps, RFC 3161 timestamps) with `sigstore-verify`, never contacting anything: the trusted
//! root is one shipped in the binary ([`roots`]), or one the user gives.
//!
//! - [`Trust`]: what a release must satisfy: the roots, and the signer (an identity for keyless
//!   signatures, or a public key).
//! - [`Trust::verify`]: one bundle against one artifact digest; a [`Failure`] says what failed in
//!   the words a `Ready=False` reason uses ([`FailureReason`]).
//! - [`policy`]: the policy of a `ClusterStack` (`spec.verify`) turned into a [`Trust`], and the
//!   check of a whole release's bundles ([`policy::ReleasePolicy::check_bundles`]), from its
//!   assets or its source's attestation store (GitHub's attestations API).
//! - [`sign`]: the other side, what `publish --sign` writes with a key, [`keyless`] with an OIDC
//!   token (Fulcio and Rekor); [`cosign`]: signatures in an OCI registry where cosign keeps them.

pub mod cosign;
pub mod crypto;
pub mod identity;
pub mod keyless;
pub mod policy;
pub mod roots;
pub mod sign;

use std::fmt;

use sigstore_verify::types::{Artifact, Bundle, DerPublicKey, Sha256Hash, SignatureContent};
use sigstore_verify::{Error as VError, PublicKeyVerificationPolicy, VerificationPolicy, Verifier};

pub use identity::Identity;
pub use roots::{BuiltInRoot, TrustRoot};

/// The file name suffix of a release asset's bundle: `<asset>.sigstore.json`, as `cosign
/// sign-blob --bundle` and `gh attestation download` name theirs.
pub const BUNDLE_SUFFIX: &str = ".sigstore.json";

/// Why a signature check failed, as the condition's reason names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureReason {
    /// No signature (bundle, cosign signature) for an asset or the artifact.
    SignatureMissing,
    /// Signed, but by someone else: another identity, issuer, repository, workflow, ref or key.
    WrongIdentity,
    /// The signature does not cover these bytes: the asset was changed after signing.
    ArtifactMismatch,
    /// A proof does not hold: the signature, the certificate's validity at signing time, the
    /// transparency-log entry (inclusion proof, checkpoint, SET) or a timestamp.
    BadProof,
    /// The certificate or log is not one the trusted root knows, or the root itself is unusable.
    UnknownRoot,
    /// The bundle is not a Sigstore bundle this verifier reads.
    MalformedBundle,
}

impl FailureReason {
    /// The reason as a condition's `reason` (CamelCase) and a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::SignatureMissing => "SignatureMissing",
            FailureReason::WrongIdentity => "WrongIdentity",
            FailureReason::ArtifactMismatch => "ArtifactMismatch",
            FailureReason::BadProof => "BadProof",
            FailureReason::UnknownRoot => "UnknownRoot",
            FailureReason::MalformedBundle => "MalformedBundle",
        }
    }

    /// Every reason, for metrics that list all of them.
    pub const ALL: [FailureReason; 6] = [
        FailureReason::SignatureMissing,
        FailureReason::WrongIdentity,
        FailureReason::ArtifactMismatch,
        FailureReason::BadProof,
        FailureReason::UnknownRoot,
        FailureReason::MalformedBundle,
    ];
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed signature check: what failed and a message naming the asset and the detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Failure {
    pub reason: FailureReason,
    pub message: String,
}

impl Failure {
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self { reason, message: message.into() }
    }

    /// The same failure with `what` (an asset, an artifact) named first.
    pub fn about(mut self, what: &str) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

/// Who must have signed.
#[derive(Debug, Clone)]
pub enum Signer {
    /// A Fulcio certificate whose identity matches.
    Keyless(Identity),
    /// A managed key. `require_tlog: false` accepts bundles without a transparency-log entry
    /// (what an air-gapped `publish --sign --key` writes); the key alone then vouches.
    Key { key: DerPublicKey, require_tlog: bool },
}

/// What a release must satisfy: signed by [`Signer`], proved against one of `roots`.
#[derive(Debug)]
pub struct Trust {
    pub roots: Vec<TrustRoot>,
    pub signer: Signer,
}

/// What a successful check found, for status and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The certificate's identity (SAN), or `key` for a managed key.
    pub signer: String,
    /// The root that vouched.
    pub root: String,
}

impl Trust {
    /// Verifies `bundle_json` for the artifact whose sha256 is `digest`. With several roots, the
    /// first that verifies wins; the failure reported is the most telling one (an identity
    /// mismatch over "unknown root", since it means the root did know the signer).
    pub fn verify(&self, bundle_json: &[u8], digest: &Sha256Hash) -> Result<Verified, Failure> {
        self.verify_subject(bundle_json, digest, None)
    }

    /// [`verify`](Self::verify) with the artifact's bytes at hand too (an Ed25519 message
    /// signature needs them; every other scheme verifies over the digest).
    pub fn verify_subject(
        &self,
        bundle_json: &[u8],
        digest: &Sha256Hash,
        bytes: Option<&[u8]>,
    ) -> Result<Verified, Failure> {
        crypto::install();
        let text = std::str::from_utf8(bundle_json)
            .map_err(|_| Failure::new(FailureReason::MalformedBundle, "the bundle is not UTF-8 JSON"))?;
        let bundle = Bundle::from_json(text)
            .map_err(|e| Failure::new(FailureReason::MalformedBundle, format!("not a Sigstore bundle: {e}")))?;
        precheck_subject(&bundle, digest)?;
        if self.roots.is_empty() {
            return Err(Failure::new(FailureReason::UnknownRoot, "no trusted root"));
        }
        let mut worst: Option<Failure> = None;
        for root in &self.roots {
            match self.verify_with(root, &bundle, digest, bytes) {
                Ok(verified) => return Ok(verified),
                Err(failure) => {
                    if worst.as_ref().is_none_or(|w| rank(failure.reason) > rank(w.reason)) {
                        worst = Some(failure);
                    }
                }
            }
        }
        Err(worst.unwrap_or_else(|| Failure::new(FailureReason::UnknownRoot, "no trusted root")))
    }

    fn verify_with(
        &self,
        root: &TrustRoot,
        bundle: &Bundle,
        digest: &Sha256Hash,
        bytes: Option<&[u8]>,
    ) -> Result<Verified, Failure> {
        let verifier = Verifier::new(root.root())
            .map_err(|e| Failure::new(FailureReason::UnknownRoot, format!("trusted root {}: {e}", root.name())))?;
        self.verify_in(root, &verifier, bundle, digest, bytes).map_err(|f| unknown_log(f, root, bundle))
    }

    fn verify_in(
        &self,
        root: &TrustRoot,
        verifier: &Verifier,
        bundle: &Bundle,
        digest: &Sha256Hash,
        bytes: Option<&[u8]>,
    ) -> Result<Verified, Failure> {
        let artifact = || match bytes {
            Some(bytes) => Artifact::from_blob(bytes),
            None => Artifact::from_digest(*digest),
        };
        match &self.signer {
            Signer::Key { key, require_tlog: false } if is_bare(bundle) => {
                verify_bare(key, bundle, digest, bytes)?;
                Ok(Verified { signer: "key".into(), root: "none (managed key, no transparency log)".into() })
            }
            Signer::Key { require_tlog: true, .. } if is_bare(bundle) => Err(Failure::new(
                FailureReason::BadProof,
                "the bundle has no transparency-log entry nor timestamp, and the policy requires one \
                 (ignoreTransparencyLog: true accepts an air-gapped key's bare signature)",
            )),
            Signer::Key { key, require_tlog } => {
                let mut policy = PublicKeyVerificationPolicy::new(key.clone());
                if !require_tlog {
                    policy = policy.skip_tlog_unsafe();
                }
                verifier.verify(artifact(), bundle, &policy).map_err(|e| classify(e, true))?;
                Ok(Verified { signer: "key".into(), root: root.name().to_string() })
            }
            Signer::Keyless(identity) => {
                let mut policy = match identity.exact_policy() {
                    Some((subject, issuer)) => VerificationPolicy::new(subject, issuer),
                    None => VerificationPolicy::any_identity().require_issuer(identity.issuer()),
                };
                if root.is_github_instance() {
                    // GitHub's own instance logs nothing publicly and runs no CT log: its bundles
                    // carry an RFC 3161 timestamp instead. Accepted for that root alone.
                    policy = policy.skip_tlog_unsafe().skip_sct();
                }
                let result = verifier.verify(artifact(), bundle, &policy).map_err(|e| classify(e, false))?;
                let cert = result.certificate().ok_or_else(|| {
                    Failure::new(FailureReason::BadProof, "the bundle's certificate was not verified")
                })?;
                identity.check(cert)?;
                let signer = result.identity().map(|s| s.as_str().to_string()).unwrap_or_default();
                Ok(Verified { signer, root: root.name().to_string() })
            }
        }
    }
}

/// A proof that failed because the bundle's transparency log is not one `root` knows (a bundle of
/// another Sigstore instance) is an unknown root, not a bad proof. Only the reason of a failure is
/// changed here, never whether it fails.
fn unknown_log(failure: Failure, root: &TrustRoot, bundle: &Bundle) -> Failure {
    let entries = &bundle.verification_material.tlog_entries;
    let known = |entry: &sigstore_verify::types::TransparencyLogEntry| {
        root.root().tlogs.iter().any(|log| log.log_id.key_id == entry.log_id.key_id)
    };
    if failure.reason == FailureReason::BadProof && !entries.is_empty() && !entries.iter().any(known) {
        let message =
            format!("the bundle's transparency log is not in trusted root {} ({})", root.name(), failure.message);
        return Failure::new(FailureReason::UnknownRoot, message);
    }
    failure
}

/// Refuses, before any cryptography, a bundle that names another artifact: a message signature
/// whose digest differs, or an attestation none of whose subjects has this digest. This is what
/// an asset swapped after signing looks like; `sigstore-verify` would refuse it too, but its
/// error does not always say so.
fn precheck_subject(bundle: &Bundle, digest: &Sha256Hash) -> Result<(), Failure> {
    match &bundle.content {
        SignatureContent::MessageSignature(sig) => {
            if let Some(md) = &sig.message_digest
                && md.digest.as_bytes().len() == 32
                && md.digest.as_bytes() != digest.as_bytes()
            {
                return Err(Failure::new(
                    FailureReason::ArtifactMismatch,
                    format!(
                        "the signature covers sha256:{}, not sha256:{}",
                        hex::encode(md.digest.as_bytes()),
                        digest.to_hex()
                    ),
                ));
            }
            Ok(())
        }
        SignatureContent::DsseEnvelope(envelope) => {
            // The statement is signed; its subjects are checked by sigstore-verify as well.
            let Ok(statement) = serde_json::from_slice::<serde_json::Value>(envelope.payload.as_bytes()) else {
                return Ok(());
            };
            let want = digest.to_hex();
            let subjects = statement["subject"].as_array().cloned().unwrap_or_default();
            if !subjects.is_empty() && !subjects.iter().any(|s| s["digest"]["sha256"].as_str() == Some(want.as_str())) {
                return Err(Failure::new(
                    FailureReason::ArtifactMismatch,
                    format!("the attestation has no subject with sha256:{want}"),
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A managed-key bundle with nothing but its signature: no log entry, no timestamp (what an
/// air-gapped `publish --sign --key` writes). `sigstore-verify` requires a verified time for every
/// bundle; with a managed key and the log waived there is no time to verify, so the signature is
/// all there is, and checked here with `sigstore-crypto`'s key.
fn is_bare(bundle: &Bundle) -> bool {
    let material = &bundle.verification_material;
    matches!(material.content, sigstore_verify::types::bundle::VerificationMaterialContent::PublicKey(_))
        && material.tlog_entries.is_empty()
        && material.timestamp_verification_data.rfc3161_timestamps.is_empty()
}

fn verify_bare(key: &DerPublicKey, bundle: &Bundle, digest: &Sha256Hash, bytes: Option<&[u8]>) -> Result<(), Failure> {
    let SignatureContent::MessageSignature(sig) = &bundle.content else {
        return Err(Failure::new(
            FailureReason::MalformedBundle,
            "a bundle without log entry or timestamp must hold a message signature",
        ));
    };
    let key = sigstore_verify::crypto::VerificationKey::from_spki(key)
        .map_err(|e| Failure::new(FailureReason::WrongIdentity, format!("the policy's key: {e}")))?;
    let result = match bytes {
        Some(bytes) => key.verify(bytes, &sig.signature),
        None => key.verify_prehashed(digest.as_bytes(), &sig.signature),
    };
    result.map_err(|e| Failure::new(FailureReason::WrongIdentity, format!("not signed by the policy's key ({e})")))
}

/// Which failure tells most when roots disagree.
fn rank(reason: FailureReason) -> u8 {
    match reason {
        FailureReason::UnknownRoot => 0,
        FailureReason::MalformedBundle => 1,
        FailureReason::BadProof => 2,
        FailureReason::SignatureMissing => 3,
        FailureReason::ArtifactMismatch => 4,
        FailureReason::WrongIdentity => 5,
    }
}

/// `sigstore-verify`'s error in our reasons. With a managed key an invalid signature over the
/// right digest means another key signed (the digest was checked before).
fn classify(error: VError, keyed: bool) -> Failure {
    use sigstore_verify::{CertificateError, TransparencyLogError};
    let reason = match &error {
        VError::IdentityMismatch { .. } | VError::IssuerMismatch { .. } => FailureReason::WrongIdentity,
        VError::SignatureInvalid(_) if keyed => FailureReason::WrongIdentity,
        VError::ArtifactMismatch(_) => FailureReason::ArtifactMismatch,
        VError::Certificate(CertificateError::ChainInvalid(_) | CertificateError::NoValidAuthority { .. }) => {
            FailureReason::UnknownRoot
        }
        VError::TransparencyLog(TransparencyLogError::UnknownLog { .. }) => FailureReason::UnknownRoot,
        VError::InvalidTrustRoot(_) | VError::TrustRoot(_) | VError::TrustedCertificate(_) => {
            FailureReason::UnknownRoot
        }
        VError::InvalidBundle(_) | VError::UnsupportedBundle(_) | VError::Types(_) => FailureReason::MalformedBundle,
        _ => FailureReason::BadProof,
    };
    let message = if keyed && reason == FailureReason::WrongIdentity {
        format!("not signed by the policy's key ({error})")
    } else {
        error.to_string()
    };
    Failure::new(reason, message)
}

/// Parses `sha256:<64 hex>` (the conformance protocol's digest form).
pub fn parse_digest(text: &str) -> Option<Sha256Hash> {
    let hex = text.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Sha256Hash::from_hex(hex).ok())?
}

/// A sha256 given as lowercase hex (the cache's form).
pub fn digest_from_hex(hex: &str) -> Result<Sha256Hash, Failure> {
    Sha256Hash::from_hex(hex)
        .map_err(|e| Failure::new(FailureReason::MalformedBundle, format!("bad digest {hex}: {e}")))
}

/// A PEM public key (`-----BEGIN PUBLIC KEY-----`, as `cosign generate-key-pair` and `clusterstack
/// keygen` write it).
pub fn public_key_from_pem(pem: &str) -> Result<DerPublicKey, String> {
    crypto::install();
    DerPublicKey::from_pem(pem).map_err(|e| format!("not a PEM public key: {e}"))
}

/// The sha256 of `bytes`.
pub fn sha256_of(bytes: &[u8]) -> Sha256Hash {
    use sha2::Digest;
    Sha256Hash::new(sha2::Sha256::digest(bytes).into())
}
