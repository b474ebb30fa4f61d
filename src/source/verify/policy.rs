//! A stack's signature policy (`spec.verify`, or the operator's default) made ready to check
//! releases, and the check of one downloaded release: every asset covered by a valid bundle
//! (its own `<asset>.sigstore.json`, or a signed `SHA256SUMS` that lists it), and for `cosign`
//! the OCI manifest's signature.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::{BUNDLE_SUFFIX, BuiltInRoot, Failure, FailureReason, Identity, Signer, Trust, TrustRoot, Verified};
use crate::api::{VerifyKind, VerifySpec};

/// What the references of a [`VerifySpec`] resolved to (ConfigMaps, Secrets, files).
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// The PEM public key, when the policy names one.
    pub key_pem: Option<String>,
    /// A user's `trusted_root.json` and where it came from, when the policy names one.
    pub trusted_root: Option<(String, String)>,
}

/// A policy ready to check releases.
#[derive(Debug)]
pub struct ReleasePolicy {
    pub kind: VerifyKind,
    pub trust: Trust,
    /// Changes whenever the policy or a document it names changes: a release verified under
    /// another fingerprint is verified again.
    pub fingerprint: String,
}

impl ReleasePolicy {
    /// Builds the policy. A bad key or root, or a policy naming no one, is an error a user must
    /// fix ([`FailureReason::UnknownRoot`] for roots, [`FailureReason::WrongIdentity`] otherwise).
    pub fn new(spec: &VerifySpec, resolved: &Resolved) -> Result<Self, Failure> {
        let config = |m: String| Failure::new(FailureReason::WrongIdentity, m);
        let signer = match (&spec.identity, &spec.key) {
            (Some(id), None) => {
                let identity = Identity {
                    issuer: id.issuer.clone(),
                    subject: id.subject.clone(),
                    repository: id.repository.clone(),
                    workflow: id.workflow.clone(),
                    ref_pattern: id.ref_pattern.clone(),
                };
                if !identity.is_specific() {
                    return Err(config("the policy's identity names no subject or repository".into()));
                }
                Signer::Keyless(identity)
            }
            (None, Some(_)) => {
                let pem = resolved.key_pem.as_deref().ok_or_else(|| config("the policy's key was not found".into()))?;
                let key = super::public_key_from_pem(pem).map_err(config)?;
                Signer::Key { key, require_tlog: !spec.ignore_transparency_log }
            }
            _ => return Err(config("set exactly one of identity or key".into())),
        };
        let unknown = |m: String| Failure::new(FailureReason::UnknownRoot, m);
        let roots = match &spec.trusted_root {
            Some(source) if source.built_in.is_some() => {
                let name = source.built_in.as_deref().unwrap_or_default();
                let built_in =
                    BuiltInRoot::parse(name).ok_or_else(|| unknown(format!("no built-in trusted root {name:?}")))?;
                vec![built_in.root().map_err(unknown)?]
            }
            Some(_) => {
                let (name, json) = resolved
                    .trusted_root
                    .as_ref()
                    .ok_or_else(|| unknown("the policy's trusted root was not found".into()))?;
                vec![TrustRoot::from_json(name, json).map_err(unknown)?]
            }
            None if spec.kind == VerifyKind::Cosign => vec![BuiltInRoot::PublicGood.root().map_err(unknown)?],
            None => {
                vec![BuiltInRoot::PublicGood.root().map_err(unknown)?, BuiltInRoot::GitHub.root().map_err(unknown)?]
            }
        };
        let mut hasher = Sha256::new();
        hasher.update(serde_json::to_vec(spec).unwrap_or_default());
        hasher.update(resolved.key_pem.as_deref().unwrap_or_default());
        for root in &roots {
            hasher.update(root.sha256());
        }
        let fingerprint = hex::encode(hasher.finalize());
        Ok(Self { kind: spec.kind, trust: Trust { roots, signer }, fingerprint })
    }

    /// Whether asset bundles are required.
    pub fn wants_bundles(&self) -> bool {
        matches!(self.kind, VerifyKind::GithubAttestation | VerifyKind::Both)
    }

    /// Whether the OCI manifest's cosign signature is required.
    pub fn wants_cosign(&self) -> bool {
        matches!(self.kind, VerifyKind::Cosign | VerifyKind::Both)
    }

    /// Checks every asset of a downloaded release. `assets` maps each content asset to its sha256
    /// (lowercase hex) and `sums` is the release's `SHA256SUMS` (name to sha256, checked by the
    /// cache) when it has one; `bundle` reads `<asset>.sigstore.json`. An asset is covered by its
    /// own bundle, or by a valid bundle of `SHA256SUMS` listing it with the same digest.
    pub fn check_bundles(
        &self,
        assets: &BTreeMap<String, String>,
        sums: Option<(&str, &BTreeMap<String, String>)>,
        bundle: impl Fn(&str) -> Option<Vec<u8>>,
    ) -> Result<Verified, Failure> {
        let mut signed_sums: Option<Result<Verified, Failure>> = None;
        let mut last = None;
        for (name, sha256) in assets {
            let digest = super::digest_from_hex(sha256)?;
            let own = bundle(&format!("{name}{BUNDLE_SUFFIX}"));
            let own_result = own.as_ref().map(|b| self.trust.verify(b, &digest).map_err(|f| f.about(name)));
            match own_result {
                Some(Ok(verified)) => {
                    last = Some(verified);
                    continue;
                }
                // A bundle of its own that fails is what is reported, whatever SHA256SUMS says.
                Some(Err(failure)) => return Err(failure),
                None => {}
            }
            let Some((sums_sha256, listed)) = sums else {
                return Err(Failure::new(FailureReason::SignatureMissing, format!("{name}: no {name}{BUNDLE_SUFFIX}")));
            };
            if listed.get(name) != Some(sha256) {
                return Err(Failure::new(
                    FailureReason::SignatureMissing,
                    format!("{name}: no {name}{BUNDLE_SUFFIX}, and SHA256SUMS does not list it"),
                ));
            }
            let verified = signed_sums.get_or_insert_with(|| {
                let sums_name = crate::source::SHA256SUMS;
                let bundle = bundle(&format!("{sums_name}{BUNDLE_SUFFIX}")).ok_or_else(|| {
                    Failure::new(
                        FailureReason::SignatureMissing,
                        format!("{name}: no {name}{BUNDLE_SUFFIX} nor {sums_name}{BUNDLE_SUFFIX}"),
                    )
                })?;
                let digest = super::digest_from_hex(sums_sha256)?;
                self.trust.verify(&bundle, &digest).map_err(|f| f.about(sums_name))
            });
            last = Some(verified.clone()?);
        }
        last.ok_or_else(|| Failure::new(FailureReason::SignatureMissing, "the release has no assets to verify"))
    }
}

/// Whether `name` is a signature asset (never itself required to be signed).
pub fn is_signature_asset(name: &str) -> bool {
    name.ends_with(BUNDLE_SUFFIX)
}
