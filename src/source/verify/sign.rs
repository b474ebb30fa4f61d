//! Signing with a managed key, for `publish --sign --key` and air-gapped sites: an ECDSA P-256
//! key in a PKCS#8 PEM file (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`,
//! or `clusterstack keygen`), a Sigstore bundle v0.3 per artifact (a message signature over its
//! sha256, the key named by a hint), no transparency-log entry: nothing is contacted, so the
//! verifier's policy must say `ignoreTransparencyLog: true` (the key alone vouches).

use sha2::{Digest, Sha256};
use sigstore_verify::bundle::{BundleV03, VerificationMaterialV03};
use sigstore_verify::crypto::KeyPair;
use sigstore_verify::types::bundle::{MessageDigest, MessageSignature};
use sigstore_verify::types::{HashAlgorithm, Sha256Hash, SignatureBytes, SignatureContent};

/// A private key that signs.
pub struct KeySigner {
    key: KeyPair,
    public_pem: String,
    hint: String,
}

impl std::fmt::Debug for KeySigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySigner").field("hint", &self.hint).finish_non_exhaustive()
    }
}

/// A new key pair's two PEM files.
pub struct GeneratedKey {
    /// PKCS#8 `PRIVATE KEY`: keep it secret.
    pub private_pem: String,
    /// `PUBLIC KEY` (SPKI): give it to verifiers.
    pub public_pem: String,
}

impl KeySigner {
    /// The key of a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), ECDSA P-256.
    pub fn from_pem(text: &str) -> Result<Self, String> {
        super::crypto::install();
        let block = pem::parse(text).map_err(|e| format!("not a PEM private key: {e}"))?;
        if block.tag() != "PRIVATE KEY" {
            return Err(format!(
                "a {} PEM block; expected an unencrypted PKCS#8 \"PRIVATE KEY\" (ECDSA P-256)",
                block.tag()
            ));
        }
        let key = KeyPair::from_pkcs8_der(block.contents()).map_err(|e| format!("not an ECDSA P-256 key: {e}"))?;
        let der = key.public_key_der().map_err(|e| format!("the public key: {e}"))?;
        let public_pem = der.to_pem();
        let hint = hex::encode(Sha256::digest(der.as_bytes()));
        Ok(Self { key, public_pem, hint })
    }

    /// A new ECDSA P-256 key pair, as PEM files.
    pub fn generate() -> Result<GeneratedKey, String> {
        super::crypto::install();
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 =
            ring::signature::EcdsaKeyPair::generate_pkcs8(&ring::signature::ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
                .map_err(|_| "cannot generate a key".to_string())?;
        let private_pem = pem::encode(&pem::Pem::new("PRIVATE KEY", pkcs8.as_ref().to_vec()));
        let public_pem = Self::from_pem(&private_pem)?.public_pem;
        Ok(GeneratedKey { private_pem, public_pem })
    }

    /// The public key, PEM.
    pub fn public_key_pem(&self) -> &str {
        &self.public_pem
    }

    /// A Sigstore bundle (JSON) signing the artifact whose sha256 is `digest`.
    pub fn bundle_for_digest(&self, digest: &Sha256Hash) -> Result<String, String> {
        let signature = self.key.sign_digest(digest).map_err(|e| format!("signing: {e}"))?;
        let content = SignatureContent::MessageSignature(
            MessageSignature::new(signature)
                .with_message_digest(MessageDigest::new(HashAlgorithm::Sha2256, (*digest).into())),
        );
        let bundle =
            BundleV03::new(VerificationMaterialV03::PublicKey { hint: self.hint.clone() }, content).into_bundle();
        bundle.to_json_pretty().map_err(|e| format!("the bundle: {e}"))
    }

    /// A signature over `payload` (cosign's simple-signing payload).
    pub fn sign(&self, payload: &[u8]) -> Result<SignatureBytes, String> {
        self.key.sign(payload).map_err(|e| format!("signing: {e}"))
    }
}

/// Signs every file at the top level of a release directory (what `publish` pushes), writing
/// `<file>.sigstore.json` beside each; existing bundles are replaced, never signed themselves.
/// Returns the bundles written, sorted.
pub fn sign_release_dir(dir: &std::path::Path, signer: &KeySigner) -> Result<Vec<std::path::PathBuf>, String> {
    let mut written = Vec::new();
    for (name, digest) in signable_files(dir)? {
        written.push(write_bundle(dir, &name, &signer.bundle_for_digest(&digest)?)?);
    }
    Ok(written)
}

/// [`sign_release_dir`] with keyless signatures: a Fulcio certificate and a Rekor entry per file.
pub async fn sign_release_dir_keyless(
    dir: &std::path::Path,
    signer: &super::keyless::KeylessSigner,
) -> Result<Vec<std::path::PathBuf>, String> {
    let mut written = Vec::new();
    for (name, digest) in signable_files(dir)? {
        let bundle = signer.bundle_for_digest(&digest).await.map_err(|e| format!("{name}: {e}"))?;
        written.push(write_bundle(dir, &name, &bundle)?);
    }
    Ok(written)
}

/// The files of a release directory to sign (not the bundles), sorted, with their sha256.
fn signable_files(dir: &std::path::Path) -> Result<Vec<(String, Sha256Hash)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().map(|t| t.is_file()).unwrap_or(false) && !super::policy::is_signature_asset(&name) {
            names.push(name);
        }
    }
    names.sort();
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let path = dir.join(&name);
        let (_, hex) = crate::source::cache::hash_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let digest = super::digest_from_hex(&hex).map_err(|e| e.to_string())?;
        files.push((name, digest));
    }
    Ok(files)
}

fn write_bundle(dir: &std::path::Path, name: &str, bundle: &str) -> Result<std::path::PathBuf, String> {
    let out = dir.join(format!("{name}{}", super::BUNDLE_SUFFIX));
    std::fs::write(&out, bundle).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}
