//! Keyless signing, for `publish --sign` where an OIDC token is at hand: `sigstore-sign` trades
//! the token for a short-lived Fulcio certificate naming its identity (an email, or a GitHub
//! Actions workflow with its repository and ref), signs with a key that lives only in memory, and
//! logs the signature to Rekor; the result is a Sigstore bundle v0.3 (certificate, signature,
//! log entry with inclusion proof, checkpoint and signed entry timestamp) that a verifier checks
//! against the instance's `trusted_root.json` and the identity its policy pins.
//!
//! The instance is Sigstore's public-good one unless `--fulcio-url` and `--rekor-url` name another
//! (a private instance, a test's fake); nothing here is fetched through TUF.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use sigstore_sign::oidc::IdentityToken;
use sigstore_sign::{SigningContext, SigningServices};
use sigstore_verify::types::bundle::VerificationMaterialContent;
use sigstore_verify::types::{Artifact, Bundle, Sha256Hash, SignatureContent};

/// Sigstore's public-good Fulcio.
pub const PUBLIC_GOOD_FULCIO: &str = "https://fulcio.sigstore.dev";
/// Sigstore's public-good Rekor (v1 API).
pub const PUBLIC_GOOD_REKOR: &str = "https://rekor.sigstore.dev";

/// Signs with certificates Fulcio issues for one OIDC token.
pub struct KeylessSigner {
    signer: sigstore_sign::Signer,
    identity: String,
    issuer: String,
}

impl std::fmt::Debug for KeylessSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeylessSigner").field("identity", &self.identity).field("issuer", &self.issuer).finish()
    }
}

impl KeylessSigner {
    /// A signer for `token` (a JWT: its claims are read, not verified; Fulcio verifies it).
    pub fn new(token: &str, fulcio_url: &str, rekor_url: &str) -> Result<Self, String> {
        super::crypto::install();
        let token = IdentityToken::from_jwt(token.trim()).map_err(|e| format!("the identity token: {e}"))?;
        if token.is_expired() {
            return Err(format!("the identity token expired at {}", token.expiration()));
        }
        let (identity, issuer) = (token.identity().to_string(), token.issuer().to_string());
        let context = SigningContext::new(SigningServices::new(fulcio_url, rekor_url));
        Ok(Self { signer: context.signer(token), identity, issuer })
    }

    /// The token of the CI environment, when there is one (GitHub Actions with `id-token:
    /// write`: `ACTIONS_ID_TOKEN_REQUEST_URL` and `_TOKEN`, asked for the audience `sigstore`;
    /// GitLab, Buildkite and others as `ambient-id` knows them).
    pub async fn ambient_token() -> Result<Option<String>, String> {
        let token = IdentityToken::detect_ambient().await.map_err(|e| format!("the CI's identity token: {e}"))?;
        Ok(token.map(|t| t.expose_secret().to_string()))
    }

    /// The identity the certificates will name (the token's email or subject).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The token's OIDC issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// A Sigstore bundle (JSON) signing the artifact whose sha256 is `digest`.
    pub async fn bundle_for_digest(&self, digest: &Sha256Hash) -> Result<String, String> {
        let bundle = self.signer.sign(Artifact::from_digest(*digest)).await.map_err(|e| format!("signing: {e}"))?;
        bundle.to_json_pretty().map_err(|e| format!("the bundle: {e}"))
    }

    /// A bundle signing `payload` itself (cosign's simple-signing payload).
    pub async fn sign_payload(&self, payload: &[u8]) -> Result<Bundle, String> {
        self.signer.sign(payload).await.map_err(|e| format!("signing: {e}"))
    }
}

/// The annotations of a cosign signature layer carrying a keyless bundle: the signature, the
/// certificate (PEM) and the Rekor bundle (its signed entry timestamp and entry), as cosign
/// writes them.
pub fn cosign_annotations(bundle: &Bundle) -> Result<std::collections::BTreeMap<String, String>, String> {
    use super::cosign::{CERTIFICATE_ANNOTATION, REKOR_BUNDLE_ANNOTATION, SIGNATURE_ANNOTATION};
    let SignatureContent::MessageSignature(signature) = &bundle.content else {
        return Err("a cosign signature is a message signature".into());
    };
    let certificate = match &bundle.verification_material.content {
        VerificationMaterialContent::Certificate(cert) => cert.raw_bytes.as_bytes().to_vec(),
        VerificationMaterialContent::X509CertificateChain { certificates } => {
            certificates.first().map(|c| c.raw_bytes.as_bytes().to_vec()).ok_or("an empty certificate chain")?
        }
        _ => return Err("the bundle has no certificate".into()),
    };
    let entry = bundle.verification_material.tlog_entries.first().ok_or("the bundle has no log entry")?;
    let promise = entry.inclusion_promise.as_ref().ok_or("the log entry has no signed entry timestamp")?;
    let rekor = serde_json::json!({
        "SignedEntryTimestamp": B64.encode(promise.signed_entry_timestamp.as_bytes()),
        "Payload": {
            "body": entry.canonicalized_body.to_base64(),
            "integratedTime": entry.integrated_time.map_or(0, |t| t.as_second()),
            "logIndex": entry.log_index.as_i64(),
            "logID": hex::encode(entry.log_id.key_id.as_bytes()),
        },
    });
    Ok(std::collections::BTreeMap::from([
        (SIGNATURE_ANNOTATION.to_string(), B64.encode(signature.signature.as_bytes())),
        (CERTIFICATE_ANNOTATION.to_string(), pem::encode(&pem::Pem::new("CERTIFICATE", certificate))),
        (REKOR_BUNDLE_ANNOTATION.to_string(), rekor.to_string()),
    ]))
}
