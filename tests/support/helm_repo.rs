//! A Helm chart repository on 127.0.0.1 for tests: serves an `index.yaml` (each chart's archive
//! at a relative URL, with its sha256 digest) and the archives, and records the paths asked, so a
//! test can tell when something was fetched (or, offline, that nothing was). Included by the
//! tests that need it alone: `#[path = "support/helm_repo.rs"] mod helm_repo;`.

// Each test binary uses a different part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// A running repository (its thread lives as long as the test process).
pub struct HelmRepo {
    port: u16,
    files: Arc<Mutex<BTreeMap<String, Vec<u8>>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl HelmRepo {
    pub fn start() -> HelmRepo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let files: Arc<Mutex<BTreeMap<String, Vec<u8>>>> = Arc::default();
        let asked: Arc<Mutex<Vec<String>>> = Arc::default();
        let (f, a) = (files.clone(), asked.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                a.lock().unwrap().push(path.clone());
                let body = f.lock().unwrap().get(&path).cloned();
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", b"not found".to_vec()),
                };
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&body));
            }
        });
        HelmRepo { port, files, asked }
    }

    /// `http://127.0.0.1:PORT<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn serve(&self, path: &str, bytes: Vec<u8>) {
        self.files.lock().unwrap().insert(path.to_string(), bytes);
    }

    /// Serves `charts` (name, version, archive) as the repository at `dir`.
    pub fn serve_repo(&self, dir: &str, charts: &[(&str, &str, Vec<u8>)]) {
        let mut index = String::from("apiVersion: v1\nentries:\n");
        let mut names: Vec<&str> = charts.iter().map(|c| c.0).collect();
        names.sort();
        names.dedup();
        for name in names {
            index += &format!("  {name}:\n");
            for (_, version, bytes) in charts.iter().filter(|c| c.0 == name) {
                index += &format!(
                    "  - apiVersion: v2\n    name: {name}\n    version: {version}\n    urls:\n    - {name}-{version}.tgz\n    digest: {}\n",
                    hex::encode(Sha256::digest(bytes))
                );
                self.serve(&format!("{dir}/{name}-{version}.tgz"), bytes.clone());
            }
        }
        self.serve(&format!("{dir}/index.yaml"), index.into_bytes());
    }

    /// The paths asked so far.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}
