//! Error paths and filters, on small bundles written to a temp dir.

use std::path::Path;

use super::*;
use crate::release::ReleaseId;

/// A Jinja bundle's `Chart.yaml`.
const JINJA_CHART: &str = "name: test\nversion: v1\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n";

/// Writes a chart with `Chart.yaml`, `values.yaml` and the given templates.
fn chart(dir: &Path, values: &str, templates: &[(&str, &str)]) {
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), JINJA_CHART).unwrap();
    std::fs::write(dir.join("values.yaml"), values).unwrap();
    for (name, text) in templates {
        let path = dir.join("templates").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn ctx() -> RenderContext {
    RenderContext::new(&ReleaseId::from_tag("docker-ferrol-1-27-v3").unwrap(), "ns1")
}

fn render_one(values: &str, template: &str) -> Result<Vec<DynamicObject>, RenderError> {
    let dir = tempfile::tempdir().unwrap();
    chart(dir.path(), values, &[("t.yaml", template)]);
    render_cluster_class(dir.path(), &ctx())
}

const CM: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n";

fn data(objects: &[DynamicObject]) -> &serde_json::Value {
    &objects[0].data["data"]
}

#[test]
fn context_has_release_chart_and_values() {
    let objects = render_one(
        "x: 1\n",
        &format!(
            "{CM}  namespace: {{{{ release.namespace }}}}\ndata:\n  a: {{{{ release.name }}}}-{{{{ chart.version }}}}\n  b: {{{{ chart.name }}}}\n  c: \"{{{{ values.x }}}}\"\n"
        ),
    )
    .unwrap();
    assert_eq!(objects[0].metadata.namespace.as_deref(), Some("ns1"));
    assert_eq!(data(&objects), &serde_json::json!({"a": "docker-ferrol-1-27-v3", "b": "test", "c": "1"}));
}

#[test]
fn undefined_variable_names_file_line_and_name() {
    let err = render_one("x: 1\n", &format!("{CM}data:\n  a: {{{{ values.nope }}}}\n")).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, RenderError::Template { line: 6, .. }), "{msg}");
    assert!(msg.contains("templates/t.yaml:6:"), "{msg}");
    assert!(msg.contains("values.nope"), "{msg}");
}

#[test]
fn undefined_variable_in_an_imported_macro_names_the_macro_file() {
    let dir = tempfile::tempdir().unwrap();
    chart(
        dir.path(),
        "",
        &[
            ("_m.j2", "{% macro name() %}\n{{ release.nope }}{% endmacro %}\n"),
            ("t.yaml", &format!("{{% import '_m.j2' as m %}}\n{CM}data:\n  a: {{{{ m.name() }}}}\n")),
        ],
    );
    let msg = render_cluster_class(dir.path(), &ctx()).unwrap_err().to_string();
    assert!(msg.contains("_m.j2:2:") && msg.contains("release.nope"), "{msg}");
}

#[test]
fn endless_loop_is_stopped_by_fuel() {
    let dir = tempfile::tempdir().unwrap();
    chart(
        dir.path(),
        "",
        &[("t.yaml", "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}")],
    );
    let limits = RenderLimits { fuel: 100_000, ..RenderLimits::default() };
    let err = render_cluster_class(dir.path(), &ctx().with_limits(limits)).unwrap_err();
    assert!(matches!(err, RenderError::OutOfFuel { fuel: 100_000, .. }), "{err}");
    assert!(err.to_string().contains("t.yaml"), "{err}");
}

#[test]
fn recursion_is_stopped_too() {
    let err = render_one("", "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").unwrap_err();
    assert!(err.to_string().contains("t.yaml"), "{err}");
}

#[test]
fn oversized_output_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    chart(dir.path(), "", &[("t.yaml", "{% for i in range(100000) %}# {{ i }} padding padding padding\n{% endfor %}")]);
    let limits = RenderLimits { max_output_bytes: 10_000, ..RenderLimits::default() };
    let err = render_cluster_class(dir.path(), &ctx().with_limits(limits)).unwrap_err();
    assert!(matches!(err, RenderError::OutputTooLarge { limit: 10_000, .. }), "{err}");
    // The same template passes with the default limit (about 3.7 MB of output).
    render_cluster_class(dir.path(), &ctx()).unwrap();
}

#[test]
fn non_yaml_output_is_an_error_naming_the_template() {
    let err = render_one("", "apiVersion: v1\nkind: [unclosed\n").unwrap_err();
    assert!(matches!(err, RenderError::NotYaml { .. }), "{err}");
    assert!(err.to_string().contains("t.yaml"), "{err}");
}

#[test]
fn missing_kind_is_an_error_naming_the_template() {
    let err = render_one("", &format!("{CM}---\napiVersion: v1\nmetadata:\n  name: x\n")).unwrap_err();
    assert!(matches!(err, RenderError::InvalidObject { index: 2, .. }), "{err}");
    assert!(err.to_string().contains("t.yaml") && err.to_string().contains("kind"), "{err}");
}

#[test]
fn duplicate_objects_across_templates_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    chart(dir.path(), "", &[("a.yaml", CM), ("b.yaml", CM)]);
    let msg = render_cluster_class(dir.path(), &ctx()).unwrap_err().to_string();
    assert!(msg.contains("a.yaml") && msg.contains("b.yaml") && msg.contains("ConfigMap"), "{msg}");
}

#[test]
fn includes_cannot_leave_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("chart");
    std::fs::write(dir.path().join("secret.j2"), "stolen").unwrap();
    chart(&chart_dir, "", &[("t.yaml", "{% include '../../secret.j2' %}")]);
    let msg = render_cluster_class(&chart_dir, &ctx()).unwrap_err().to_string();
    assert!(msg.contains("outside the bundle"), "{msg}");
    assert!(!msg.contains("stolen"));

    chart(&chart_dir, "", &[("t.yaml", &format!("{{% include '{}' %}}", dir.path().join("secret.j2").display()))]);
    let msg = render_cluster_class(&chart_dir, &ctx()).unwrap_err().to_string();
    assert!(msg.contains("outside the bundle"), "{msg}");

    // A file of the bundle itself (also in a subdirectory) can be included.
    chart(&chart_dir, "", &[("t.yaml", "{% include 'sub/_cm.j2' %}"), ("sub/_cm.j2", CM)]);
    assert_eq!(render_cluster_class(&chart_dir, &ctx()).unwrap().len(), 1);
}

#[cfg(unix)]
#[test]
fn symlinks_out_of_the_bundle_are_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("chart");
    std::fs::write(dir.path().join("secret.j2"), "stolen").unwrap();
    chart(&chart_dir, "", &[("t.yaml", "{% include '_link.j2' %}")]);
    std::os::unix::fs::symlink(dir.path().join("secret.j2"), chart_dir.join("templates/_link.j2")).unwrap();
    let msg = render_cluster_class(&chart_dir, &ctx()).unwrap_err().to_string();
    assert!(msg.contains("symlink") && !msg.contains("stolen"), "{msg}");

    // A symlink that stays inside is fine.
    std::fs::write(chart_dir.join("templates/_cm.j2"), CM).unwrap();
    std::fs::remove_file(chart_dir.join("templates/_link.j2")).unwrap();
    std::os::unix::fs::symlink(chart_dir.join("templates/_cm.j2"), chart_dir.join("templates/_link.j2")).unwrap();
    assert_eq!(render_cluster_class(&chart_dir, &ctx()).unwrap().len(), 1);
}

#[test]
fn helm_filters() {
    let values = "m: {a: 1, b: [x, z]}\ns: \"he said \\\"hi\\\"\"\nempty: \"\"\n";
    let template = format!(
        "{CM}data:\n  yaml: {{{{ values.m | to_yaml | quote }}}}\n  json: {{{{ values.m | to_json | quote }}}}\n  \
         q: {{{{ values.s | quote }}}}\n  b64: {{{{ 'hello' | b64encode }}}}\n  unb64: {{{{ 'aGVsbG8=' | b64decode }}}}\n  \
         dflt: {{{{ values.missing | default('fallback') }}}}\n  trim: {{{{ '  x  ' | trim | upper }}}}{{{{ 'Y' | lower }}}}\n  \
         ind: {{{{ 'a: 1\\nb: 2' | indent(2) | quote }}}}\n  nested: {{{{ values.m | to_yaml | nindent(4) }}}}\n"
    );
    let objects = render_one(values, &template).unwrap();
    let d = data(&objects);
    assert_eq!(d["yaml"], "a: 1\nb:\n- x\n- z");
    assert_eq!(d["json"], r#"{"a":1,"b":["x","z"]}"#);
    assert_eq!(d["q"], "he said \"hi\"");
    assert_eq!(d["b64"], "aGVsbG8=");
    assert_eq!(d["unb64"], "hello");
    assert_eq!(d["dflt"], "fallback");
    assert_eq!(d["trim"], "Xy");
    assert_eq!(d["ind"], "  a: 1\n  b: 2");
    assert_eq!(d["nested"], serde_json::json!({"a": 1, "b": ["x", "z"]}));
}

#[test]
fn required_fails_with_its_message() {
    for expr in ["values.missing", "values.empty", "values.nothing"] {
        let err = render_one(
            "empty: \"\"\nnothing: ~\n",
            &format!("{CM}data:\n  a: {{{{ {expr} | required('set values.x to the pod CIDR') }}}}\n"),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("set values.x to the pod CIDR") && msg.contains("t.yaml:6"), "{expr}: {msg}");
    }
    let objects = render_one("x: 5\n", &format!("{CM}data:\n  a: \"{{{{ values.x | required('m') }}}}\"\n")).unwrap();
    assert_eq!(data(&objects)["a"], "5");
}

#[test]
fn addons_need_a_cluster_and_merge_the_rendered_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("ms");
    chart(
        &addon,
        "a: {keep: 1, set: old}\nlist: [1, 2]\n",
        &[("t.yaml", &format!("{CM}data:\n  v: {{{{ values | to_json | quote }}}}\n"))],
    );
    std::fs::write(addon.join("overwrite.yaml"), "a:\n  set: {{ cluster.metadata.name }}\nlist: [3]\n").unwrap();
    let err = render_addons(dir.path(), &ctx()).unwrap_err();
    assert!(matches!(err, RenderError::NoCluster(_)), "{err}");

    let cluster = ClusterObjects { cluster: serde_json::json!({"metadata": {"name": "c1"}}), ..Default::default() };
    let charts = render_addons(dir.path(), &ctx().with_cluster(cluster)).unwrap();
    assert_eq!(charts.len(), 1);
    let v: serde_json::Value = serde_json::from_str(charts[0].objects[0].data["data"]["v"].as_str().unwrap()).unwrap();
    assert_eq!(v, serde_json::json!({"a": {"keep": 1, "set": "c1"}, "list": [3]}));
}

#[test]
fn the_same_object_in_two_addons_is_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    chart(&dir.path().join("one"), "", &[("t.yaml", CM)]);
    chart(&dir.path().join("two"), "", &[("t.yaml", CM)]);
    let cluster = ClusterObjects::default();
    let msg = render_addons(dir.path(), &ctx().with_cluster(cluster)).unwrap_err().to_string();
    assert!(msg.contains("addon one") && msg.contains("addon two"), "{msg}");
}

#[test]
fn macros_and_non_yaml_files_are_not_rendered_on_their_own() {
    let dir = tempfile::tempdir().unwrap();
    chart(dir.path(), "", &[("_m.j2", "not: [yaml"), ("_x.yaml", "not: [yaml"), ("notes.txt", "x"), ("t.yaml", CM)]);
    assert_eq!(render_cluster_class(dir.path(), &ctx()).unwrap().len(), 1);
}

/// Writes files under `dir`.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

#[test]
fn a_chart_without_the_jinja_marker_is_a_helm_chart() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: cluster-class\nversion: v3\n"),
            ("values.yaml", "replicas: 3\n"),
            (
                "templates/_helpers.tpl",
                "{{- define \"class.name\" -}}{{ .Release.Name }}-{{ .Chart.Version }}{{- end -}}",
            ),
            (
                "templates/class.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: {{ include \"class.name\" . }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  replicas: {{ .Values.replicas }}\n",
            ),
        ],
    );
    assert_eq!(chart_engine(dir.path()).unwrap(), Engine::Helm);
    let objects = render_cluster_class(dir.path(), &ctx()).unwrap();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].metadata.name.as_deref(), Some("docker-ferrol-1-27-v3"));
    assert_eq!(objects[0].metadata.namespace.as_deref(), Some("ns1"));
    assert_eq!(objects[0].data["spec"]["replicas"], serde_json::json!(3));
}

#[test]
fn a_helm_addon_gets_its_values_from_overwrite_yaml_over_the_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("cni");
    write_files(
        &addon,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: cni\nversion: v2\n"),
            ("values.yaml", "cluster: {name: default, pods: 10.0.0.0/8}\n"),
            (
                "overwrite.yaml",
                "# per cluster\nvalues: |\n  cluster:\n    name: {{ .Cluster.metadata.name }}\n    host: {{ .Cluster.spec.controlPlaneEndpoint.host | quote }}\n",
            ),
            (
                "crds/crd.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n",
            ),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cni\n  namespace: {{ .Release.Namespace }}\ndata:\n  cluster: {{ .Values.cluster.name }}\n  host: {{ .Values.cluster.host }}\n  pods: {{ .Values.cluster.pods }}\n  kube: {{ .Capabilities.KubeVersion.Version }}\n",
            ),
            (
                "templates/test.yaml",
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  annotations:\n    helm.sh/hook: test\n",
            ),
        ],
    );
    let cluster = ClusterObjects {
        cluster: serde_json::json!({"metadata": {"name": "wl-1"}, "spec": {"controlPlaneEndpoint": {"host": "10.1.2.3"}}}),
        ..Default::default()
    };
    let charts = render_addons(dir.path(), &ctx().with_cluster(cluster).with_kube_version("v1.30.4")).unwrap();
    let objects = &charts[0].objects;
    // The CRD first (apply order), the test hook left out.
    let kinds: Vec<&str> = objects.iter().map(|o| o.types.as_ref().unwrap().kind.as_str()).collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "ConfigMap"]);
    let cm = &objects[1];
    assert_eq!(cm.metadata.name.as_deref(), Some("cluster-addon-cni"));
    assert_eq!(cm.metadata.namespace.as_deref(), Some("kube-system"));
    assert_eq!(
        cm.data["data"],
        serde_json::json!({"cluster": "wl-1", "host": "10.1.2.3", "pods": "10.0.0.0/8", "kube": "v1.30.4"})
    );
}

#[test]
fn a_failing_values_template_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("cni");
    write_files(
        &addon,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: cni\nversion: v2\n"),
            ("overwrite.yaml", "values: |\n  a: 1\n  b: {{ .Cluster.spec.nope.deeper }}\n"),
            ("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
        ],
    );
    let cluster = ClusterObjects { cluster: serde_json::json!({"spec": {"nope": null}}), ..Default::default() };
    let msg = render_addons(dir.path(), &ctx().with_cluster(cluster)).unwrap_err().to_string();
    assert!(msg.contains("overwrite.yaml:3:"), "{msg}");
    assert!(msg.contains("nil pointer evaluating interface {}.deeper"), "{msg}");
}

#[test]
fn an_unknown_engine_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        dir.path(),
        &[("Chart.yaml", "name: x\nversion: v1\nannotations:\n  clusterstack.x-k8s.io/template-engine: erb\n")],
    );
    let msg = render_cluster_class(dir.path(), &ctx()).unwrap_err().to_string();
    assert!(msg.contains("unknown clusterstack.x-k8s.io/template-engine \"erb\""), "{msg}");
}

/// A bundle with one addon `cni` of the given `Chart.yaml`, whose template prints `a`, `b` and `c`
/// of its values; `values.yaml` sets all three, `overwrite.yaml` overrides `b` and `c`.
fn addon_with_overwrite(dir: &Path, chart_yaml: &str, overwrite: &str, template: &str) {
    write_files(
        &dir.join("cni"),
        &[
            ("Chart.yaml", chart_yaml),
            ("values.yaml", "a: chart\nb: chart\nc: chart\nlist: [1, 2]\n"),
            ("overwrite.yaml", overwrite),
            ("templates/cm.yaml", template),
        ],
    );
}

fn platform_values() -> std::collections::BTreeMap<String, serde_json::Value> {
    std::collections::BTreeMap::from([("cni".to_string(), serde_json::json!({"c": "platform", "list": [3]}))])
}

fn wl_cluster() -> ClusterObjects {
    ClusterObjects { cluster: serde_json::json!({"metadata": {"name": "wl-1"}}), ..Default::default() }
}

#[test]
fn platform_values_are_merged_over_the_overwrite_for_helm_addons() {
    let dir = tempfile::tempdir().unwrap();
    addon_with_overwrite(
        dir.path(),
        "apiVersion: v2\nname: cni\nversion: v2\n",
        "values: |\n  b: {{ .Cluster.metadata.name }}\n  c: overwrite\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: {{ .Values.a }}\n  b: {{ .Values.b }}\n  c: {{ .Values.c }}\n  list: {{ .Values.list | toJson | quote }}\n",
    );
    let ctx = ctx().with_cluster(wl_cluster()).with_addon_values(platform_values());
    let charts = render_addons(dir.path(), &ctx).unwrap();
    assert_eq!(
        charts[0].objects[0].data["data"],
        serde_json::json!({"a": "chart", "b": "wl-1", "c": "platform", "list": "[3]"})
    );
}

#[test]
fn platform_values_are_merged_over_the_overwrite_for_jinja_addons() {
    let dir = tempfile::tempdir().unwrap();
    addon_with_overwrite(
        dir.path(),
        "name: cni\nversion: v2\nannotations:\n  clusterstack.x-k8s.io/template-engine: jinja\n",
        "b: {{ cluster.metadata.name }}\nc: overwrite\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: {{ values.a }}\n  b: {{ values.b }}\n  c: {{ values.c }}\n  list: \"{{ values.list }}\"\n",
    );
    let ctx = ctx().with_cluster(wl_cluster()).with_addon_values(platform_values());
    let charts = render_addons(dir.path(), &ctx).unwrap();
    assert_eq!(
        charts[0].objects[0].data["data"],
        serde_json::json!({"a": "chart", "b": "wl-1", "c": "platform", "list": "[3]"})
    );
}

#[test]
fn platform_values_for_an_addon_the_release_lacks_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    addon_with_overwrite(
        dir.path(),
        "apiVersion: v2\nname: cni\nversion: v2\n",
        "values: |\n  c: overwrite\n",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
    );
    let values = std::collections::BTreeMap::from([("cin".to_string(), serde_json::json!({"c": 1}))]);
    let msg =
        render_addons(dir.path(), &ctx().with_cluster(wl_cluster()).with_addon_values(values)).unwrap_err().to_string();
    assert!(msg.contains("the addon \"cin\""), "{msg}");
    assert!(msg.contains("its addons: cni"), "{msg}");
}

/// A Helm chart's documents are read as the API server gets them from helm (go-yaml, YAML 1.1);
/// documents helm prints but no API server accepts stop the render, naming template and document.
#[test]
fn helm_documents_are_read_as_go_yaml_and_non_objects_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("c");
    std::fs::create_dir_all(chart_dir.join("templates")).unwrap();
    std::fs::write(chart_dir.join("Chart.yaml"), "apiVersion: v2\nname: c\nversion: v1\n").unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\nmode: 0755\nflag: on\nd: \"one\ntwo\"\n";
    std::fs::write(chart_dir.join("templates/cm.yaml"), cm).unwrap();
    let id = ReleaseId::from_tag("docker-ferrol-1-27-v1").unwrap();
    let ctx = RenderContext::new(&id, "ns");
    let objects = render_cluster_class(&chart_dir, &ctx).unwrap();
    assert_eq!(objects[0].data["mode"], 493);
    assert_eq!(objects[0].data["flag"], true);
    assert_eq!(objects[0].data["d"], "one two");

    // Documents helm prints but no API server accepts: one error names them all; rendering for
    // `clusterstack render` keeps them apart from the objects.
    let no_kind = "apiVersion: v1\nmetadata:\n  name: x\n";
    let number_label = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: numbered\n  labels:\n    a: 1\n";
    let other = cm.replace("name: m", "name: m2");
    std::fs::write(chart_dir.join("templates/bad.yaml"), format!("{other}---\n{no_kind}---\n{number_label}")).unwrap();
    let err = render_cluster_class(&chart_dir, &ctx).unwrap_err();
    assert!(matches!(&err, RenderError::Unaccepted(docs) if docs.len() == 2), "{err}");
    let err = err.to_string();
    assert!(err.contains("templates/bad.yaml document 2: has no kind"), "{err}");
    assert!(err.contains("templates/bad.yaml document 3: metadata"), "{err}");
    let rendered = render_chart(&chart_dir, &ctx.clone().keeping_unaccepted()).unwrap();
    assert_eq!(rendered.objects.len(), 2, "the ConfigMaps m and m2");
    let kept: Vec<(usize, &serde_json::Value)> = rendered.unaccepted.iter().map(|d| (d.index, &d.document)).collect();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0], (2, &serde_json::json!({"apiVersion": "v1", "metadata": {"name": "x"}})));
    assert_eq!(kept[1].1["metadata"]["labels"]["a"], 1);
    // What helm itself refuses stays an error: a document that is not a mapping.
    std::fs::write(chart_dir.join("templates/bad.yaml"), "- a\n- b\n").unwrap();
    let err = render_chart(&chart_dir, &ctx.clone().keeping_unaccepted()).unwrap_err();
    assert!(matches!(err, RenderError::InvalidObject { index: 1, .. }), "{err}");
}

/// The render worker's form (each object sent whole as JSON as it is read, only its head kept as
/// an object, its number in the reply) reads back, as the parent reads the worker's stream and
/// reply, into the very objects an in-process render gives, in the same order: metadata written in any way `ObjectMeta` reads (nulls, empty maps, a
/// timestamp), numbers, YAML 1.1 scalars, text needing escapes, `crds/` files.
#[test]
fn objects_kept_as_json_read_back_into_the_same_objects() {
    let dir = tempfile::tempdir().unwrap();
    write_files(
        &dir.path().join("cni"),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: cni\nversion: v2\n"),
            ("overwrite.yaml", "values: |\n  name: {{ .Cluster.metadata.name }}\n"),
            (
                "crds/crd.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\nspec:\n  group: example.com\n  versions: [{name: v1, served: true, storage: true}]\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: others.example.com\n",
            ),
            (
                "templates/objects.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name }}\n  labels: null\n  annotations: {}\n  creationTimestamp: null\ndata:\n  text: \"tab\\there \\\"quoted\\\" \\u00e9 \\U0001F600\"\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: ns\n  labels: {a: b}\nspec:\n  replicas: 3\n  ratio: 0.25\n  big: 12345678901234567890\n  negative: -7\n  mode: 0755\n  flag: on\n  empty: ~\n  list: [1, two, {three: 3}]\n---\n# only a comment\n",
            ),
        ],
    );
    let ctx = ctx().with_cluster(wl_cluster()).with_kube_version("v1.30.4");
    let whole = render_addons(dir.path(), &ctx).unwrap();
    let mut json_ctx = ctx.clone();
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = sent.clone();
    json_ctx.json_sink = Some(objects::JsonSink::new(move |json| {
        let mut sent = sink.lock().unwrap();
        sent.push(json.get().to_string());
        sent.len() as u64 - 1
    }));
    let kept = render_addons(dir.path(), &json_ctx).unwrap();
    assert_eq!(kept[0].streamed.len(), 4);
    assert!(kept[0].objects.iter().all(|o| o.data.as_object().is_some_and(|m| m.is_empty())), "heads only");
    let streamed: objects::Streamed = sent
        .lock()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(n, json)| (n as u64, objects::into_dynamic_object(serde_json::from_str(json).unwrap())))
        .collect();
    let reply = serde_json::to_vec(&kept).unwrap();
    let read: Vec<RenderedChart> = objects::with_streamed(streamed, || serde_json::from_slice(&reply)).unwrap();
    assert_eq!(read[0].objects.len(), 4);
    // Each number takes its object once.
    let twice =
        objects::with_streamed(objects::Streamed::new(), || serde_json::from_slice::<Vec<RenderedChart>>(&reply));
    assert!(twice.unwrap_err().to_string().contains("never sent, or named twice"));
    assert_eq!(serde_json::to_value(&whole).unwrap(), serde_json::to_value(&read).unwrap());
    let names: Vec<_> = read[0].objects.iter().map(|o| o.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["others.example.com", "things.example.com", "wl-1", "d"]);
    assert_eq!(read[0].objects[3].data["spec"]["mode"], 493);
}
