//! Release identity: `<provider>-<name>-<major>-<minor>-<version>`.
//!
//! Two spellings exist. The tag (dash) form names GitHub releases,
//! ClusterStackRelease objects and cache directories:
//! `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha-hipstsw`.
//! The class (dot) form names ClusterClasses and `spec.versions` entries:
//! `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha.hipstsw`.
//! They differ only for non-stable versions. Provider and stack name contain
//! no `-`, so a tag always splits into exactly 5 (stable) or 7 (non-stable) parts.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Why a string is not a cluster-stack release name or version. Callers
/// listing a repository skip such tags instead of failing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The string does not have the shape of a cluster-stack name at all.
    #[error("{input:?} is not a cluster-stack release name: {reason}")]
    NotAClusterStack { input: String, reason: &'static str },
    /// The string is not a cluster-stack version.
    #[error("{input:?} is not a cluster-stack version: {reason}")]
    BadVersion { input: String, reason: &'static str },
    /// The string is not a Kubernetes `<major>.<minor>` version.
    #[error("{input:?} is not a Kubernetes minor version like \"1.27\"")]
    BadKubernetesMinor { input: String },
}

/// A Kubernetes minor version, e.g. 1.27.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KubernetesMinor {
    pub major: u32,
    pub minor: u32,
}

impl KubernetesMinor {
    pub fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }

    /// The dash form used inside names: `1-27`.
    pub fn dashed(&self) -> String {
        format!("{}-{}", self.major, self.minor)
    }
}

impl fmt::Display for KubernetesMinor {
    /// The dotted form of `ClusterStack.spec.kubernetesVersion`: `1.27`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for KubernetesMinor {
    type Err = NameError;

    /// Parses `1.27` (also accepting a leading `v`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || NameError::BadKubernetesMinor { input: s.to_string() };
        let rest = s.strip_prefix('v').unwrap_or(s);
        let (major, minor) = rest.split_once('.').ok_or_else(bad)?;
        Ok(Self { major: parse_number(major).ok_or_else(bad)?, minor: parse_number(minor).ok_or_else(bad)? })
    }
}

/// A cluster-stack version.
///
/// Stable versions `vN` are ordered numerically. Non-stable versions
/// `vN-<channel>.<id>` (e.g. `v0-sha.hipstsw`, a content hash, or
/// `v1-alpha.3`) are never ordered against stable ones and never the "latest".
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StackVersion {
    Stable(u64),
    PreRelease { major: u64, channel: String, id: String },
}

impl StackVersion {
    pub fn is_stable(&self) -> bool {
        matches!(self, StackVersion::Stable(_))
    }

    /// The dot form: `v2`, `v0-sha.hipstsw`.
    pub fn dotted(&self) -> String {
        self.to_string()
    }

    /// The dash form used in tags: `v2`, `v0-sha-hipstsw`.
    pub fn dashed(&self) -> String {
        match self {
            StackVersion::Stable(n) => format!("v{n}"),
            StackVersion::PreRelease { major, channel, id } => format!("v{major}-{channel}-{id}"),
        }
    }

    /// Parses the dash form (`v0-sha-hipstsw`) or the dot form (`v0-sha.hipstsw`).
    pub fn parse_any(s: &str) -> Result<Self, NameError> {
        let parts: Vec<&str> = s.split('-').collect();
        match parts.as_slice() {
            [v] => Self::from_parts(s, v, None),
            [v, channel, id] => Self::from_parts(s, v, Some((channel, id))),
            [v, channel_id] => {
                let (channel, id) = channel_id.split_once('.').ok_or(NameError::BadVersion {
                    input: s.to_string(),
                    reason: "a non-stable version is vN-<channel>.<id>",
                })?;
                Self::from_parts(s, v, Some((channel, id)))
            }
            _ => Err(NameError::BadVersion { input: s.to_string(), reason: "too many '-' separated parts" }),
        }
    }

    fn from_parts(input: &str, v: &str, pre: Option<(&str, &str)>) -> Result<Self, NameError> {
        let bad = |reason| NameError::BadVersion { input: input.to_string(), reason };
        let major = v
            .strip_prefix('v')
            .and_then(parse_number::<u64>)
            .ok_or_else(|| bad("a version starts with v and a number, e.g. v2"))?;
        match pre {
            None => Ok(StackVersion::Stable(major)),
            Some((channel, id)) => {
                let channel_ok = channel.starts_with(|c: char| c.is_ascii_lowercase()) && is_lower_alnum(channel);
                if !channel_ok {
                    return Err(bad("the channel is lowercase letters and digits, starting with a letter"));
                }
                if id.is_empty() || !is_lower_alnum(id) {
                    return Err(bad("the id of a non-stable version is lowercase letters and digits"));
                }
                Ok(StackVersion::PreRelease { major, channel: channel.to_string(), id: id.to_string() })
            }
        }
    }
}

impl fmt::Display for StackVersion {
    /// The dot form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StackVersion::Stable(n) => write!(f, "v{n}"),
            StackVersion::PreRelease { major, channel, id } => write!(f, "v{major}-{channel}.{id}"),
        }
    }
}

impl FromStr for StackVersion {
    type Err = NameError;

    /// Parses the dot form, as written in `spec.versions` and `metadata.yaml`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.split('-').count() == 3 {
            return Err(NameError::BadVersion {
                input: s.to_string(),
                reason: "expected the dot form vN-<channel>.<id>, got the dash form",
            });
        }
        Self::parse_any(s)
    }
}

impl PartialOrd for StackVersion {
    /// Stable versions compare numerically (`v10 > v9`). Two non-stable
    /// versions of one channel compare by major, then by id (numerically when
    /// both ids are numbers, so `alpha.10 > alpha.9`). Content-hash ids
    /// (`sha`) and versions of different channels are unordered.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        match (self, other) {
            (StackVersion::Stable(a), StackVersion::Stable(b)) => Some(a.cmp(b)),
            (
                StackVersion::PreRelease { major: ma, channel: ca, id: ia },
                StackVersion::PreRelease { major: mb, channel: cb, id: ib },
            ) if ca == cb => {
                if self == other {
                    return Some(Ordering::Equal);
                }
                match (ia.parse::<u64>(), ib.parse::<u64>()) {
                    (Ok(a), Ok(b)) => Some(ma.cmp(mb).then(a.cmp(&b))),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// The identity of one cluster-stack release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReleaseId {
    pub provider: String,
    pub name: String,
    pub kubernetes: KubernetesMinor,
    pub version: StackVersion,
}

impl ReleaseId {
    pub fn new(
        provider: &str,
        name: &str,
        kubernetes: KubernetesMinor,
        version: StackVersion,
    ) -> Result<Self, NameError> {
        for (part, what) in [(provider, "provider"), (name, "name")] {
            if part.is_empty() || !is_lower_alnum(part) {
                return Err(NameError::NotAClusterStack {
                    input: format!("{provider}-{name}"),
                    reason: if what == "provider" {
                        "the provider is lowercase letters and digits"
                    } else {
                        "the stack name is lowercase letters and digits"
                    },
                });
            }
        }
        Ok(Self { provider: provider.to_string(), name: name.to_string(), kubernetes, version })
    }

    /// Parses the tag (dash) form: `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha-hipstsw`.
    pub fn from_tag(tag: &str) -> Result<Self, NameError> {
        let parts: Vec<&str> = tag.split('-').collect();
        if parts.len() != 5 && parts.len() != 7 {
            return Err(not_a_stack(tag, "a tag has 5 '-' separated parts (7 for non-stable versions)"));
        }
        Self::from_parts(tag, &parts)
    }

    /// Parses the class (dot) form: `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha.hipstsw`.
    pub fn from_class_name(name: &str) -> Result<Self, NameError> {
        let parts: Vec<&str> = name.split('-').collect();
        if parts.len() != 5 && parts.len() != 6 {
            return Err(not_a_stack(name, "a class name has 5 '-' separated parts (6 for non-stable versions)"));
        }
        if parts.len() == 5 && parts[4].contains('.') {
            return Err(not_a_stack(name, "a stable version has no '.'"));
        }
        Self::from_parts(name, &parts)
    }

    /// Parses either form.
    pub fn parse_any(s: &str) -> Result<Self, NameError> {
        match s.split('-').count() {
            7 => Self::from_tag(s),
            _ => Self::from_class_name(s),
        }
    }

    fn from_parts(input: &str, parts: &[&str]) -> Result<Self, NameError> {
        let [provider, name, major, minor, version @ ..] = parts else {
            return Err(not_a_stack(input, "too few parts"));
        };
        let (Some(major), Some(minor)) = (parse_number(major), parse_number(minor)) else {
            return Err(not_a_stack(input, "the third and fourth parts are the Kubernetes major and minor version"));
        };
        let version = StackVersion::parse_any(&version.join("-"))
            .map_err(|_| not_a_stack(input, "the version part is vN, or vN-<channel>-<id> for non-stable versions"))?;
        Self::new(provider, name, KubernetesMinor { major, minor }, version)
            .map_err(|_| not_a_stack(input, "provider and stack name are lowercase letters and digits"))
    }

    /// `<provider>-<name>-<major>-<minor>`, e.g. `docker-ferrol-1-27`: the
    /// stack without its version (`release.name` in templates).
    pub fn stack_name(&self) -> String {
        format!("{}-{}-{}", self.provider, self.name, self.kubernetes.dashed())
    }

    /// The tag (dash) form.
    pub fn tag(&self) -> String {
        format!("{}-{}", self.stack_name(), self.version.dashed())
    }

    /// The class (dot) form: the ClusterClass name.
    pub fn class_name(&self) -> String {
        format!("{}-{}", self.stack_name(), self.version.dotted())
    }

    /// Whether this release belongs to the same stack as `other` (ignoring versions).
    pub fn same_stack(&self, other: &ReleaseId) -> bool {
        self.provider == other.provider && self.name == other.name && self.kubernetes == other.kubernetes
    }
}

impl fmt::Display for ReleaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.tag())
    }
}

fn not_a_stack(input: &str, reason: &'static str) -> NameError {
    NameError::NotAClusterStack { input: input.to_string(), reason }
}

fn is_lower_alnum(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Parses a decimal number without sign, leading `+` or surrounding space.
fn parse_number<T: FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_stable_tag() {
        let id = ReleaseId::from_tag("docker-ferrol-1-27-v2").unwrap();
        assert_eq!(id.provider, "docker");
        assert_eq!(id.name, "ferrol");
        assert_eq!(id.kubernetes, KubernetesMinor::new(1, 27));
        assert_eq!(id.version, StackVersion::Stable(2));
        assert_eq!(id.tag(), "docker-ferrol-1-27-v2");
        assert_eq!(id.class_name(), "docker-ferrol-1-27-v2");
        assert_eq!(id.stack_name(), "docker-ferrol-1-27");
    }

    #[test]
    fn parses_non_stable_in_both_forms() {
        let from_tag = ReleaseId::from_tag("docker-ferrol-1-27-v0-sha-hipstsw").unwrap();
        let from_class = ReleaseId::from_class_name("docker-ferrol-1-27-v0-sha.hipstsw").unwrap();
        assert_eq!(from_tag, from_class);
        assert_eq!(
            from_tag.version,
            StackVersion::PreRelease { major: 0, channel: "sha".into(), id: "hipstsw".into() }
        );
        assert_eq!(from_tag.tag(), "docker-ferrol-1-27-v0-sha-hipstsw");
        assert_eq!(from_tag.class_name(), "docker-ferrol-1-27-v0-sha.hipstsw");
        assert_eq!(ReleaseId::parse_any("docker-ferrol-1-27-v0-sha-hipstsw").unwrap(), from_tag);
        assert_eq!(ReleaseId::parse_any("docker-ferrol-1-27-v0-sha.hipstsw").unwrap(), from_tag);
    }

    #[test]
    fn scs2_is_a_valid_stack_name() {
        let id = ReleaseId::from_tag("openstack-scs2-1-29-v4").unwrap();
        assert_eq!(id.name, "scs2");
    }

    #[test]
    fn foreign_tags_are_typed_errors() {
        for tag in [
            "openstack-csp-helper-v0.2.0",
            "openstack-scs-1-29-v2-test",
            "",
            "docker-ferrol-1-27",
            "docker-ferrol-x-27-v1",
            "docker-ferrol-1-27-2",
            "docker-ferrol-1-27-v1.0",
            "Docker-ferrol-1-27-v1",
            "docker-ferrol-1-27-v-1",
            "docker-ferrol-1-27-v+1",
            "docker-ferrol-1-27-v1-Alpha-1",
            "docker-ferrol-1-27-v1-alpha-",
        ] {
            let err = ReleaseId::from_tag(tag).expect_err(tag);
            assert!(matches!(err, NameError::NotAClusterStack { .. }), "{tag}: {err:?}");
            assert!(ReleaseId::parse_any(tag).is_err(), "{tag}");
        }
    }

    #[test]
    fn dash_and_dot_forms_are_not_mixed_up() {
        // A dot-form name is not a tag, and a 7-part tag is not a class name.
        assert!(ReleaseId::from_tag("docker-ferrol-1-27-v0-sha.hipstsw").is_err());
        assert!(ReleaseId::from_class_name("docker-ferrol-1-27-v0-sha-hipstsw").is_err());
        assert!("v0-sha-hipstsw".parse::<StackVersion>().is_err());
        assert!(StackVersion::parse_any("v0-sha-hipstsw").is_ok());
    }

    #[test]
    fn stable_versions_compare_numerically() {
        let v = |s: &str| s.parse::<StackVersion>().unwrap();
        assert!(v("v10") > v("v9"));
        assert!(v("v2") < v("v11"));
        assert_eq!(v("v3").partial_cmp(&v("v3")), Some(Ordering::Equal));
    }

    #[test]
    fn non_stable_versions_are_never_ordered_against_stable() {
        let v = |s: &str| s.parse::<StackVersion>().unwrap();
        assert_eq!(v("v1-alpha.3").partial_cmp(&v("v1")), None);
        assert_eq!(v("v1").partial_cmp(&v("v0-sha.abc")), None);
        assert_eq!(v("v0-sha.abc").partial_cmp(&v("v0-sha.def")), None);
        assert_eq!(v("v1-alpha.1").partial_cmp(&v("v1-beta.1")), None);
        assert!(v("v1-alpha.10") > v("v1-alpha.9"));
        assert!(!v("v1-alpha.3").is_stable());
    }

    #[test]
    fn kubernetes_minor_parses_multi_digit_parts() {
        assert_eq!("1.27".parse::<KubernetesMinor>().unwrap(), KubernetesMinor::new(1, 27));
        assert_eq!("10.3".parse::<KubernetesMinor>().unwrap(), KubernetesMinor::new(10, 3));
        assert_eq!(KubernetesMinor::new(1, 27).to_string(), "1.27");
        assert_eq!(KubernetesMinor::new(1, 27).dashed(), "1-27");
        for bad in ["1", "1.", ".27", "1.27.3", "a.b", "1-27", "-1.2"] {
            assert!(bad.parse::<KubernetesMinor>().is_err(), "{bad}");
        }
    }

    fn arb_version() -> impl Strategy<Value = StackVersion> {
        prop_oneof![
            (0u64..100_000).prop_map(StackVersion::Stable),
            (0u64..1000, "[a-z][a-z0-9]{0,8}", "[a-z0-9]{1,12}")
                .prop_map(|(major, channel, id)| StackVersion::PreRelease { major, channel, id }),
        ]
    }

    fn arb_id() -> impl Strategy<Value = ReleaseId> {
        ("[a-z0-9]{1,12}", "[a-z0-9]{1,12}", 0u32..100, 0u32..1000, arb_version()).prop_map(
            |(provider, name, major, minor, version)| ReleaseId {
                provider,
                name,
                kubernetes: KubernetesMinor { major, minor },
                version,
            },
        )
    }

    proptest! {
        #[test]
        fn tag_form_round_trips(id in arb_id()) {
            prop_assert_eq!(ReleaseId::from_tag(&id.tag()).unwrap(), id.clone());
            prop_assert_eq!(ReleaseId::parse_any(&id.tag()).unwrap(), id);
        }

        #[test]
        fn class_form_round_trips(id in arb_id()) {
            prop_assert_eq!(ReleaseId::from_class_name(&id.class_name()).unwrap(), id.clone());
            prop_assert_eq!(ReleaseId::parse_any(&id.class_name()).unwrap(), id);
        }

        #[test]
        fn version_dot_form_round_trips(v in arb_version()) {
            prop_assert_eq!(v.dotted().parse::<StackVersion>().unwrap(), v.clone());
            prop_assert_eq!(StackVersion::parse_any(&v.dashed()).unwrap(), v);
        }

        #[test]
        fn stable_order_is_numeric(a in 0u64..1_000_000, b in 0u64..1_000_000) {
            let (va, vb) = (StackVersion::Stable(a), StackVersion::Stable(b));
            prop_assert_eq!(va.partial_cmp(&vb), Some(a.cmp(&b)));
            // The string order would disagree for e.g. 10 vs 9; ours must not.
            let parsed: StackVersion = format!("v{a}").parse().unwrap();
            prop_assert_eq!(parsed, va);
        }
    }
}
