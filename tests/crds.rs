//! The generated CRDs: kept in sync with `crds/`, compatible with the Go
//! operator's manifests, and carrying the schema rules users rely on.

use std::collections::BTreeSet;

use clusterstack::api::{self, Channel, ClusterStack, ClusterStackRelease};
use clusterstack::release::StackVersion;
use serde_json::{Value, json};

fn crd_json(plural: &str) -> Value {
    let crd = api::all_crds()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("no CRD {plural}"));
    serde_json::to_value(crd).unwrap()
}

fn schema(plural: &str) -> Value {
    crd_json(plural)["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn committed_crds_match_the_code() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let mut expected = BTreeSet::new();
    for crd in api::all_crds() {
        let name = api::crd_file_name(&crd);
        let path = dir.join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `cargo run -- crds --dir crds`", path.display()));
        assert_eq!(
            committed,
            api::crd_yaml(&crd).unwrap(),
            "{name} is out of date; run `cargo run -- crds --dir crds`"
        );
        expected.insert(name);
    }
    let present: BTreeSet<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(present, expected, "crds/ holds files the code does not generate");
}

#[test]
fn the_stream_parses_back_into_four_crds() {
    let yaml = api::crds_yaml().unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let kinds: Vec<&str> = docs.iter().map(|d| d["spec"]["names"]["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["ClusterStack", "ClusterStackRelease", "ClusterAddon", "ClusterStackRollout"]);
    for doc in &docs {
        assert_eq!(doc["spec"]["group"], "clusterstack.x-k8s.io");
        assert_eq!(doc["spec"]["scope"], "Namespaced");
        assert_eq!(doc["spec"]["versions"][0]["name"], "v1alpha1");
        assert!(doc["spec"]["versions"][0]["subresources"]["status"].is_object());
    }
}

fn column_names(plural: &str) -> Vec<String> {
    crd_json(plural)["spec"]["versions"][0]["additionalPrinterColumns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn short_names_and_print_columns_match_the_go_operator() {
    assert_eq!(crd_json("clusterstacks")["spec"]["names"]["shortNames"], json!(["csk"]));
    assert_eq!(crd_json("clusterstackreleases")["spec"]["names"]["shortNames"], json!(["cskr"]));
    assert_eq!(
        column_names("clusterstacks"),
        ["Provider", "ClusterStack", "K8s", "Channel", "Autosubscribe", "Usable", "Latest", "Age", "Reason", "Message"]
    );
    assert_eq!(column_names("clusterstackreleases"), ["K8s Version", "Ready", "Age", "Reason", "Message"]);
}

#[test]
fn the_rollout_kind_has_its_short_name_columns_and_defaults() {
    assert_eq!(crd_json("clusterstackrollouts")["spec"]["names"]["shortNames"], json!(["cskro"]));
    assert_eq!(column_names("clusterstackrollouts"), ["Target", "Phase", "Wave", "Healthy", "Failed", "Age"]);
    let props = &schema("clusterstackrollouts")["properties"]["spec"]["properties"];
    assert_eq!(props["target"]["default"], "latest");
    assert_eq!(props["failurePolicy"]["properties"]["rollback"]["enum"], json!(["Automatic", "Never"]));
    assert_eq!(schema("clusterstackrollouts")["properties"]["spec"]["required"], json!(["clusterStackRef"]));
    // maxConcurrent takes a number or a percentage.
    let wave = &props["waves"]["items"]["properties"];
    assert_eq!(wave["maxConcurrent"]["x-kubernetes-int-or-string"], true, "{wave:#}");
}

#[test]
fn defaults_and_validation_are_in_the_schema() {
    let spec = &schema("clusterstacks")["properties"]["spec"];
    let props = &spec["properties"];
    assert_eq!(props["channel"]["default"], "stable");
    // `stable`, `custom` (the Go operator's two) or a pre-release channel's name (`ttl`).
    let channel = pattern(&props["channel"]);
    for good in ["stable", "custom", "ttl", "alpha2"] {
        assert!(channel.is_match(good), "{good}");
        assert!(clusterstack::api::Channel::parse(good).is_ok(), "{good}");
    }
    for bad in ["", "Stable", "t-tl", "2ttl", "v0-ttl"] {
        assert!(!channel.is_match(bad), "{bad}");
        assert!(clusterstack::api::Channel::parse(bad).is_err(), "{bad}");
    }
    let name = pattern(&props["name"]);
    for good in ["scs", "scs2", "scs-hcp", "a-1-b"] {
        assert!(name.is_match(good), "{good}");
    }
    for bad in ["-scs", "scs-", "scs--hcp", "Scs", "scs_hcp"] {
        assert!(!name.is_match(bad), "{bad}");
    }
    assert_eq!(props["autoSubscribe"]["default"], true);
    assert_eq!(props["noProvider"]["default"], false);
    assert_eq!(props["provider"]["minLength"], 1);
    assert_eq!(props["name"]["minLength"], 1);
    let required: BTreeSet<&str> = spec["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(required.is_superset(&BTreeSet::from(["provider", "name", "kubernetesVersion"])), "{required:?}");
    for field in ["provider", "name", "channel", "kubernetesVersion"] {
        let rules = &props[field]["x-kubernetes-validations"];
        assert_eq!(rules[0]["rule"], "self == oldSelf", "{field} must be immutable");
    }
    let source_rule = &props["source"]["x-kubernetes-validations"][0]["rule"];
    assert_eq!(
        source_rule,
        "(has(self.github) ? 1 : 0) + (has(self.directory) ? 1 : 0) + (has(self.oci) ? 1 : 0) == 1"
    );

    let addon = &schema("clusteraddons")["properties"]["spec"];
    assert!(addon["required"].as_array().unwrap().contains(&json!("clusterRef")));
    let rules: Vec<&str> = addon["properties"]["clusterRef"]["x-kubernetes-validations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rule"].as_str().unwrap())
        .collect();
    assert!(rules.iter().any(|r| r.contains("self.kind == 'Cluster'")), "{rules:?}");
    assert!(rules.contains(&"self == oldSelf"), "{rules:?}");
}

#[test]
fn conditions_are_map_lists_keyed_by_type() {
    for plural in ["clusterstacks", "clusterstackreleases", "clusteraddons"] {
        let conditions = &schema(plural)["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map", "{plural}");
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]), "{plural}");
        let item = &conditions["items"];
        assert!(item["required"].as_array().unwrap().contains(&json!("type")), "{plural}");
        for field in ["type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"] {
            assert!(item["properties"][field].is_object(), "{plural}: condition field {field}");
        }
    }
}

fn pattern(value: &Value) -> regex::Regex {
    regex::Regex::new(value["pattern"].as_str().expect("a pattern")).unwrap()
}

#[test]
fn kubernetes_version_pattern_allows_multi_digit_parts() {
    let re = pattern(&schema("clusterstacks")["properties"]["spec"]["properties"]["kubernetesVersion"]);
    for good in ["1.27", "1.30", "10.1"] {
        assert!(re.is_match(good), "{good}");
    }
    for bad in ["1", "1.27.3", "v1.27", "1-27", ""] {
        assert!(!re.is_match(bad), "{bad}");
    }
}

#[test]
fn versions_pattern_accepts_exactly_the_dot_form() {
    let re = pattern(&schema("clusterstacks")["properties"]["spec"]["properties"]["versions"]["items"]);
    for good in ["v1", "v10", "v0-sha.hipstsw", "v1-alpha.3"] {
        assert!(re.is_match(good), "{good}");
        assert!(good.parse::<StackVersion>().is_ok(), "{good}");
    }
    for bad in ["1", "v", "v0-sha-hipstsw", "v1.0", "V1", "v1-alpha", "latest"] {
        assert!(!re.is_match(bad), "{bad}");
        assert!(bad.parse::<StackVersion>().is_err(), "{bad}");
    }
}

/// A ClusterStack as the Go operator's users write it and the API server
/// stores it (defaults filled in, conditions in CAPI's shape).
const GO_CLUSTER_STACK: &str = r#"
apiVersion: clusterstack.x-k8s.io/v1alpha1
kind: ClusterStack
metadata:
  name: clusterstack
  namespace: cluster
spec:
  provider: docker
  name: ferrol
  kubernetesVersion: "1.27"
  channel: stable
  autoSubscribe: true
  noProvider: false
  versions:
    - v1
  providerRef:
    apiVersion: infrastructure.clusterstack.x-k8s.io/v1alpha1
    kind: DockerClusterStackReleaseTemplate
    name: cspotemplate
    namespace: cluster
status:
  latestRelease: docker-ferrol-1-27-v2
  usableVersions: v1, v2
  summary:
    - name: docker-ferrol-1-27-v1
      ready: true
      phase: done
  conditions:
    - type: Ready
      status: "True"
      lastTransitionTime: "2024-01-02T03:04:05Z"
    - type: ClusterStackReleasesSynced
      status: "False"
      severity: Warning
      reason: Failed
      message: one release failed
      lastTransitionTime: "2024-01-02T03:04:05Z"
"#;

#[test]
fn a_go_operator_manifest_round_trips_without_loss() {
    let original: Value = serde_saphyr::from_str(GO_CLUSTER_STACK).unwrap();
    let typed: ClusterStack = serde_saphyr::from_str(GO_CLUSTER_STACK).unwrap();
    assert_eq!(typed.spec.provider, "docker");
    assert_eq!(typed.spec.kubernetes_version, "1.27");
    assert_eq!(typed.spec.channel, Channel::Stable);
    assert_eq!(typed.spec.versions, ["v1"]);
    assert_eq!(typed.status.as_ref().unwrap().conditions[1].severity.as_deref(), Some("Warning"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, original);
}

#[test]
fn a_minimal_manifest_gets_the_go_defaults() {
    let typed: ClusterStack = serde_saphyr::from_str(
        "apiVersion: clusterstack.x-k8s.io/v1alpha1
kind: ClusterStack
metadata: {name: cs}
spec: {provider: docker, name: ferrol, kubernetesVersion: \"1.27\", versions: [v1]}
",
    )
    .unwrap();
    assert_eq!(typed.spec.channel, Channel::Stable);
    assert!(typed.spec.auto_subscribe);
    assert!(!typed.spec.no_provider);
    assert!(!typed.spec.suspend);
    assert_eq!(typed.spec.source, None);
    assert_eq!(typed.spec.poll_interval, None);
    // Our optional additions stay absent when unset, so Go-era manifests are unchanged.
    let back = serde_json::to_value(&typed.spec).unwrap();
    for field in ["source", "pollInterval", "suspend", "providerRef"] {
        assert!(back.get(field).is_none(), "{field} serialised although unset");
    }
}

#[test]
fn release_status_uses_the_go_resource_shape() {
    let yaml = r#"
apiVersion: clusterstack.x-k8s.io/v1alpha1
kind: ClusterStackRelease
metadata: {name: docker-ferrol-1-27-v1, namespace: cluster}
spec: {}
status:
  kubernetesVersion: v1.27.3
  ready: false
  resources:
    - {group: cluster.x-k8s.io, version: v1beta1, kind: ClusterClass, namespace: cluster, name: docker-ferrol-1-27-v1, status: synced}
    - {group: infrastructure.cluster.x-k8s.io, version: v1beta1, kind: DockerClusterTemplate, namespace: cluster, name: t, status: not-synced, error: boom}
"#;
    let original: Value = serde_saphyr::from_str(yaml).unwrap();
    let typed: ClusterStackRelease = serde_saphyr::from_str(yaml).unwrap();
    let status = typed.status.as_ref().unwrap();
    assert_eq!(status.resources[1].status, api::SyncStatus::NotSynced);
    assert_eq!(status.resources[1].error, "boom");
    assert_eq!(serde_json::to_value(&typed).unwrap(), original);
}
