//! Chart semantics: dependencies, aliases, conditions, tags, import-values,
//! globals, `.Files`, CRDs, hooks and error locations. Expected outputs are
//! what `helm template` prints for the same charts.

use std::io::Write as _;
use std::path::Path;

use super::*;

fn write(dir: &Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }
}

/// A `.tgz` of `files` under the directory `top/`, as `helm package` makes it.
fn tgz(top: &str, files: &[(&str, &str)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast()));
    for (name, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        // Raw names, so a test can write a hostile `..` path as an attacker would.
        let path = format!("{top}/{name}");
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, text.as_bytes()).expect("append");
    }
    let gz = builder.into_inner().expect("tar");
    gz.finish().expect("gzip")
}

fn render(dir: &Path, opts: &HelmOptions) -> Vec<HelmManifest> {
    let chart = load_chart(dir).expect("loads");
    render_chart(&chart, opts).expect("renders")
}

/// The documents without the white space helm prints after them (`printed` tests that).
fn contents(manifests: &[HelmManifest]) -> Vec<String> {
    manifests.iter().map(|m| m.content.trim_end().to_string()).collect()
}

fn parent_chart(dir: &Path) {
    let sub = tgz(
        "sub",
        &[
            ("Chart.yaml", "apiVersion: v2\nname: sub\nversion: 1.2.3\n"),
            ("values.yaml", "color: blue\nsize: 1\nexports:\n  shared:\n    fromsub: yes-please\n"),
            (
                "templates/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-{{ .Chart.Name }}\ndata:\n  color: {{ .Values.color }}\n  size: {{ printf \"%v\" .Values.size | printf \"%q\" }}\n  region: {{ .Values.global.region }}\n  chart: {{ .Chart.Name }}-{{ .Chart.Version }}\n  base: {{ .Template.BasePath }}\n  helper: {{ include \"sub.helper\" . }}\n",
            ),
            ("templates/_helpers.tpl", "{{- define \"sub.helper\" -}}from-sub{{- end -}}"),
        ],
    );
    std::fs::create_dir_all(dir.join("charts")).expect("mkdir");
    let mut f = std::fs::File::create(dir.join("charts/sub-1.2.3.tgz")).expect("create");
    f.write_all(&sub).expect("write");
    write(
        dir,
        &[
            (
                "Chart.yaml",
                "apiVersion: v2\nname: parent\nversion: 0.1.0\ndependencies:\n- name: sub\n  version: 1.2.3\n  alias: cni\n  import-values: [shared]\n- name: sub\n  version: 1.2.3\n  alias: disabled\n  condition: disabled.enabled\n- name: sub\n  version: 1.2.3\n  alias: tagged\n  tags: [extra]\n",
            ),
            (
                "values.yaml",
                "global:\n  region: eu\ncni:\n  color: red\ndisabled:\n  enabled: false\ntags:\n  extra: false\n",
            ),
            (
                "templates/main.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: main\ndata:\n  imported: {{ .Values.fromsub }}\n  cni: {{ .Values.cni.color }}\n",
            ),
            ("templates/NOTES.txt", "Thanks for installing {{ .Release.Name }}"),
        ],
    );
}

#[test]
fn aliased_vendored_subchart_with_conditions_tags_globals_and_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    parent_chart(dir.path());
    let mut opts = HelmOptions::new("rel", "ns");
    opts.values = serde_json::json!({"cni": {"size": 3}});
    let manifests = render(dir.path(), &opts);
    let sources: Vec<&str> = manifests.iter().map(|m| m.source.as_str()).collect();
    // `off` is disabled by its condition, `tagged` by its tag; NOTES.txt is not a manifest.
    assert_eq!(sources, ["parent/charts/cni/templates/cm.yaml", "parent/templates/main.yaml"]);
    assert_eq!(
        manifests[0].content,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rel-cni\ndata:\n  color: red\n  size: \"3\"\n  region: eu\n  chart: cni-1.2.3\n  base: parent/charts/cni/templates\n  helper: from-sub\n\n"
    );
    assert_eq!(
        manifests[1].content,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: main\ndata:\n  imported: yes-please\n  cni: red\n\n"
    );
}

#[test]
fn a_condition_set_by_the_user_enables_the_subchart() {
    let dir = tempfile::tempdir().expect("tempdir");
    parent_chart(dir.path());
    let mut opts = HelmOptions::new("rel", "ns");
    opts.values = serde_json::json!({"disabled": {"enabled": true}, "tags": {"extra": true}});
    let sources: Vec<String> = render(dir.path(), &opts).into_iter().map(|m| m.source).collect();
    assert_eq!(sources.len(), 4, "{sources:?}");
}

#[test]
fn null_in_user_values_deletes_a_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"),
            ("values.yaml", "a: 1\nb: {p: 1, q: 2}\n"),
            ("templates/t.yaml", "a: {{ .Values.a }}\nb: {{ .Values.b }}\n"),
        ],
    );
    let mut opts = HelmOptions::new("r", "n");
    opts.values = serde_json::json!({"a": null, "b": {"q": null}});
    let out = contents(&render(dir.path(), &opts));
    assert_eq!(out, vec!["a: \nb: map[p:1]".to_string()]);
}

#[test]
fn files_get_glob_lines_and_helmignore() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"),
            (".helmignore", "*.bak\n"),
            ("files/a.txt", "line1\nline2\n"),
            ("files/b.conf", "k=v"),
            ("files/old.bak", "ignored"),
            (
                "templates/t.yaml",
                "get: {{ .Files.Get \"files/b.conf\" }}\nlines: {{ range .Files.Lines \"files/a.txt\" }}[{{ . }}]{{ end }}\nbak: [{{ .Files.Get \"files/old.bak\" }}]\nconfig:\n{{ (.Files.Glob \"files/*.txt\").AsConfig }}\n",
            ),
        ],
    );
    let out = contents(&render(dir.path(), &HelmOptions::new("r", "n")));
    assert_eq!(out, vec!["get: k=v\nlines: [line1][line2]\nbak: []\nconfig:\na.txt: |\n  line1\n  line2".to_string()]);
}

/// A directory chart's other files are read when a template first asks for them: one removed
/// after loading costs nothing until a template (or `--include-crds`) needs it, and then fails
/// the render naming it, never as an empty file. A file swapped for a link is not followed.
#[test]
fn files_of_a_directory_chart_are_read_when_asked_for() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"),
            ("files/used.txt", "used"),
            ("files/unused.txt", "unused"),
            ("crds/crd.yaml", "kind: CustomResourceDefinition\n"),
            ("templates/t.yaml", "got: {{ .Files.Get \"files/used.txt\" }}\n"),
        ],
    );
    let chart = load_chart(dir.path()).expect("loads");
    std::fs::remove_file(dir.path().join("files/unused.txt")).expect("rm");
    std::fs::remove_file(dir.path().join("crds/crd.yaml")).expect("rm");
    let out = render_chart(&chart, &HelmOptions::new("r", "n")).expect("renders");
    assert_eq!(contents(&out), vec!["got: used".to_string()]);

    let mut with_crds = HelmOptions::new("r", "n");
    with_crds.include_crds = true;
    let e = render_chart(&chart, &with_crds).expect_err("the CRD file is gone").to_string();
    assert!(e.contains("crds/crd.yaml") && e.contains("cannot read"), "{e}");

    // Read once, then kept: the render after the file is gone still has it.
    std::fs::remove_file(dir.path().join("files/used.txt")).expect("rm");
    let again = render_chart(&chart, &HelmOptions::new("r", "n")).expect("renders from what was read");
    assert_eq!(contents(&again), vec!["got: used".to_string()]);

    write(dir.path(), &[("files/used.txt", "used"), ("secret.txt", "outside")]);
    let chart = load_chart(dir.path()).expect("loads");
    std::fs::remove_file(dir.path().join("files/used.txt")).expect("rm");
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), dir.path().join("files/used.txt")).expect("link");
    let e = render_chart(&chart, &HelmOptions::new("r", "n")).expect_err("a link is not followed").to_string();
    assert!(e.contains("files/used.txt") && e.contains("cannot read"), "{e}");
    assert!(!e.contains("outside"), "{e}");
}

/// helm checks the root chart's `kubeVersion` against the version's numbers (a provider's
/// suffix passes), names the version as given, and checks no subchart's.
#[test]
fn the_root_charts_kube_version_is_checked_as_helm_checks_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\nkubeVersion: \">= 1.21.0\"\n"),
            ("templates/t.yaml", "v: {{ .Capabilities.KubeVersion.Version }}\n"),
            ("charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 1.0.0\nkubeVersion: \">= 99.0.0\"\n"),
        ],
    );
    let chart = load_chart(dir.path()).expect("loads");
    let mut opts = HelmOptions::new("r", "n");
    opts.kube_version = Some("v1.29.4-gke.100".into());
    assert_eq!(contents(&render_chart(&chart, &opts).expect("renders")), vec!["v: v1.29.4-gke.100".to_string()]);
    opts.kube_version = Some("v1.20.15-gke.1".into());
    let e = render_chart(&chart, &opts).expect_err("too old").to_string();
    assert!(
        e.ends_with("chart requires kubeVersion: >= 1.21.0 which is incompatible with Kubernetes v1.20.15-gke.1"),
        "{e}"
    );
    write(dir.path(), &[("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\nkubeVersion: not a constraint\n")]);
    let e = render_chart(&load_chart(dir.path()).expect("loads"), &HelmOptions::new("r", "n")).expect_err("unparsable");
    assert!(
        e.to_string().contains("kubeVersion: not a constraint which is incompatible with Kubernetes v1.36.0"),
        "{e}"
    );
}

/// Helm 2's `requirements.yaml` is read into the metadata as helm reads it (conditions apply,
/// missing charts are all named), and an apiVersion v1 chart keeps it in `.Files`; checked
/// with helm v4.2.3 (loki-stack is such a chart).
#[test]
fn requirements_yaml_declares_dependencies() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v1\nname: c\nversion: 1.0.0\n"),
            ("requirements.yaml", "dependencies:\n- name: sub\n  version: 0.1.0\n  condition: sub.enabled\n"),
            ("values.yaml", "sub:\n  enabled: false\n"),
            ("charts/sub/Chart.yaml", "apiVersion: v1\nname: sub\nversion: 0.1.0\n"),
            ("charts/sub/templates/cm.yaml", "kind: ConfigMap\nmetadata:\n  name: sub\n"),
            ("templates/t.yaml", "r: {{ .Files.Get \"requirements.yaml\" | quote }}\n"),
        ],
    );
    let out = contents(&render(dir.path(), &HelmOptions::new("r", "n")));
    let want = "r: \"dependencies:\\n- name: sub\\n  version: 0.1.0\\n  condition: sub.enabled\\n\"";
    assert_eq!(out, vec![want.to_string()], "the condition disables the subchart; v1 keeps the file");
    write(
        dir.path(),
        &[(
            "requirements.yaml",
            "dependencies:\n- name: sub\n  version: 0.1.0\n- name: a\n  version: 1\n- name: b\n  version: 1\n",
        )],
    );
    let chart = load_chart(dir.path()).expect("loads");
    let e = render_chart(&chart, &HelmOptions::new("r", "n")).expect_err("missing").to_string();
    assert!(e.ends_with("found in Chart.yaml, but missing in charts/ directory: a, b"), "{e}");
}

#[test]
fn capabilities_release_and_chart_objects() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\nappVersion: \"2.1\"\n"),
            (
                "templates/t.yaml",
                "kv: {{ .Capabilities.KubeVersion }} {{ .Capabilities.KubeVersion.Minor }}\nhas: {{ .Capabilities.APIVersions.Has \"apps/v1\" }} {{ .Capabilities.APIVersions.Has \"x.io/v1\" }} {{ len .Capabilities.APIVersions }} {{ range .Capabilities.APIVersions }}{{ if eq . \"x.io/v1\" }}{{ . }}{{ end }}{{ end }}\nrel: {{ .Release }}\nchart: {{ .Chart.Name }} {{ .Chart.AppVersion }} {{ .Chart.Home }}|\n",
            ),
        ],
    );
    let mut opts = HelmOptions::new("r", "n");
    opts.kube_version = Some("1.30.2".into());
    opts.api_versions = vec!["x.io/v1".into()];
    let out = contents(&render(dir.path(), &opts));
    assert_eq!(
        out[0],
        "kv: v1.30.2 30\nhas: true true 56 x.io/v1\nrel: map[IsInstall:true IsUpgrade:false Name:r Namespace:n Revision:1 Service:Helm]\nchart: c 2.1 |"
    );
}

#[test]
fn crds_hooks_and_document_splitting() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"),
            (
                "crds/crd.yaml",
                "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: xs.example.com\n",
            ),
            (
                "templates/t.yaml",
                "---\n# only a comment\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: test\n  annotations:\n    helm.sh/hook: test\n---   \napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
            ),
        ],
    );
    let mut opts = HelmOptions::new("r", "n");
    let without = render(dir.path(), &opts);
    assert_eq!(without.len(), 3, "{without:?}");
    assert_eq!(without[1].hook.as_deref(), Some("test"));
    opts.include_crds = true;
    let with = render(dir.path(), &opts);
    assert_eq!(with.len(), 4);
    assert_eq!(with[0].source, "c/crds/crd.yaml");
}

#[test]
fn a_parent_define_overrides_a_subchart_define() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: p\nversion: 1.0.0\n"),
            ("templates/_h.tpl", "{{ define \"name\" }}parent{{ end }}"),
            ("charts/s/Chart.yaml", "apiVersion: v2\nname: s\nversion: 1.0.0\n"),
            ("charts/s/templates/_h.tpl", "{{ define \"name\" }}sub{{ end }}"),
            ("charts/s/templates/t.yaml", "n: {{ template \"name\" }}\n"),
        ],
    );
    assert_eq!(contents(&render(dir.path(), &HelmOptions::new("r", "n"))), vec!["n: parent".to_string()]);
}

#[test]
fn errors_name_the_template_file_and_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"),
            ("templates/t.yaml", "a: 1\nb: {{ .Values.image.tag }}\n"),
        ],
    );
    let chart = load_chart(dir.path()).expect("loads");
    let e = render_chart(&chart, &HelmOptions::new("r", "n")).expect_err("fails");
    match e {
        HelmError::Template { file, line, message } => {
            assert!(file.ends_with("/templates/t.yaml"), "{file}");
            assert_eq!(line, 2);
            assert!(message.contains("nil pointer evaluating interface {}.tag"), "{message}");
        }
        other => panic!("unexpected {other}"),
    }
    write(dir.path(), &[("templates/t.yaml", "a: 1\n\nb: {{ required \"image.tag is required\" .Values.x }}\n")]);
    let chart = load_chart(dir.path()).expect("loads");
    let e = render_chart(&chart, &HelmOptions::new("r", "n")).expect_err("fails").to_string();
    assert!(
        e.ends_with("/templates/t.yaml:3: execution error at (c/templates/t.yaml:3:6): image.tag is required"),
        "{e}"
    );
}

#[test]
fn a_missing_dependency_and_links_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\ndependencies:\n- name: gone\n  version: 1.0.0\n")],
    );
    let chart = load_chart(dir.path()).expect("loads");
    let e = render_chart(&chart, &HelmOptions::new("r", "n")).expect_err("fails").to_string();
    assert!(e.contains("missing in charts/ directory: gone"), "{e}");
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).expect("symlink");
        let e = load_chart(dir.path()).expect_err("refused").to_string();
        assert!(e.contains("symbolic link"), "{e}");
    }
}

#[test]
fn archive_paths_may_not_escape() {
    let data = tgz("c", &[("Chart.yaml", "apiVersion: v2\nname: c\nversion: 1.0.0\n"), ("../evil", "x")]);
    let e = load::load_archive("c.tgz", &data).expect_err("refused").to_string();
    assert!(e.contains("escapes"), "{e}");
}

#[test]
fn split_manifests_like_helm() {
    // helm v4.2.3 prints the third document as `---\nc: 3`: the first separator's `\s*` takes the
    // blank line, so the second `---` follows no newline and stays in the document.
    assert_eq!(split_manifests("a: 1\n---\nb: 2\n--- \n\n---\nc: 3"), vec!["a: 1", "b: 2", "---\nc: 3"]);
    assert_eq!(split_manifests("a: 1\n---# comment\nb: 2\n---text: 3"), vec!["a: 1", "# comment\nb: 2", "text: 3"]);
    assert_eq!(split_manifests("---\na: 1"), vec!["a: 1"]);
}

#[test]
fn documents_split_where_helms_expression_matches() {
    // helm's `SplitManifests` expression, which `manifest_parts` matches by hand: compared on
    // every string of up to 8 characters of separators, white space and text.
    let sep = regex::Regex::new(r"(?:^|[\t\n\x0C\r ]*\n)---[\t\n\x0C\r ]*").expect("helm's expression");
    let mut current = vec![String::new()];
    let mut split = 0;
    for _ in 0..=8 {
        let mut next = Vec::new();
        for text in &current {
            let trimmed = text.trim_start();
            let want: Vec<&str> = sep.split(trimmed).filter(|d| !d.trim().is_empty()).map(str::trim_start).collect();
            assert_eq!(manifest_parts(text), want, "{text:?}");
            split += usize::from(want.len() > 1);
            for c in ['-', '\n', ' ', 'x', '\r'] {
                next.push(format!("{text}{c}"));
            }
        }
        current = next;
    }
    assert!(split > 500, "{split}");
}

#[test]
fn comments_in_chart_yaml_and_values_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        &[
            ("Chart.yaml", "# A chart\napiVersion: v2 # the v2 format\nname: c\n# the version\nversion: 1.0.0\n"),
            ("values.yaml", "# defaults\nport: 80 # the port\nlist:\n  # first\n  - a\n"),
            ("templates/t.yaml", "port: {{ .Values.port }}\nfirst: {{ index .Values.list 0 }}\n"),
        ],
    );
    assert_eq!(contents(&render(dir.path(), &HelmOptions::new("r", "n"))), vec!["port: 80\nfirst: a".to_string()]);
}
