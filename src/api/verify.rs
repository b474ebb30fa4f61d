//! `ClusterStack.spec.verify`: whose signatures a stack's releases must carry (see
//! `docs/security.md`). The operator-wide default (`--verify-policy`) has the same shape.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// Which signatures a release must carry.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VerifyKind {
    /// A Sigstore bundle for every release asset: a GitHub artifact attestation (`actions/attest`)
    /// or `cosign sign-blob --bundle`, published as the asset `<asset>.sigstore.json` (an OCI
    /// release: a file of the artifact so named), or, for a GitHub source, held by GitHub's
    /// attestations API for the asset's digest.
    #[default]
    GithubAttestation,
    /// A cosign signature of the release's OCI manifest, where cosign keeps it (the tag
    /// `sha256-<digest>.sig`). For OCI sources only.
    Cosign,
    /// Both.
    Both,
}

/// The signature policy of a ClusterStack: its releases are downloaded, verified and only then
/// extracted; a release that fails is never applied.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.identity) != has(self.key)").message("set exactly one of identity (keyless) or key"))]
pub struct VerifySpec {
    /// `github-attestation` (default), `cosign` or `both`.
    #[serde(default)]
    pub kind: VerifyKind,
    /// Keyless signatures: who must have signed (the Fulcio certificate's claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<VerifyIdentity>,
    /// A managed key instead: a Secret or ConfigMap key holding the PEM public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeySource>,
    /// With `key`: accept signatures without a transparency-log entry (air-gapped signing with
    /// `publish --sign --key`). The key alone then vouches.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_transparency_log: bool,
    /// The trusted root the signatures are proved against. Default: the built-in public-good
    /// root, and for `github-attestation` GitHub's own instance as well.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted_root: Option<TrustedRootSource>,
}

/// The identity of a keyless signer. `subject` or `repository` is required.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.subject) || has(self.repository)").message("set subject or repository"))]
pub struct VerifyIdentity {
    /// The OIDC issuer. Default `https://token.actions.githubusercontent.com` (GitHub Actions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The certificate's subject (SAN) exactly: an email or a URI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `OWNER/REPO` of the GitHub repository whose workflow signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$"))]
    pub repository: Option<String>,
    /// The workflow file that signed, e.g. `.github/workflows/release.yml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    /// The ref the workflow ran for, `*` matching anything: e.g. `refs/tags/v*`.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_pattern: Option<String>,
}

/// Where a document comes from: a key of a ConfigMap or Secret in the ClusterStack's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.configMapRef) != has(self.secretRef)").message("set exactly one of configMapRef or secretRef"))]
pub struct KeySource {
    /// A ConfigMap key holding the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<KeyRef>,
    /// A Secret key holding the document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<KeyRef>,
}

/// A trusted root: built in, or a `trusted_root.json` in a ConfigMap or Secret.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.builtIn) ? 1 : 0) + (has(self.configMapRef) ? 1 : 0) + (has(self.secretRef) ? 1 : 0) == 1").message("set exactly one of builtIn, configMapRef or secretRef"))]
pub struct TrustedRootSource {
    /// `public-good` (Sigstore's instance) or `github` (GitHub's instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^(public-good|github)$"))]
    pub built_in: Option<String>,
    /// A ConfigMap key holding a `trusted_root.json` (key default `trusted_root.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map_ref: Option<KeyRef>,
    /// A Secret key holding a `trusted_root.json` (key default `trusted_root.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<KeyRef>,
}

/// A key of a ConfigMap or Secret in the ClusterStack's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// Name of the ConfigMap or Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within it. Default: `cosign.pub` for a public key, `trusted_root.json` for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
