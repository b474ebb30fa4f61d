//! Trusted roots: the `trusted_root.json` documents that say which certificate authorities,
//! transparency logs, CT logs and timestamp authorities a signature may be proved against.
//!
//! Two are built in, compiled from the copies `sigstore-trust-root` embeds (never fetched at run
//! time): Sigstore's public-good instance and GitHub's own instance (artifact attestations of
//! private repositories). They change only when that crate is bumped, a reviewed change of
//! `Cargo.lock`; `clusterstack trusted-root` prints them and their sha256 so a reviewer can
//! compare them with `sigstore/root-signing` (see docs/security.md, "Rotating a trusted root").
//! A user's own root (a private Sigstore instance, an air-gapped site) is read from a file, a
//! ConfigMap or a Secret.

use sha2::{Digest, Sha256};
use sigstore_verify::trust_root::{SIGSTORE_GITHUB_TRUSTED_ROOT, SIGSTORE_PRODUCTION_TRUSTED_ROOT, TrustedRoot};

/// A root shipped in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltInRoot {
    /// Sigstore's public-good instance (Fulcio, Rekor, CT log, TSA of sigstore.dev).
    PublicGood,
    /// GitHub's Sigstore instance: its bundles have no transparency-log entry, only an RFC 3161
    /// timestamp, which is accepted for this root alone.
    GitHub,
}

impl BuiltInRoot {
    /// The name used in the policy (`trustedRoot.builtIn`) and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            BuiltInRoot::PublicGood => "public-good",
            BuiltInRoot::GitHub => "github",
        }
    }

    /// The root by its name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "public-good" => Some(BuiltInRoot::PublicGood),
            "github" => Some(BuiltInRoot::GitHub),
            _ => None,
        }
    }

    /// The `trusted_root.json` as shipped.
    pub fn json(self) -> &'static str {
        match self {
            BuiltInRoot::PublicGood => SIGSTORE_PRODUCTION_TRUSTED_ROOT,
            BuiltInRoot::GitHub => SIGSTORE_GITHUB_TRUSTED_ROOT,
        }
    }

    /// The parsed root.
    pub fn root(self) -> Result<TrustRoot, String> {
        let mut root = TrustRoot::from_json(self.name(), self.json())?;
        root.github_instance = self == BuiltInRoot::GitHub;
        Ok(root)
    }
}

/// One parsed trusted root and its name (for messages and status).
#[derive(Debug, Clone)]
pub struct TrustRoot {
    name: String,
    root: TrustedRoot,
    github_instance: bool,
    sha256: String,
}

impl TrustRoot {
    /// Parses a `trusted_root.json`; `name` says where it came from. A user's root is never
    /// treated as GitHub's instance: a bundle without a log entry needs the built-in GitHub root.
    pub fn from_json(name: &str, json: &str) -> Result<Self, String> {
        let root = TrustedRoot::from_json(json).map_err(|e| format!("trusted root {name}: {e}"))?;
        let sha256 = hex::encode(Sha256::digest(json.as_bytes()));
        Ok(Self { name: name.to_string(), root, github_instance: false, sha256 })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn root(&self) -> &TrustedRoot {
        &self.root
    }

    /// Whether this is the built-in GitHub instance (see [`BuiltInRoot::GitHub`]).
    pub fn is_github_instance(&self) -> bool {
        self.github_instance
    }

    /// The sha256 of the JSON document, to tell roots apart in status and logs.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_roots_parse_and_only_github_skips_the_log() {
        for built_in in [BuiltInRoot::PublicGood, BuiltInRoot::GitHub] {
            let root = built_in.root().unwrap();
            assert_eq!(BuiltInRoot::parse(built_in.name()), Some(built_in));
            assert_eq!(root.is_github_instance(), built_in == BuiltInRoot::GitHub);
            assert!(!root.root().certificate_authorities.is_empty(), "{}", built_in.name());
        }
        // The same document given by a user is not GitHub's instance.
        let user = TrustRoot::from_json("user", BuiltInRoot::GitHub.json()).unwrap();
        assert!(!user.is_github_instance());
        assert!(TrustRoot::from_json("broken", "{").is_err());
    }
}
