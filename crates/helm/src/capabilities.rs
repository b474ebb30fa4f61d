//! `.Capabilities`: the Kubernetes version (Helm's `common.KubeVersion`, with its check of a
//! chart's `kubeVersion`), the API versions and the Helm version templates see.

use std::collections::BTreeMap;
use std::rc::Rc;

use gotmpl::{FuncError, Object, Value};

/// The Kubernetes version `helm template` assumes without `--kube-version`
/// (helm v4.2, the version the differential tests pin).
pub const DEFAULT_KUBE_VERSION: &str = "v1.36.0";
/// The Helm version templates see.
pub const HELM_VERSION: &str = "v4.2.3";

/// The API versions `helm template` offers by default (its client's scheme).
pub const DEFAULT_API_VERSIONS: &[&str] = &[
    "v1",
    "admissionregistration.k8s.io/v1",
    "admissionregistration.k8s.io/v1alpha1",
    "admissionregistration.k8s.io/v1beta1",
    "internal.apiserver.k8s.io/v1alpha1",
    "apps/v1",
    "apps/v1beta1",
    "apps/v1beta2",
    "authentication.k8s.io/v1",
    "authentication.k8s.io/v1alpha1",
    "authentication.k8s.io/v1beta1",
    "authorization.k8s.io/v1",
    "authorization.k8s.io/v1beta1",
    "autoscaling/v1",
    "autoscaling/v2",
    "batch/v1",
    "batch/v1beta1",
    "certificates.k8s.io/v1",
    "certificates.k8s.io/v1beta1",
    "certificates.k8s.io/v1alpha1",
    "coordination.k8s.io/v1alpha2",
    "coordination.k8s.io/v1beta1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "discovery.k8s.io/v1beta1",
    "events.k8s.io/v1",
    "events.k8s.io/v1beta1",
    "extensions/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1",
    "flowcontrol.apiserver.k8s.io/v1beta1",
    "flowcontrol.apiserver.k8s.io/v1beta2",
    "flowcontrol.apiserver.k8s.io/v1beta3",
    "networking.k8s.io/v1",
    "networking.k8s.io/v1beta1",
    "node.k8s.io/v1",
    "node.k8s.io/v1alpha1",
    "node.k8s.io/v1beta1",
    "policy/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "rbac.authorization.k8s.io/v1beta1",
    "rbac.authorization.k8s.io/v1alpha1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
    "resource.k8s.io/v1alpha3",
    "scheduling.k8s.io/v1alpha2",
    "scheduling.k8s.io/v1beta1",
    "scheduling.k8s.io/v1",
    "storage.k8s.io/v1beta1",
    "storage.k8s.io/v1",
    "storage.k8s.io/v1alpha1",
    "storagemigration.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1beta1",
    "apiextensions.k8s.io/v1",
];

/// `.Capabilities`.
pub struct Capabilities {
    pub kube_version: Value,
    pub api_versions: Value,
    pub helm_version: Value,
}

impl Capabilities {
    /// Capabilities for a parsed Kubernetes version and extra API versions besides the defaults.
    pub fn new(kube: KubeVersion, extra_api_versions: &[String]) -> Self {
        let mut apis: Vec<Value> = DEFAULT_API_VERSIONS.iter().map(|v| Value::str(*v)).collect();
        apis.extend(extra_api_versions.iter().map(|v| Value::str(v.as_str())));
        Self {
            kube_version: Value::Object(Rc::new(kube)),
            api_versions: Value::Object(Rc::new(ApiVersions(Rc::new(apis)))),
            helm_version: Value::Object(Rc::new(HelmVersion)),
        }
    }
}

impl Object for Capabilities {
    fn type_name(&self) -> &str {
        "*common.Capabilities"
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "KubeVersion" => Some(self.kube_version.clone()),
            "APIVersions" => Some(self.api_versions.clone()),
            "HelmVersion" => Some(self.helm_version.clone()),
            _ => None,
        }
    }

    fn go_string(&self) -> String {
        "&{...}".into()
    }

    fn to_data(&self) -> Value {
        Value::map(BTreeMap::from([
            ("KubeVersion".to_string(), self.kube_version.clone()),
            ("APIVersions".to_string(), self.api_versions.clone()),
            ("HelmVersion".to_string(), self.helm_version.clone()),
        ]))
    }

    fn json_field_order(&self) -> &[&'static str] {
        &["KubeVersion", "APIVersions", "HelmVersion"]
    }
}

/// `.Capabilities.KubeVersion`: Helm's `common.KubeVersion`, from the version parsed as
/// Kubernetes' `version.ParseGeneric` parses it (two or more dot-separated numbers after an
/// optional `v`, then anything).
pub struct KubeVersion {
    /// The version as given, with a `v` in front (`v1.29.4-gke.100`, `v1.29`).
    version: String,
    /// Its numbers only (`v1.29.4`, `v1.29`): what `String()` gives and constraints check.
    normalized: String,
    major: String,
    minor: String,
}

impl KubeVersion {
    pub fn parse(text: &str) -> Result<Self, String> {
        let invalid = || format!("invalid Kubernetes version {text:?}");
        let bare = text.trim_start();
        let bare = bare.strip_prefix('v').unwrap_or(bare);
        // The dot-separated numbers at the start; what follows is kept but not interpreted.
        let mut numbers: Vec<u64> = Vec::new();
        let mut rest = bare;
        loop {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                break;
            }
            // Kubernetes refuses a leading zero in the first number.
            if numbers.is_empty() && digits > 1 && rest.starts_with('0') {
                return Err(invalid());
            }
            numbers.push(rest[..digits].parse().map_err(|_| invalid())?);
            rest = &rest[digits..];
            match rest.strip_prefix('.') {
                Some(after) if after.starts_with(|c: char| c.is_ascii_digit()) => rest = after,
                _ => break,
            }
        }
        if numbers.len() < 2 {
            return Err(invalid());
        }
        let joined: Vec<String> = numbers.iter().map(u64::to_string).collect();
        let version = if text.starts_with('v') { text.to_string() } else { format!("v{text}") };
        Ok(Self {
            version,
            normalized: format!("v{}", joined.join(".")),
            major: joined[0].clone(),
            minor: joined[1].clone(),
        })
    }
}

impl KubeVersion {
    /// Helm's check of a chart's `kubeVersion` (its root chart's only): the constraint against
    /// the version's numbers (so `v1.29.4-gke.100` satisfies `>= 1.21.0`); a constraint or
    /// version that does not parse is incompatible. The message names the version as given.
    pub fn check_chart(&self, constraint: &str) -> Result<(), String> {
        if crate::sprig::semver::is_compatible_range(constraint, &self.normalized) {
            return Ok(());
        }
        Err(format!("chart requires kubeVersion: {constraint} which is incompatible with Kubernetes {}", self.version))
    }
}

impl Object for KubeVersion {
    fn type_name(&self) -> &str {
        "common.KubeVersion"
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Version" | "GitVersion" => Some(Value::str(self.version.as_str())),
            "String" => Some(Value::str(self.normalized.as_str())),
            "Major" => Some(Value::str(self.major.as_str())),
            "Minor" => Some(Value::str(self.minor.as_str())),
            _ => None,
        }
    }

    /// A struct without a `String()` of its own (the method is on its pointer): Go prints its
    /// fields, the unexported one too.
    fn go_string(&self) -> String {
        format!("{{{} {} {} {}}}", self.version, self.normalized, self.major, self.minor)
    }

    /// `{{ .Capabilities.KubeVersion }}` reaches the pointer's `String()`.
    fn addressable_string(&self) -> Option<String> {
        Some(self.normalized.clone())
    }

    /// Its exported fields, under their Go names (the struct has no JSON tags).
    fn to_data(&self) -> Value {
        Value::map(BTreeMap::from([
            ("Version".to_string(), Value::str(self.version.as_str())),
            ("Major".to_string(), Value::str(self.major.as_str())),
            ("Minor".to_string(), Value::str(self.minor.as_str())),
        ]))
    }

    fn json_field_order(&self) -> &[&'static str] {
        &["Version", "Major", "Minor"]
    }
}

/// `.Capabilities.APIVersions`: a list with `Has`.
pub struct ApiVersions(Rc<Vec<Value>>);

impl Object for ApiVersions {
    fn type_name(&self) -> &str {
        "common.VersionSet"
    }

    fn field(&self, _: &str) -> Option<Value> {
        None
    }

    fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
        if method != "Has" {
            return None;
        }
        Some(match args {
            [Value::String(s)] => Ok(Value::Bool(self.0.iter().any(|v| v.as_str() == Some(s)))),
            _ => Err(FuncError::msg(format!("wrong number of args for Has: want 1 got {}", args.len()))),
        })
    }

    fn go_string(&self) -> String {
        gotmpl::fmt::format_value(&Value::List(self.0.clone()))
    }

    fn to_data(&self) -> Value {
        Value::List(self.0.clone())
    }

    fn elements(&self) -> Option<Value> {
        Some(Value::List(self.0.clone()))
    }
}

/// `.Capabilities.HelmVersion`.
pub struct HelmVersion;

impl Object for HelmVersion {
    fn type_name(&self) -> &str {
        "version.BuildInfo"
    }

    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Version" => Some(Value::str(HELM_VERSION)),
            "GitCommit" | "GitTreeState" | "GoVersion" | "KubeClientVersion" => Some(Value::str("")),
            _ => None,
        }
    }

    fn go_string(&self) -> String {
        format!("{{{HELM_VERSION}    }}")
    }

    /// `version.BuildInfo` under its JSON tags. The build's commit and Go version are helm's
    /// own; we are not that build, so they are empty, as the fields are.
    fn to_data(&self) -> Value {
        Value::map(
            HELM_VERSION_FIELDS
                .iter()
                .map(|(key, field)| (key.to_string(), self.field(field).unwrap_or(Value::Nil)))
                .collect(),
        )
    }

    fn json_field_order(&self) -> &[&'static str] {
        &["version", "git_commit", "git_tree_state", "go_version", "kube_client_version"]
    }
}

/// `version.BuildInfo`'s JSON tags and fields.
const HELM_VERSION_FIELDS: &[(&str, &str)] = &[
    ("version", "Version"),
    ("git_commit", "GitCommit"),
    ("git_tree_state", "GitTreeState"),
    ("go_version", "GoVersion"),
    ("kube_client_version", "KubeClientVersion"),
];
