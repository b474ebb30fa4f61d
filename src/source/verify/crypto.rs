//! The cryptography under `sigstore-verify`: ring (already linked through rustls and kube) for
//! hashing, signatures over messages and P-256 keys, and RustCrypto for signatures over a digest
//! (an artifact given as `sha256:<hex>`, a large asset hashed as it streams), which ring does not
//! offer. `sigstore-crypto`'s own provider would link aws-lc, a second TLS-grade C library and
//! the second rustls provider that `kube-rs-notes` warns about.

use std::sync::Once;

use ring::signature::{self as rs, KeyPair as _};
use sigstore_verify::crypto::{self as sc, CryptoProvider, HashContext, KeyAlgorithm, SigningKeyPair, SigningScheme};
use sigstore_verify::types::HashAlgorithm;

static PROVIDER: RingProvider = RingProvider;
static INSTALL: Once = Once::new();

/// Makes our provider `sigstore-crypto`'s process-wide default (once; later calls are no-ops).
pub fn install() {
    INSTALL.call_once(|| {
        // Only fails when a provider is already installed, which then is ours.
        let _ = sc::install_default_provider(&PROVIDER);
    });
}

#[derive(Debug)]
struct RingProvider;

struct RingHash(ring::digest::Context);

impl HashContext for RingHash {
    fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }
    fn finalize(self: Box<Self>) -> Vec<u8> {
        self.0.finish().as_ref().to_vec()
    }
}

fn ring_verification(scheme: SigningScheme) -> Option<&'static dyn rs::VerificationAlgorithm> {
    Some(match scheme {
        SigningScheme::EcdsaP256Sha256 => &rs::ECDSA_P256_SHA256_ASN1,
        SigningScheme::EcdsaP256Sha384 => &rs::ECDSA_P256_SHA384_ASN1,
        SigningScheme::EcdsaP384Sha256 => &rs::ECDSA_P384_SHA256_ASN1,
        SigningScheme::EcdsaP384Sha384 => &rs::ECDSA_P384_SHA384_ASN1,
        SigningScheme::Ed25519 => &rs::ED25519,
        SigningScheme::RsaPssSha256 => &rs::RSA_PSS_2048_8192_SHA256,
        SigningScheme::RsaPssSha384 => &rs::RSA_PSS_2048_8192_SHA384,
        SigningScheme::RsaPssSha512 => &rs::RSA_PSS_2048_8192_SHA512,
        SigningScheme::RsaPkcs1Sha256 => &rs::RSA_PKCS1_2048_8192_SHA256,
        SigningScheme::RsaPkcs1Sha384 => &rs::RSA_PKCS1_2048_8192_SHA384,
        SigningScheme::RsaPkcs1Sha512 => &rs::RSA_PKCS1_2048_8192_SHA512,
        // ML-DSA: neither ring nor a released RustCrypto crate we use; refused below.
        _ => return None,
    })
}

fn unsupported(scheme: SigningScheme) -> sc::Error {
    sc::Error::UnsupportedAlgorithm(format!("{} signatures are not supported", scheme.name()))
}

fn invalid(scheme: SigningScheme) -> sc::Error {
    sc::Error::Verification(format!("{} signature invalid", scheme.name()))
}

impl CryptoProvider for RingProvider {
    fn hash(&self, algorithm: HashAlgorithm) -> sc::Result<Box<dyn HashContext>> {
        let algorithm = match algorithm {
            HashAlgorithm::Sha2256 => &ring::digest::SHA256,
            HashAlgorithm::Sha2384 => &ring::digest::SHA384,
            HashAlgorithm::Sha2512 => &ring::digest::SHA512,
            other => return Err(sc::Error::UnsupportedAlgorithm(format!("cannot compute {other} digests"))),
        };
        Ok(Box::new(RingHash(ring::digest::Context::new(algorithm))))
    }

    fn verify_raw(&self, scheme: SigningScheme, key: &[u8], data: &[u8], signature: &[u8]) -> sc::Result<()> {
        let algorithm = ring_verification(scheme).ok_or_else(|| unsupported(scheme))?;
        rs::UnparsedPublicKey::new(algorithm, key).verify(data, signature).map_err(|_| invalid(scheme))
    }

    fn verify_prehashed(&self, scheme: SigningScheme, key: &[u8], digest: &[u8], signature: &[u8]) -> sc::Result<()> {
        use p256::ecdsa::signature::hazmat::PrehashVerifier;
        let ok = match scheme {
            SigningScheme::EcdsaP256Sha256 | SigningScheme::EcdsaP256Sha384 => {
                let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(key).map_err(|_| invalid(scheme))?;
                let sig = p256::ecdsa::DerSignature::try_from(signature).map_err(|_| invalid(scheme))?;
                key.verify_prehash(digest, &sig).is_ok()
            }
            SigningScheme::EcdsaP384Sha256 | SigningScheme::EcdsaP384Sha384 => {
                let key = p384::ecdsa::VerifyingKey::from_sec1_bytes(key).map_err(|_| invalid(scheme))?;
                let sig = p384::ecdsa::DerSignature::try_from(signature).map_err(|_| invalid(scheme))?;
                key.verify_prehash(digest, &sig).is_ok()
            }
            SigningScheme::RsaPkcs1Sha256
            | SigningScheme::RsaPkcs1Sha384
            | SigningScheme::RsaPkcs1Sha512
            | SigningScheme::RsaPssSha256
            | SigningScheme::RsaPssSha384
            | SigningScheme::RsaPssSha512 => verify_rsa_prehashed(scheme, key, digest, signature)?,
            _ => return Err(unsupported(scheme)),
        };
        if ok { Ok(()) } else { Err(invalid(scheme)) }
    }

    fn generate_key_pair(&self, algorithm: KeyAlgorithm) -> sc::Result<Box<dyn SigningKeyPair>> {
        if algorithm != KeyAlgorithm::EcdsaP256 {
            return Err(sc::Error::UnsupportedAlgorithm(format!("key generation for {algorithm:?}")));
        }
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = rs::EcdsaKeyPair::generate_pkcs8(&rs::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map_err(|_| sc::Error::KeyGeneration("cannot generate an ECDSA P-256 key".into()))?;
        Ok(Box::new(P256Key::from_pkcs8(pkcs8.as_ref())?))
    }

    fn key_pair_from_pkcs8_der(&self, pkcs8: &[u8]) -> sc::Result<Box<dyn SigningKeyPair>> {
        Ok(Box::new(P256Key::from_pkcs8(pkcs8)?))
    }
}

/// RSA over a digest: `spki_pubkey_bytes` is the PKCS#1 `RSAPublicKey` (as the trait says).
fn verify_rsa_prehashed(scheme: SigningScheme, key: &[u8], digest: &[u8], signature: &[u8]) -> sc::Result<bool> {
    use rsa::pkcs1::DecodeRsaPublicKey;
    use rsa::{Pkcs1v15Sign, Pss, PublicKey};
    let key = PublicKey::from_pkcs1_der(key).map_err(|_| invalid(scheme))?;
    let result = match scheme {
        SigningScheme::RsaPkcs1Sha256 => key.verify(Pkcs1v15Sign::new::<sha2::Sha256>(), digest, signature),
        SigningScheme::RsaPkcs1Sha384 => key.verify(Pkcs1v15Sign::new::<sha2::Sha384>(), digest, signature),
        SigningScheme::RsaPkcs1Sha512 => key.verify(Pkcs1v15Sign::new::<sha2::Sha512>(), digest, signature),
        SigningScheme::RsaPssSha256 => key.verify(Pss::<sha2::Sha256>::new(), digest, signature),
        SigningScheme::RsaPssSha384 => key.verify(Pss::<sha2::Sha384>::new(), digest, signature),
        SigningScheme::RsaPssSha512 => key.verify(Pss::<sha2::Sha512>::new(), digest, signature),
        _ => return Err(unsupported(scheme)),
    };
    Ok(result.is_ok())
}

/// An ECDSA P-256 key: ring signs messages, p256 signs digests (the same key, from one PKCS#8).
struct P256Key {
    ring: rs::EcdsaKeyPair,
    digest_signer: p256::ecdsa::SigningKey,
}

impl P256Key {
    fn from_pkcs8(pkcs8: &[u8]) -> sc::Result<Self> {
        use p256::pkcs8::DecodePrivateKey;
        let ring =
            rs::EcdsaKeyPair::from_pkcs8(&rs::ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8, &ring::rand::SystemRandom::new())
                .map_err(|e| sc::Error::InvalidKeyFormat(format!("not an ECDSA P-256 PKCS#8 key: {e}")))?;
        let digest_signer = p256::ecdsa::SigningKey::from_pkcs8_der(pkcs8)
            .map_err(|e| sc::Error::InvalidKeyFormat(format!("not an ECDSA P-256 PKCS#8 key: {e}")))?;
        Ok(Self { ring, digest_signer })
    }
}

impl SigningKeyPair for P256Key {
    fn algorithm(&self) -> KeyAlgorithm {
        KeyAlgorithm::EcdsaP256
    }

    fn public_key_bytes(&self) -> &[u8] {
        self.ring.public_key().as_ref()
    }

    fn sign_raw(&self, data: &[u8]) -> sc::Result<Vec<u8>> {
        let sig = self
            .ring
            .sign(&ring::rand::SystemRandom::new(), data)
            .map_err(|_| sc::Error::Signing("ECDSA P-256 signing failed".into()))?;
        Ok(sig.as_ref().to_vec())
    }

    fn sign_prehashed(&self, digest: &[u8]) -> sc::Result<Vec<u8>> {
        use p256::ecdsa::signature::hazmat::PrehashSigner;
        let sig: p256::ecdsa::Signature = self
            .digest_signer
            .sign_prehash(digest)
            .map_err(|e| sc::Error::Signing(format!("ECDSA P-256 signing failed: {e}")))?;
        Ok(sig.to_der().as_bytes().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_signs_messages_and_digests_that_both_verify_either_way() {
        install();
        let key = sc::KeyPair::generate_ecdsa_p256().unwrap();
        let public = key.public_key_bytes().to_vec();
        let message = b"cluster stack";
        let digest = ring::digest::digest(&ring::digest::SHA256, message);
        let by_message = key.sign(message).unwrap();
        let by_digest =
            key.sign_digest(&sigstore_verify::types::Sha256Hash::try_from(digest.as_ref()).unwrap()).unwrap();
        for sig in [&by_message, &by_digest] {
            PROVIDER.verify_raw(SigningScheme::EcdsaP256Sha256, &public, message, sig.as_bytes()).unwrap();
            PROVIDER
                .verify_prehashed(SigningScheme::EcdsaP256Sha256, &public, digest.as_ref(), sig.as_bytes())
                .unwrap();
        }
        let other = ring::digest::digest(&ring::digest::SHA256, b"another stack");
        assert!(
            PROVIDER
                .verify_raw(SigningScheme::EcdsaP256Sha256, &public, b"another stack", by_message.as_bytes())
                .is_err()
        );
        assert!(
            PROVIDER
                .verify_prehashed(SigningScheme::EcdsaP256Sha256, &public, other.as_ref(), by_message.as_bytes())
                .is_err()
        );
    }
}
