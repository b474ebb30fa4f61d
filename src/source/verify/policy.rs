//! A stack's signature policy (`spec.verify`, or the operator's default) made ready to check
//! releases, and the check of one downloaded release: every asset covered by a valid bundle
//! (its own `<asset>.sigstore.json`, or a signed `SHA256SUMS` that lists it), and for `cosign`
//! the OCI manifest's signature.

use std::collections::{BTreeMap, BTreeSet};

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
    /// cache) when it has one; `bundle` reads `<asset>.sigstore.json`; `attested` asks the
    /// source's attestation store (GitHub's attestations API) for the bundles of a digest (`None`:
    /// the source has none). An asset is covered by, in this order:
    ///
    /// 1. its own `<asset>.sigstore.json` (a release asset costs no request; one that fails is
    ///    what is reported, whatever else there is);
    /// 2. an attestation of its digest from the store: any one that verifies is enough;
    /// 3. a valid bundle of `SHA256SUMS` (its own asset, or an attestation) listing it with the
    ///    same digest.
    ///
    /// The attestations' failures are reported only when neither they nor `SHA256SUMS` cover the
    /// asset.
    ///
    /// An attestation naming several subjects (`attest-build-provenance` with `subject-path`)
    /// covers each of them: bundles already fetched are tried before asking for another digest.
    pub async fn check_bundles<E, F>(
        &self,
        assets: &BTreeMap<String, String>,
        sums: Option<(&str, &BTreeMap<String, String>)>,
        bundle: impl Fn(&str) -> Option<Vec<u8>>,
        attested: impl Fn(String) -> F,
    ) -> Result<Result<Verified, Failure>, E>
    where
        F: Future<Output = Result<Option<Vec<Vec<u8>>>, E>>,
    {
        let mut store = Store { fetched: Vec::new(), asked: BTreeSet::new(), available: true };
        let mut signed_sums: Option<Result<Verified, Failure>> = None;
        let mut last = None;
        for (name, sha256) in assets {
            let digest = match super::digest_from_hex(sha256) {
                Ok(digest) => digest,
                Err(failure) => return Ok(Err(failure)),
            };
            let own = bundle(&format!("{name}{BUNDLE_SUFFIX}"));
            match own.map(|b| self.trust.verify(&b, &digest).map_err(|f| f.about(name))) {
                Some(Ok(verified)) => {
                    last = Some(verified);
                    continue;
                }
                // A bundle of its own that fails is what is reported, whatever else there is.
                Some(Err(failure)) => return Ok(Err(failure)),
                None => {}
            }
            // Attestations that exist but do not verify are reported only when SHA256SUMS does not
            // vouch for the asset either: any one valid signature is enough.
            let attested_failure = match store.verify(self, sha256, &attested).await? {
                Some(Ok(verified)) => {
                    last = Some(verified);
                    continue;
                }
                Some(Err(failure)) => Some(failure.about(name)),
                None => None,
            };
            let missing = |available: bool, more: &str| {
                if let Some(failure) = &attested_failure {
                    return failure.clone();
                }
                let api = if available { format!(", no attestation of sha256:{sha256}") } else { String::new() };
                Failure::new(FailureReason::SignatureMissing, format!("{name}: no {name}{BUNDLE_SUFFIX}{api}{more}"))
            };
            let Some((sums_sha256, listed)) = sums else {
                return Ok(Err(missing(store.available, "")));
            };
            if listed.get(name) != Some(sha256) {
                return Ok(Err(missing(store.available, ", and SHA256SUMS does not list it")));
            }
            if signed_sums.is_none() {
                let sums_name = crate::source::SHA256SUMS;
                let result = match super::digest_from_hex(sums_sha256) {
                    Err(failure) => Err(failure),
                    Ok(digest) => match bundle(&format!("{sums_name}{BUNDLE_SUFFIX}")) {
                        Some(b) => self.trust.verify(&b, &digest).map_err(|f| f.about(sums_name)),
                        None => match store.verify(self, sums_sha256, &attested).await? {
                            Some(result) => result.map_err(|f| f.about(sums_name)),
                            None => Err(missing(store.available, &format!(" nor a signed {sums_name}"))),
                        },
                    },
                };
                signed_sums = Some(result);
            }
            match signed_sums.clone() {
                Some(Ok(verified)) => last = Some(verified),
                Some(Err(failure)) => return Ok(Err(failure)),
                None => {}
            }
        }
        Ok(last.ok_or_else(|| Failure::new(FailureReason::SignatureMissing, "the release has no assets to verify")))
    }
}

/// The attestations fetched while checking one release.
struct Store {
    /// Every bundle fetched so far: one naming several subjects serves each.
    fetched: Vec<Vec<u8>>,
    /// The digests asked for.
    asked: BTreeSet<String>,
    /// Whether the source has an attestation store at all.
    available: bool,
}

impl Store {
    /// The check of `sha256` against the attestations naming it: `None` when there are none.
    async fn verify<E, F>(
        &mut self,
        policy: &ReleasePolicy,
        sha256: &str,
        attested: &impl Fn(String) -> F,
    ) -> Result<Option<Result<Verified, Failure>>, E>
    where
        F: Future<Output = Result<Option<Vec<Vec<u8>>>, E>>,
    {
        let digest = match super::digest_from_hex(sha256) {
            Ok(digest) => digest,
            Err(failure) => return Ok(Some(Err(failure))),
        };
        // Bundles fetched for another digest that name this one too are tried first; the API is
        // asked for this digest when none of them verifies.
        let reused: Vec<usize> = (0..self.fetched.len()).filter(|i| names_digest(&self.fetched[*i], sha256)).collect();
        let mut worst: Option<Failure> = None;
        let mut try_each = |fetched: &[Vec<u8>], candidates: Vec<usize>| {
            for i in candidates {
                match policy.trust.verify(&fetched[i], &digest) {
                    Ok(verified) => return Some(verified),
                    Err(failure) => {
                        if worst.as_ref().is_none_or(|w| super::rank(failure.reason) > super::rank(w.reason)) {
                            worst = Some(failure);
                        }
                    }
                }
            }
            None
        };
        if let Some(verified) = try_each(&self.fetched, reused) {
            return Ok(Some(Ok(verified)));
        }
        if self.available && self.asked.insert(sha256.to_string()) {
            match attested(sha256.to_string()).await? {
                None => self.available = false,
                Some(bundles) => {
                    let from = self.fetched.len();
                    self.fetched.extend(bundles);
                    if let Some(verified) = try_each(&self.fetched, (from..self.fetched.len()).collect()) {
                        return Ok(Some(Ok(verified)));
                    }
                }
            }
        }
        Ok(worst.map(|failure| {
            let message = format!("no attestation of sha256:{sha256} verifies; {}", failure.message);
            Err(Failure::new(failure.reason, message))
        }))
    }
}

/// Whether a bundle is about the artifact `sha256`: a message signature over that digest, or an
/// attestation with that subject. Only a pre-filter: verification checks it again.
fn names_digest(bundle: &[u8], sha256: &str) -> bool {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(bundle) else { return false };
    if let Some(digest) = json["messageSignature"]["messageDigest"]["digest"].as_str() {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD.decode(digest).unwrap_or_default();
        return hex::encode(bytes) == sha256;
    }
    let payload = json["dsseEnvelope"]["payload"].as_str().unwrap_or_default();
    let statement = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(payload).unwrap_or_default()
    };
    let Ok(statement) = serde_json::from_slice::<serde_json::Value>(&statement) else { return false };
    statement["subject"]
        .as_array()
        .is_some_and(|subjects| subjects.iter().any(|s| s["digest"]["sha256"].as_str() == Some(sha256)))
}

/// Whether `name` is a signature asset (never itself required to be signed).
pub fn is_signature_asset(name: &str) -> bool {
    name.ends_with(BUNDLE_SUFFIX)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use base64::Engine;
    use base64::engine::general_purpose::STANDARD as B64;

    use super::{ReleasePolicy, Resolved, names_digest};
    use crate::api::{KeyRef, KeySource, VerifySpec};
    use crate::source::verify::sign::KeySigner;
    use crate::source::verify::{FailureReason, sha256_of};

    /// An attestation store that fails (another key's) does not hide a signed SHA256SUMS that
    /// vouches for the asset; without SHA256SUMS its failure is what is reported.
    #[tokio::test]
    async fn a_failing_attestation_falls_back_to_a_signed_sha256sums() {
        let ours = KeySigner::generate().unwrap();
        let signer = KeySigner::from_pem(&ours.private_pem).unwrap();
        let stranger = KeySigner::from_pem(&KeySigner::generate().unwrap().private_pem).unwrap();
        let key = KeySource { secret_ref: Some(KeyRef { name: "k".into(), key: None }), ..Default::default() };
        let spec = VerifySpec { key: Some(key), ignore_transparency_log: true, ..Default::default() };
        let resolved = Resolved { key_pem: Some(ours.public_pem.clone()), trusted_root: None };
        let policy = ReleasePolicy::new(&spec, &resolved).unwrap();

        let asset = sha256_of(b"the class").to_hex();
        let sums_text = format!("{asset}  class.tgz\n");
        let sums_digest = sha256_of(sums_text.as_bytes());
        let assets = BTreeMap::from([("class.tgz".to_string(), asset.clone())]);
        let listed = BTreeMap::from([("class.tgz".to_string(), asset.clone())]);
        let sums_bundle = signer.bundle_for_digest(&sums_digest).unwrap().into_bytes();
        let theirs =
            stranger.bundle_for_digest(&crate::source::verify::digest_from_hex(&asset).unwrap()).unwrap().into_bytes();
        let attested = |_: String| {
            let theirs = theirs.clone();
            async move { Ok::<_, std::convert::Infallible>(Some(vec![theirs])) }
        };
        let sums_hex = sums_digest.to_hex();
        let own = |name: &str| (name == "SHA256SUMS.sigstore.json").then(|| sums_bundle.clone());
        let verified = policy.check_bundles(&assets, Some((&sums_hex, &listed)), own, attested).await.unwrap();
        assert_eq!(verified.unwrap().signer, "key");

        let failure = policy.check_bundles(&assets, None, |_| None, attested).await.unwrap().unwrap_err();
        assert_eq!(failure.reason, FailureReason::WrongIdentity, "{failure}");
        assert!(failure.message.starts_with("class.tgz: no attestation of sha256:"), "{failure}");
    }

    #[test]
    fn a_bundle_names_the_digest_of_its_message_or_of_each_subject() {
        let (a, b, c) = ("aa".repeat(32), "bb".repeat(32), "cc".repeat(32));
        let message = serde_json::json!({
            "messageSignature": {"messageDigest": {"algorithm": "SHA2_256", "digest": B64.encode(hex::decode(&a).unwrap())}}
        });
        let message = serde_json::to_vec(&message).unwrap();
        assert!(names_digest(&message, &a));
        assert!(!names_digest(&message, &b));
        // An attestation of several subjects (attest-build-provenance with subject-path) names each.
        let statement = serde_json::json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "x.tgz", "digest": {"sha256": a}}, {"name": "y.tgz", "digest": {"sha256": b}}],
        });
        let dsse = serde_json::json!({"dsseEnvelope": {"payload": B64.encode(statement.to_string())}});
        let dsse = serde_json::to_vec(&dsse).unwrap();
        assert!(names_digest(&dsse, &a) && names_digest(&dsse, &b));
        assert!(!names_digest(&dsse, &c));
        assert!(!names_digest(b"not json", &a));
    }
}
