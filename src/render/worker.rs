//! Rendering in a sandbox: the operator re-executes its own binary as a
//! short-lived render worker (`clusterstack __render-worker`, hidden) with
//! resource limits, and talks to it over a pipe, as Argo CD's repo server
//! runs helm apart from its controller.
//!
//! Why a process and not a thread: a thread cannot be stopped, and an
//! allocation failure or a stack overflow aborts the whole process. The
//! engines have budgets of their own (steps, sizes, aliases, depth), but a
//! missed one must cost one render, not every tenant's operator. The worker
//! runs under `RLIMIT_AS` (address space), `RLIMIT_CPU` (CPU seconds) and
//! `RLIMIT_CORE` 0, the parent enforces a wall-clock deadline and caps what
//! it reads back; whatever kills the worker becomes a [`RenderError::Sandbox`]
//! naming the release and the budget.
//!
//! Protocol: one JSON [`Request`] on the worker's stdin; on its stdout, the
//! objects of an addon render as the worker reads them, each a frame
//! `O<length>\n<the object as JSON>`, then `R\n` and one JSON [`Reply`] to the
//! end, where a number stands for the object streamed under it (counted from
//! 0); then the worker exits. The parent reads each object while the worker
//! renders the rest, so reading a large chart's reply (kube-prometheus-stack:
//! 3.1 MB) no longer waits for the render to end, and the worker holds no
//! object once sent. Nothing streamed counts until the reply has been read
//! and the worker has exited cleanly. Renders of different releases run in
//! parallel, at most [`SandboxConfig::parallel`] at once.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::addons::{AddonRender, check_addons, render_addons_reusing};
use super::cache::{ReleaseKey, RenderCache};
use super::objects::{JsonSink, Streamed};
use super::{ClusterObjects, RenderContext, RenderError, RenderLimits, RenderedChart, render_cluster_class};

/// The hidden subcommand the worker runs as.
pub const WORKER_ARG: &str = "__render-worker";

/// glibc's allocator settings for the worker, read by glibc as the process starts (other C
/// libraries ignore the variable). A worker lives for one render and touches tens of MiB that it
/// never gives back: a quarter of its CPU went to faulting that memory in 4 KiB pages, one fault
/// per page. Its heap in transparent huge pages (`hugetlb=1`: `madvise`, which is all a kernel
/// set to `madvise` grants), grown 8 MiB at a time (`top_pad`), takes a fifth of the faults; the
/// worker's peak RSS grows by a few MiB (`bench_helm_real`). `RLIMIT_AS` bounds it as before.
pub const WORKER_MALLOC_TUNABLES: &str = "glibc.malloc.hugetlb=1:glibc.malloc.top_pad=8388608";

/// Where and within what a render worker runs.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The operator's own binary.
    pub exe: PathBuf,
    /// `RLIMIT_AS`: the worker's address space, bytes.
    pub address_space: u64,
    /// `RLIMIT_CPU`: CPU seconds.
    pub cpu_seconds: u64,
    /// Wall-clock time before the worker is killed.
    pub wall: Duration,
    /// The largest reply read back, bytes.
    pub max_reply_bytes: usize,
    /// Workers running at once.
    pub parallel: usize,
}

impl SandboxConfig {
    /// The defaults for the operator's own binary.
    pub fn new(exe: PathBuf) -> Self {
        Self {
            exe,
            address_space: 1024 * 1024 * 1024,
            cpu_seconds: 30,
            wall: Duration::from_secs(60),
            max_reply_bytes: 64 * 1024 * 1024,
            parallel: 2,
        }
    }
}

static SANDBOX: OnceLock<(SandboxConfig, tokio::sync::Semaphore)> = OnceLock::new();

/// Turns the sandbox on for this process (the operator does at start);
/// without it renders run in process (tests, whose binary is no operator).
pub fn enable(config: SandboxConfig) {
    let permits = config.parallel.max(1);
    let _ = SANDBOX.set((config, tokio::sync::Semaphore::new(permits)));
}

/// What the worker is asked to render.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    pub chart_dir: PathBuf,
    pub release_name: String,
    pub namespace: String,
    pub chart_version: String,
    pub kube_version: Option<String>,
    pub fuel: u64,
    pub max_output_bytes: usize,
    /// Set: render the addon bundle `chart_dir` for this workload cluster instead of a class.
    #[serde(default)]
    pub addons: Option<AddonsJob>,
}

/// The workload cluster's side of an addon render.
#[derive(Debug, Serialize, Deserialize)]
pub struct AddonsJob {
    pub cluster: ClusterObjects,
    pub addon_values: std::collections::BTreeMap<String, serde_json::Value>,
    /// The release's `cluster-addon-values.yaml` (the older layout), see `RenderContext`.
    #[serde(default)]
    pub release_values: Option<PathBuf>,
    /// Addons (by key) and values digests whose render the parent holds: not rendered again.
    #[serde(default)]
    pub reuse: Vec<(String, String)>,
}

/// What the worker answers.
#[derive(Debug, Serialize, Deserialize)]
pub enum Reply {
    Objects(#[serde(deserialize_with = "super::objects::deserialize_objects")] Vec<DynamicObject>),
    /// The addons of a bundle, rendered or reused.
    Addons(Vec<AddonRender>),
    /// The render failed: the engine's message (it names file and line).
    Failed(String),
}

/// Renders a cluster class in a worker when the sandbox is on, else in
/// process on a blocking thread. `release` names the release in errors.
pub async fn render_cluster_class_isolated(
    release: &str,
    chart_dir: PathBuf,
    ctx: RenderContext,
) -> Result<Vec<DynamicObject>, RenderError> {
    let Some((config, slots)) = SANDBOX.get() else {
        return tokio::task::spawn_blocking(move || render_cluster_class(&chart_dir, &ctx))
            .await
            .map_err(|e| sandbox(release, format!("the render task failed: {e}")))?;
    };
    let _slot = slots.acquire().await.map_err(|e| sandbox(release, e.to_string()))?;
    let request = Request {
        chart_dir,
        release_name: ctx.release_name,
        namespace: ctx.namespace,
        chart_version: ctx.chart_version,
        kube_version: ctx.kube_version,
        fuel: ctx.limits.fuel,
        max_output_bytes: ctx.limits.max_output_bytes,
        addons: None,
    };
    match run_worker(config, &request).await.map_err(|m| sandbox(release, m))? {
        Reply::Objects(objects) => Ok(objects),
        Reply::Addons(_) => Err(sandbox(release, "the render worker answered with addon charts".into())),
        Reply::Failed(message) => Err(RenderError::Sandbox { release: release.to_string(), message }),
    }
}

/// Renders the addon bundle `bundle_dir` for a workload cluster (`ctx.cluster`) in a worker when
/// the sandbox is on, else in process on a blocking thread: the values templates and charts of
/// addons are as untrusted as a cluster class. `release` names the release in errors. With a
/// `cache`, addons whose values render to a digest the cache holds for `key` are not rendered
/// again, and shareable renders are kept (see `render::cache`).
pub async fn render_addons_isolated(
    release: &str,
    bundle_dir: PathBuf,
    ctx: RenderContext,
    cache: Option<(&RenderCache, &ReleaseKey)>,
) -> Result<Vec<Arc<RenderedChart>>, RenderError> {
    let held = cache.map(|(cache, key)| cache.held(key)).unwrap_or_default();
    let reuse: Vec<(String, String)> = held.keys().cloned().collect();
    let addons = match SANDBOX.get() {
        None => {
            let offered: std::collections::HashSet<(String, String)> = reuse.into_iter().collect();
            tokio::task::spawn_blocking(move || {
                render_addons_reusing(&bundle_dir, &ctx, &|key, values| {
                    offered.contains(&(key.to_string(), values.to_string()))
                })
            })
            .await
            .map_err(|e| sandbox(release, format!("the render task failed: {e}")))??
        }
        Some((config, slots)) => {
            let Some(cluster) = ctx.cluster else {
                return Err(RenderError::NoCluster(bundle_dir.display().to_string()));
            };
            let _slot = slots.acquire().await.map_err(|e| sandbox(release, e.to_string()))?;
            let request = Request {
                chart_dir: bundle_dir,
                release_name: ctx.release_name,
                namespace: ctx.namespace,
                chart_version: ctx.chart_version,
                kube_version: ctx.kube_version,
                fuel: ctx.limits.fuel,
                max_output_bytes: ctx.limits.max_output_bytes,
                addons: Some(AddonsJob {
                    cluster,
                    addon_values: ctx.addon_values,
                    release_values: ctx.release_values,
                    reuse,
                }),
            };
            match run_worker(config, &request).await.map_err(|m| sandbox(release, m))? {
                Reply::Addons(addons) => addons,
                Reply::Objects(_) => {
                    return Err(sandbox(release, "the render worker answered with class objects".into()));
                }
                Reply::Failed(message) => return Err(RenderError::Sandbox { release: release.to_string(), message }),
            }
        }
    };
    let mut charts = Vec::with_capacity(addons.len());
    for addon in addons {
        match addon {
            AddonRender::Rendered { key, chart, values, shareable, bytes } => {
                let chart = Arc::new(chart);
                if let (Some((cache, release_key)), Some(values)) = (cache, values) {
                    cache.insert(release_key, &key, &values, chart.clone(), shareable, bytes);
                }
                charts.push(chart);
            }
            AddonRender::Reused { key, values } => {
                let chart = held.get(&(key.clone(), values.clone())).ok_or_else(|| {
                    sandbox(release, format!("the render worker reused a render of addon {key} it was not offered"))
                })?;
                if let Some((cache, release_key)) = cache {
                    cache.hit(release_key, &key, &values);
                }
                charts.push(chart.clone());
            }
        }
    }
    check_addons(charts.iter().map(|c| &**c))?;
    Ok(charts)
}

fn sandbox(release: &str, message: String) -> RenderError {
    RenderError::Sandbox { release: release.to_string(), message }
}

/// Runs one worker for `request`; `Err` says which budget ended it.
pub async fn run_worker(config: &SandboxConfig, request: &Request) -> Result<Reply, String> {
    let input = serde_json::to_vec(request).map_err(|e| e.to_string())?;
    let mut command = tokio::process::Command::new(&config.exe);
    command
        .arg(WORKER_ARG)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .env_clear()
        .env("GLIBC_TUNABLES", WORKER_MALLOC_TUNABLES)
        .kill_on_drop(true);
    let (address_space, cpu) = (config.address_space, config.cpu_seconds);
    // SAFETY: between fork and exec only async-signal-safe calls are made:
    // setrlimit(2) on plain values, no allocation, no locks.
    unsafe {
        command.pre_exec(move || {
            set_limit(libc::RLIMIT_AS, address_space)?;
            // The soft limit sends SIGXCPU; the hard one a second later SIGKILL.
            set_limits(libc::RLIMIT_CPU, cpu, cpu + 1)?;
            set_limit(libc::RLIMIT_CORE, 0)?;
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|e| format!("cannot start the render worker: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("the render worker has no stdin")?;
    let stdout = child.stdout.take().ok_or("the render worker has no stdout")?;
    let mut stderr = child.stderr.take().ok_or("the render worker has no stderr")?;
    widen_pipe(&stdout);
    let stdout = blocking_file(stdout).map_err(|e| format!("reading from the render worker: {e}"))?;
    // The reply is read, and its objects parsed, on a thread of its own as the worker writes
    // them: parsing a large chart's objects is work the operator would otherwise start only
    // once the worker has ended.
    let max = config.max_reply_bytes;
    let over_limit = || format!("the render's output is over the limit of {max} bytes (output budget)");
    let reading = tokio::task::spawn_blocking(move || read_reply(stdout, max));
    let work = async {
        stdin.write_all(&input).await.map_err(|e| format!("writing to the render worker: {e}"))?;
        drop(stdin);
        let mut err = Vec::new();
        let mut err_reader = (&mut stderr).take(4096);
        let read_out = async {
            let read = reading.await.unwrap_or_else(|e| Err(ReadError::Unreadable(format!("the reader failed: {e}"))));
            // A worker whose reply is over the limit is stopped now: it would wait on a pipe
            // nobody reads, and its stderr would never end.
            if let Err(ReadError::OverLimit) = read {
                let _ = child.start_kill();
            }
            read
        };
        let (read, _) = tokio::join!(read_out, err_reader.read_to_end(&mut err));
        if let Err(ReadError::OverLimit) = read {
            return Err(over_limit());
        }
        let status = child.wait().await.map_err(|e| format!("waiting for the render worker: {e}"))?;
        Ok::<_, String>((status, read, err))
    };
    let (status, read, err) = match tokio::time::timeout(config.wall, work).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(format!(
                "the render took longer than {}s and was stopped (wall-time budget)",
                config.wall.as_secs()
            ));
        }
    };
    // Whatever the worker sent counts only once it has exited cleanly.
    if !status.success() {
        return Err(describe_exit(config, status, &err));
    }
    read.map_err(|e| match e {
        ReadError::OverLimit => over_limit(),
        ReadError::Unreadable(m) => format!("the render worker's reply is unreadable: {m}"),
    })
}

/// Why a worker's reply could not be read.
enum ReadError {
    /// It is longer than the parent reads.
    OverLimit,
    Unreadable(String),
}

/// Reads the worker's stdout (see the protocol at the top): the streamed objects, each parsed
/// as it comes, then the reply, whose numbers take them. At most `max` bytes are read.
fn read_reply(stdout: std::fs::File, max: usize) -> Result<Reply, ReadError> {
    use std::io::{BufRead as _, Read as _};
    let bad = |m: String| ReadError::Unreadable(m);
    let mut input = std::io::BufReader::with_capacity(1 << 16, stdout);
    let (mut streamed, mut total, mut buf) = (Streamed::new(), 0usize, Vec::new());
    loop {
        let mut header = Vec::new();
        (&mut input).take(24).read_until(b'\n', &mut header).map_err(|e| bad(e.to_string()))?;
        total += header.len();
        match header.as_slice() {
            b"R\n" => {
                buf.clear();
                (&mut input)
                    .take((max.saturating_sub(total) + 1) as u64)
                    .read_to_end(&mut buf)
                    .map_err(|e| bad(e.to_string()))?;
                if total + buf.len() > max {
                    return Err(ReadError::OverLimit);
                }
                return super::objects::with_streamed(streamed, || serde_json::from_slice(&buf))
                    .map_err(|e| bad(e.to_string()));
            }
            [b'O', length @ .., b'\n'] => {
                let length: usize = std::str::from_utf8(length)
                    .ok()
                    .and_then(|l| l.parse().ok())
                    .ok_or_else(|| bad(format!("a frame's header is {:?}", String::from_utf8_lossy(&header))))?;
                total = total.saturating_add(length);
                if total > max {
                    return Err(ReadError::OverLimit);
                }
                buf.resize(length, 0);
                input.read_exact(&mut buf).map_err(|e| bad(format!("an object ends early: {e}")))?;
                // UTF-8 checked once for the whole object, not string by string as `from_slice`
                // does (2% of the parse, measured on kube-prometheus-stack's objects).
                let object = std::str::from_utf8(&buf)
                    .map_err(|e| format!("an object is not UTF-8: {e}"))
                    .and_then(|text| serde_json::from_str(text).map_err(|e| e.to_string()))
                    .and_then(super::objects::into_dynamic_object);
                streamed.insert(streamed.len() as u64, object);
            }
            [] => return Err(bad("it ends before the reply".into())),
            _ => return Err(bad(format!("a frame's header is {:?}", String::from_utf8_lossy(&header)))),
        }
    }
}

/// The worker's stdout as a file read on a blocking thread: tokio made the pipe non-blocking.
fn blocking_file(stdout: tokio::process::ChildStdout) -> std::io::Result<std::fs::File> {
    use std::os::fd::AsRawFd as _;
    let fd = stdout.into_owned_fd()?;
    // SAFETY: fcntl on a descriptor this process owns, with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(std::fs::File::from(fd))
}

/// Lets the reply's pipe hold 1 MiB (Linux's default most) instead of 64 KiB: a large chart's
/// reply is megabytes, and each time a full pipe blocks the worker both processes switch. A pipe
/// that stays small only costs those switches.
fn widen_pipe(stdout: &tokio::process::ChildStdout) {
    use std::os::fd::AsRawFd as _;
    // SAFETY: fcntl on a descriptor this process owns, with an integer argument.
    unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
}

fn set_limit(resource: libc::__rlimit_resource_t, value: u64) -> std::io::Result<()> {
    set_limits(resource, value, value)
}

fn set_limits(resource: libc::__rlimit_resource_t, soft: u64, hard: u64) -> std::io::Result<()> {
    let limit = libc::rlimit { rlim_cur: soft as libc::rlim_t, rlim_max: hard as libc::rlim_t };
    // SAFETY: a plain system call on a valid, initialised struct.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Why the worker ended, in terms of the budget it ran out of.
fn describe_exit(config: &SandboxConfig, status: std::process::ExitStatus, stderr: &[u8]) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    let detail = String::from_utf8_lossy(stderr);
    let detail = detail.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let memory = detail.contains("memory allocation") || detail.contains("out of memory");
    match status.signal() {
        Some(libc::SIGXCPU) | Some(libc::SIGKILL) if !memory => {
            format!("the render used more than {} CPU seconds and was stopped (CPU budget)", config.cpu_seconds)
        }
        _ if memory => format!(
            "the render needed more than {} MiB of memory and was stopped (memory budget)",
            config.address_space / (1024 * 1024)
        ),
        Some(libc::SIGSEGV) | Some(libc::SIGBUS) => {
            "the render worker overflowed its stack and was stopped (stack budget)".to_string()
        }
        Some(sig) => format!("the render worker was killed by signal {sig}"),
        None => format!("the render worker exited with {status}"),
    }
}

/// The worker's stdout (see the protocol at the top), shared by the threads that read documents.
struct Stream {
    out: std::sync::Mutex<StreamState>,
}

struct StreamState {
    /// Taken when the reply is written, which closes the pipe.
    out: Option<std::io::BufWriter<std::fs::File>>,
    /// The number of the next object sent.
    next: u64,
    /// A write failed: the parent is gone or stopped reading, and the worker fails.
    failed: bool,
}

impl Stream {
    fn send(&self, json: &serde_json::value::RawValue) -> u64 {
        use std::io::Write as _;
        let mut state = crate::util::lock(&self.out);
        let number = state.next;
        state.next += 1;
        let json = json.get();
        let written = match state.out.as_mut() {
            Some(out) => writeln!(out, "O{}", json.len()).and_then(|()| out.write_all(json.as_bytes())),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        state.failed |= written.is_err();
        number
    }
}

/// The worker's side: reads a [`Request`] from stdin, renders (streaming an addon render's
/// objects as it reads them), writes the [`Reply`] to stdout. Runs before any runtime or logging
/// is set up.
pub fn serve() -> std::process::ExitCode {
    use std::io::{Read as _, Write as _};
    use std::os::fd::FromRawFd as _;
    helm_render::render_once_then_exit();
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return std::process::ExitCode::FAILURE;
    }
    // SAFETY: descriptor 1 is the pipe the parent reads, open for the process's life, and
    // nothing else in the worker writes to it (std's `stdout()` is never used). Owning it lets
    // the worker close it as soon as the reply is written: the parent sees the end then, not
    // after the worker has torn its memory down.
    let stdout = unsafe { std::fs::File::from_raw_fd(1) };
    let stream = Arc::new(Stream {
        out: std::sync::Mutex::new(StreamState {
            out: Some(std::io::BufWriter::with_capacity(1 << 16, stdout)),
            next: 0,
            failed: false,
        }),
    });
    let reply = match serde_json::from_slice::<Request>(&input) {
        Ok(r) => {
            let mut ctx = RenderContext {
                release_name: r.release_name,
                namespace: r.namespace,
                chart_version: r.chart_version,
                cluster: None,
                kube_version: r.kube_version,
                limits: RenderLimits { fuel: r.fuel, max_output_bytes: r.max_output_bytes },
                addon_values: Default::default(),
                release_values: None,
                // The operator applies what the worker renders: never keep what no API server accepts.
                keep_unaccepted: false,
                keep_text: false,
                json_sink: None,
            };
            ctx.limits.max_output_bytes = r.max_output_bytes;
            match r.addons {
                Some(job) => {
                    ctx.cluster = Some(job.cluster);
                    ctx.addon_values = job.addon_values;
                    ctx.release_values = job.release_values;
                    let sink = stream.clone();
                    ctx.json_sink = Some(JsonSink::new(move |json| sink.send(json)));
                    let reuse: std::collections::HashSet<(String, String)> = job.reuse.into_iter().collect();
                    let offered = |key: &str, values: &str| reuse.contains(&(key.to_string(), values.to_string()));
                    match render_addons_reusing(&r.chart_dir, &ctx, &offered) {
                        Ok(addons) => Reply::Addons(addons),
                        Err(e) => Reply::Failed(e.to_string()),
                    }
                }
                None => match render_cluster_class(&r.chart_dir, &ctx) {
                    Ok(objects) => Reply::Objects(objects),
                    Err(e) => Reply::Failed(e.to_string()),
                },
            }
        }
        Err(e) => Reply::Failed(format!("unreadable request: {e}")),
    };
    let mut state = crate::util::lock(&stream.out);
    // Written as it is serialised, not gathered first: a class's reply is its objects. Dropping
    // the writer closes the pipe: the parent reads to its end while this process exits.
    let written = match state.out.take() {
        Some(mut out) => out
            .write_all(b"R\n")
            .and_then(|()| serde_json::to_writer(&mut out, &reply).map_err(std::io::Error::from))
            .and_then(|()| out.flush()),
        None => Err(std::io::ErrorKind::BrokenPipe.into()),
    };
    let failed = state.failed || written.is_err();
    drop(state);
    // The process ends now: freeing every object first (a tenth of a large chart's render)
    // would only keep it waiting.
    std::mem::forget(reply);
    if failed { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(stream: &[u8], max: usize) -> Result<Reply, String> {
        let mut file = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut file, stream).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        read_reply(file, max).map_err(|e| match e {
            ReadError::OverLimit => "over the limit".to_string(),
            ReadError::Unreadable(m) => m,
        })
    }

    fn stream(objects: &[&str], reply: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for o in objects {
            out.extend(format!("O{}\n{o}", o.len()).bytes());
        }
        out.extend(format!("R\n{reply}").bytes());
        out
    }

    const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"}}"#;

    fn chart_reply(objects: &str) -> String {
        format!(
            r#"{{"Addons":[{{"Rendered":{{"key":"k","chart":{{"name":"k","objects":{objects},"unaccepted":[]}},"values":null,"shareable":false,"bytes":1}}}}]}}"#
        )
    }

    #[test]
    fn streamed_objects_take_their_numbers_in_the_reply() {
        let other = CM.replace(r#""a""#, r#""b""#);
        let Reply::Addons(addons) = read(&stream(&[CM, &other], &chart_reply("[1,0]")), 1 << 20).unwrap() else {
            panic!("addons")
        };
        let AddonRender::Rendered { chart, .. } = &addons[0] else { panic!("rendered") };
        let names: Vec<_> = chart.objects.iter().map(|o| o.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(chart.objects[1].data["data"]["k"], "v");
        // Objects inline, as a class's reply has them, read as before.
        assert!(read(&stream(&[], &chart_reply(&format!("[{CM}]"))), 1 << 20).is_ok());
    }

    #[test]
    fn a_stream_that_breaks_its_rules_is_unreadable() {
        let cases = [
            (stream(&[CM], &chart_reply("[1]")), "never sent, or named twice"),
            (stream(&[CM], &chart_reply("[0,0]")), "never sent, or named twice"),
            (stream(&["[1,2]"], &chart_reply("[0]")), "streamed object 0: is not a mapping"),
            (stream(&[r#"{"metadata":{"name":1}}"#], &chart_reply("[0]")), "streamed object 0: metadata"),
            (stream(&["{\"a\":"], &chart_reply("[0]")), "streamed object 0: EOF"),
            (format!("O{}\n{CM}", CM.len() + 10).into_bytes(), "an object ends early"),
            (format!("O{}\n{CM}", CM.len()).into_bytes(), "ends before the reply"),
            (b"X1\n{}".to_vec(), "a frame's header is \"X1\\n\""),
            (b"O-1\n".to_vec(), "a frame's header is \"O-1\\n\""),
            (vec![b'O'; 100], "a frame's header is"),
            (stream(&[], "{\"Addons\":"), "EOF while parsing"),
            (
                [&b"O3\n\"\xff\"R\n"[..], chart_reply("[0]").as_bytes()].concat(),
                "streamed object 0: an object is not UTF-8",
            ),
        ];
        for (input, expected) in cases {
            let e =
                read(&input, 1 << 20).err().unwrap_or_else(|| panic!("{:?} was read", String::from_utf8_lossy(&input)));
            assert!(e.contains(expected), "{:?}: {e}", String::from_utf8_lossy(&input));
        }
    }

    #[test]
    fn a_stream_past_the_limit_is_over_it_wherever_it_goes_past() {
        let reply = chart_reply("[0]");
        let whole = stream(&[CM], &reply);
        assert!(read(&whole, whole.len()).is_ok());
        for max in [1, CM.len(), whole.len() - reply.len(), whole.len() - 1] {
            assert_eq!(read(&whole, max).err().as_deref(), Some("over the limit"), "limit {max}");
        }
        // A header claiming more than the limit is over it before anything is read.
        assert_eq!(read(b"O99999999999\n", 1 << 20).err().as_deref(), Some("over the limit"));
        assert_eq!(read(format!("O{}\n", usize::MAX).as_bytes(), 1 << 20).err().as_deref(), Some("over the limit"));
    }
}
