//! The public corpus (`../shared/helm-corpus`, never copied into the project) rendered by ours and
//! by the pinned `helm`, compared object by object.
//!
//! - Every chart of `charts/`: `helm template corpus-chart-1-30 DIR --namespace corpus-ns
//!   --skip-tests`, or with `NAME.values.yaml` beside it the addon form (`cluster-addon`,
//!   `kube-system`, `--include-crds`, `-f NAME.values.yaml`), as the corpus README says; ours
//!   through `helm_render`.
//! - Every stack of `stacks/`: built by `clusterstack build` (`build_release`), then the class and
//!   each addon rendered by the operator's own path (`clusterstack::render`) and by `helm template`
//!   on the same built assets, as the Go operator runs it (the addon values are the stack's
//!   `overwrite.yaml` rendered over a workload Cluster, given to helm with `-f`).
//!
//! Both outputs are split where helm splits documents and read as the API server is given them
//! (go-yaml v2, YAML 1.1, through sigs.k8s.io/yaml); a key whose value is null is an absent key.
//! helm's by an independent reader (`libyaml-safer`, see `crates/helm/tests/support/yaml_oracle.rs`),
//! ours by our own go-yaml reader, as the operator reads it: a reader bug cannot hide by
//! misreading both alike. Plain scalars read by YAML 1.1's rules where YAML 1.2 differs (`on`,
//! `0644`) are counted and printed per case.
//! What helm itself randomises is found by rendering twice with helm: only there are values
//! compared by shape (type, and length when helm's two runs agree on it).
//!
//! Where the corpus is: `$CLUSTERSTACK_HELM_CORPUS`, else `../shared/helm-corpus` beside the
//! workspace. Under `CI=true` a missing corpus or helm fails; locally the test is skipped loudly.

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/corpus_read.rs"]
mod corpus_read;
use corpus_read::{Side, differing, objects_of, set_aside_random};
#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;
use corpus::require_corpus;

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value as Json;

/// Differences from helm still open: (case, object key `apiVersion/kind/namespace/name` or
/// `*render*` for a case ours fails to render, how it differs, why). How: the JSON pointers
/// where the object differs, `, `-separated (`only in helm`, `only in ours` for a missing
/// object), or the first line of our error for `*render*`. Each is asserted to differ still, in
/// exactly that way, then set aside and printed: a listed difference that agrees again, or
/// differs otherwise, fails the test so that the list stays true.
const KNOWN: &[(&str, &str, &str, &str)] = &[
    (
        "chart traefik",
        "apiextensions.k8s.io/v1/CustomResourceDefinition//ingressroutes.traefik.io",
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/routes/items/properties/priority/maximum",
        BIG_INTEGER,
    ),
    (
        "chart traefik",
        "apiextensions.k8s.io/v1/CustomResourceDefinition//ingressroutetcps.traefik.io",
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/routes/items/properties/priority/maximum",
        BIG_INTEGER,
    ),
];

/// Why the traefik CRDs differ (found when helm's side was first read by the independent reader;
/// reading both sides with ours had hidden it).
const BIG_INTEGER: &str = "our go-yaml reader gives `maximum: 9223372036854775000` (an int64) \
    as the float64 9223372036854774784, as helm's values reading does; sigs.k8s.io/yaml's \
    YAMLToJSON, which an object takes to the API server, keeps the int64 exact";

/// Cases not compared, and why. The reason is checked on every run (see
/// [`addons_need_the_network`]): an entry whose reason no longer holds fails the test.
const SKIPPED: &[(&str, &str)] = &[(
    "stack openstack/scs2 addons",
    "its addon charts are Chart.yaml dependencies in https:// Helm repositories, which `build` \
     fetches (tests/build_deps.rs) and a test cannot reach; only its class is compared here",
)];

/// Whether some addon chart of a stack has a dependency in an `https://` repository that is not
/// vendored in its `charts/`: what keeps `build` (and so the comparison) from running offline.
fn addons_need_the_network(source: &Path) -> bool {
    let Ok(addons) = std::fs::read_dir(source.join("cluster-addon")) else { return false };
    addons.flatten().any(|addon| {
        let Ok(text) = std::fs::read_to_string(addon.path().join("Chart.yaml")) else { return false };
        let chart: Json = serde_saphyr::from_str(&text).unwrap_or_default();
        chart["dependencies"].as_array().into_iter().flatten().any(|d| {
            let remote = d["repository"].as_str().is_some_and(|r| r.starts_with("https://"));
            let name = d["name"].as_str().unwrap_or_default();
            let vendored = std::fs::read_dir(addon.path().join("charts"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|f| f.file_name().to_string_lossy().starts_with(name));
            remote && !vendored
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Cases

/// Documents as `(source, text)`.
type Docs = Vec<(String, String)>;
/// Renders our side of a case: its documents, or why ours failed.
type RenderOurs = Box<dyn Fn() -> Result<Docs, String> + Send + Sync>;

/// What one case compares: helm's command and our objects.
struct Case {
    name: String,
    chart: PathBuf,
    args: helm::TemplateArgs,
    /// Our documents `(source, text)`, or why ours failed.
    ours: RenderOurs,
}

fn helm_docs(helm_bin: &Path, case: &Case) -> Result<Vec<(String, String)>, String> {
    let mut cmd = std::process::Command::new(helm_bin);
    cmd.arg("template").arg(&case.args.release).arg(&case.chart).arg("--namespace").arg(&case.args.namespace);
    cmd.arg("--skip-tests");
    if let Some(v) = &case.args.kube_version {
        cmd.arg("--kube-version").arg(v);
    }
    if case.args.include_crds {
        cmd.arg("--include-crds");
    }
    for f in &case.args.values_files {
        cmd.arg("-f").arg(f);
    }
    helm::isolate(&mut cmd);
    let out = cmd.output().map_err(|e| format!("running {}: {e}", helm_bin.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(helm::split_helm_output(&String::from_utf8_lossy(&out.stdout))
        .into_iter()
        .map(|d| (d.source, d.content))
        .collect())
}

/// Outcome of one case: objects matched, and the differences found (with the known ones set
/// aside and listed).
struct Outcome {
    name: String,
    matched: usize,
    total: usize,
    failures: Vec<String>,
    known: Vec<String>,
    /// helm's plain scalars read by YAML 1.1's rules where YAML 1.2 reads them otherwise.
    yaml11: Vec<String>,
}

/// The listed difference of `key` in `case`: (how it differs, why).
fn known(case: &str, key: &str) -> Option<(&'static str, &'static str)> {
    KNOWN.iter().find(|(c, k, ..)| *c == case && *k == key).map(|(_, _, how, why)| (*how, *why))
}

/// Checks a difference against its KNOWN entry: set aside (as `out.known`) when it differs
/// exactly as recorded, a failure otherwise.
fn check_known(out: &mut Outcome, key: &str, how: &str, known: (&str, &str), text: String) {
    let (recorded, why) = known;
    if how == recorded {
        out.known.push(format!("{key}: {why}"));
    } else {
        out.failures.push(format!(
            "{key} is listed in KNOWN ({why}) but differs otherwise now:\n  recorded: {recorded}\n  now:      {how}\n{text}"
        ));
    }
}

fn run_case(helm_bin: &Path, case: &Case) -> Outcome {
    let mut out = Outcome {
        name: case.name.clone(),
        matched: 0,
        total: 0,
        failures: Vec::new(),
        known: Vec::new(),
        yaml11: Vec::new(),
    };
    // Helm twice, as processes, while ours renders in this thread.
    let (h1, h2, ours) = std::thread::scope(|s| {
        let a = s.spawn(|| helm_docs(helm_bin, case));
        let b = s.spawn(|| helm_docs(helm_bin, case));
        let ours = (case.ours)();
        (a.join().expect("helm thread"), b.join().expect("helm thread"), ours)
    });
    let (h1, h2) = match (h1, h2) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            out.failures.push(format!("helm fails on it (not a corpus chart helm renders?):\n{e}"));
            return out;
        }
    };
    let mut yaml11 = Vec::new();
    let parsed =
        objects_of(Side::Helm, &h1, &mut out.yaml11).and_then(|a| Ok((a, objects_of(Side::Helm, &h2, &mut yaml11)?)));
    let (mut h1, h2) = match parsed {
        Ok(p) => p,
        Err(e) => {
            out.failures.push(format!("helm's output is not read by the independent reader: {e}"));
            return out;
        }
    };
    out.total = h1.len();
    let ours = ours.and_then(|docs| objects_of(Side::Ours, &docs, &mut yaml11));
    let mut ours = match ours {
        Ok(o) => o,
        Err(e) => {
            let text = format!("ours fails where helm renders:\n{e}");
            match known(&case.name, "*render*") {
                Some(k) => check_known(&mut out, "*render*", first_line(&e), k, text),
                None => out.failures.push(text),
            }
            return out;
        }
    };
    if known(&case.name, "*render*").is_some() {
        out.failures.push("listed in KNOWN as failing to render, but renders now: remove it".into());
    }
    set_aside_random(&mut h1, &h2, &mut ours);
    let keys: std::collections::BTreeSet<&String> = h1.keys().chain(ours.keys()).collect();
    for key in keys {
        let (h, o) = (h1.get(key), ours.get(key));
        if h == o {
            out.matched += 1;
            if let Some((_, why)) = known(&case.name, key) {
                out.failures.push(format!("{key} is listed in KNOWN ({why}) but matches now: remove it"));
            }
            continue;
        }
        let (how, text) = match (h, o) {
            (Some(h), None) => ("only in helm".to_string(), format!("only in helm: {key}\n{}", to_yaml(h))),
            (None, Some(o)) => ("only in ours".to_string(), format!("only in ours: {key}\n{}", to_yaml(o))),
            (Some(h), Some(o)) => {
                let mut pointers = Vec::new();
                differing(h, o, String::new(), &mut pointers);
                let text = format!("differs: {key} (- helm, + ours)\n{}", only_changes(&to_yaml(h), &to_yaml(o)));
                (pointers.join(", "), text)
            }
            (None, None) => continue,
        };
        match known(&case.name, key) {
            Some(k) => check_known(&mut out, key, &how, k, text),
            None => out.failures.push(text),
        }
    }
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn to_yaml(v: &Json) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| format!("{v:#}"))
}

/// The changed lines of a line diff, with two lines of context.
fn only_changes(a: &str, b: &str) -> String {
    let diff = helm::line_diff(a, b);
    let lines: Vec<&str> = diff.lines().collect();
    let changed: Vec<bool> = lines.iter().map(|l| !l.starts_with("  ")).collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let near = (i.saturating_sub(2)..(i + 3).min(lines.len())).any(|j| changed[j]);
        if near {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Runs the cases on as many threads as there are cores (each also runs two helm processes).
fn run_all(helm_bin: &Path, cases: Vec<Case>) -> Vec<Outcome> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).max(1);
    let queue = Mutex::new(cases.into_iter().enumerate().collect::<Vec<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().expect("queue").pop();
                    let Some((i, case)) = next else { break };
                    let outcome = run_case(helm_bin, &case);
                    results.lock().expect("results").push((i, outcome));
                }
            });
        }
    });
    let mut results = results.into_inner().expect("results");
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, o)| o).collect()
}

fn report(test: &str, outcomes: &[Outcome]) {
    let mut failed = Vec::new();
    for o in outcomes {
        eprintln!(
            "{test}: {}: {}/{} objects match helm{}",
            o.name,
            o.matched,
            o.total,
            if o.known.is_empty() { String::new() } else { format!(", {} known differences", o.known.len()) }
        );
        for k in &o.known {
            eprintln!("    KNOWN: {k}");
        }
        if !o.yaml11.is_empty() {
            eprintln!("    {} plain scalars of helm's output read by YAML 1.1 (go-yaml v2) rules:", o.yaml11.len());
            for r in &o.yaml11 {
                eprintln!("      {r}");
            }
        }
        if !o.failures.is_empty() {
            failed.push(format!("=== {}:\n{}", o.name, o.failures.join("\n")));
        }
    }
    assert!(failed.is_empty(), "{} of {} cases differ from helm:\n{}", failed.len(), outcomes.len(), failed.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// Charts

fn chart_cases(corpus: &Path) -> Vec<Case> {
    let dir = corpus.join("charts");
    corpus::chart_names(corpus)
        .into_iter()
        .map(|name| {
            let chart = dir.join(&name);
            let values = dir.join(format!("{name}.values.yaml"));
            let mut args = if values.is_file() {
                let mut a = helm::TemplateArgs::new("cluster-addon", "kube-system");
                a.include_crds = true;
                a.values_files.push(values.clone());
                a
            } else {
                helm::TemplateArgs::new("corpus-chart-1-30", "corpus-ns")
            };
            args.kube_version = None;
            let ours_args = args.clone();
            let ours_chart = chart.clone();
            Case {
                name: format!("chart {name}"),
                chart,
                args,
                ours: Box::new(move || render_chart_ours(&ours_chart, &ours_args)),
            }
        })
        .collect()
}

fn render_chart_ours(dir: &Path, args: &helm::TemplateArgs) -> Result<Vec<(String, String)>, String> {
    let chart = helm_render::load_chart(dir).map_err(|e| e.to_string())?;
    let mut opts = helm_render::HelmOptions::new(args.release.as_str(), args.namespace.as_str());
    opts.include_crds = args.include_crds;
    opts.kube_version = args.kube_version.clone();
    for file in &args.values_files {
        let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
        let values = helm_render::values::parse_values(&text)?;
        clusterstack::render::merge_values(&mut opts.values, values);
    }
    let manifests = helm_render::render_chart(&chart, &opts).map_err(|e| e.to_string())?;
    // `--skip-tests`: helm test hooks are left out.
    Ok(manifests
        .into_iter()
        .filter(|m| {
            !m.hook.as_deref().is_some_and(|h| h.split(',').any(|h| h.trim() == "test" || h.trim() == "test-success"))
        })
        .map(|m| (m.source, m.content))
        .collect())
}

#[test]
fn corpus_charts_render_as_helm_renders_them() {
    let test = "corpus_charts_render_as_helm_renders_them";
    let Some(corpus) = require_corpus(test) else { return };
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let outcomes = run_all(&helm_bin, chart_cases(&corpus));
    report(test, &outcomes);
}

// ---------------------------------------------------------------------------------------------
// Stacks

/// The workload Cluster the addons are rendered for (with its control plane and infrastructure
/// cluster), as `clusterstack render --addons --cluster` reads it.
fn workload_cluster() -> clusterstack::render::ClusterObjects {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/example-cluster.yaml");
    let text = std::fs::read_to_string(&path).expect("example cluster");
    let docs: Vec<Json> = serde_saphyr::from_multiple(&text).expect("example cluster YAML");
    let of = |kind: &str| docs.iter().find(|d| d["kind"] == kind).cloned().unwrap_or_else(|| serde_json::json!({}));
    clusterstack::render::ClusterObjects {
        cluster: of("Cluster"),
        control_plane: of("KubeadmControlPlane"),
        infra_cluster: of("DockerCluster"),
    }
}

fn objects_as_docs(label: &str, objects: &[kube::api::DynamicObject]) -> Result<Vec<(String, String)>, String> {
    objects.iter().map(|o| Ok((label.to_string(), serde_json::to_string(o).map_err(|e| e.to_string())?))).collect()
}

/// The stacks of the corpus: `(label, source dir)`.
fn stacks(corpus: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for provider in std::fs::read_dir(corpus.join("stacks")).expect("corpus stacks").flatten() {
        for stack in std::fs::read_dir(provider.path()).expect("corpus stacks").flatten() {
            if stack.path().join("csctl.yaml").is_file() {
                let label =
                    format!("{}/{}", provider.file_name().to_string_lossy(), stack.file_name().to_string_lossy());
                out.push((label, stack.path()));
            }
        }
    }
    out.sort();
    out
}

/// Builds every stack and returns the cases: its class and each addon. A stack that does not
/// build is a failure (reported in `failures`).
fn stack_cases(corpus: &Path, work: &Path, failures: &mut Vec<String>) -> Vec<Case> {
    use clusterstack::package::build::{BuildOptions, build_release};
    use clusterstack::render::{RenderContext, render_addon, render_cluster_class};
    use clusterstack::source::archive::{ExtractLimits, extract_tgz};

    let mut cases = Vec::new();
    for (label, source) in stacks(corpus) {
        let out = work.join(label.replace('/', "-"));
        let skip_addons = SKIPPED.iter().any(|(what, _)| *what == format!("stack {label} addons"));
        if skip_addons && !addons_need_the_network(&source) {
            failures.push(format!(
                "=== stack {label}: listed in SKIPPED, but its addons no longer need the network: remove it"
            ));
        }
        if skip_addons {
            // Without its addons `build` cannot run: the class chart as `build` packs it (its
            // version set to the release's), rendered from a copy.
            cases.push(class_from_source(&label, &source, &out));
            continue;
        }
        let built =
            match build_release(&BuildOptions { source_dir: source.clone(), out_dir: out.clone(), version: None }) {
                Ok(b) => b,
                Err(e) => {
                    failures.push(format!("=== stack {label}: clusterstack build fails:\n{e}"));
                    continue;
                }
            };
        let id = built.id.clone();
        let kube = built.metadata.versions.kubernetes.to_string();
        let extracted = out.join("extracted");
        let class_asset = built.dir.join(clusterstack::package::build::cluster_class_asset(&id));
        extract_tgz(&class_asset, &extracted.join("class"), &ExtractLimits::default()).expect("extract class");
        let class_dir = std::fs::read_dir(extracted.join("class"))
            .expect("class dir")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("Chart.yaml").is_file())
            .expect("a class chart");
        let namespace = "cluster-ns";
        let ctx = RenderContext::new(&id, namespace);
        let class_label = format!("stack {label} class");
        let dir = class_dir.clone();
        cases.push(Case {
            name: class_label.clone(),
            chart: class_asset,
            args: helm::TemplateArgs::new(&id.stack_name(), namespace),
            ours: Box::new(move || {
                let objects = render_cluster_class(&dir, &ctx).map_err(|e| e.to_string())?;
                objects_as_docs("class", &objects)
            }),
        });
        let addon_asset = built.dir.join(clusterstack::package::build::cluster_addon_asset(
            &id,
            &built.metadata.versions.components.cluster_addon,
        ));
        extract_tgz(&addon_asset, &extracted.join("addons"), &ExtractLimits::default()).expect("extract addons");
        let names = clusterstack::render::addon_names(&extracted.join("addons")).expect("addon names");
        assert!(!names.is_empty(), "stack {label}: no addon charts in {}", addon_asset.display());
        for name in names {
            let dir = extracted.join("addons").join(&name);
            let mut args = helm::TemplateArgs::new("cluster-addon", "kube-system");
            args.include_crds = true;
            args.kube_version = Some(kube.clone());
            // The Go operator's `-f`: the addon's overwrite.yaml rendered over the Cluster.
            let overwrite = dir.join("overwrite.yaml");
            if overwrite.is_file() {
                let text = std::fs::read_to_string(&overwrite).expect("overwrite.yaml");
                let values = clusterstack::render::render_values_template(
                    &overwrite.display().to_string(),
                    &text,
                    &workload_cluster(),
                    &Default::default(),
                )
                .expect("overwrite.yaml renders");
                let file = out.join(format!("{name}.values.json"));
                std::fs::write(&file, values.to_string()).expect("values file");
                args.values_files.push(file);
            }
            let ctx =
                RenderContext::new(&id, namespace).with_kube_version(kube.clone()).with_cluster(workload_cluster());
            let ours_dir = dir.clone();
            cases.push(Case {
                name: format!("stack {label} addon {name}"),
                chart: dir,
                args,
                ours: Box::new(move || {
                    let chart = render_addon(&ours_dir, &ctx).map_err(|e| e.to_string())?;
                    objects_as_docs("addon", &chart.objects)
                }),
            });
        }
    }
    cases
}

/// The class of a stack that is not built: `cluster-class/` with the version `v1`, in `out`.
fn class_from_source(label: &str, source: &Path, out: &Path) -> Case {
    use clusterstack::package::build::{StackConfig, collect_files};
    use clusterstack::release::StackVersion;
    let config = StackConfig::read(source).expect("csctl.yaml");
    let id = config.release_id(StackVersion::Stable(1)).expect("release id");
    let files = collect_files(&source.join("cluster-class")).expect("class files");
    let files = clusterstack::package::helm::set_chart_version(files, &StackVersion::Stable(1));
    let dir = out.join("class");
    for (name, bytes) in &files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("class dir");
        std::fs::write(&path, bytes).expect("class file");
    }
    let namespace = "cluster-ns";
    let ctx = clusterstack::render::RenderContext::new(&id, namespace);
    let ours_dir = dir.clone();
    Case {
        name: format!("stack {label} class"),
        chart: dir,
        args: helm::TemplateArgs::new(&id.stack_name(), namespace),
        ours: Box::new(move || {
            let objects = clusterstack::render::render_cluster_class(&ours_dir, &ctx).map_err(|e| e.to_string())?;
            objects_as_docs("class", &objects)
        }),
    }
}

#[test]
fn corpus_stacks_build_and_render_as_helm_renders_them() {
    let test = "corpus_stacks_build_and_render_as_helm_renders_them";
    let Some(corpus) = require_corpus(test) else { return };
    let Some(helm_bin) = helm::require_helm(test) else { return };
    let work = tempfile::tempdir().expect("temp dir");
    let mut failures = Vec::new();
    let cases = stack_cases(&corpus, work.path(), &mut failures);
    let outcomes = run_all(&helm_bin, cases);
    for (what, why) in SKIPPED {
        eprintln!("{test}: SKIPPED {what}: {why}");
    }
    report(test, &outcomes);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
