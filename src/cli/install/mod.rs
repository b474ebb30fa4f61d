//! `clusterstack install --export`: everything needed to run the operator in
//! a cluster, as one multi-document YAML stream for `kubectl apply -f -`.
//!
//! The objects are typed k8s-openapi values; the Deployment's arguments are
//! the flags of [`crate::controller::runtime::config::OperatorArgs`].

use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, Namespace, ObjectFieldSelector,
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext, Service,
    ServiceAccount, ServicePort, ServiceSpec, Volume, VolumeMount, VolumeResourceRequirements,
};
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api;
use crate::apply::AGGREGATE_LABEL;
use crate::controller::runtime::config::{
    DEFAULT_CACHE_DIR, DEFAULT_HEALTH_ADDR, DEFAULT_METRICS_ADDR, DEFAULT_SOURCE,
};

use super::CliError;
use super::install_hooks as hooks;
use super::install_monitoring as monitoring;

/// Name of every namespaced object of the installation (and of the ClusterRole).
pub const NAME: &str = "clusterstack-operator";
/// Default namespace of the operator.
pub const DEFAULT_NAMESPACE: &str = "clusterstack-system";
/// Name of the optional Secret holding a GitHub token under the key `token`.
pub const GITHUB_TOKEN_SECRET: &str = "clusterstack-github";
const METRICS_PORT: i32 = 8080;
const HEALTH_PORT: i32 = 8081;
/// The user of distroless `nonroot` images.
const NONROOT: i64 = 65532;

/// The CAPI template kinds cluster classes contain, by API group: the
/// operator applies them, so it may manage exactly these (no wildcards).
pub const TEMPLATE_RESOURCES: &[(&str, &[&str])] = &[
    ("cluster.x-k8s.io", &["clusterclasses"]),
    (
        "infrastructure.cluster.x-k8s.io",
        &[
            "dockerclustertemplates",
            "dockermachinetemplates",
            // CAPD's in-memory backend (the sandbox's and the end-to-end tests' stacks).
            "devclustertemplates",
            "devmachinetemplates",
            "openstackclustertemplates",
            "openstackmachinetemplates",
            "hetznerclustertemplates",
            "hcloudmachinetemplates",
            "hetznerbaremetalmachinetemplates",
        ],
    ),
    ("controlplane.cluster.x-k8s.io", &["kubeadmcontrolplanetemplates"]),
    ("bootstrap.cluster.x-k8s.io", &["kubeadmconfigtemplates"]),
];

/// Arguments of `clusterstack install`.
#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Print the manifests to standard output (pipe them into `kubectl apply -f -`).
    #[arg(long, required = true)]
    pub export: bool,
    /// Namespace the operator runs in.
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// Container image of the operator.
    #[arg(long, default_value = concat!("ghcr.io/sovereigncloudstack/clusterstack:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// Default release source of ClusterStacks without `spec.source`.
    #[arg(long, default_value = DEFAULT_SOURCE, value_parser = check_source)]
    pub default_source: String,
    /// Size of the release cache's PersistentVolumeClaim.
    #[arg(long, default_value = "5Gi")]
    pub cache_size: String,
    /// StorageClass of the cache's PersistentVolumeClaim; the cluster's default when unset.
    #[arg(long)]
    pub storage_class: Option<String>,
    /// Operator instances: the first handles ClusterStacks without a shard label, instance K
    /// (1..N-1) those labelled `clusterstack.x-k8s.io/shard=shard-K`; one Deployment, cache
    /// volume and leader Lease each.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub shards: u16,
    /// Generate the hook server's CA and serving certificate here (a Secret, and the CA bundle in
    /// the ExtensionConfig) instead of asking cert-manager for them.
    #[arg(long)]
    pub self_signed: bool,
    /// Add a Prometheus Operator ServiceMonitor for the metrics Service and a PrometheusRule with
    /// the operator's alerts (needs the monitoring.coreos.com CRDs in the cluster).
    #[arg(long)]
    pub monitoring: bool,
    /// Objects one release may apply (the operator's `--max-objects-per-release`): a release
    /// rendering more is refused before anything is applied.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_objects_per_release: u32,
}

fn check_source(s: &str) -> Result<String, crate::controller::runtime::config::BadSource> {
    crate::controller::runtime::config::parse_source(s).map(|_| s.to_string())
}

/// Prints the manifests.
pub fn run(args: InstallArgs) -> Result<(), CliError> {
    let yaml = manifests(&args)?;
    std::io::stdout()
        .write_all(yaml.as_bytes())
        .map_err(|source| CliError::Write { path: "standard output".into(), source })
}

/// Every manifest as one multi-document YAML stream: CRDs, Namespace,
/// ServiceAccount, RBAC, the cache's PersistentVolumeClaim, the Deployment,
/// the metrics Service, the lifecycle hooks' wiring and, with `--monitoring`,
/// the ServiceMonitor and PrometheusRule.
///
/// `charts/clusterstack` renders the same objects (`tests/operator_chart.rs`): a change here
/// needs the same change there.
pub fn manifests(args: &InstallArgs) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    let mut push = |doc: &dyn erased::Doc| -> Result<(), serde_saphyr::ser::Error> {
        out.push_str("---\n");
        out.push_str(&doc.yaml()?);
        Ok(())
    };
    for crd in api::all_crds() {
        push(&crd)?;
    }
    let ns = &args.namespace;
    push(&Namespace { metadata: meta(ns, None), ..Default::default() })?;
    push(&ServiceAccount { metadata: meta(NAME, Some(ns)), ..Default::default() })?;
    for role in cluster_roles() {
        push(&role)?;
    }
    push(&ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: role_ref("ClusterRole"),
        subjects: Some(vec![subject(ns)]),
    })?;
    push(&lease_role(ns))?;
    push(&RoleBinding {
        metadata: meta(NAME, Some(ns)),
        role_ref: role_ref("Role"),
        subjects: Some(vec![subject(ns)]),
    })?;
    push(&cache_claim(args))?;
    let mut main = deployment(args);
    if args.shards > 1
        && let Some(spec) = main.spec.as_mut()
    {
        // The shards' pods carry the shard label: keep the selectors apart.
        spec.selector.match_expressions =
            Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: crate::controller::runtime::watch::SHARD_LABEL.into(),
                operator: "DoesNotExist".into(),
                values: None,
            }]);
    }
    push(&main)?;
    for k in 1..args.shards {
        let (claim, deployment) = shard_variant(args, &format!("shard-{k}"));
        push(&claim)?;
        push(&deployment)?;
    }
    push(&metrics_service(ns))?;
    // The Runtime SDK lifecycle hooks: Service, certificate, ExtensionConfig.
    let labels = serde_json::to_value(labels()).unwrap_or_default();
    push(&hooks::service(ns, &labels))?;
    let ca_bundle = if args.self_signed {
        let (secret, ca) = hooks::self_signed(ns, &labels).map_err(|e| {
            <serde_saphyr::ser::Error as serde::ser::Error>::custom(format!("generating the hook certificates: {e}"))
        })?;
        push(&secret)?;
        Some(ca)
    } else {
        for doc in hooks::cert_manager(ns, &labels) {
            push(&doc)?;
        }
        None
    };
    push(&hooks::extension_config(ns, &labels, ca_bundle.as_deref()))?;
    if args.monitoring {
        push(&monitoring::service_monitor(ns, NAME, &labels))?;
        let rule = monitoring::prometheus_rule(ns, NAME, &labels)
            .map_err(|e| <serde_saphyr::ser::Error as serde::ser::Error>::custom(format!("the alerting rules: {e}")))?;
        push(&rule)?;
    }
    Ok(out)
}

/// The operator's identity and permissions as `manifests` writes them: its Namespace and
/// ServiceAccount, the ClusterRoles (the aggregated one and the two it aggregates), the
/// ClusterRoleBinding, and the leader-election Role and RoleBinding. The sandbox and the
/// end-to-end tests grant exactly these.
pub fn rbac(namespace: &str) -> Result<Vec<serde_json::Value>, String> {
    let json = |v: Result<serde_json::Value, serde_json::Error>| v.map_err(|e| e.to_string());
    let mut out = vec![
        json(serde_json::to_value(Namespace { metadata: meta(namespace, None), ..Default::default() }))?,
        json(serde_json::to_value(ServiceAccount { metadata: meta(NAME, Some(namespace)), ..Default::default() }))?,
    ];
    for role in cluster_roles() {
        out.push(json(serde_json::to_value(role))?);
    }
    out.push(json(serde_json::to_value(ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: role_ref("ClusterRole"),
        subjects: Some(vec![subject(namespace)]),
    }))?);
    out.push(json(serde_json::to_value(lease_role(namespace)))?);
    out.push(json(serde_json::to_value(RoleBinding {
        metadata: meta(NAME, Some(namespace)),
        role_ref: role_ref("Role"),
        subjects: Some(vec![subject(namespace)]),
    }))?);
    Ok(out)
}

/// Serialising a list of different object types.
mod erased {
    pub trait Doc {
        fn yaml(&self) -> Result<String, serde_saphyr::ser::Error>;
    }
    impl<T: serde::Serialize> Doc for T {
        fn yaml(&self) -> Result<String, serde_saphyr::ser::Error> {
            serde_saphyr::to_string(self)
        }
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "clusterstack".to_string()),
        ("app.kubernetes.io/component".to_string(), "operator".to_string()),
    ])
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        labels: Some(labels()),
        ..Default::default()
    }
}

fn role_ref(kind: &str) -> RoleRef {
    RoleRef { api_group: "rbac.authorization.k8s.io".into(), kind: kind.into(), name: NAME.into() }
}

fn subject(namespace: &str) -> Subject {
    Subject { kind: "ServiceAccount".into(), name: NAME.into(), namespace: Some(namespace.into()), api_group: None }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

const MANAGE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];
const READ: &[&str] = &["get", "list", "watch"];

/// The operator's ClusterRole aggregates every ClusterRole labelled
/// [`AGGREGATE_LABEL`]`: "true"` (the Cluster API convention): its own
/// permissions and the CAPI template kinds come in two such roles; platform
/// teams and provider plug-ins add kinds (e.g. `openstack.k-orc.cloud`
/// `images`) with a labelled ClusterRole of their own.
fn cluster_roles() -> Vec<ClusterRole> {
    let selector = LabelSelector {
        match_labels: Some(BTreeMap::from([(AGGREGATE_LABEL.to_string(), "true".to_string())])),
        ..Default::default()
    };
    let aggregated = ClusterRole {
        metadata: meta(NAME, None),
        rules: Some(Vec::new()),
        aggregation_rule: Some(AggregationRule { cluster_role_selectors: Some(vec![selector]) }),
    };
    let labelled = |name: &str, rules: Vec<PolicyRule>| {
        let mut metadata = meta(name, None);
        metadata.labels.get_or_insert_with(BTreeMap::new).insert(AGGREGATE_LABEL.into(), "true".into());
        ClusterRole { metadata, rules: Some(rules), aggregation_rule: None }
    };
    let templates = TEMPLATE_RESOURCES.iter().map(|(group, resources)| rule(group, resources, MANAGE)).collect();
    vec![
        aggregated,
        labelled(&format!("{NAME}-core"), core_rules()),
        labelled(&format!("{NAME}-capi-templates"), templates),
    ]
}

/// Cluster-wide permissions of the operator itself: our CRDs and their status,
/// events, reading CAPI Clusters, reading token Secrets.
fn core_rules() -> Vec<PolicyRule> {
    let g = api::GROUP;
    let rules = vec![
        rule(g, &["clusterstacks", "clusterstackreleases", "clusteraddons", "clusterstackrollouts"], MANAGE),
        rule(
            g,
            &[
                "clusterstacks/status",
                "clusterstackreleases/status",
                "clusteraddons/status",
                "clusterstackrollouts/status",
            ],
            &["get", "update", "patch"],
        ),
        // Setting blockOwnerDeletion on owner references needs update on the owner's finalizers.
        rule(
            g,
            &["clusterstacks/finalizers", "clusterstackreleases/finalizers", "clusteraddons/finalizers"],
            &["update"],
        ),
        rule("", &["events"], &["create", "patch"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
        // GitHub tokens named by `spec.source.github.tokenSecretRef`.
        rule("", &["secrets"], &["get"]),
        rule("cluster.x-k8s.io", &["clusters"], READ),
        // Rollouts move Clusters: a server-side apply of `spec.topology` class and version only.
        rule("cluster.x-k8s.io", &["clusters"], &["patch"]),
        // Addons: platform values, and the control plane and infrastructure cluster of a Cluster
        // that addon templates see.
        rule("", &["configmaps"], &["get"]),
        // (Providers other than docker add their infrastructure cluster kind here.)
        rule("controlplane.cluster.x-k8s.io", &["kubeadmcontrolplanes"], &["get"]),
        rule("infrastructure.cluster.x-k8s.io", &["dockerclusters", "devclusters"], &["get"]),
    ];
    rules
}

/// Leader election, only in the operator's own namespace.
fn lease_role(namespace: &str) -> Role {
    Role {
        metadata: meta(NAME, Some(namespace)),
        rules: Some(vec![rule(
            "coordination.k8s.io",
            &["leases"],
            &["get", "list", "watch", "create", "update", "patch"],
        )]),
    }
}

fn cache_claim(args: &InstallArgs) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta("clusterstack-cache", Some(&args.namespace)),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: args.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(args.cache_size.clone()))])),
                limits: None,
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// The container's arguments: `clusterstack operator` and its flags.
pub fn operator_args() -> Vec<String> {
    vec![
        "operator".into(),
        format!("--metrics-addr={DEFAULT_METRICS_ADDR}"),
        format!("--health-addr={DEFAULT_HEALTH_ADDR}"),
        format!("--cache-dir={DEFAULT_CACHE_DIR}"),
        format!("--hooks-addr=0.0.0.0:{}", hooks::HOOKS_PORT),
        format!("--hooks-cert-dir={}", hooks::HOOKS_CERT_DIR),
        "--leader-elect".into(),
    ]
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), value_from: None }
}

fn probe(path: &str, initial_delay: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("health".into()),
            ..Default::default()
        }),
        initial_delay_seconds: Some(initial_delay),
        period_seconds: Some(10),
        ..Default::default()
    }
}

/// The malloc setting the Deployment runs the operator with (name, value); `bench_operator`
/// runs it the same way.
pub const MALLOC_ARENA_MAX: (&str, &str) = ("MALLOC_ARENA_MAX", "2");

fn deployment(args: &InstallArgs) -> Deployment {
    let ns = &args.namespace;
    let container = Container {
        name: "operator".into(),
        image: Some(args.image.clone()),
        image_pull_policy: Some("IfNotPresent".into()),
        args: Some(operator_args()),
        env: Some(vec![
            env("CLUSTERSTACK_LOG_FORMAT", "json"),
            env("CLUSTERSTACK_DEFAULT_SOURCE", &args.default_source),
            env("CLUSTERSTACK_MAX_OBJECTS_PER_RELEASE", &args.max_objects_per_release.to_string()),
            // glibc keeps up to 8 malloc arenas per core, one per busy thread (tokio workers,
            // blocking render and download threads); two bound the RSS that freed memory keeps
            // (bench_operator: 100.5 → 83.6 MiB at 1,000 stacks), at no measurable speed cost.
            env(MALLOC_ARENA_MAX.0, MALLOC_ARENA_MAX.1),
            EnvVar {
                name: "POD_NAMESPACE".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector { field_path: "metadata.namespace".into(), api_version: None }),
                    ..Default::default()
                }),
            },
            EnvVar {
                name: "CLUSTERSTACK_GITHUB_TOKEN".into(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: GITHUB_TOKEN_SECRET.into(),
                        key: "token".into(),
                        // Without a token the operator still works, at 60 requests/hour.
                        optional: Some(true),
                    }),
                    ..Default::default()
                }),
            },
        ]),
        ports: Some(vec![
            ContainerPort { name: Some("metrics".into()), container_port: METRICS_PORT, ..Default::default() },
            ContainerPort { name: Some("health".into()), container_port: HEALTH_PORT, ..Default::default() },
            ContainerPort { name: Some("hooks".into()), container_port: hooks::HOOKS_PORT, ..Default::default() },
        ]),
        liveness_probe: Some(probe("/healthz", 10)),
        readiness_probe: Some(probe("/readyz", 5)),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("50m".into())),
                ("memory".to_string(), Quantity("64Mi".into())),
            ])),
            limits: Some(BTreeMap::from([("memory".to_string(), Quantity("512Mi".into()))])),
            ..Default::default()
        }),
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            read_only_root_filesystem: Some(true),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), add: None }),
            ..Default::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount { name: "cache".into(), mount_path: DEFAULT_CACHE_DIR.into(), ..Default::default() },
            VolumeMount { name: "tmp".into(), mount_path: "/tmp".into(), ..Default::default() },
            VolumeMount {
                name: "hooks-tls".into(),
                mount_path: hooks::HOOKS_CERT_DIR.into(),
                read_only: Some(true),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    let pod = PodSpec {
        service_account_name: Some(NAME.into()),
        containers: vec![container],
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(NONROOT),
            run_as_group: Some(NONROOT),
            fs_group: Some(NONROOT),
            seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), localhost_profile: None }),
            ..Default::default()
        }),
        volumes: Some(vec![
            Volume {
                name: "cache".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: "clusterstack-cache".into(),
                    read_only: None,
                }),
                ..Default::default()
            },
            Volume { name: "tmp".into(), empty_dir: Some(Default::default()), ..Default::default() },
            Volume {
                name: "hooks-tls".into(),
                secret: Some(k8s_openapi::api::core::v1::SecretVolumeSource {
                    secret_name: Some(hooks::HOOKS_TLS_SECRET.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    Deployment {
        metadata: meta(NAME, Some(ns)),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            // The cache volume is ReadWriteOnce: the old pod must go before the new one mounts it.
            strategy: Some(DeploymentStrategy { type_: Some("Recreate".into()), rolling_update: None }),
            selector: LabelSelector { match_labels: Some(labels()), match_expressions: None },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels()), ..Default::default() }),
                spec: Some(pod),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// The cache claim and Deployment of one shard: their own names, the pod label
/// `clusterstack.x-k8s.io/shard`, and `--shard`.
fn shard_variant(args: &InstallArgs, shard: &str) -> (PersistentVolumeClaim, Deployment) {
    let mut claim = cache_claim(args);
    let claim_name = format!("clusterstack-cache-{shard}");
    claim.metadata.name = Some(claim_name.clone());
    let mut d = deployment(args);
    d.metadata.name = Some(format!("{NAME}-{shard}"));
    let mut pod_labels = labels();
    pod_labels.insert(crate::controller::runtime::watch::SHARD_LABEL.into(), shard.into());
    if let Some(spec) = d.spec.as_mut() {
        spec.selector.match_labels = Some(pod_labels.clone());
        if let Some(m) = spec.template.metadata.as_mut() {
            m.labels = Some(pod_labels);
        }
        if let Some(pod) = spec.template.spec.as_mut() {
            for c in &mut pod.containers {
                c.args.get_or_insert_with(Vec::new).push(format!("--shard={shard}"));
            }
            for v in pod.volumes.iter_mut().flatten() {
                if let Some(pvc) = v.persistent_volume_claim.as_mut() {
                    pvc.claim_name = claim_name.clone();
                }
            }
        }
    }
    (claim, d)
}

fn metrics_service(namespace: &str) -> Service {
    let mut metadata = meta("clusterstack-operator-metrics", Some(namespace));
    let (key, value) = monitoring::METRICS_SERVICE_LABEL;
    metadata.labels.get_or_insert_with(BTreeMap::new).insert(key.into(), value.into());
    Service {
        metadata,
        spec: Some(ServiceSpec {
            selector: Some(labels()),
            ports: Some(vec![ServicePort {
                name: Some("metrics".into()),
                port: METRICS_PORT,
                target_port: Some(IntOrString::String("metrics".into())),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;
