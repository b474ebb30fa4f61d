//! Differential tests: every chart of `tests/charts/` rendered by the real `helm template` and by
//! the `clusterstack-helm` crate, compared object by object (key `apiVersion/kind/namespace/name`)
//! after normalising only what Helm makes random (generated keys and certificates, random
//! strings, uuids, timestamps). A mismatch prints a line diff per object.
//!
//! Error cases: each failure mode (missing required value, `fail`, bad syntax, unknown function,
//! schema violation, failing helper, output that is not YAML, wrong type) fails in both, and our
//! message names the file and line helm names.
//!
//! Without helm the tests print a SKIPPED line (and fail when `CI=true`); see
//! `tests/support/helm.rs` (this crate's).

#[path = "support/helm.rs"]
mod helm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use helm_render::yaml_to_value;
use helm_render::{HelmOptions, load_chart, render_chart};
use serde_json::Value as Json;

/// A known difference between helm's objects and ours, this list being its record.
struct Known {
    /// The case it belongs to: chart, kube version given and values files.
    chart: &'static str,
    kube: Option<&'static str>,
    values: &'static [&'static str],
    /// Where: the object key and a JSON pointer in it.
    key: &'static str,
    pointer: &'static str,
    /// What each side has there, as compact JSON.
    helm: &'static str,
    ours: &'static str,
    why: &'static str,
}

/// Known differences. Each is asserted to differ still, in exactly the way recorded, and only
/// then set aside: an entry that agrees again, or differs otherwise, fails the test so that the
/// list stays true.
const KNOWN: &[Known] = &[
    Known {
        chart: "files",
        kube: None,
        values: &[],
        key: "v1/ConfigMap//files-get",
        pointer: "/data/binB64",
        helm: r#""AAECYmluYXJ5/w==""#,
        ours: r#""AAECYmluYXJ577+9""#,
        why: ".Files.Get of a binary file: helm hands b64enc Go's string of the raw bytes, ours a \
              Rust string in which the invalid UTF-8 byte became U+FFFD",
    },
    Known {
        chart: "umbrella",
        kube: None,
        values: &[],
        key: "v1/ConfigMap//rel-as-data",
        pointer: "/data/subChartJson",
        helm: r#""{\"APIVersion\":\"v2\",\"Annotations\":null,\"AppVersion\":\"v9.9.9\",\"Condition\":\"\",\"Dependencies\":[],\"Deprecated\":false,\"Description\":\"a vendored subchart, packed into the parent's charts/ as a .tgz by the test\",\"Home\":\"\",\"Icon\":\"\",\"IsRoot\":false,\"Keywords\":[],\"KubeVersion\":\"\",\"Maintainers\":[],\"Name\":\"backend\",\"Sources\":[],\"Tags\":\"\",\"Type\":\"\",\"Version\":\"2.1.0\"}""#,
        ours: r#""{\"APIVersion\":\"v2\",\"Annotations\":{},\"AppVersion\":\"v9.9.9\",\"Condition\":\"\",\"Dependencies\":[],\"Deprecated\":false,\"Description\":\"a vendored subchart, packed into the parent's charts/ as a .tgz by the test\",\"Home\":\"\",\"Icon\":\"\",\"IsRoot\":false,\"Keywords\":[],\"KubeVersion\":\"\",\"Maintainers\":[],\"Name\":\"backend\",\"Sources\":[],\"Tags\":\"\",\"Type\":\"\",\"Version\":\"2.1.0\"}""#,
        why: "a chart without annotations: helm's nil map is null in JSON, the engine's empty map {}",
    },
];

/// Checks the known differences of `case` and sets them aside; returns what is no longer true of
/// the list (an entry that agrees, or differs otherwise than recorded).
fn set_aside_known(case: &Case, helm: &mut BTreeMap<String, Json>, ours: &mut BTreeMap<String, Json>) -> Vec<String> {
    let mut stale = Vec::new();
    for Known { chart, kube, values, key, pointer, helm: helm_was, ours: ours_was, why } in KNOWN {
        if *chart != case.chart || *kube != case.kube_version || *values != case.values {
            continue;
        }
        let at = |objs: &mut BTreeMap<String, Json>| {
            objs.get_mut(*key).and_then(|o| o.pointer_mut(pointer)).map(std::mem::take)
        };
        let (h, o) = (at(helm), at(ours));
        let shown = |v: &Option<Json>| v.as_ref().map_or("(absent)".to_string(), Json::to_string);
        let (hs, os) = (shown(&h), shown(&o));
        if hs == *helm_was && os == *ours_was {
            eprintln!("KNOWN difference (still as recorded): {chart} {key} {pointer}: {why}");
        } else if h == o {
            stale.push(format!("listed in KNOWN but agrees now, remove it: {chart} {key} {pointer} ({why})"));
        } else {
            stale.push(format!(
                "listed in KNOWN but differs otherwise now: {chart} {key} {pointer}\n  recorded: helm {helm_was}, ours {ours_was}\n  now:      helm {hs}, ours {os}"
            ));
        }
        for (objs, v) in [(&mut *helm, h), (&mut *ours, o)] {
            if let (Some(slot), Some(_)) = (objs.get_mut(*key).and_then(|o| o.pointer_mut(pointer)), v) {
                *slot = Json::String("<known difference>".into());
            }
        }
    }
    stale
}

fn charts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charts")
}

/// One differential case.
struct Case {
    chart: &'static str,
    release: &'static str,
    namespace: &'static str,
    kube_version: Option<&'static str>,
    include_crds: bool,
    /// Files of `tests/charts/_values/`, given with `-f` in this order.
    values: &'static [&'static str],
    /// Charts of `tests/charts/_vendored/` packed into the chart's `charts/` as `.tgz`.
    vendored: &'static [&'static str],
}

const fn case(chart: &'static str) -> Case {
    Case { chart, release: "rel", namespace: "ns", kube_version: None, include_crds: false, values: &[], vendored: &[] }
}

/// The chart directory to render: in place, or a temporary copy with vendored `.tgz`s.
fn prepare(case: &Case, tmp: &Path) -> PathBuf {
    let src = charts_dir().join(case.chart);
    if case.vendored.is_empty() {
        return src;
    }
    let dest = tmp.join(case.chart);
    copy_dir(&src, &dest);
    std::fs::create_dir_all(dest.join("charts")).expect("charts dir");
    for name in case.vendored {
        let from = charts_dir().join("_vendored").join(name);
        helm::pack_chart(&from, name, &dest.join("charts").join(format!("{name}.tgz"))).expect("pack vendored chart");
    }
    dest
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for entry in std::fs::read_dir(from).expect("read dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy file");
        }
    }
}

fn helm_args(case: &Case) -> helm::TemplateArgs {
    let mut args = helm::TemplateArgs::new(case.release, case.namespace);
    args.kube_version = case.kube_version.map(str::to_string);
    args.include_crds = case.include_crds;
    args.values_files = case.values.iter().map(|v| charts_dir().join("_values").join(v)).collect();
    args
}

/// User values as helm reads `-f` files (YAML 1.1 scalars), merged in order.
fn user_values(case: &Case) -> Json {
    let mut merged = serde_json::Map::new();
    for file in case.values {
        let text = std::fs::read_to_string(charts_dir().join("_values").join(file)).expect("values file");
        let value = yaml_to_value(&text).unwrap_or_else(|e| panic!("values {file}: {e}")).to_json();
        if let Json::Object(m) = value {
            merge_json(&mut merged, m);
        }
    }
    Json::Object(merged)
}

fn merge_json(into: &mut serde_json::Map<String, Json>, from: serde_json::Map<String, Json>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Json::Object(a)), Json::Object(b)) => merge_json(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

fn our_options(case: &Case) -> HelmOptions {
    let mut opts = HelmOptions::new(case.release, case.namespace);
    opts.kube_version = case.kube_version.map(str::to_string);
    opts.include_crds = case.include_crds;
    opts.values = user_values(case);
    opts.seed = Some(1);
    opts
}

fn render_ours(dir: &Path, case: &Case) -> Result<Vec<(String, String)>, String> {
    let chart = load_chart(dir).map_err(|e| e.to_string())?;
    let manifests = render_chart(&chart, &our_options(case)).map_err(|e| e.to_string())?;
    Ok(manifests.into_iter().map(|m| (m.source, m.content)).collect())
}

/// Reads a text with the crate's go-yaml reader.
fn read_ours(text: &str) -> Result<Json, String> {
    Ok(yaml_to_value(text)?.to_json())
}

/// Reads a document of ours as the operator does: with the crate's go-yaml reader, followed by
/// a line break as helm's release manifest writes it (`helm template` prints it so, and helm's
/// side is read from that print).
fn read_our_document(text: &str) -> Result<Json, String> {
    // Our documents end with the line break helm prints after each (`render_chart`).
    match text.ends_with('\n') {
        true => read_ours(text),
        false => read_ours(&format!("{text}\n")),
    }
}

/// helm's documents read by the independent reader ([`helm::oracle`]), ours by ours: a reader
/// bug cannot hide by misreading both alike.
fn objects(docs: &[(String, String)], who: &str, chart: &str) -> BTreeMap<String, Json> {
    let docs = docs.iter().map(|(s, c)| (s.as_str(), c.as_str()));
    let objs = if who == "helm" { helm::parse_docs(docs) } else { helm::parse_docs_with(docs, read_our_document) };
    let mut objs = objs.unwrap_or_else(|e| panic!("{chart}: {who}'s output: {e}"));
    objs.values_mut().for_each(helm::normalise);
    objs
}

/// Renders with both and returns a report of the differences, or `None`.
fn compare(helm_bin: &Path, case: &Case) -> Option<String> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = prepare(case, tmp.path());
    let label =
        format!("{} (kube {:?}, crds {}, values {:?})", case.chart, case.kube_version, case.include_crds, case.values);
    let theirs = helm::helm_template(helm_bin, &dir, &helm_args(case))
        .unwrap_or_else(|e| panic!("{label}: helm fails on a chart of the corpus:\n{e}"));
    let theirs: Vec<(String, String)> =
        helm::split_helm_output(&theirs).into_iter().map(|d| (d.source, d.content)).collect();
    let ours = match render_ours(&dir, case) {
        Ok(ours) => ours,
        Err(e) => return Some(format!("=== {label}: helm renders it, ours fails:\n{e}\n")),
    };
    let (mut h, mut o) = (objects(&theirs, "helm", case.chart), objects(&ours, "ours", case.chart));
    let mut report: String = set_aside_known(case, &mut h, &mut o).into_iter().map(|n| n + "\n").collect();
    report.push_str(&helm::diff_objects(&h, &o).unwrap_or_default());
    // The `# Source:` of each object.
    let sources = |docs: &[(String, String)], read: fn(&str) -> Result<Json, String>| -> BTreeMap<String, String> {
        docs.iter()
            .filter_map(|(s, c)| {
                let v = read(c).ok()?;
                v.is_object().then(|| (helm::object_key(&v), s.clone()))
            })
            .collect()
    };
    let (hs, os) = (sources(&theirs, helm::oracle::read_one), sources(&ours, read_our_document));
    for (key, source) in &hs {
        if let Some(ours) = os.get(key)
            && ours != source
        {
            report.push_str(&format!("source of {key}: helm {source}, ours {ours}\n"));
        }
    }
    (!report.is_empty()).then(|| format!("=== {label}:\n{report}"))
}

fn run_cases(test: &str, cases: &[Case]) {
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let failures: Vec<String> = cases.iter().filter_map(|c| compare(&helm_bin, c)).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from helm:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn go_template_semantics_match_helm() {
    run_cases("go_template_semantics_match_helm", &[case("gotmpl-basics")]);
}

#[test]
fn sprig_functions_match_helm() {
    run_cases("sprig_functions_match_helm", &[case("sprig")]);
}

#[test]
fn umbrella_with_aliased_vendored_subchart_matches_helm() {
    run_cases(
        "umbrella_with_aliased_vendored_subchart_matches_helm",
        &[
            Case { vendored: &["sub"], ..case("umbrella") },
            Case { vendored: &["sub"], values: &["umbrella-toggled.yaml"], release: "other", ..case("umbrella") },
        ],
    );
}

/// A dependency's alias (and the condition, tags and import-values under it) reaches a vendored
/// chart only when the chart's version satisfies the dependency's range (no range, a prerelease
/// outside it, a range that does not parse: the chart stays under its own name); conditions
/// split at commas untrimmed; a subchart's dependency list is not checked; a chart listing no
/// dependencies processes none of its subcharts' either.
#[test]
fn dependency_versions_decide_aliases_as_in_helm() {
    run_cases(
        "dependency_versions_decide_aliases_as_in_helm",
        &[
            Case { vendored: &["sub"], ..case("dependency-versions") },
            Case { vendored: &["sub"], values: &["dependency-versions-toggled.yaml"], ..case("dependency-versions") },
            case("unlisted-dependencies"),
        ],
    );
}

/// Block scalars of every chomping ending a document, a template file, a CRD file, the
/// manifests and the hooks: `helm template` prints each document followed by a newline and
/// trims the last manifest, so a kept scalar's value depends on where it is printed.
#[test]
fn block_scalars_at_document_ends_match_helm() {
    run_cases(
        "block_scalars_at_document_ends_match_helm",
        &[
            case("block-scalar-ends"),
            Case { include_crds: true, ..case("block-scalar-ends") },
            Case { values: &["block-scalar-trailing-comment.yaml"], ..case("block-scalar-ends") },
        ],
    );
}

/// `Chart.yaml` as helm reads it: repeated keys (the last wins), no `apiVersion` (v1, so
/// `requirements.yaml` is read and kept in `.Files`), text fields sanitised, null annotations;
/// and what of `charts/` helm loads as charts (not what starts with `_` or `.`).
#[test]
fn chart_yaml_reads_as_in_helm() {
    run_cases("chart_yaml_reads_as_in_helm", &[case("chart-yaml"), case("charts-dir-entries")]);
}

/// Kinds of difference the public corpus showed (`tests/helm_corpus.rs`): `.Values` methods,
/// documents split at `---# comment`, unknown hook events dropped.
#[test]
fn helm_object_methods_document_splits_and_hooks_match_helm() {
    run_cases("helm_object_methods_document_splits_and_hooks_match_helm", &[case("helm-semantics")]);
}

#[test]
fn files_and_tpl_match_helm() {
    run_cases("files_and_tpl_match_helm", &[case("files")]);
}

#[test]
fn schema_crds_and_hooks_match_helm() {
    run_cases(
        "schema_crds_and_hooks_match_helm",
        &[
            case("schema"),
            Case { include_crds: true, kube_version: Some("1.29.4"), ..case("crds-hooks") },
            case("crds-hooks"),
            // A provider's version (kept as given, its numbers for String()) and two numbers.
            Case { kube_version: Some("v1.29.4-gke.100"), ..case("crds-hooks") },
            Case { kube_version: Some("1.29"), ..case("crds-hooks") },
        ],
    );
}

#[test]
fn cni_shaped_chart_matches_helm() {
    run_cases(
        "cni_shaped_chart_matches_helm",
        &[
            Case { release: "kube-cni", namespace: "kube-system", kube_version: Some("1.30.2"), ..case("cni") },
            Case { release: "cni", namespace: "kube-system", kube_version: Some("v1.25.16"), ..case("cni") },
            Case { release: "cni", namespace: "kube-system", ..case("cni") },
        ],
    );
}

#[test]
fn cloud_provider_shaped_chart_matches_helm() {
    run_cases(
        "cloud_provider_shaped_chart_matches_helm",
        &[Case { release: "occm", namespace: "kube-system", ..case("cloud-provider") }],
    );
}

#[test]
fn cluster_class_chart_matches_helm() {
    run_cases(
        "cluster_class_chart_matches_helm",
        &[Case { release: "openstack-scs-1-30", namespace: "cluster", ..case("cluster-class") }],
    );
}

// ---------------------------------------------------------------------------------------------
// Errors

/// Renders `case` with both, expecting both to fail; returns (helm's message, ours).
fn both_fail(helm_bin: &Path, case: &Case) -> (String, String) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = prepare(case, tmp.path());
    let theirs = match helm::helm_template(helm_bin, &dir, &helm_args(case)) {
        Err(e) => e,
        Ok(out) => panic!("{}: helm renders it, expected a failure:\n{out}", case.chart),
    };
    let ours = match render_ours(&dir, case) {
        Err(e) => e,
        Ok(docs) => panic!("{}: ours renders it, helm fails with:\n{theirs}\nours:\n{docs:?}", case.chart),
    };
    (theirs, ours)
}

/// The `file:line` pairs helm's message names (`(chart/templates/x.yaml:6:10)`, `x.yaml:6`).
fn positions(message: &str) -> Vec<(String, usize)> {
    let re = regex::Regex::new(r"([\w./-]+\.(?:yaml|tpl|txt)):(\d+)").expect("regex");
    re.captures_iter(message).filter_map(|c| Some((c[1].to_string(), c[2].parse().ok()?))).collect()
}

fn error_case(chart: &'static str) -> Case {
    Case { chart, ..case(chart) }
}

#[test]
fn template_errors_name_file_and_line_as_helm() {
    let Some(helm_bin) = helm::require_helm("template_errors_name_file_and_line_as_helm") else { return };
    let cases: &[(&str, &str)] = &[
        ("errors/required", "image.tag is required"),
        ("errors/fail", "mode \"weird\" is not supported"),
        ("errors/syntax", "unexpected EOF"),
        ("errors/unknown-function", "function \"nosuchfunction\" not defined"),
        ("errors/helper-error", "index out of range"),
        ("errors/wrong-type", "nested"),
    ];
    let mut failures = Vec::new();
    for (chart, text) in cases {
        let (theirs, ours) = both_fail(&helm_bin, &error_case(chart));
        assert!(theirs.contains(text), "{chart}: helm's message changed:\n{theirs}");
        let mut missing = Vec::new();
        if !ours.contains(text) {
            missing.push(format!("the message {text:?}"));
        }
        for (file, line) in positions(&theirs) {
            let named = ours.contains(&format!("{file}:{line}")) || ours.contains(&format!("({file}:{line}"));
            if !named {
                missing.push(format!("{file}:{line}"));
            }
        }
        if !missing.is_empty() {
            failures.push(format!(
                "{chart}: ours does not name {}\n  helm: {}\n  ours: {ours}",
                missing.join(", "),
                theirs.trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// helm's message without its `Error: ` and the `--debug` hint.
fn helm_error_text(stderr: &str) -> String {
    let text = stderr.trim();
    let text = text.strip_suffix("Use --debug flag to render out invalid YAML").unwrap_or(text).trim();
    text.rsplit("Error: ").next().unwrap_or(text).trim().to_string()
}

#[test]
fn template_errors_read_as_helms_text() {
    let Some(helm_bin) = helm::require_helm("template_errors_read_as_helms_text") else { return };
    let charts = [
        "errors/required",
        "errors/fail",
        "errors/syntax",
        "errors/unknown-function",
        "errors/helper-error",
        "errors/wrong-type",
        // `required`/`fail` in helpers and `tpl`: the call site in the template being rendered.
        "errors/required-in-helper",
        "errors/fail-in-tpl",
        // The chain of includes, as helm lays it out, or Go's one line where helm keeps it.
        "errors/include-chain",
        "errors/include-missing",
        "errors/tpl-in-helper",
        "errors/template-action",
        // helm v4.2 indexes the last byte of an empty file's text.
        "errors/files-lines-empty",
        // A plain file in charts/ is loaded as a chart without a Chart.yaml.
        "errors/file-in-charts",
    ];
    let mut failures = Vec::new();
    for chart in charts {
        let (theirs, ours) = both_fail(&helm_bin, &error_case(chart));
        let theirs = helm_error_text(&theirs);
        if !ours.ends_with(&format!(": {theirs}")) {
            failures.push(format!("{chart}:\n  helm: {theirs}\n  ours: {ours}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn incompatible_kube_version_fails_as_in_helm() {
    let Some(helm_bin) = helm::require_helm("incompatible_kube_version_fails_as_in_helm") else { return };
    let case = Case { kube_version: Some("v1.20.15"), ..case("cni") };
    let (theirs, ours) = both_fail(&helm_bin, &case);
    assert!(theirs.contains(">= 1.21.0-0"), "helm: {theirs}");
    assert!(ours.contains(">= 1.21.0-0") && ours.contains("1.20.15"), "ours: {ours}\nhelm: {theirs}");
}

#[test]
fn schema_violations_are_reported_as_helm_reports_them() {
    let Some(helm_bin) = helm::require_helm("schema_violations_are_reported_as_helm_reports_them") else { return };
    let case = Case { values: &["schema-invalid.yaml"], ..case("schema") };
    let (theirs, ours) = both_fail(&helm_bin, &case);
    for needle in ["/mode", "/name", "/replicas", "extra"] {
        assert!(theirs.contains(needle), "helm's message changed: {theirs}");
        assert!(ours.contains(needle), "ours does not name {needle}:\n  ours: {ours}\n  helm: {theirs}");
    }
}

/// The independent reader every comparison reads helm's output with ([`helm::oracle`]) reads as
/// helm's own go-yaml does: a chart prints `fromYaml | toJson` of a file of scalars YAML 1.1 and
/// 1.2 read differently (`on`, `0644`, `1_000`, quoted forms, tags, merges, keys), and the
/// oracle's reading of that file must be that JSON. Our reader must read it so too.
#[test]
fn the_independent_reader_reads_yaml_as_helms_go_yaml() {
    let Some(helm_bin) = helm::require_helm("the_independent_reader_reads_yaml_as_helms_go_yaml") else { return };
    let case = case("yaml-reading");
    let out = helm::helm_template(&helm_bin, &charts_dir().join(case.chart), &helm_args(&case))
        .unwrap_or_else(|e| panic!("helm fails on yaml-reading: {e}"));
    let objs = helm::parse_docs(helm::split_helm_output(&out).iter().map(|d| (d.source.as_str(), d.content.as_str())))
        .expect("helm's output reads");
    let diff = |a: &Json, b: &Json| helm::line_diff(&format!("{a:#}"), &format!("{b:#}"));
    // A file of scalars, and one ending in a block scalar without a final line break.
    for (field, file, yaml11) in [("read", "scalars.yaml", 20), ("blockEnd", "block-end.yaml", 0)] {
        let printed = objs["v1/ConfigMap//yaml-reading"]["data"][field].as_str().expect("data field").to_string();
        let helms: Json = serde_json::from_str(&printed).expect("toJson prints JSON");
        let text = std::fs::read_to_string(charts_dir().join("yaml-reading").join(file)).expect("file");
        let reading = helm::oracle::read_stream(&text).unwrap_or_else(|e| panic!("the oracle reads {file}: {e}"));
        assert_eq!(reading.documents.len(), 1);
        let oracle = &reading.documents[0];
        assert!(*oracle == helms, "{file}: oracle (+) against helm's fromYaml (-):\n{}", diff(&helms, oracle));
        // YAML 1.1 readings are counted, not hidden: scalars.yaml is made of them.
        assert!(reading.yaml11.len() >= yaml11, "{file}: {:#?}", reading.yaml11);
        let ours = read_ours(&text).expect("ours reads it");
        assert!(ours == helms, "{file}: ours (+) against helm's fromYaml (-):\n{}", diff(&helms, &ours));
    }
}
