//! Helm rendering: ours against `helm template`, both run the same way, as one process per
//! render, on one large generated chart (a parent with an aliased, vendored `.tgz` subchart of
//! 120 templates and a deep helper library, shaped like a big CNI chart). Prints the median wall
//! time of N rounds and the peak memory of both, and the ratios against the goals (≤ 0.25×
//! helm's wall time, ≤ 0.5× its peak memory). Our side's process is this example started again
//! (`--ours-once`): load, render and print the manifests to a file, as helm prints its output;
//! the time of its render alone (in process, without the process start) is printed after, on a
//! line of its own, and no ratio is taken of it.
//!
//! `cargo run --release --example bench_helm [-- ROUNDS]`. Needs helm (`.ci/install-helm`, or
//! `CLUSTERSTACK_HELM`). Each process's peak memory is sampled from `/proc/PID/status`
//! (`VmHWM`, the high-water mark) while it runs (helm's also from GNU time when present); ours
//! also reports its own at exit.

#[path = "../crates/helm/tests/support/helm.rs"]
mod helm;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use helm_render::{HelmOptions, load_chart, render_chart};

const SUB_TEMPLATES: usize = 120;
const PARENT_TEMPLATES: usize = 10;
const HELPER_DEPTH: usize = 12;
const KUBE_VERSION: &str = "v1.30.4";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--ours-child") {
        return ours_child(Path::new(&args[2]), args[3].parse()?);
    }
    if args.get(1).map(String::as_str) == Some("--ours-once") {
        return ours_once(Path::new(&args[2]));
    }
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let Some(helm_bin) = helm::find_helm() else {
        eprintln!("bench_helm: helm not found; {}", helm::INSTALL_HINT);
        std::process::exit(2);
    };

    let tmp = tempfile::tempdir()?;
    let chart = generate(tmp.path())?;
    let mut args = helm::TemplateArgs::new("bench", "kube-system");
    args.kube_version = Some(KUBE_VERSION.to_string());

    // helm: N processes
    let mut helm_times = Vec::new();
    let mut helm_peak_kib = 0u64;
    let mut helm_objects = 0;
    for _ in 0..rounds {
        let (elapsed, peak, out) = run_process(helm_command(&helm_bin, &chart, &args), &chart)?;
        helm_times.push(elapsed);
        helm_peak_kib = helm_peak_kib.max(peak);
        helm_objects = helm::split_helm_output(&out).len();
    }
    if let Some(peak) = gnu_time_peak(&helm_bin, &chart, &args) {
        helm_peak_kib = helm_peak_kib.max(peak);
    }

    // ours: N processes, each loading, rendering and printing once, timed as helm's are
    let mut ours_times = Vec::new();
    let mut ours_peak_kib = 0u64;
    let mut ours_objects = 0;
    for _ in 0..rounds {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.arg("--ours-once").arg(&chart);
        let (elapsed, peak, out) = run_process(cmd, &chart)?;
        ours_times.push(elapsed);
        ours_peak_kib = ours_peak_kib.max(peak);
        ours_objects = helm::split_helm_output(&out).len();
    }

    // ours, for reference: the render alone, N times in one fresh process (no process start)
    let out = Command::new(std::env::current_exe()?)
        .arg("--ours-child")
        .arg(&chart)
        .arg(rounds.to_string())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("our renderer failed: {}", String::from_utf8_lossy(&out.stdout)).into());
    }
    let report = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> Option<String> {
        report.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let in_process: Vec<Duration> = field("times_us:")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .map(Duration::from_micros)
        .collect();
    let in_process_kib: u64 = field("vmhwm_kib:").and_then(|v| v.parse().ok()).unwrap_or(0);

    let (h, o) = (median(&helm_times), median(&ours_times));
    let wall_ratio = o.as_secs_f64() / h.as_secs_f64();
    let mem_ratio = ours_peak_kib as f64 / helm_peak_kib as f64;
    println!(
        "chart: parent with {PARENT_TEMPLATES} templates + vendored subchart (.tgz, aliased) with {SUB_TEMPLATES} templates, helper depth {HELPER_DEPTH}"
    );
    println!("documents: helm {helm_objects}, ours {ours_objects}");
    println!("rounds: {rounds} (median); both sides run as one process per render, output to a file");
    println!("helm template (process): wall {:>8.1} ms, peak RSS {:>7.1} MiB", ms(h), mib(helm_peak_kib));
    println!("ours (process):          wall {:>8.1} ms, peak RSS {:>7.1} MiB", ms(o), mib(ours_peak_kib));
    println!(
        "ratio wall: {wall_ratio:.3}x (goal <= 0.25x: {}); ratio memory: {mem_ratio:.3}x (goal <= 0.5x: {})",
        met(wall_ratio <= 0.25),
        met(mem_ratio <= 0.5)
    );
    println!(
        "ours in-process, for reference (load + render only, {rounds} renders in one process, no ratio): wall {:>8.1} ms, peak RSS {:>7.1} MiB",
        ms(median(&in_process)),
        mib(in_process_kib)
    );
    Ok(())
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn median(times: &[Duration]) -> Duration {
    let mut t = times.to_vec();
    t.sort();
    t.get(t.len() / 2).copied().unwrap_or_default()
}

/// Our side, in a fresh process: load + render `rounds` times; prints times and `VmHWM`.
fn ours_child(chart: &Path, rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = HelmOptions::new("bench", "kube-system");
    opts.kube_version = Some(KUBE_VERSION.to_string());
    let mut times = String::new();
    let mut objects = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        let loaded = load_chart(chart)?;
        let manifests = render_chart(&loaded, &opts)?;
        let _ = write!(times, "{} ", start.elapsed().as_micros());
        objects = manifests.len();
    }
    println!("times_us: {times}\nvmhwm_kib: {}\nobjects: {objects}", vm_hwm_kib()?);
    Ok(())
}

/// Our side as one process: load, render and print the manifests as `helm template` does.
fn ours_once(chart: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = HelmOptions::new("bench", "kube-system");
    opts.kube_version = Some(KUBE_VERSION.to_string());
    let manifests = render_chart(&load_chart(chart)?, &opts)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for m in &manifests {
        std::io::Write::write_all(&mut out, format!("---\n# Source: {}\n{}\n", m.source, m.content).as_bytes())?;
    }
    std::io::Write::flush(&mut out)?;
    eprintln!("vmhwm_kib: {}", vm_hwm_kib()?);
    Ok(())
}

/// This process's `VmHWM` (KiB) as `/proc/self/status` gives it.
fn vm_hwm_kib() -> std::io::Result<String> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    Ok(status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or("0")
        .to_string())
}

fn helm_command(helm_bin: &Path, chart: &Path, args: &helm::TemplateArgs) -> Command {
    let mut cmd = Command::new(helm_bin);
    cmd.arg("template").arg(&args.release).arg(chart).arg("--namespace").arg(&args.namespace);
    if let Some(v) = &args.kube_version {
        cmd.arg("--kube-version").arg(v);
    }
    helm::isolate(&mut cmd);
    cmd
}

/// One render as a process (helm's or ours), its stdout to a file: wall time from spawn to
/// exit, peak RSS (KiB, sampled) and its output.
fn run_process(mut cmd: Command, chart: &Path) -> Result<(Duration, u64, String), Box<dyn std::error::Error>> {
    let out_path = chart.with_extension("out");
    cmd.stdout(std::fs::File::create(&out_path)?).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak = 0u64;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if let Ok(text) = std::fs::read_to_string(&status_path)
            && let Some(kib) = text
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let elapsed = start.elapsed();
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut err)?;
    }
    if !status.success() {
        return Err(format!("{cmd:?} failed: {err}").into());
    }
    // A short process can end between two samples: ours reports its own high-water mark.
    if let Some(kib) = err.lines().find_map(|l| l.strip_prefix("vmhwm_kib:")?.trim().parse::<u64>().ok()) {
        peak = peak.max(kib);
    }
    Ok((elapsed, peak, std::fs::read_to_string(&out_path)?))
}

/// Peak RSS of one helm run as GNU time reports it (`%M`, KiB), when `/usr/bin/time` is there.
fn gnu_time_peak(helm_bin: &Path, chart: &Path, args: &helm::TemplateArgs) -> Option<u64> {
    let mut cmd = Command::new("/usr/bin/time");
    cmd.args(["-f", "%M"]).arg(helm_bin).arg("template").arg(&args.release).arg(chart);
    cmd.arg("--namespace").arg(&args.namespace);
    if let Some(v) = &args.kube_version {
        cmd.arg("--kube-version").arg(v);
    }
    helm::isolate(&mut cmd);
    let out = cmd.stdout(Stdio::null()).output().ok()?;
    String::from_utf8_lossy(&out.stderr).lines().last()?.trim().parse().ok()
}

// ---------------------------------------------------------------------------------------------
// The generated chart

fn write(path: &Path, text: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

/// Writes the parent chart (with the subchart packed into `charts/`) under `root`.
fn generate(root: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let sub = root.join("src/engine");
    write(&sub.join("Chart.yaml"), "apiVersion: v2\nname: engine\nversion: 1.16.5\nappVersion: 1.16.5\n")?;
    write(&sub.join("values.yaml"), &sub_values())?;
    write(&sub.join("templates/_helpers.tpl"), &helpers())?;
    for i in 0..SUB_TEMPLATES {
        write(&sub.join(format!("templates/component-{i:03}.yaml")), &sub_template(i))?;
    }
    write(&sub.join("files/config.txt"), &"key = value\n".repeat(200))?;

    let parent = root.join("platform");
    write(
        &parent.join("Chart.yaml"),
        "apiVersion: v2\nname: platform\nversion: 2.0.0\ndependencies:\n  - name: engine\n    version: 1.16.5\n    alias: cni\n    condition: cni.enabled\n",
    )?;
    write(
        &parent.join("values.yaml"),
        "global:\n  clusterName: bench\n  registry: quay.io/example\ncni:\n  enabled: true\n  debug: true\n",
    )?;
    for i in 0..PARENT_TEMPLATES {
        write(
            &parent.join(format!("templates/cm-{i}.yaml")),
            &format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ .Release.Name }}}}-parent-{i}\ndata:\n  global: {{{{ .Values.global | toJson | quote }}}}\n  cni: {{{{ .Values.cni | toYaml | sha256sum }}}}\n"
            ),
        )?;
    }
    std::fs::create_dir_all(parent.join("charts"))?;
    helm::pack_chart(&sub, "engine", &parent.join("charts/engine-1.16.5.tgz"))?;
    Ok(parent)
}

fn sub_values() -> String {
    let mut v = String::from(
        "image:\n  repository: engine\n  tag: \"\"\n  digest: sha256:abc\n  useDigest: true\nresources:\n  limits: {cpu: \"1\", memory: 1Gi}\n  requests: {cpu: 100m, memory: 128Mi}\ntolerations:\n  - operator: Exists\ndebug: false\nfeatures:\n",
    );
    for i in 0..200 {
        let _ = writeln!(v, "  feature{i}:\n    enabled: {}\n    level: {i}\n    name: \"feature-{i}\"", i % 3 != 0);
    }
    v.push_str("extraEnv:\n");
    for i in 0..20 {
        let _ = writeln!(v, "  - name: ENV_{i}\n    value: \"value-{i}\"");
    }
    v
}

/// A helper library: names, labels, images, capability checks and a chain of
/// `HELPER_DEPTH` helpers that include each other.
fn helpers() -> String {
    let mut h = String::from(
        r#"{{- define "engine.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "engine.fullname" -}}
{{- printf "%s-%s" .Release.Name (include "engine.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- define "engine.labels" -}}
app.kubernetes.io/name: {{ include "engine.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}
{{- define "engine.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- $registry := .Values.global.registry | default "docker.io" -}}
{{- printf "%s/%s:%s" $registry .Values.image.repository $tag -}}
{{- if and .Values.image.useDigest .Values.image.digest }}@{{ .Values.image.digest }}{{ end -}}
{{- end -}}
{{- define "engine.pdbApi" -}}
{{- if semverCompare ">=1.21-0" .Capabilities.KubeVersion.Version -}}policy/v1{{- else -}}policy/v1beta1{{- end -}}
{{- end -}}
"#,
    );
    for d in 0..HELPER_DEPTH {
        let next = if d + 1 < HELPER_DEPTH {
            format!("{{{{ include \"engine.chain{}\" . }}}}", d + 1)
        } else {
            "{{ .root.Values.debug }}".to_string()
        };
        let _ = writeln!(
            h,
            "{{{{- define \"engine.chain{d}\" -}}}}\n{{{{- if .root.Values.features.feature{d}.enabled -}}}}{d}:{{{{ .root.Values.features.feature{d}.name | upper }}}}/{next}{{{{- else -}}}}-{next}{{{{- end -}}}}\n{{{{- end -}}}}"
        );
    }
    h
}

fn sub_template(i: usize) -> String {
    let component = format!("component-{i:03}");
    let mut t = format!(
        r#"{{{{- $ctx := dict "root" . "component" "{component}" }}}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{{{ include "engine.fullname" . }}}}-{component}
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    {{{{- include "engine.labels" $ctx | nindent 4 }}}}
  annotations:
    chain: {{{{ include "engine.chain0" $ctx | quote }}}}
    checksum/config: {{{{ .Files.Get "files/config.txt" | sha256sum }}}}
spec:
  replicas: {{{{ add1 (mod {i} 3) }}}}
  selector:
    matchLabels:
      {{{{- include "engine.labels" $ctx | nindent 6 }}}}
  template:
    metadata:
      labels:
        {{{{- include "engine.labels" $ctx | nindent 8 }}}}
    spec:
      tolerations:
        {{{{- toYaml .Values.tolerations | nindent 8 }}}}
      containers:
        - name: main
          image: {{{{ include "engine.image" . | quote }}}}
          args:
            - --cluster={{{{ .Values.global.clusterName }}}}
            {{{{- if .Values.debug }}}}
            - --debug
            {{{{- end }}}}
            {{{{- range $name, $f := .Values.features }}}}
            {{{{- if $f.enabled }}}}
            - --enable-{{{{ $name }}}}={{{{ $f.level }}}}
            {{{{- end }}}}
            {{{{- end }}}}
          env:
            {{{{- toYaml .Values.extraEnv | nindent 12 }}}}
          resources:
            {{{{- toYaml .Values.resources | nindent 12 }}}}
---
apiVersion: {{{{ include "engine.pdbApi" . }}}}
kind: PodDisruptionBudget
metadata:
  name: {{{{ include "engine.fullname" . }}}}-{component}
spec:
  maxUnavailable: 1
"#
    );
    if i.is_multiple_of(4) {
        t.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{{{ include \"engine.fullname\" . }}}}-{component}-config\ndata:\n  rendered: {{{{ tpl \"{{{{ .Release.Name }}}}-{{{{ .Chart.Version }}}}\" . | quote }}}}\n  features: {{{{ .Values.features | toJson | b64enc | quote }}}}\n"
        ));
    }
    t
}
