//! A throwaway OCI registry for tests: the CNCF distribution registry (Debian's `docker-registry`)
//! on a free 127.0.0.1 port with a temporary storage directory, killed on drop.
//!
//! The binary is `$CLUSTERSTACK_REGISTRY_BIN`, else `docker-registry` on `PATH` (`.ci/run` installs
//! it, pinned). Without it a local run prints a loud SKIPPED line; with `CI=true` the test fails.
//! Included by the tests that need it alone: `#[path = "support/registry.rs"] mod registry;`.

// Each test binary uses a different part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running registry.
pub struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The registry binary, if there is one.
pub fn registry_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CLUSTERSTACK_REGISTRY_BIN").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("docker-registry")).find(|p| p.is_file()))
}

impl Registry {
    /// Starts a registry for `test`, or says SKIPPED (panics under `CI=true`) when there is no binary.
    pub fn start(test: &str) -> Option<Registry> {
        let Some(bin) = registry_binary() else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: docker-registry not found (CI=true): install it or set CLUSTERSTACK_REGISTRY_BIN");
            }
            eprintln!("\n*** SKIPPED {test}: docker-registry not found (set CLUSTERSTACK_REGISTRY_BIN) ***\n");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new(&bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let registry = Registry { child, port, _dir: dir };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(registry);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the registry did not start on port {port}");
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}
