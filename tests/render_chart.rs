//! `clusterstack render` for people who compare with helm: any chart, any release name, values
//! files, `--kube-version`, `--include-crds`, `--namespace`, as `helm template` takes them; a
//! single addon directory and a symlinked chart directory render; nothing renders silently empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args).output().unwrap()
}

/// The objects printed as JSON, sorted by kind and name.
fn objects(out: &Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut items = list["items"].as_array().unwrap().clone();
    items.sort_by_key(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]));
    items
}

/// A chart that shows the release name, namespace, values, Kubernetes version and a CRD.
fn chart(dir: &Path) {
    write(
        dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 1.0.0\n"),
            ("values.yaml", "a: chart\nb: chart\nc: chart\n"),
            (
                "crds/crd.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n",
            ),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-web\n  namespace: {{ .Release.Namespace }}\ndata:\n  a: {{ .Values.a }}\n  b: {{ .Values.b }}\n  c: {{ .Values.c }}\n  kube: {{ .Capabilities.KubeVersion.Version }}\n",
            ),
        ],
    );
}

#[test]
fn a_plain_chart_renders_with_helms_flags() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("web");
    chart(&chart_dir);
    write(dir.path(), &[("one.yaml", "b: one\nc: one\n"), ("two.yaml", "c: two\n")]);
    let (one, two) = (dir.path().join("one.yaml"), dir.path().join("two.yaml"));
    let args = [
        "my-release",
        chart_dir.to_str().unwrap(),
        "-n",
        "apps",
        "-f",
        one.to_str().unwrap(),
        "--values",
        two.to_str().unwrap(),
        "--kube-version",
        "v1.31.2",
        "--include-crds",
    ];
    let ours = objects(&run(&[&["render"], &args[..], &["-o", "json"]].concat()));
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert_eq!(ours[0]["metadata"]["name"], "my-release-web");
    assert_eq!(ours[0]["metadata"]["namespace"], "apps");
    assert_eq!(ours[0]["data"], serde_json::json!({"a": "chart", "b": "one", "c": "two", "kube": "v1.31.2"}));
    assert_eq!(ours[1]["kind"], "CustomResourceDefinition");

    // Without --include-crds the CRD is left out, as helm template does.
    let no_crds = objects(&run(&["render", "my-release", chart_dir.to_str().unwrap(), "-o", "json"]));
    assert_eq!(no_crds.len(), 1);
    assert_eq!(no_crds[0]["metadata"]["namespace"], "default");

    // The same as the real helm, object by object.
    let Some(helm) = helm() else { return };
    let out = Command::new(helm).arg("template").args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut theirs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    theirs.retain(|d| !d.is_null());
    theirs.sort_by_key(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]));
    assert_eq!(ours, theirs);
}

#[test]
fn a_chart_without_a_name_renders_as_release_name_and_a_symlink_renders() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("web");
    chart(&chart_dir);
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&chart_dir, &link).unwrap();
    let ours = objects(&run(&["render", link.to_str().unwrap(), "-o", "json"]));
    assert_eq!(ours[0]["metadata"]["name"], "release-name-web");
}

#[test]
fn a_single_addon_directory_renders_as_the_addon() {
    let dir = tempfile::tempdir().unwrap();
    let addon = dir.path().join("bundle/cni");
    write(
        &addon,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: cni\nversion: v1\n"),
            ("overwrite.yaml", "values: |\n  cluster: {{ .Cluster.metadata.name }}\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cni\ndata:\n  cluster: {{ .Values.cluster }}\n  extra: {{ .Values.extra | default \"none\" }}\n",
            ),
        ],
    );
    write(
        dir.path(),
        &[
            ("cluster.yaml", "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: wl-1\n"),
            ("platform.yaml", "extra: platform\n"),
        ],
    );
    let cluster = dir.path().join("cluster.yaml");
    let platform = format!("cni={}", dir.path().join("platform.yaml").display());
    let common = ["render", addon.to_str().unwrap(), "--tag", "docker-x-1-30-v1", "--addons", "--cluster"];
    let ours = objects(&run(&[&common[..], &[cluster.to_str().unwrap(), "-f", &platform, "-o", "json"]].concat()));
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0]["data"], serde_json::json!({"cluster": "wl-1", "extra": "platform"}));

    // Values for an addon the release does not have are an error, not ignored.
    let unknown = format!("cin={}", dir.path().join("platform.yaml").display());
    let out = run(&[&common[..], &[cluster.to_str().unwrap(), "-f", &unknown]].concat());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"cin\""), "{stderr}");
}

#[test]
fn nothing_rendered_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            ("empty/Chart.yaml", "apiVersion: v2\nname: empty\nversion: 1.0.0\n"),
            ("empty/templates/cm.yaml", "{{- if .Values.on }}\napiVersion: v1\nkind: ConfigMap\n{{- end }}\n"),
        ],
    );
    let out = run(&["render", dir.path().join("empty").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rendered no objects"), "{stderr}");

    // A directory with no chart at all, as addons, says so.
    std::fs::create_dir_all(dir.path().join("nothing")).unwrap();
    std::fs::write(dir.path().join("cluster.yaml"), "kind: Cluster\nmetadata:\n  name: c\n").unwrap();
    let out = run(&[
        "render",
        dir.path().join("nothing").to_str().unwrap(),
        "--tag",
        "docker-x-1-30-v1",
        "--addons",
        "--cluster",
        dir.path().join("cluster.yaml").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no addon charts"), "{stderr}");
}

/// The pinned helm (`$CLUSTERSTACK_HELM`); missing fails under `CI=true`, else skips loudly.
fn helm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CLUSTERSTACK_HELM").map(PathBuf::from).filter(|p| p.is_file()) {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("helm not found (CI=true): set CLUSTERSTACK_HELM");
    }
    eprintln!("\n*** SKIPPED the comparison with helm: set CLUSTERSTACK_HELM ***\n");
    None
}

#[test]
fn flags_a_release_does_not_take_are_refused_not_ignored() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        &[
            (
                "docker-x-1-30-cluster-class/Chart.yaml",
                "apiVersion: v2\nname: docker-x-1-30-cluster-class\nversion: v1\n",
            ),
            (
                "docker-x-1-30-cluster-class/templates/cc.yaml",
                "apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}\n",
            ),
            ("v.yaml", "a: 1\n"),
        ],
    );
    let class = dir.path().join("docker-x-1-30-cluster-class");
    let ok = objects(&run(&["render", class.to_str().unwrap(), "-o", "json"]));
    assert_eq!(ok[0]["metadata"]["name"], "docker-x-1-30-v1");
    for extra in [&["-f", dir.path().join("v.yaml").to_str().unwrap()][..], &["--include-crds"][..]] {
        let out = run(&[&["render", class.to_str().unwrap()][..], extra].concat());
        assert!(!out.status.success(), "{extra:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn documents_no_api_server_accepts_print_as_helm_prints_them_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("odd");
    write(
        &chart_dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: odd\nversion: 1.0.0\n"),
            (
                "templates/docs.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fine\n---\napiVersion: v1\nmetadata:\n  name: no-kind\n\
                 ---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: numbered\n  labels:\n    tier: 1\n",
            ),
        ],
    );
    let out = run(&["render", "rel", chart_dir.to_str().unwrap(), "-o", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let docs = objects(&out);
    let names: Vec<&str> = docs.iter().map(|d| d["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fine", "numbered", "no-kind"], "{docs:?}");
    assert_eq!(docs[1]["metadata"]["labels"]["tier"], 1);
    let file = chart_dir.join("templates/docs.yaml").display().to_string();
    for (index, reason) in [(2, "has no kind"), (3, "metadata")] {
        let warning = format!("warning: {file} document {index}: {reason}");
        assert!(stderr.contains(&warning), "no {warning:?} in:\n{stderr}");
    }
    assert!(!stderr.contains("document 1"), "{stderr}");

    // helm prints the same three documents.
    let Some(helm) = helm() else { return };
    let out = Command::new(helm).args(["template", "rel", chart_dir.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut theirs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    theirs.retain(|d| !d.is_null());
    theirs.sort_by_key(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]));
    assert_eq!(docs, theirs);
}

/// A chart whose output shows how helm prints: kinds in install order (unknown kinds last, by
/// name), hooks after everything else in that order too, `helm test` hooks and unknown hook
/// events left out, CRD files printed whole and unread (comments, `---` and all), comment-only
/// documents, `---#` separators, trailing blank lines and a template without a final newline.
fn printing_chart(dir: &Path) {
    write(
        dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: printing\nversion: 1.0.0\n"),
            (
                "crds/b.yaml",
                "# a CRD file, printed as it is\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bs.example.com\n\n\n",
            ),
            (
                "crds/a.yml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: as.example.com}  # flow\n",
            ),
            ("crds/notes.txt", "not a manifest\n"),
            ("charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
            (
                "charts/sub/crds/c.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: cs.example.com\n",
            ),
            ("charts/sub/templates/svc.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: sub   \n\n"),
            (
                "templates/all.yaml",
                "\n\n# leading comment\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n---\napiVersion: example.com/v1\nkind: Zebra\nmetadata:\n  name: z\n---# only a comment\n---\napiVersion: example.com/v1\nkind: Aardvark\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  text: |\n    ---\n    kept\n\n\n",
            ),
            (
                "templates/hooks.yaml",
                "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: hook-sa\n  annotations:\n    \"helm.sh/hook\": post-install\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook: test\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: old\n  annotations:\n    helm.sh/hook: crd-install\n",
            ),
            ("templates/ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns"),
            ("templates/NOTES.txt", "Thanks for installing {{ .Release.Name }}\n"),
            ("templates/_helpers.tpl", "{{- define \"x\" }}x{{ end }}\n"),
        ],
    );
}

#[test]
fn yaml_output_is_byte_for_byte_helms() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("printing");
    printing_chart(&chart_dir);
    let chart = chart_dir.to_str().unwrap();
    let Some(helm) = helm() else { return };
    for flags in [&["--include-crds"][..], &["--skip-tests"][..], &[][..]] {
        let args = [&["rel", chart, "-n", "apps"][..], flags].concat();
        let ours = run(&[&["render"][..], &args].concat());
        assert!(ours.status.success(), "{flags:?}: {}", String::from_utf8_lossy(&ours.stderr));
        let theirs = Command::new(&helm).arg("template").args(&args).output().unwrap();
        assert!(theirs.status.success(), "{}", String::from_utf8_lossy(&theirs.stderr));
        let (ours, theirs) = (String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout));
        assert_eq!(ours, theirs, "{flags:?}");
    }
}

#[test]
fn yaml_output_fails_where_helm_fails() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("bad");
    write(
        &chart_dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: bad\nversion: 1.0.0\n"),
            // A CRD file helm never reads: not an error.
            ("crds/broken.yaml", "kind: [\n"),
            ("templates/ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"),
            (
                "templates/broken.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\ndata:\n  a: [1, 2\n",
            ),
        ],
    );
    let out = run(&["render", "rel", chart_dir.to_str().unwrap(), "--include-crds"]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("templates/broken.yaml") && stderr.contains("not valid YAML"), "{stderr}");
    let Some(helm) = helm() else { return };
    let theirs =
        Command::new(helm).args(["template", "rel", chart_dir.to_str().unwrap(), "--include-crds"]).output().unwrap();
    assert!(!theirs.status.success());
    let stderr = String::from_utf8_lossy(&theirs.stderr);
    assert!(stderr.contains("YAML parse error on bad/templates/broken.yaml"), "{stderr}");
}

/// helm reads each document's `apiVersion`, `kind`, `metadata.name` and annotation values into
/// Go strings: a scalar is taken as its text, a sequence or mapping fails the chart (even in a
/// document it then drops as an unknown hook). Ours fails the same way, `render` and `-o json`
/// alike, with helm's words, and prints what helm prints where the scalars pass.
#[test]
fn heads_helm_cannot_read_fail_as_in_helm() {
    let dir = tempfile::tempdir().unwrap();
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n";
    let cases = [
        ("api-version", "apiVersion: [v1]\nkind: ConfigMap\nmetadata:\n  name: a\n".to_string()),
        ("kind", "apiVersion: v1\nkind: {a: 1}\nmetadata:\n  name: a\n".to_string()),
        ("name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [a]\n".to_string()),
        // The first bad annotation in key order, after a good one and before a later bad one.
        ("annotation", format!("{cm}  annotations:\n    a: fine\n    m: {{b: 1}}\n    z: [1]\n")),
        ("dropped-hook", format!("{cm}  annotations:\n    helm.sh/hook: crd-install\n    x: [1]\n")),
    ];
    let Some(helm) = helm() else { return };
    for (name, doc) in cases {
        let chart_dir = dir.path().join(name);
        write(
            &chart_dir,
            &[
                ("Chart.yaml", &format!("apiVersion: v2\nname: {name}\nversion: 1.0.0\n")),
                ("templates/ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"),
                ("templates/x.yaml", &doc),
            ],
        );
        let chart = chart_dir.to_str().unwrap();
        let theirs = Command::new(&helm).args(["template", "rel", chart]).output().unwrap();
        assert!(!theirs.status.success(), "{name}: helm renders it");
        let theirs = String::from_utf8_lossy(&theirs.stderr);
        let prefix = format!("YAML parse error on {name}/templates/x.yaml: ");
        let message = theirs.split(&prefix).nth(1).and_then(|m| m.lines().next()).unwrap_or_else(|| {
            panic!("{name}: helm's message changed: {theirs}");
        });
        for json in [false, true] {
            let args = [&["render", "rel", chart][..], if json { &["-o", "json"][..] } else { &[][..] }].concat();
            let ours = run(&args);
            assert!(!ours.status.success(), "{name} (json: {json}): ours renders it");
            assert!(ours.stdout.is_empty(), "{name}");
            let stderr = String::from_utf8_lossy(&ours.stderr);
            assert!(
                stderr.contains("templates/x.yaml") && stderr.contains(message),
                "{name}:\n ours: {stderr}\n helm: {theirs}"
            );
        }
    }

    // Scalars pass: a number or boolean where helm wants a string is read as its text (a
    // numeric hook is a hook of no known event, left out), and printed as helm prints it.
    let chart_dir = dir.path().join("scalars");
    write(
        &chart_dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: scalars\nversion: 1.0.0\n"),
            ("templates/ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ok\n"),
            (
                "templates/x.yaml",
                &format!(
                    "{cm}  annotations:\n    a: 1.5\n    b: true\n    c: null\n---\napiVersion: 1.0\nkind: ConfigMap\nmetadata:\n  name: 5\n---\n{cm}  annotations:\n    helm.sh/hook: 5\n---\n{cm}  annotations:\n    helm.sh/hook: null\n"
                ),
            ),
        ],
    );
    let chart = chart_dir.to_str().unwrap();
    let ours = run(&["render", "rel", chart]);
    assert!(ours.status.success(), "{}", String::from_utf8_lossy(&ours.stderr));
    let theirs = Command::new(&helm).args(["template", "rel", chart]).output().unwrap();
    assert!(theirs.status.success(), "{}", String::from_utf8_lossy(&theirs.stderr));
    assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout));
    let stderr = String::from_utf8_lossy(&ours.stderr);
    assert!(stderr.contains("document 2: apiVersion is 1, not a string"), "{stderr}");
}

/// An object rendered twice: helm prints both, so `render` does, with a warning naming both
/// templates; `-o json` (objects, as the operator takes them) refuses it.
#[test]
fn an_object_rendered_twice_prints_twice_as_in_helm_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let chart_dir = dir.path().join("twice");
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: same\ndata:\n  from: ";
    write(
        &chart_dir,
        &[
            ("Chart.yaml", "apiVersion: v2\nname: twice\nversion: 1.0.0\n"),
            ("templates/a.yaml", &format!("{cm}a\n")),
            ("templates/b.yaml", &format!("{cm}b\n---\n{cm}b-again\n")),
        ],
    );
    let chart = chart_dir.to_str().unwrap();
    let ours = run(&["render", "rel", chart]);
    assert!(ours.status.success(), "{}", String::from_utf8_lossy(&ours.stderr));
    let stderr = String::from_utf8_lossy(&ours.stderr);
    assert_eq!(stderr.matches("is rendered twice").count(), 2, "{stderr}");
    assert!(
        stderr.contains("/twice/templates/a.yaml and by ")
            && stderr.contains("/twice/templates/b.yaml: helm prints both"),
        "{stderr}"
    );
    let json = run(&["render", "rel", chart, "-o", "json"]);
    assert!(!json.status.success());
    assert!(String::from_utf8_lossy(&json.stderr).contains("is rendered twice"));
    let Some(helm) = helm() else { return };
    let theirs = Command::new(helm).args(["template", "rel", chart]).output().unwrap();
    assert!(theirs.status.success(), "{}", String::from_utf8_lossy(&theirs.stderr));
    assert_eq!(String::from_utf8_lossy(&ours.stdout), String::from_utf8_lossy(&theirs.stdout));
}

/// `Chart.yaml` has one reader on every path (`helm_render::chart_yaml`), as helm reads it: a
/// repeated key's last value counts for a cluster-class chart (its release is named by it), an
/// addon and a chart rendered as `helm template`, where it was refused on some paths before.
#[test]
fn a_chart_yaml_repeating_keys_reads_as_in_helm_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let chart_yaml = "apiVersion: v2\nname: docker-x-1-30-cluster-class\nversion: v1\ndescription: one\ndescription: two\nversion: v2\n";
    let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Version }}\ndata:\n  description: {{ .Chart.Description }}\n";
    write(
        dir.path(),
        &[
            ("docker-x-1-30-cluster-class/Chart.yaml", chart_yaml),
            ("docker-x-1-30-cluster-class/templates/cm.yaml", template),
            ("bundle/cni/Chart.yaml", "apiVersion: v2\nname: cni\nname: cni\nversion: v1\n"),
            ("bundle/cni/templates/cm.yaml", template),
            ("cluster.yaml", "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: wl-1\n"),
        ],
    );
    let class = dir.path().join("docker-x-1-30-cluster-class");
    let ours = objects(&run(&["render", class.to_str().unwrap(), "-o", "json"]));
    assert_eq!(ours[0]["metadata"]["name"], "docker-x-1-30-v2");
    assert_eq!(ours[0]["data"]["description"], "two");

    let addon = dir.path().join("bundle/cni");
    let cluster = dir.path().join("cluster.yaml");
    let args = ["render", addon.to_str().unwrap(), "--tag", "docker-x-1-30-v1", "--addons", "--cluster"];
    let ours = objects(&run(&[&args[..], &[cluster.to_str().unwrap(), "-o", "json"]].concat()));
    assert_eq!(ours[0]["metadata"]["name"], "cluster-addon-v1");

    let args = ["rel", class.to_str().unwrap()];
    let ours = objects(&run(&[&["render"], &args[..], &["-o", "json"]].concat()));
    let Some(helm) = helm() else { return };
    let out = Command::new(helm).arg("template").args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut theirs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).unwrap();
    theirs.retain(|d| !d.is_null());
    assert_eq!(ours, theirs);
}
