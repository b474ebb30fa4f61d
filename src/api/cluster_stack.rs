//! `ClusterStack`: which cluster stack to follow, and which versions to keep.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::common::{Condition, ObjectRef};

/// How often a ClusterStack's source is polled when `spec.pollInterval` is unset.
pub const DEFAULT_POLL_INTERVAL: &str = "5m";

/// ClusterStack says which cluster stack (provider, name, Kubernetes minor,
/// channel) to follow, and which of its releases to keep available.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "clusterstack.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterStack",
    namespaced,
    doc = "ClusterStack follows one cluster stack and keeps the wanted releases of it available.",
    status = "ClusterStackStatus",
    shortname = "csk",
    printcolumn = r#"{"name":"Provider","type":"string","jsonPath":".spec.provider"}"#,
    printcolumn = r#"{"name":"ClusterStack","type":"string","jsonPath":".spec.name"}"#,
    printcolumn = r#"{"name":"K8s","type":"string","jsonPath":".spec.kubernetesVersion"}"#,
    printcolumn = r#"{"name":"Channel","type":"string","jsonPath":".spec.channel"}"#,
    printcolumn = r#"{"name":"Autosubscribe","type":"string","jsonPath":".spec.autoSubscribe"}"#,
    printcolumn = r#"{"name":"Usable","type":"string","jsonPath":".status.usableVersions"}"#,
    printcolumn = r#"{"name":"Latest","type":"string","jsonPath":".status.latestRelease"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].reason"}"#,
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].message"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackSpec {
    /// Provider of the cluster stack, e.g. `docker` or `openstack`. Contains no `-`. Immutable.
    #[schemars(length(min = 1), pattern(r"^[a-z0-9]+$"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("provider is immutable"))]
    pub provider: String,

    /// Name of the cluster stack, e.g. `ferrol`, `scs` or `scs-hcp`: lowercase letters and digits,
    /// in parts joined by single `-`. Immutable.
    #[schemars(length(min = 1), pattern(r"^[a-z0-9]+(-[a-z0-9]+)*$"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("name is immutable"))]
    pub name: String,

    /// Kubernetes version as `<major>.<minor>`, e.g. `1.27`. Immutable.
    #[schemars(pattern(r"^[0-9]+\.[0-9]+$"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("kubernetesVersion is immutable"))]
    pub kubernetes_version: String,

    /// Release channel: `stable` follows versions `vN`; `custom` keeps the pinned non-stable
    /// versions such as `v0-sha.abc123` or `v1-alpha.3`; a channel name (`ttl`, `alpha`)
    /// follows that channel's versions (`v0-ttl.1712345678`), newest by their number. Immutable.
    #[serde(default)]
    #[x_kube(validation = Rule::new("self == oldSelf").message("channel is immutable"))]
    pub channel: Channel,

    /// Versions to keep available, in dot form: `v1` for the stable channel,
    /// `v1-alpha.1` or `v0-sha.abc123` for the custom channel.
    #[serde(default)]
    #[schemars(inner(pattern(r"^v[0-9]+(-[a-z][a-z0-9]*\.[a-z0-9]+)?$")))]
    pub versions: Vec<String>,

    /// Also keep the latest release of the channel available, following new
    /// releases as they are published.
    #[serde(default = "default_true")]
    pub auto_subscribe: bool,

    /// There is no provider-specific work (no node images to prepare) for this stack.
    #[serde(default)]
    pub no_provider: bool,

    /// Reference to a provider `<Kind>Template` object holding the
    /// provider-specific settings for each release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<ObjectRef>,

    /// Where releases come from. Unset: the operator's default source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ReleaseSourceSpec>,

    /// How often the source is polled for new releases, as a duration such as
    /// `30s`, `5m` or `1h`. Default `5m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^([0-9]+(ms|s|m|h))+$"))]
    pub poll_interval: Option<String>,

    /// Stop all changes for this stack: no polling, no release created or deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub suspend: bool,
    /// Require signed releases: whose signatures, proved against which trusted root. Without it
    /// (and without the operator's `--verify-policy`), releases are checked by digest only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<super::VerifySpec>,
}

fn default_true() -> bool {
    true
}

/// Release channel of a ClusterStack: `stable` (versions `vN`), `custom` (every non-stable
/// version; pinned only, it has no order), or the name of one pre-release channel (`ttl`,
/// `alpha`...): its versions `vN-<channel>.<id>`, ordered by N, then by the id as a number (the
/// stack repository's development builds `v0-ttl.<unix time>` by their time), whose newest
/// `autoSubscribe` keeps. So a development build is never taken by auto-subscribe unless the
/// ClusterStack asks for its channel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Channel {
    /// Stable versions `vN`.
    #[default]
    Stable,
    /// Non-stable versions `vN-<channel>.<id>`, of any channel.
    Custom,
    /// The versions `vN-<name>.<id>` of one pre-release channel.
    Named(String),
}

impl Channel {
    /// The channel's name as written in `spec.channel`.
    pub fn as_str(&self) -> &str {
        match self {
            Channel::Stable => "stable",
            Channel::Custom => "custom",
            Channel::Named(name) => name,
        }
    }

    /// Parses `spec.channel`: `stable`, `custom` or a channel name (a lowercase letter, then
    /// lowercase letters and digits, as in a version's `<channel>`).
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "stable" => Ok(Channel::Stable),
            "custom" => Ok(Channel::Custom),
            name if name.starts_with(|c: char| c.is_ascii_lowercase())
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) =>
            {
                Ok(Channel::Named(name.to_string()))
            }
            other => Err(format!(
                "channel {other:?} is not stable, custom or a channel name (lowercase letters and digits, e.g. ttl)"
            )),
        }
    }

    /// Whether `version` belongs to this channel.
    pub fn admits(&self, version: &crate::release::StackVersion) -> bool {
        use crate::release::StackVersion;
        match (self, version) {
            (Channel::Stable, v) => v.is_stable(),
            (Channel::Custom, v) => !v.is_stable(),
            (Channel::Named(name), StackVersion::PreRelease { channel, .. }) => channel == name,
            (Channel::Named(_), StackVersion::Stable(_)) => false,
        }
    }

    /// The newest of `items` (by their `version`) in this channel: the highest `vN` for
    /// `stable`; for a named channel the highest N, then the highest id read as a number (ids
    /// that are not numbers, such as content hashes, have no order and are never the newest);
    /// none for `custom`, whose versions of different channels cannot be compared.
    pub fn newest<T>(
        &self,
        items: impl IntoIterator<Item = T>,
        version: impl Fn(&T) -> &crate::release::StackVersion,
    ) -> Option<T> {
        use crate::release::StackVersion;
        let rank = |v: &StackVersion| -> Option<(u64, u64)> {
            match (self, v) {
                (Channel::Stable, StackVersion::Stable(n)) => Some((*n, 0)),
                (Channel::Named(name), StackVersion::PreRelease { major, channel, id }) if channel == name => {
                    id.parse::<u64>().ok().map(|id| (*major, id))
                }
                _ => None,
            }
        };
        items
            .into_iter()
            .filter_map(|item| rank(version(&item)).map(|r| (r, item)))
            .max_by_key(|(r, _)| *r)
            .map(|(_, i)| i)
    }
}

impl std::fmt::Display for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Channel {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Channel {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Channel::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Channel {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Channel".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^[a-z][a-z0-9]*$"})
    }
}

/// Where a ClusterStack's releases come from. Exactly one field is set.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.github) ? 1 : 0) + (has(self.directory) ? 1 : 0) + (has(self.oci) ? 1 : 0) == 1").message("set exactly one of github, directory or oci"))]
pub struct ReleaseSourceSpec {
    /// Releases of a GitHub repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github: Option<GitHubSource>,
    /// Releases in a directory of the operator's filesystem, one subdirectory per release tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<DirectorySource>,
    /// Releases as artifacts in a repository of an OCI registry, one tag per release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<OciSource>,
}

/// A repository of an OCI registry holding cluster-stack releases as ORAS-style artifacts.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OciSource {
    /// `HOST[:PORT]/REPOSITORY`, e.g. `registry.scs.community/kaas/cluster-stacks`.
    #[schemars(length(min = 3))]
    pub repository: String,
    /// Secret in the ClusterStack's namespace with the registry credentials: keys `username` and
    /// `password`, or `token` (a bearer access token). `key` is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretKeyRef>,
}

/// A GitHub repository publishing cluster-stack releases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GitHubSource {
    /// Owner (user or organisation) of the repository.
    #[schemars(length(min = 1))]
    pub owner: String,
    /// Name of the repository.
    #[schemars(length(min = 1))]
    pub repository: String,
    /// Secret key holding an access token, in the ClusterStack's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_secret_ref: Option<SecretKeyRef>,
}

/// A key of a Secret in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key within the Secret. Default `token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A local directory of releases.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DirectorySource {
    /// Path of the directory, as the operator sees it.
    #[schemars(length(min = 1))]
    pub path: String,
}

/// Observed state of a ClusterStack.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackStatus {
    /// Conditions: `Ready`, `ReleasesSynced`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// One line per ClusterStackRelease of this stack.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub summary: Vec<ClusterStackReleaseSummary>,
    /// Comma-separated versions whose releases are ready to use.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub usable_versions: String,
    /// The newest release of the channel known from the source.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_release: String,
    /// The `.metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The state of one ClusterStackRelease, as summarised on its ClusterStack.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStackReleaseSummary {
    /// Name of the ClusterStackRelease (tag form).
    pub name: String,
    /// Whether the release is ready to use.
    #[serde(default)]
    pub ready: bool,
    /// Phase of the release, e.g. `downloading release assets`, `applying objects`, `done`.
    #[serde(default)]
    pub phase: String,
    /// Why the release is not ready.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}
