//! A release's `metadata.yaml`.
//!
//! ```yaml
//! apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
//! versions:
//!   clusterStack: v3
//!   kubernetes: v1.27.5
//!   components:
//!     clusterAddon: v2
//!     nodeImage: v3
//! ```

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{KubernetesMinor, ReleaseId, StackVersion};

/// The asset name of a release's metadata.
pub const METADATA_FILE: &str = "metadata.yaml";
/// The only `apiVersion` of `metadata.yaml` there is.
pub const METADATA_API_VERSION: &str = "metadata.clusterstack.x-k8s.io/v1alpha1";

/// Why a `metadata.yaml` cannot be used. Names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The parser's message, without the file's text (see [`yaml_error_without_content`]).
    #[error("{file}: not valid metadata YAML: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: field {field}: {message}")]
    Field { file: String, field: &'static str, message: String },
}

/// A parsed, validated `metadata.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseMetadata {
    pub versions: Versions,
}

/// `versions` of `metadata.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    pub cluster_stack: StackVersion,
    pub kubernetes: KubernetesVersion,
    pub components: Components,
}

/// `versions.components` of `metadata.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Components {
    /// Version of the addon bundle; lags the stack version when addons did not change.
    pub cluster_addon: StackVersion,
    /// Version of the node images, when the stack has any.
    pub node_image: Option<StackVersion>,
    /// Version of the cluster class, when the builder writes one (an open csctl change does:
    /// bumped only when `cluster-class/` changed). Read and kept; the ClusterClass is still named
    /// by the stack version.
    pub cluster_class: Option<StackVersion>,
}

/// A full Kubernetes version, `v1.27.5`, with the build metadata of distributions that carry it
/// (RKE2's `v1.30.4+rke2r1`, k3s' `v1.30.4+k3s1`; open csctl changes write them into
/// `metadata.yaml`). Build metadata takes no part in precedence ([`Self::precedence`]), as in
/// SemVer and Cluster API's own version checks: `+rke2r2` is not higher than `+rke2r1`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubernetesVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// What follows `+`, e.g. `rke2r1`.
    pub build: Option<String>,
}

impl KubernetesVersion {
    pub fn minor_version(&self) -> KubernetesMinor {
        KubernetesMinor::new(self.major, self.minor)
    }

    /// What orders two versions (Cluster API refuses to lower a Cluster's version by it).
    pub fn precedence(&self) -> (u32, u32, u32) {
        (self.major, self.minor, self.patch)
    }
}

impl fmt::Display for KubernetesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        match &self.build {
            Some(build) => write!(f, "+{build}"),
            None => Ok(()),
        }
    }
}

impl FromStr for KubernetesVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || format!("{s:?} is not a Kubernetes version like v1.27.5 (or v1.30.4+rke2r1)");
        let rest = s.strip_prefix('v').ok_or_else(err)?;
        let (rest, build) = match rest.split_once('+') {
            // SemVer build metadata: dot-separated identifiers of letters, digits and `-`.
            Some((rest, build))
                if build
                    .split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')) =>
            {
                (rest, Some(build.to_string()))
            }
            Some(_) => return Err(err()),
            None => (rest, None),
        };
        let parts: Vec<&str> = rest.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else { return Err(err()) };
        let num = |p: &str| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) { None } else { p.parse::<u32>().ok() }
        };
        Ok(Self {
            major: num(major).ok_or_else(err)?,
            minor: num(minor).ok_or_else(err)?,
            patch: num(patch).ok_or_else(err)?,
            build,
        })
    }
}

/// The file as written, before validation.
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawMetadata {
    api_version: Option<String>,
    versions: Option<RawVersions>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct RawVersions {
    cluster_stack: Option<String>,
    kubernetes: Option<String>,
    components: Option<RawComponents>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct RawComponents {
    cluster_addon: Option<String>,
    node_image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster_class: Option<String>,
}

/// A YAML parser's message that quotes nothing of the file: no source snippet, and the values it
/// quotes (`invalid type: string "..."`) replaced by `"…"`. The line and column stay. A release's
/// files are its author's, but a message travels further (conditions, Events, logs) than the
/// file's readers, and a file that is not what it claims (a symlink to `/etc/passwd`) must not
/// be printed through it.
pub fn yaml_error_without_content(e: &serde_saphyr::Error) -> String {
    let message = e.without_snippet().to_string();
    let mut out = String::with_capacity(message.len());
    let mut quoted = false;
    for c in message.chars() {
        if c == '"' {
            if quoted {
                out.push_str("\"…\"");
            }
            quoted = !quoted;
        } else if !quoted {
            out.push(c);
        }
    }
    out
}

impl ReleaseMetadata {
    /// Parses and validates `metadata.yaml`; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, MetadataError> {
        let raw: RawMetadata = serde_saphyr::from_str(text)
            .map_err(|e| MetadataError::Syntax { file: file.to_string(), message: yaml_error_without_content(&e) })?;
        let field =
            |field: &'static str, message: String| MetadataError::Field { file: file.to_string(), field, message };
        let required =
            |value: Option<String>, name: &'static str| value.ok_or_else(|| field(name, "is required".into()));
        let version =
            |value: String, name: &'static str| value.parse::<StackVersion>().map_err(|e| field(name, e.to_string()));

        let api_version = required(raw.api_version, "apiVersion")?;
        if api_version != METADATA_API_VERSION {
            return Err(field("apiVersion", format!("is {api_version:?}, expected {METADATA_API_VERSION:?}")));
        }
        let versions = raw.versions.ok_or_else(|| field("versions", "is required".into()))?;
        let cluster_stack =
            version(required(versions.cluster_stack, "versions.clusterStack")?, "versions.clusterStack")?;
        let kubernetes = required(versions.kubernetes, "versions.kubernetes")?
            .parse::<KubernetesVersion>()
            .map_err(|m| field("versions.kubernetes", m))?;
        let components = versions.components.ok_or_else(|| field("versions.components", "is required".into()))?;
        let cluster_addon = version(
            required(components.cluster_addon, "versions.components.clusterAddon")?,
            "versions.components.clusterAddon",
        )?;
        let node_image = components.node_image.map(|v| version(v, "versions.components.nodeImage")).transpose()?;
        // csctl writes an empty string where it has no version (its field has no omitempty).
        let cluster_class = components
            .cluster_class
            .filter(|v| !v.is_empty())
            .map(|v| version(v, "versions.components.clusterClass"))
            .transpose()?;
        Ok(Self {
            versions: Versions {
                cluster_stack,
                kubernetes,
                components: Components { cluster_addon, node_image, cluster_class },
            },
        })
    }

    /// Checks that the metadata belongs to the release `id`: same stack
    /// version and same Kubernetes minor. `file` names it in errors.
    pub fn check_matches(&self, file: &str, id: &ReleaseId) -> Result<(), MetadataError> {
        let field =
            |field: &'static str, message: String| MetadataError::Field { file: file.to_string(), field, message };
        if self.versions.cluster_stack != id.version {
            return Err(field(
                "versions.clusterStack",
                format!("is {}, but the release {} has version {}", self.versions.cluster_stack, id.tag(), id.version),
            ));
        }
        if self.versions.kubernetes.minor_version() != id.kubernetes {
            return Err(field(
                "versions.kubernetes",
                format!(
                    "is {}, but the release {} is for Kubernetes {}",
                    self.versions.kubernetes,
                    id.tag(),
                    id.kubernetes
                ),
            ));
        }
        Ok(())
    }

    /// Writes the file in the ecosystem's layout.
    pub fn to_yaml(&self) -> String {
        let raw = RawMetadata {
            api_version: Some(METADATA_API_VERSION.to_string()),
            versions: Some(RawVersions {
                cluster_stack: Some(self.versions.cluster_stack.to_string()),
                kubernetes: Some(self.versions.kubernetes.to_string()),
                components: Some(RawComponents {
                    cluster_addon: Some(self.versions.components.cluster_addon.to_string()),
                    node_image: self.versions.components.node_image.as_ref().map(ToString::to_string),
                    cluster_class: self.versions.components.cluster_class.as_ref().map(ToString::to_string),
                }),
            }),
        };
        // Serialising plain strings into YAML cannot fail; fall back to an
        // empty document rather than panic if the library ever disagrees.
        serde_saphyr::to_string(&raw).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
versions:
  clusterStack: v3
  kubernetes: v1.27.5
  components:
    clusterAddon: v2
    nodeImage: v3
";

    #[test]
    fn parses_the_fact_sheet_example() {
        let m = ReleaseMetadata::parse("metadata.yaml", SAMPLE).unwrap();
        assert_eq!(m.versions.cluster_stack, StackVersion::Stable(3));
        assert_eq!(m.versions.kubernetes, KubernetesVersion { major: 1, minor: 27, patch: 5, build: None });
        assert_eq!(m.versions.components.cluster_addon, StackVersion::Stable(2));
        assert_eq!(m.versions.components.node_image, Some(StackVersion::Stable(3)));
        let id = ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap();
        m.check_matches("metadata.yaml", &id).unwrap();
    }

    #[test]
    fn round_trips_through_yaml() {
        let m = ReleaseMetadata::parse("metadata.yaml", SAMPLE).unwrap();
        let again = ReleaseMetadata::parse("metadata.yaml", &m.to_yaml()).unwrap();
        assert_eq!(m, again);
    }

    /// What the stack repository's build script writes (four-space indentation, a `v0-ttl`
    /// version), with an RKE2 Kubernetes version and csctl's open `clusterClass` component.
    #[test]
    fn reads_the_stack_scripts_layout_rke2_versions_and_a_cluster_class_component() {
        let text = "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1
versions:
    kubernetes: v1.30.4+rke2r1
    clusterStack: v0-ttl.1712345678
    components:
        clusterAddon: v0-ttl.1712345678
        nodeImage: v0-ttl.1712345678
        clusterClass: v3
";
        let m = ReleaseMetadata::parse("metadata.yaml", text).unwrap();
        assert_eq!(m.versions.kubernetes.to_string(), "v1.30.4+rke2r1");
        assert_eq!(m.versions.kubernetes.build.as_deref(), Some("rke2r1"));
        assert_eq!(m.versions.components.cluster_class, Some(StackVersion::Stable(3)));
        let id = ReleaseId::from_tag("rke2-scs-1-30-v0-ttl-1712345678").unwrap();
        m.check_matches("metadata.yaml", &id).unwrap();
        assert_eq!(ReleaseMetadata::parse("metadata.yaml", &m.to_yaml()).unwrap(), m);
        // csctl writes an empty clusterClass when it has none; a malformed one names the field.
        let empty = text.replace("clusterClass: v3", "clusterClass: \"\"");
        assert_eq!(ReleaseMetadata::parse("m", &empty).unwrap().versions.components.cluster_class, None);
        let (place, _) = field_error(&text.replace("clusterClass: v3", "clusterClass: three"));
        assert_eq!(place, "rel/metadata.yaml:versions.components.clusterClass");
        // RKE2's and k3s' build metadata; anything else after `+` is not a version.
        for good in ["v1.30.4+rke2r1", "v1.31.2+k3s1", "v1.30.4+rke2r1.x-y"] {
            assert_eq!(good.parse::<KubernetesVersion>().unwrap().to_string(), good);
        }
        for bad in ["v1.30.4+", "v1.30.4+rke2r1+x", "v1.30.4+a..b", "v1.30+rke2r1", "v1.30.4+ä"] {
            assert!(bad.parse::<KubernetesVersion>().is_err(), "{bad}");
        }
        let v = |s: &str| s.parse::<KubernetesVersion>().unwrap();
        assert_eq!(v("v1.30.4+rke2r2").precedence(), v("v1.30.4+rke2r1").precedence());
        assert!(v("v1.30.5+rke2r1").precedence() > v("v1.30.4+rke2r9").precedence());
    }

    #[test]
    fn non_stable_versions_use_the_dot_form() {
        let text = SAMPLE.replace("clusterStack: v3", "clusterStack: v0-sha.hipstsw");
        let m = ReleaseMetadata::parse("metadata.yaml", &text).unwrap();
        let id = ReleaseId::from_tag("docker-ferrol-1-27-v0-sha-hipstsw").unwrap();
        m.check_matches("metadata.yaml", &id).unwrap();
    }

    fn field_error(text: &str) -> (String, String) {
        match ReleaseMetadata::parse("rel/metadata.yaml", text) {
            Err(MetadataError::Field { file, field, message }) => (format!("{file}:{field}"), message),
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let cases = [
            (SAMPLE.replace("metadata.clusterstack.x-k8s.io/v1alpha1", "v2"), "apiVersion"),
            (SAMPLE.replace("  clusterStack: v3\n", ""), "versions.clusterStack"),
            (SAMPLE.replace("clusterStack: v3", "clusterStack: 3"), "versions.clusterStack"),
            (SAMPLE.replace("v1.27.5", "1.27.5"), "versions.kubernetes"),
            (SAMPLE.replace("v1.27.5", "v1.27"), "versions.kubernetes"),
            (SAMPLE.replace("clusterAddon: v2", "clusterAddon: two"), "versions.components.clusterAddon"),
            (SAMPLE.replace("nodeImage: v3", "nodeImage: x"), "versions.components.nodeImage"),
            ("apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\n".to_string(), "versions"),
        ];
        for (text, field) in cases {
            let (place, message) = field_error(&text);
            assert_eq!(place, format!("rel/metadata.yaml:{field}"), "{message}");
            assert!(!message.is_empty());
        }
    }

    #[test]
    fn syntax_errors_name_the_file() {
        let err = ReleaseMetadata::parse("rel/metadata.yaml", "versions: [unclosed").unwrap_err();
        assert!(matches!(err, MetadataError::Syntax { .. }));
        assert!(err.to_string().starts_with("rel/metadata.yaml:"), "{err}");
        let err = ReleaseMetadata::parse("rel/metadata.yaml", "bogus: 1\n").unwrap_err();
        assert!(err.to_string().contains("rel/metadata.yaml"), "{err}");
    }

    #[test]
    fn syntax_errors_quote_nothing_of_the_file() {
        // The reported case: a symlinked metadata.yaml to /etc/passwd put its first line into a
        // condition. Whatever the file holds, the message names the file and the place only.
        let passwd = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";
        for text in [passwd, "secret-token-123\n", "versions: \"hunter2\"\n", "a: [secret, \"x\"\n"] {
            let e = ReleaseMetadata::parse("rel/metadata.yaml", text).unwrap_err().to_string();
            assert!(e.starts_with("rel/metadata.yaml: not valid metadata YAML:"), "{e}");
            for secret in ["root:x", "/bin/bash", "daemon", "secret", "hunter2"] {
                assert!(!e.contains(secret), "{secret:?} leaked: {e}");
            }
        }
    }

    #[test]
    fn mismatch_with_the_release_is_reported() {
        let m = ReleaseMetadata::parse("metadata.yaml", SAMPLE).unwrap();
        let other_version = ReleaseId::from_tag("docker-ferrol-1-27-v4").unwrap();
        let err = m.check_matches("metadata.yaml", &other_version).unwrap_err();
        assert!(err.to_string().contains("versions.clusterStack"), "{err}");
        let other_kube = ReleaseId::from_tag("docker-ferrol-1-28-v3").unwrap();
        let err = m.check_matches("metadata.yaml", &other_kube).unwrap_err();
        assert!(err.to_string().contains("versions.kubernetes"), "{err}");
    }
}
