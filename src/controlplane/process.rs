//! Child processes that never outlive us: each is started from one thread that lives as long as the
//! process (so Linux's parent-death signal, which follows the *thread* that forked, means "when this
//! process dies", also on `kill -9`), in a process group of its own (a Ctrl-C at the terminal
//! reaches only us, and we stop the children in order), with its output in a log file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A request to the spawner thread: the command and where to send the child.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// The spawner thread's queue; the thread is started at first use and never ends.
fn spawner() -> &'static Mutex<mpsc::Sender<SpawnRequest>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        // If the thread cannot start, every spawn reports the closed channel as its error.
        let _ = std::thread::Builder::new().name("child-spawner".into()).spawn(move || {
            for (mut command, reply) in rx {
                let _ = reply.send(command.spawn());
            }
        });
        Mutex::new(tx)
    })
}

/// Starts `command` so that it dies with this process and has its own process group.
pub fn spawn(mut command: Command) -> std::io::Result<Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: only async-signal-safe calls between fork and exec.
        let parent = std::process::id() as libc::pid_t;
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl: then nobody would signal us.
                if libc::getppid() != parent {
                    return Err(std::io::Error::other("the parent exited while starting"));
                }
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let (tx, rx) = mpsc::channel();
    spawner()
        .lock()
        .map_err(|_| std::io::Error::other("the spawner lock is poisoned"))?
        .send((command, tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv().map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// A started program with its log file; stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program args...` with stdout and stderr appended to `log`.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        env: &[(&str, &str)],
    ) -> std::io::Result<Self> {
        let out = File::options().create(true).append(true).open(log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = spawn(command).map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", program.display())))?;
        Ok(Self { name: name.to_string(), child, log: log.to_path_buf() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The exit status if the process has ended.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of the log (for error messages).
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on a pid we own and have not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; waits until it has exited.
    pub fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        self.signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// SIGKILL (a crash), and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// The last `lines` lines of a file ("" when unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_process_is_reaped_and_its_log_kept() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sh.log");
        let mut p =
            Process::start("sh", Path::new("/bin/sh"), &["-c".into(), "echo started; exec sleep 60".into()], &log, &[])
                .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p.log_tail(1).contains("started") {
            assert!(Instant::now() < deadline, "the child did not write its log");
            std::thread::sleep(Duration::from_millis(10));
        }
        p.stop(Duration::from_secs(5));
        assert!(p.exited().is_some());
        assert_eq!(p.log_tail(5), "started");
    }

    #[test]
    fn children_get_their_own_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sh.log");
        let mut p =
            Process::start("sh", Path::new("/bin/sh"), &["-c".into(), "exec sleep 60".into()], &log, &[]).unwrap();
        // SAFETY: getpgid on our child.
        let group = unsafe { libc::getpgid(p.pid() as libc::pid_t) };
        assert_eq!(group, p.pid() as libc::pid_t, "the child leads its own group");
        p.kill();
    }
}
