//! Tests of `install --export`: the objects, their flags and their wiring.

use super::*;
use crate::controller::runtime::config::OperatorArgs;
use clap::Parser;
use serde_json::Value;

fn args(extra: &[&str]) -> InstallArgs {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: InstallArgs,
    }
    let mut argv = vec!["install", "--export"];
    argv.extend_from_slice(extra);
    Wrap::try_parse_from(argv).unwrap().args
}

fn docs(extra: &[&str]) -> Vec<Value> {
    let yaml = manifests(&args(extra)).unwrap();
    serde_saphyr::from_multiple::<Value>(&yaml).unwrap()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

#[test]
fn output_parses_and_has_every_kind() {
    let docs = docs(&[]);
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "PersistentVolumeClaim",
        "Deployment",
        "Service",
    ] {
        assert!(!find(&docs, kind).is_empty(), "missing {kind}");
    }
    assert_eq!(find(&docs, "CustomResourceDefinition").len(), api::all_crds().len());
    // The typed objects parse back too.
    let yaml = manifests(&args(&[])).unwrap();
    let deployment: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let d: Deployment = serde_json::from_value(find(&deployment, "Deployment")[0].clone()).unwrap();
    assert_eq!(d.metadata.name.as_deref(), Some(NAME));
}

#[test]
fn namespace_and_image_are_honoured_everywhere() {
    let docs = docs(&["--namespace", "ops", "--image", "registry.example/cs:1"]);
    assert_eq!(find(&docs, "Namespace")[0]["metadata"]["name"], "ops");
    for kind in ["ServiceAccount", "Role", "RoleBinding", "PersistentVolumeClaim", "Deployment", "Service"] {
        assert_eq!(find(&docs, kind)[0]["metadata"]["namespace"], "ops", "{kind}");
    }
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        assert_eq!(find(&docs, kind)[0]["subjects"][0]["namespace"], "ops", "{kind}");
    }
    let container = &find(&docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/cs:1");
}

#[test]
fn the_hook_wiring_uses_cert_manager_by_default_and_a_generated_ca_with_self_signed() {
    let docs_of = docs;
    let docs = docs_of(&[]);
    let ext = find(&docs, "ExtensionConfig")[0];
    assert_eq!(ext["spec"]["clientConfig"]["service"]["name"], "clusterstack-hooks");
    assert!(ext["metadata"]["annotations"][super::hooks::INJECT_CA_ANNOTATION].is_string(), "{ext}");
    assert_eq!(find(&docs, "Certificate")[0]["spec"]["secretName"], super::hooks::HOOKS_TLS_SECRET);
    assert_eq!(find(&docs, "Service").len(), 2);

    let signed = docs_of(&["--self-signed"]);
    let docs = signed;
    assert!(find(&docs, "Certificate").is_empty());
    let ext = find(&docs, "ExtensionConfig")[0];
    let bundle = ext["spec"]["clientConfig"]["caBundle"].as_str().unwrap();
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.decode(bundle).unwrap();
    let secret = find(&docs, "Secret")[0];
    let ca_in_secret =
        base64::engine::general_purpose::STANDARD.decode(secret["data"]["ca.crt"].as_str().unwrap()).unwrap();
    assert_eq!(ca, ca_in_secret);
    assert!(String::from_utf8(ca).unwrap().contains("BEGIN CERTIFICATE"));
}

#[test]
fn the_cluster_role_aggregates_labelled_roles() {
    let docs = docs(&[]);
    let roles = find(&docs, "ClusterRole");
    let main = roles.iter().find(|r| r["metadata"]["name"] == NAME).unwrap();
    assert_eq!(main["aggregationRule"]["clusterRoleSelectors"][0]["matchLabels"][AGGREGATE_LABEL], "true", "{main}");
    // The binding grants the aggregated role.
    assert_eq!(find(&docs, "ClusterRoleBinding")[0]["roleRef"]["name"], NAME);
    let labelled: Vec<&&Value> = roles.iter().filter(|r| r["metadata"]["labels"][AGGREGATE_LABEL] == "true").collect();
    assert_eq!(labelled.len(), 2, "{labelled:?}");
    // The CAPI template kinds come by default, in one labelled role.
    let capi = labelled.iter().find(|r| r["metadata"]["name"] == format!("{NAME}-capi-templates")).unwrap();
    let groups: Vec<&str> =
        capi["rules"].as_array().unwrap().iter().map(|r| r["apiGroups"][0].as_str().unwrap()).collect();
    for g in ["cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io"] {
        assert!(groups.contains(&g), "{groups:?}");
    }
}

#[test]
fn rbac_is_least_privilege() {
    let docs = docs(&[]);
    let roles: Vec<&Value> = find(&docs, "ClusterRole").into_iter().chain(find(&docs, "Role")).collect();
    let mut granted = Vec::new();
    for role in roles {
        for rule in role["rules"].as_array().unwrap() {
            for field in ["apiGroups", "resources", "verbs"] {
                for v in rule[field].as_array().unwrap() {
                    assert_ne!(v, "*", "wildcard in {field}: {rule}");
                }
            }
            assert!(rule.get("nonResourceURLs").is_none());
            for group in rule["apiGroups"].as_array().unwrap() {
                for res in rule["resources"].as_array().unwrap() {
                    for verb in rule["verbs"].as_array().unwrap() {
                        granted.push(format!(
                            "{}/{}:{}",
                            group.as_str().unwrap(),
                            res.as_str().unwrap(),
                            verb.as_str().unwrap()
                        ));
                    }
                }
            }
        }
    }
    let has = |p: &str| granted.iter().any(|g| g == p);
    for needed in [
        "clusterstack.x-k8s.io/clusterstacks:watch",
        "clusterstack.x-k8s.io/clusterstackreleases:create",
        "clusterstack.x-k8s.io/clusterstackreleases:delete",
        "clusterstack.x-k8s.io/clusterstacks/status:patch",
        "clusterstack.x-k8s.io/clusterstackreleases/status:patch",
        "events.k8s.io/events:create",
        "coordination.k8s.io/leases:patch",
        "cluster.x-k8s.io/clusters:list",
        "cluster.x-k8s.io/clusterclasses:patch",
        "infrastructure.cluster.x-k8s.io/dockermachinetemplates:patch",
        "controlplane.cluster.x-k8s.io/kubeadmcontrolplanetemplates:patch",
        "bootstrap.cluster.x-k8s.io/kubeadmconfigtemplates:delete",
        "clusterstack.x-k8s.io/clusteraddons:create",
        "clusterstack.x-k8s.io/clusteraddons/status:patch",
        "/configmaps:get",
        "clusterstack.x-k8s.io/clusterstackrollouts:watch",
        "clusterstack.x-k8s.io/clusterstackrollouts/status:patch",
        "cluster.x-k8s.io/clusters:patch",
    ] {
        assert!(has(needed), "missing {needed}");
    }
    for denied in [
        "cluster.x-k8s.io/clusters:delete",
        "/secrets:list",
        "/secrets:watch",
        "/secrets:create",
        "apiextensions.k8s.io/customresourcedefinitions:create",
        "rbac.authorization.k8s.io/clusterroles:create",
        // Nothing is ever updated (but finalizers, for blockOwnerDeletion), nor are stacks
        // created by the operator.
        "cluster.x-k8s.io/clusterclasses:update",
        "clusterstack.x-k8s.io/clusterstacks:create",
        "clusterstack.x-k8s.io/clusterstacks/status:update",
        "coordination.k8s.io/leases:update",
    ] {
        assert!(!has(denied), "must not grant {denied}");
    }
    // Leases only in the operator's namespace.
    assert!(
        find(&docs, "ClusterRole")[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["apiGroups"][0] != "coordination.k8s.io")
    );
}

#[test]
fn shards_get_a_deployment_cache_and_flag_each() {
    let yaml = manifests(&args(&["--shards", "3"])).unwrap();
    for name in ["clusterstack-operator-shard-1", "clusterstack-operator-shard-2", "clusterstack-cache-shard-2"] {
        assert!(yaml.contains(&format!("name: {name}")), "{name} missing");
    }
    assert!(yaml.contains("--shard=shard-2"));
    assert!(yaml.contains("DoesNotExist"));
    assert_eq!(yaml.matches("kind: Deployment").count(), 3);
    let single = manifests(&args(&[])).unwrap();
    assert_eq!(single.matches("kind: Deployment").count(), 1);
    assert!(!single.contains("--shard"));
}

#[test]
fn deployment_is_non_root_read_only_with_probes_and_a_persistent_cache() {
    let docs = docs(&["--storage-class", "fast", "--cache-size", "10Gi"]);
    let pod = &find(&docs, "Deployment")[0]["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_ne!(pod["securityContext"]["runAsUser"], 0);
    assert_eq!(pod["serviceAccountName"], NAME);
    let c = &pod["containers"][0];
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // Probes point at a port the container declares.
    let port = c["livenessProbe"]["httpGet"]["port"].as_str().unwrap();
    assert!(c["ports"].as_array().unwrap().iter().any(|p| p["name"] == port));
    // The cache is on the claim.
    let mount = c["volumeMounts"].as_array().unwrap().iter().find(|m| m["mountPath"] == DEFAULT_CACHE_DIR).unwrap();
    let volume = pod["volumes"].as_array().unwrap().iter().find(|v| v["name"] == mount["name"]).unwrap();
    let claim = &find(&docs, "PersistentVolumeClaim")[0];
    assert_eq!(volume["persistentVolumeClaim"]["claimName"], claim["metadata"]["name"]);
    assert_eq!(claim["spec"]["storageClassName"], "fast");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
    // The metrics Service selects the pod and targets its metrics port.
    let svc = &find(&docs, "Service")[0];
    assert_eq!(svc["spec"]["selector"], find(&docs, "Deployment")[0]["spec"]["template"]["metadata"]["labels"]);
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], "metrics");
}

#[test]
fn the_deployment_arguments_are_accepted_by_the_operator() {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: OperatorArgs,
    }
    let argv = operator_args();
    assert_eq!(argv[0], "operator");
    let parsed = Wrap::try_parse_from(argv.iter().map(String::as_str)).unwrap().args;
    assert!(parsed.leader_elect);
    assert_eq!(parsed.cache_dir, std::path::PathBuf::from(DEFAULT_CACHE_DIR));
    assert_eq!(parsed.health_addr.port(), HEALTH_PORT as u16);
    assert_eq!(parsed.metrics_addr.port(), METRICS_PORT as u16);
}

#[test]
fn a_bad_default_source_is_refused() {
    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: InstallArgs,
    }
    assert!(Wrap::try_parse_from(["install", "--export", "--default-source", "nowhere"]).is_err());
    assert!(Wrap::try_parse_from(["install"]).is_err(), "--export is required");
}
