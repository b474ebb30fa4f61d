//! Helm rendering on real charts: the corpus's largest charts (kube-prometheus-stack and
//! ingress-nginx with their values files, argo-workflows) and the whole corpus, rendered by the
//! `clusterstack render` binary and by `helm template`, both as processes, side by side in one
//! run. Prints the median wall time of N rounds, the highest peak RSS (the kernel's `ru_maxrss` of
//! each child, from `wait4`: of the child or of any process it waited for, whichever is larger)
//! and the ratios against the goals (≤ 0.25× helm's wall time and ≤ 0.4× its memory per large
//! chart, ≤ 0.2× on the whole corpus); the corpus also without the charts that generate RSA
//! keys, whose time is key generation's.
//!
//! kube-prometheus-stack also goes the operator's way, as an addon bundle built into a temp dir
//! (the corpus chart with an `overwrite.yaml` that labels every object with the Cluster's name):
//! - `render BUNDLE --addons --cluster C` (the command line's render of a workload cluster's
//!   addons, in process);
//! - the operator's render of one Cluster's addons: this example run again as a child that calls
//!   `render::worker::render_addons_isolated` with the sandbox on, as the ClusterAddon controller
//!   does (the render worker, a second process, renders; its reply is read back into objects);
//! - 100 Clusters of one release rendered by that path through the controller's render cache,
//!   once with values naming each Cluster (100 distinct values: 100 renders) and once with the
//!   same values for all (once per distinct values: the first two Clusters render at once, so
//!   two renders, 98 reused), against helm run once per Cluster, two at a time as the operator
//!   runs two render workers.
//!
//! helm gets the same chart with the rendered values (`helm template cluster-addon DIR
//! --namespace kube-system --include-crds --kube-version V -f values`, as the Go operator runs it).
//!
//! `cargo build --release && cargo run --release --example bench_helm_real [-- ROUNDS]`.
//! Needs helm (`CLUSTERSTACK_HELM`) and the corpus (`CLUSTERSTACK_HELM_CORPUS`, default
//! `<repo>/../shared/helm-corpus`); ours is `target/release/clusterstack` (or
//! `CLUSTERSTACK_BIN`).

#[path = "helm_real/operator.rs"]
mod operator;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One run: wall time and peak RSS in MiB, or why it failed.
type Run = Result<(Duration, f64), String>;

/// Prints a row: a name, ours and helm's wall time and peak RSS.
type Row<'a> = &'a dyn Fn(&str, (Duration, f64), (Duration, f64));

fn measure(command: Command) -> Run {
    let start = Instant::now();
    let child = spawn(command)?;
    finish(child, start)
}

fn spawn(mut command: Command) -> Result<std::process::Child, String> {
    command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| e.to_string())
}

/// Waits for a child started at `start`: its wall time and peak RSS.
fn finish(mut child: std::process::Child, start: Instant) -> Run {
    // Read stderr on the side so a chatty child never blocks on a full pipe while we wait.
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        err
    });
    let (status, peak_kib) = wait_rusage(child.id())?;
    let wall = start.elapsed();
    let err = reader.join().unwrap_or_default();
    // Ours exits non-zero where helm prints nothing (every template empty or a test hook): the
    // render was done all the same, so it is timed.
    if status != 0 && !err.contains("rendered no objects") {
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    Ok((wall, peak_kib as f64 / 1024.0))
}

/// Waits for child `pid` with `wait4`: its exit code (or 128 + signal) and its peak RSS in KiB,
/// as the kernel counted it over the child's whole life (`ru_maxrss`), not sampled.
fn wait_rusage(pid: u32) -> Result<(i32, i64), String> {
    let pid = libc::pid_t::try_from(pid).map_err(|e| e.to_string())?;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of the plain C struct, which `wait4` fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes for the duration of the call.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4: {e}"));
        }
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
    Ok((code, usage.ru_maxrss))
}

/// The arguments of a corpus chart, as the corpus README says helm renders it.
fn chart_args(charts: &Path, name: &str) -> Vec<String> {
    let dir = charts.join(name).display().to_string();
    let values = charts.join(format!("{name}.values.yaml"));
    if values.is_file() {
        ["cluster-addon", &dir, "--namespace", "kube-system", "--include-crds", "--skip-tests", "-f"]
            .iter()
            .map(|s| s.to_string())
            .chain([values.display().to_string()])
            .collect()
    } else {
        ["corpus-chart-1-30", &dir, "--namespace", "corpus-ns", "--skip-tests"].iter().map(|s| s.to_string()).collect()
    }
}

/// Wall times summed and the highest peak, ours and helm's, over some charts.
#[derive(Default)]
struct Sums {
    charts: usize,
    ours: (Duration, f64),
    helm: (Duration, f64),
}

impl Sums {
    fn add(&mut self, o: (Duration, f64), h: (Duration, f64)) {
        self.charts += 1;
        self.ours = (self.ours.0 + o.0, self.ours.1.max(o.1));
        self.helm = (self.helm.0 + h.0, self.helm.1.max(h.1));
    }
}

/// Whether a chart's templates (its subcharts' included) call Sprig's RSA key generation.
fn calls_key_generation(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else { return false };
    entries.flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            return calls_key_generation(&path);
        }
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        ["genPrivateKey", "genCA", "genSelfSignedCert", "genSignedCert"].iter().any(|f| text.contains(f))
    })
}

fn median(mut runs: Vec<(Duration, f64)>) -> (Duration, f64) {
    runs.sort_by_key(|r| r.0);
    let wall = runs[runs.len() / 2].0;
    let peak = runs.iter().map(|r| r.1).fold(0.0, f64::max);
    (wall, peak)
}

/// `n` rounds of ours and helm, interleaved so that the machine's load falls on both alike.
fn rounds(n: usize, ours: impl Fn() -> Command, helm: impl Fn() -> Command) -> (Run, Run) {
    let (mut o, mut h) = (Ok(Vec::new()), Ok(Vec::new()));
    for _ in 0..n {
        for (runs, make) in [(&mut o, &ours as &dyn Fn() -> Command), (&mut h, &helm)] {
            if let Ok(list) = runs {
                match measure(make()) {
                    Ok(r) => list.push(r),
                    Err(e) => *runs = Err(e),
                }
            }
        }
    }
    (o.map(median), h.map(median))
}

/// Runs `commands` `parallel` at a time: the wall time of all, the highest peak RSS of any.
fn measure_parallel(commands: Vec<Command>, parallel: usize) -> Run {
    let start = Instant::now();
    let mut peak: f64 = 0.0;
    let mut commands = commands.into_iter().peekable();
    while commands.peek().is_some() {
        let batch: Vec<_> = commands.by_ref().take(parallel).map(|c| (Instant::now(), spawn(c))).collect();
        for (started, child) in batch {
            peak = peak.max(finish(child?, started)?.1);
        }
    }
    Ok((start.elapsed(), peak))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(operator::CHILD) {
        return operator::child(&args[2..]);
    }
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let helm = std::env::var_os("CLUSTERSTACK_HELM").map(PathBuf::from).ok_or("set CLUSTERSTACK_HELM")?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let corpus = std::env::var_os("CLUSTERSTACK_HELM_CORPUS").map(PathBuf::from).unwrap_or_else(|| {
        let near = root.join("../shared/helm-corpus");
        if near.is_dir() { near } else { root.join("../../shared/helm-corpus") }
    });
    let ours = match std::env::var_os("CLUSTERSTACK_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe()?.parent().and_then(Path::parent).ok_or("no target dir")?.join("clusterstack"),
    };
    let charts = corpus.join("charts");
    println!("bench_helm_real: {n} rounds, median wall time, peak RSS; ours {}", ours.display());
    println!(
        "{:<28} {:>10} {:>10} {:>7} {:>9} {:>9} {:>7}",
        "chart", "ours ms", "helm ms", "ratio", "ours MiB", "helm MiB", "ratio"
    );
    let row = |name: &str, o: (Duration, f64), h: (Duration, f64)| {
        println!(
            "{name:<28} {:>10.1} {:>10.1} {:>6.2}× {:>9.1} {:>9.1} {:>6.2}×",
            o.0.as_secs_f64() * 1e3,
            h.0.as_secs_f64() * 1e3,
            o.0.as_secs_f64() / h.0.as_secs_f64(),
            o.1,
            h.1,
            o.1 / h.1
        )
    };
    let ours_cmd = |args: &[String]| {
        let mut c = Command::new(&ours);
        c.arg("render").args(args);
        c
    };
    let helm_cmd = |args: &[String]| {
        let mut c = Command::new(&helm);
        c.arg("template").args(args);
        c
    };
    for name in ["kube-prometheus-stack", "argo-workflows", "ingress-nginx"] {
        let args = chart_args(&charts, name);
        match rounds(n, || ours_cmd(&args), || helm_cmd(&args)) {
            (Ok(o), Ok(h)) => row(name, o, h),
            (o, h) => println!("{name:<28} ours: {:?} helm: {:?}", o.err(), h.err()),
        }
    }
    operator_path(&Paths { ours: &ours, helm: &helm, charts: &charts }, n, &row)?;
    // The whole corpus: every chart once per round, wall times summed, the highest peak.
    let mut names: Vec<String> = std::fs::read_dir(&charts)?
        .flatten()
        .filter(|e| e.path().join("Chart.yaml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    // The charts that generate RSA keys (`genPrivateKey`, `genCA`, `genSelfSignedCert`,
    // `genSignedCert`) are summed apart too: key generation, not rendering, dominates them.
    let keys = |name: &str| calls_key_generation(&charts.join(name));
    let (mut all, mut no_keys) = (Sums::default(), Sums::default());
    let mut failed = Vec::new();
    for name in &names {
        let args = chart_args(&charts, name);
        match rounds(n, || ours_cmd(&args), || helm_cmd(&args)) {
            (Ok(o), Ok(h)) => {
                all.add(o, h);
                if !keys(name) {
                    no_keys.add(o, h);
                }
            }
            (o, _) => failed.push(format!("{name}: {}", o.err().unwrap_or_else(|| "helm failed".into()))),
        }
    }
    row(&format!("whole corpus ({} charts)", all.charts), all.ours, all.helm);
    row(&format!("  without RSA keys ({})", no_keys.charts), no_keys.ours, no_keys.helm);
    for f in &failed {
        println!("  left out: {f}");
    }
    println!("goals: ≤ 0.25× wall and ≤ 0.4× memory per large chart; ≤ 0.2× on the whole corpus");
    Ok(())
}

struct Paths<'a> {
    ours: &'a Path,
    helm: &'a Path,
    charts: &'a Path,
}

/// kube-prometheus-stack the operator's way (see the top of the file): `render --addons`, the
/// controller's render of one Cluster, and of 100 Clusters with and without values per Cluster.
fn operator_path(p: &Paths, n: usize, row: Row<'_>) -> Result<(), Box<dyn std::error::Error>> {
    let named = operator::bundle(&p.charts.join("kube-prometheus-stack"), true)?;
    let same = operator::bundle(&p.charts.join("kube-prometheus-stack"), false)?;
    let values_dir = tempfile::tempdir()?;
    let values = |named: bool, i: usize| -> std::io::Result<PathBuf> {
        let file = values_dir.path().join(format!("{named}-{i}.yaml"));
        std::fs::write(&file, operator::rendered_values(named, &format!("wl-{i}")))?;
        Ok(file)
    };
    let helm = |bundle: &operator::Bundle, values: &Path| {
        let mut c = Command::new(p.helm);
        c.args(["template", "cluster-addon"]).arg(&bundle.chart);
        c.args(["--namespace", "kube-system", "--include-crds", "--kube-version", operator::KUBE_VERSION, "-f"]);
        c.arg(values);
        c
    };
    let stats = values_dir.path().join("stats");
    let child = |bundle: &operator::Bundle, clusters: usize| -> Result<Command, std::io::Error> {
        let mut c = Command::new(std::env::current_exe()?);
        c.arg(operator::CHILD).arg(p.ours).arg(&bundle.dir).arg(clusters.to_string()).arg(&stats);
        Ok(c)
    };
    let first = values(true, 0)?;
    let render_addons = || {
        let mut c = Command::new(p.ours);
        c.arg("render").arg(&named.dir).args(["--tag", operator::TAG, "--addons", "--cluster"]).arg(&named.cluster);
        c.args(["--kube-version", operator::KUBE_VERSION]);
        c
    };
    let label = "kube-prometheus-stack";
    match rounds(n, render_addons, || helm(&named, &first)) {
        (Ok(o), Ok(h)) => row(&format!("{label}: render --addons"), o, h),
        (o, h) => println!("{label}: render --addons: ours {:?} helm {:?}", o.err(), h.err()),
    }
    let one = child(&named, 1)?;
    let one = || {
        let mut c = Command::new(one.get_program());
        c.args(one.get_args());
        c
    };
    match rounds(n, one, || helm(&named, &first)) {
        (Ok(o), Ok(h)) => row(&format!("{label}: operator, 1 Cluster"), o, h),
        (o, h) => println!("{label}: operator: ours {:?} helm {:?}", o.err(), h.err()),
    }
    // The fleet: one round each (helm renders 100 times), two renders at a time on both sides.
    const FLEET: usize = 100;
    for (bundle, is_named, what) in [(&named, true, "values per Cluster"), (&same, false, "the same values")] {
        let ours = measure(child(bundle, FLEET)?);
        let reuse = std::fs::read_to_string(&stats).unwrap_or_default();
        let helm_runs = (0..FLEET).map(|i| values(is_named, i).map(|v| helm(bundle, &v))).collect::<Result<_, _>>()?;
        match (ours, measure_parallel(helm_runs, 2)) {
            (Ok(o), Ok(h)) => {
                row(&format!("{FLEET} Clusters, {what}"), o, h);
                let counts: Vec<&str> = reuse.split_whitespace().collect();
                if let [hits, renders, objects] = counts[..] {
                    println!("  ({renders} rendered, {hits} reused; {objects} objects in all)");
                }
            }
            (o, h) => println!("{FLEET} Clusters, {what}: ours {:?} helm {:?}", o.err(), h.err()),
        }
    }
    Ok(())
}
