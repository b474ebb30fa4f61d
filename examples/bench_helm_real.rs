//! Helm rendering on real charts: the corpus's largest charts (kube-prometheus-stack and
//! ingress-nginx with their values files, argo-workflows) and the whole corpus, rendered by the
//! `clusterstack render` binary and by `helm template`, both as processes, side by side in one
//! run. Prints the median wall time of N rounds, the highest peak RSS (the kernel's `ru_maxrss` of
//! each child, from `wait4`) and the ratios against the goals (≤ 0.25× helm's wall time and ≤ 0.4× its memory per
//! large chart, ≤ 0.2× on the whole corpus); the corpus also without the charts that generate RSA
//! keys, whose time is key generation's.
//!
//! `cargo build --release && cargo run --release --example bench_helm_real [-- ROUNDS]`.
//! Needs helm (`CLUSTERSTACK_HELM`) and the corpus (`CLUSTERSTACK_HELM_CORPUS`, default
//! `<repo>/../shared/helm-corpus`); ours is `target/release/clusterstack` (or
//! `CLUSTERSTACK_BIN`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One run: wall time and peak RSS in MiB, or why it failed.
type Run = Result<(Duration, f64), String>;

fn measure(mut command: Command) -> Run {
    let start = Instant::now();
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| e.to_string())?;
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
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
