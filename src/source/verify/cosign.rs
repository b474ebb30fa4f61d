//! Signatures in an OCI registry where cosign keeps them: the manifest tagged
//! `sha256-<manifest hex>.sig` beside the signed artifact, one layer per signature, each a
//! simple-signing payload (which names the signed manifest's digest) with the signature and its
//! material in the layer's annotations (`dev.cosignproject.cosign/signature`, and for keyless
//! signatures `dev.sigstore.cosign/certificate`, `/chain` and the Rekor `/bundle`).
//!
//! Why this form and not the OCI 1.1 referrers API (cosign's newer bundle format): it works on
//! every registry (Debian's `docker-registry`, distribution 2.8, has no referrers API, and many
//! mirrors have none), and it is the form every cosign version writes by default before v3 and
//! reads. A layer is verified by turning it into the Sigstore bundle it amounts to.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::{Failure, FailureReason, Trust, Verified};

/// The media type of a signature layer.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The base64 signature over the layer's payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The PEM signing certificate (keyless).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The PEM chain above the certificate (keyless).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";
/// The Rekor bundle: signed entry timestamp and the log entry.
pub const REKOR_BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

/// The tag cosign gives the signatures of the manifest `digest` (`sha256:<hex>`).
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// The simple-signing payload naming `reference` (`HOST/REPOSITORY`) at `digest`, as cosign
/// writes it.
pub fn payload(reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": reference},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    }))
    .unwrap_or_default()
}

/// One signature layer: its payload and annotations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    pub payload: Vec<u8>,
    pub annotations: BTreeMap<String, String>,
}

/// Verifies one layer for the manifest `digest`: the payload must name that digest, and its
/// signature must satisfy `trust`.
pub fn verify_layer(trust: &Trust, layer: &SignatureLayer, digest: &str) -> Result<Verified, Failure> {
    let payload: serde_json::Value = serde_json::from_slice(&layer.payload)
        .map_err(|e| Failure::new(FailureReason::MalformedBundle, format!("the signature payload is not JSON: {e}")))?;
    let signed = payload["critical"]["image"]["docker-manifest-digest"].as_str().unwrap_or_default();
    if signed != digest {
        return Err(Failure::new(
            FailureReason::ArtifactMismatch,
            format!("the signature covers manifest {signed:?}, not {digest}"),
        ));
    }
    let bundle = bundle_of(layer)?;
    let payload_digest = super::sha256_of(&layer.payload);
    trust.verify_subject(bundle.as_bytes(), &payload_digest, Some(&layer.payload))
}

/// The Sigstore bundle a cosign signature layer amounts to: v0.1 with the certificate chain and
/// the Rekor entry (signed entry timestamp, no inclusion proof, as cosign's `bundle` annotation
/// carries it) for a keyless signature; v0.3 with a key hint for a keyed one.
pub fn bundle_of(layer: &SignatureLayer) -> Result<String, Failure> {
    let malformed = |m: String| Failure::new(FailureReason::MalformedBundle, m);
    let signature = layer.annotations.get(SIGNATURE_ANNOTATION).ok_or_else(|| {
        Failure::new(FailureReason::SignatureMissing, format!("a layer without {SIGNATURE_ANNOTATION}"))
    })?;
    let digest = B64.encode(super::sha256_of(&layer.payload).as_bytes());
    let message = serde_json::json!({
        "messageDigest": {"algorithm": "SHA2_256", "digest": digest},
        "signature": signature,
    });
    let mut tlog_entries = Vec::new();
    if let Some(rekor) = layer.annotations.get(REKOR_BUNDLE_ANNOTATION) {
        let rekor: serde_json::Value =
            serde_json::from_str(rekor).map_err(|e| malformed(format!("{REKOR_BUNDLE_ANNOTATION}: {e}")))?;
        let entry = &rekor["Payload"];
        let body_b64 = entry["body"].as_str().unwrap_or_default();
        let body: serde_json::Value =
            B64.decode(body_b64).ok().and_then(|b| serde_json::from_slice(&b).ok()).ok_or_else(|| {
                malformed(format!("{REKOR_BUNDLE_ANNOTATION}: the log entry body is not base64 JSON"))
            })?;
        let log_id = hex::decode(entry["logID"].as_str().unwrap_or_default())
            .map_err(|e| malformed(format!("{REKOR_BUNDLE_ANNOTATION}: logID: {e}")))?;
        tlog_entries.push(serde_json::json!({
            "logIndex": entry["logIndex"].as_i64().unwrap_or(-1).to_string(),
            "logId": {"keyId": B64.encode(log_id)},
            "kindVersion": {"kind": body["kind"], "version": body["apiVersion"]},
            "integratedTime": entry["integratedTime"].as_i64().unwrap_or_default().to_string(),
            "inclusionPromise": {"signedEntryTimestamp": rekor["SignedEntryTimestamp"]},
            "canonicalizedBody": body_b64,
        }));
    }
    let bundle = match layer.annotations.get(CERTIFICATE_ANNOTATION) {
        Some(cert) => {
            let mut certificates = Vec::new();
            let chain = layer.annotations.get(CHAIN_ANNOTATION).map(String::as_str).unwrap_or_default();
            for block in pem::parse_many(format!("{cert}\n{chain}"))
                .map_err(|e| malformed(format!("{CERTIFICATE_ANNOTATION}: {e}")))?
            {
                certificates.push(serde_json::json!({"rawBytes": B64.encode(block.contents())}));
            }
            serde_json::json!({
                "mediaType": "application/vnd.dev.sigstore.bundle+json;version=0.1",
                "verificationMaterial": {
                    "x509CertificateChain": {"certificates": certificates},
                    "tlogEntries": tlog_entries,
                },
                "messageSignature": message,
            })
        }
        None => serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {"publicKey": {"hint": ""}, "tlogEntries": tlog_entries},
            "messageSignature": message,
        }),
    };
    Ok(bundle.to_string())
}

/// The annotations of a layer signed with a managed key.
pub fn keyed_annotations(signer: &super::sign::KeySigner, payload: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let signature = signer.sign(payload)?;
    Ok(BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), B64.encode(signature.as_bytes()))]))
}

/// Verifies the signatures found for manifest `digest`: any one layer that verifies is enough; none
/// at all is [`FailureReason::SignatureMissing`]; otherwise the most telling failure.
pub fn verify_any(trust: &Trust, layers: &[SignatureLayer], digest: &str) -> Result<Verified, Failure> {
    let mut failure = None;
    for layer in layers {
        match verify_layer(trust, layer, digest) {
            Ok(verified) => return Ok(verified),
            Err(f) => failure = Some(f),
        }
    }
    Err(failure.unwrap_or_else(|| {
        Failure::new(
            FailureReason::SignatureMissing,
            format!("no cosign signature ({}) for {digest}", signature_tag(digest)),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::verify::sign::KeySigner;
    use crate::source::verify::{BuiltInRoot, Signer};

    fn trust_in(key_pem: &str) -> Trust {
        let key = crate::source::verify::public_key_from_pem(key_pem).unwrap();
        Trust { roots: vec![BuiltInRoot::PublicGood.root().unwrap()], signer: Signer::Key { key, require_tlog: false } }
    }

    #[test]
    fn a_keyed_layer_verifies_for_its_manifest_only_and_with_its_key_only() {
        let generated = KeySigner::generate().unwrap();
        let signer = KeySigner::from_pem(&generated.private_pem).unwrap();
        let digest = format!("sha256:{}", "ab".repeat(32));
        let payload = payload("127.0.0.1:5000/stacks", &digest);
        let layer = SignatureLayer { annotations: keyed_annotations(&signer, &payload).unwrap(), payload };
        let trust = trust_in(&generated.public_pem);
        verify_any(&trust, std::slice::from_ref(&layer), &digest).unwrap();

        let other = format!("sha256:{}", "cd".repeat(32));
        assert_eq!(
            verify_any(&trust, std::slice::from_ref(&layer), &other).unwrap_err().reason,
            FailureReason::ArtifactMismatch
        );
        let stranger = trust_in(&KeySigner::generate().unwrap().public_pem);
        assert_eq!(
            verify_any(&stranger, std::slice::from_ref(&layer), &digest).unwrap_err().reason,
            FailureReason::WrongIdentity
        );
        assert_eq!(verify_any(&trust, &[], &digest).unwrap_err().reason, FailureReason::SignatureMissing);
        assert_eq!(signature_tag(&digest), format!("sha256-{}.sig", "ab".repeat(32)));
    }
}
