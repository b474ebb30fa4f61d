//! `clusterstack sandbox` as a user runs it, with Cluster API: the command builds nothing here
//! (`.ci/run` built the pins), starts the control plane, Cluster API and the operator, and ends its
//! start-up with Clusters whose control plane Cluster API initialised, their ClusterAddons Ready,
//! and each workload cluster holding the addon objects; SIGTERM stops everything it started.
//!
//! `harness = false`: the binary moves itself into a loopback-only network namespace first (the
//! sandbox's Cluster API listens on every interface).

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clusterstack::controlplane::Binaries;
use clusterstack::controlplane::netns;

fn main() -> std::process::ExitCode {
    if std::env::args().any(|a| a == "--list") {
        println!("the_sandbox_provisions_clusters_with_their_addons: test");
        return std::process::ExitCode::SUCCESS;
    }
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if !filters.is_empty()
        && !filters.iter().any(|f| "the_sandbox_provisions_clusters_with_their_addons".contains(f.as_str()))
    {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed\n");
        return std::process::ExitCode::SUCCESS;
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let built = Binaries::find(&Binaries::default_dir()).map(|b| b.capi.is_some());
    if !matches!(built, Ok(true)) {
        let why = "the control plane and Cluster API are not built: run hack/controlplane/build --capi";
        assert!(!ci, "sandbox: {why} (CI=true: .ci/run builds them)");
        eprintln!("\n*** SKIPPED sandbox: {why} ***\n");
        return std::process::ExitCode::SUCCESS;
    }
    if let Err(e) = netns::isolate() {
        assert!(!ci, "sandbox: cannot isolate the network: {e}");
        eprintln!("\n*** sandbox: no network namespace ({e}): Cluster API listens on every interface ***\n");
    }
    println!("\nrunning 1 test");
    let start = Instant::now();
    the_sandbox_provisions_clusters_with_their_addons();
    println!("test the_sandbox_provisions_clusters_with_their_addons ... ok ({:.1} s)", start.elapsed().as_secs_f64());
    println!("\ntest result: ok. 1 passed; 0 failed\n");
    std::process::ExitCode::SUCCESS
}

fn the_sandbox_provisions_clusters_with_their_addons() {
    let dir = tempfile::tempdir().expect("a state directory");
    let kubeconfig = dir.path().join("sandbox.kubeconfig");
    let state = dir.path().join("state");
    let mut child = Command::new(support::real::operator_binary())
        .args(["sandbox", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .arg("--dir")
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clusterstack sandbox starts");
    // Its progress on stderr until "ready in"; its tables on stdout.
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(line) if line.contains("ready in") => break,
            Ok(_) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("the sandbox ended before it was ready: {e}; status {:?}", child.try_wait()),
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the sandbox exited with {status} before it was ready");
        }
        assert!(Instant::now() < deadline, "the sandbox was not ready in 600 s");
    }
    let bins = Binaries::find(&Binaries::default_dir()).expect("built");
    let kubectl = |config: &std::path::Path, args: &[&str]| -> String {
        let out = Command::new(&bins.kubectl)
            .arg(format!("--kubeconfig={}", config.display()))
            .args(args)
            .output()
            .expect("kubectl");
        assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Every example Cluster: initialised by Cluster API, its ClusterAddon Ready, its workload
    // cluster holding the addons.
    let clusters = kubectl(
        &kubeconfig,
        &[
            "get",
            "clusters.cluster.x-k8s.io",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}={.status.initialization.controlPlaneInitialized}{\"\\n\"}{end}",
        ],
    );
    let clusters: Vec<&str> = clusters.lines().filter(|l| !l.is_empty()).collect();
    assert!(clusters.len() >= 2, "the examples' Clusters: {clusters:?}");
    for line in &clusters {
        let (key, initialised) = line.split_once('=').expect("ns/name=value");
        assert_eq!(initialised, "true", "Cluster API initialised {key}'s control plane");
        let (ns, name) = key.split_once('/').expect("ns/name");
        let ready = kubectl(
            &kubeconfig,
            &["get", "clusteraddons", "-n", ns, &format!("cluster-addon-{name}"), "-o", "jsonpath={.status.ready}"],
        );
        assert_eq!(ready, "true", "the ClusterAddon of {key} is Ready");
        let workload = state.join(format!("workload-{ns}-{name}.kubeconfig"));
        let objects = kubectl(&workload, &["get", "daemonsets,deployments", "-n", "kube-system", "-o", "name"]);
        assert!(
            objects.contains("daemonset.apps/cni") && objects.contains("deployment.apps/metrics-server"),
            "{key}'s workload cluster: {objects}"
        );
    }
    // SIGTERM: everything stops, the command exits 0.
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let stop = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(stop.elapsed() < Duration::from_secs(90), "the sandbox did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "the sandbox exited with {status}");
}
