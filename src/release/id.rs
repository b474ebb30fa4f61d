//! Release identity: `<provider>-<name>-<major>-<minor>-<version>`.
//!
//! Two spellings exist. The tag (dash) form names GitHub releases,
//! ClusterStackRelease objects and cache directories:
//! `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha-hipstsw`.
//! The class (dot) form names ClusterClasses and `spec.versions` entries:
//! `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha.hipstsw`.
//! They differ only for non-stable versions.
//!
//! How a name splits (the stack name may contain `-`, as csctl's open change allows:
//! `openstack-scs-hcp-1-30-v2`): the **version is read from the right** (`vN`, or `vN-<channel>-<id>`
//! in a tag, `vN-<channel>.<id>` in a class name), the two parts before it are the Kubernetes major
//! and minor, the **first part is the provider** (which has no `-`), and everything in between is
//! the stack name. So `docker-scs-2-1-30-v1` is stack `scs-2` for Kubernetes 1.30, and a stack
//! name may even end in what looks like a version (`docker-x-1-27-v2-1-28-v3` is stack
//! `x-1-27-v2`, Kubernetes 1.28, v3). A stable and a non-stable reading of one string can never
//! both succeed (the part before a stable version is a number, the part three from the end of a
//! non-stable tag starts with `v`), so every name has exactly one identity and every identity one
//! name. csctl's change takes the first part from the fifth on that starts with `v` as the version:
//! it agrees on every name it accepts, and misreads stack names with such a part (`a-b-c-vpn`).

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
        if provider.is_empty() || !is_lower_alnum(provider) {
            return Err(NameError::NotAClusterStack {
                input: format!("{provider}-{name}"),
                reason: "the provider is lowercase letters and digits",
            });
        }
        if !is_stack_name(name) {
            return Err(NameError::NotAClusterStack {
                input: format!("{provider}-{name}"),
                reason: "the stack name is lowercase letters and digits, in parts joined by single '-'",
            });
        }
        Ok(Self { provider: provider.to_string(), name: name.to_string(), kubernetes, version })
    }

    /// Parses the tag (dash) form: `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha-hipstsw`.
    pub fn from_tag(tag: &str) -> Result<Self, NameError> {
        Self::from_parts(tag, 3)
    }

    /// Parses the class (dot) form: `docker-ferrol-1-27-v2`, `docker-ferrol-1-27-v0-sha.hipstsw`.
    pub fn from_class_name(name: &str) -> Result<Self, NameError> {
        Self::from_parts(name, 2)
    }

    /// Parses either form: a last part with a `.` is the class form's `<channel>.<id>`.
    pub fn parse_any(s: &str) -> Result<Self, NameError> {
        match s.rsplit('-').next().is_some_and(|last| last.contains('.')) {
            true => Self::from_class_name(s),
            false => Self::from_tag(s),
        }
    }

    /// Splits `input` as the module documentation says; a non-stable version takes
    /// `pre_release_parts` parts (3 in a tag, 2 in a class name).
    fn from_parts(input: &str, pre_release_parts: usize) -> Result<Self, NameError> {
        let parts: Vec<&str> = input.split('-').collect();
        // A stable version is the last part; a non-stable one the last 2 or 3. At most one of the
        // two readings gives a stack (see the module documentation); the stable one's error is
        // the one to report when neither does.
        let stable = Self::split_at(input, &parts, 1);
        if stable.is_ok() || parts.len() < pre_release_parts {
            return stable;
        }
        Self::split_at(input, &parts, pre_release_parts).or(stable)
    }

    fn split_at(input: &str, parts: &[&str], version_parts: usize) -> Result<Self, NameError> {
        if parts.len() < 4 + version_parts {
            return Err(not_a_stack(
                input,
                "a release name is <provider>-<name>-<major>-<minor>-<version> (the name may contain '-')",
            ));
        }
        let (head, version) = parts.split_at(parts.len() - version_parts);
        let version = version.join("-");
        if version_parts == 1 && version.contains('.') {
            return Err(not_a_stack(input, "a stable version has no '.'"));
        }
        let version = StackVersion::parse_any(&version).map_err(|_| {
            not_a_stack(
                input,
                "the version part is vN, or vN-<channel>-<id> (vN-<channel>.<id> in a class name) for non-stable versions",
            )
        })?;
        let (provider, rest) = (head[0], &head[1..]);
        let (name, kube) = rest.split_at(rest.len() - 2);
        let (Some(major), Some(minor)) = (parse_number(kube[0]), parse_number(kube[1])) else {
            return Err(not_a_stack(
                input,
                "the two parts before the version are the Kubernetes major and minor version",
            ));
        };
        Self::new(provider, &name.join("-"), KubernetesMinor { major, minor }, version).map_err(|e| match e {
            NameError::NotAClusterStack { reason, .. } => not_a_stack(input, reason),
            other => other,
        })
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

/// A stack name: parts of lowercase letters and digits joined by single `-` (`scs`, `scs-hcp`).
pub fn is_stack_name(s: &str) -> bool {
    s.split('-').all(is_lower_alnum)
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
    fn stack_names_may_contain_dashes_and_split_from_the_right() {
        let id = ReleaseId::from_tag("openstack-scs-hcp-1-30-v2").unwrap();
        assert_eq!((id.provider.as_str(), id.name.as_str()), ("openstack", "scs-hcp"));
        assert_eq!(id.kubernetes, KubernetesMinor::new(1, 30));
        assert_eq!(id.stack_name(), "openstack-scs-hcp-1-30");
        // Numeric parts of the name: the Kubernetes version is the two parts before the version.
        let id = ReleaseId::from_tag("docker-scs-2-1-30-v1").unwrap();
        assert_eq!((id.name.as_str(), id.kubernetes), ("scs-2", KubernetesMinor::new(1, 30)));
        // A name ending in what looks like a release is still the name.
        let id = ReleaseId::from_tag("docker-x-1-27-v2-1-28-v3").unwrap();
        assert_eq!(
            (id.name.as_str(), id.kubernetes, &id.version),
            ("x-1-27-v2", KubernetesMinor::new(1, 28), &StackVersion::Stable(3))
        );
        // Non-stable versions in both forms; an id that looks like a stable version is still the id.
        let tag = ReleaseId::from_tag("openstack-scs-hcp-1-30-v0-ttl-1712345678").unwrap();
        let class = ReleaseId::from_class_name("openstack-scs-hcp-1-30-v0-ttl.1712345678").unwrap();
        assert_eq!(tag, class);
        assert_eq!(tag.name, "scs-hcp");
        let odd = ReleaseId::from_tag("docker-a-b-1-27-v0-alpha-v5").unwrap();
        assert_eq!((odd.name.as_str(), odd.version.dotted()), ("a-b", "v0-alpha.v5".to_string()));
        // csctl's open change reads `a-b-c-vpn` wrong (its version is the first part from the
        // fifth on that starts with `v`); ours does not.
        assert_eq!(ReleaseId::from_tag("openstack-a-b-c-vpn-1-30-v1").unwrap().name, "a-b-c-vpn");
        for bad in
            ["docker--x-1-27-v1", "docker-x--1-27-v1", "docker-x-1-27-v1-", "docker-X-y-1-27-v1", "docker-1-27-v1"]
        {
            assert!(ReleaseId::parse_any(bad).is_err(), "{bad}");
        }
        assert!(ReleaseId::new("open-stack", "scs", KubernetesMinor::new(1, 30), StackVersion::Stable(1)).is_err());
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
        // Stack names of one to four parts, parts that look like numbers and versions included.
        let part = prop_oneof!["[a-z0-9]{1,8}", "[0-9]{1,3}", "v[0-9]{1,2}"];
        let name = proptest::collection::vec(part, 1..5).prop_map(|p| p.join("-"));
        ("[a-z0-9]{1,12}", name, 0u32..100, 0u32..1000, arb_version()).prop_map(
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
