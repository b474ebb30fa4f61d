//! Where the control plane's programs are, and building them.
//!
//! `hack/controlplane/build` is the one build: it compiles each component from the Go module pinned
//! in its `go.mod`/`go.sum` into `OUT/<component>-<version>-<hash>/`, where the hash covers the
//! pins and the script. The same files are compiled into this binary, so the key computed here is
//! the key the script writes, and `clusterstack sandbox` can run the script from anywhere (it writes
//! the embedded copy out first): a binary never picks up programs built from other pins.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::ControlPlaneError;

/// The build script and the pinned modules, as committed.
const BUILD_SCRIPT: &str = include_str!("../../hack/controlplane/build");
const SOURCES: &[(&str, &str)] = &[
    ("kubernetes/go.mod", include_str!("../../hack/controlplane/kubernetes/go.mod")),
    ("kubernetes/go.sum", include_str!("../../hack/controlplane/kubernetes/go.sum")),
    ("etcd/go.mod", include_str!("../../hack/controlplane/etcd/go.mod")),
    ("etcd/go.sum", include_str!("../../hack/controlplane/etcd/go.sum")),
    ("capi/go.mod", include_str!("../../hack/controlplane/capi/go.mod")),
    ("capi/go.sum", include_str!("../../hack/controlplane/capi/go.sum")),
    ("capi/build.sh", include_str!("../../hack/controlplane/capi/build.sh")),
];

/// Overrides where built components are looked for and built (the script's `OUT`).
pub const DIR_ENV: &str = "CLUSTERSTACK_CONTROLPLANE_DIR";

/// One pinned component.
#[derive(Debug, Clone, Copy)]
pub struct Component {
    /// `kubernetes`, `etcd`.
    pub name: &'static str,
    /// The module whose version names the build.
    module: &'static str,
    /// The files whose bytes the key hashes, in the script's order (`build` is the script).
    hashed: &'static [&'static str],
}

pub const KUBERNETES: Component = Component {
    name: "kubernetes",
    module: "k8s.io/kubernetes",
    hashed: &["kubernetes/go.mod", "kubernetes/go.sum", "build"],
};
pub const ETCD: Component =
    Component { name: "etcd", module: "go.etcd.io/etcd/server/v3", hashed: &["etcd/go.mod", "etcd/go.sum", "build"] };
/// Cluster API: the providers' CRDs and webhook manifests (always), the managers (`--capi`).
pub const CAPI: Component = Component {
    name: "capi",
    module: "sigs.k8s.io/cluster-api",
    hashed: &["capi/go.mod", "capi/go.sum", "capi/build.sh", "build"],
};

fn source(path: &str) -> &'static str {
    if path == "build" {
        return BUILD_SCRIPT;
    }
    SOURCES.iter().find(|(p, _)| *p == path).map_or("", |(_, text)| text)
}

impl Component {
    /// The pinned version of its module (`v1.35.4`), as the script reads it from go.mod.
    pub fn version(&self) -> String {
        module_version(source(&format!("{}/go.mod", self.name)), self.module).unwrap_or_default()
    }

    /// `<name>-<version>-<first 12 hex of sha256 of its hashed files>`.
    pub fn key(&self) -> String {
        let mut hash = Sha256::new();
        for path in self.hashed {
            hash.update(source(path));
        }
        let hex = hex::encode(hash.finalize());
        format!("{}-{}-{}", self.name, self.version(), &hex[..12])
    }
}

/// The version `module` is required at in a go.mod (not a `replace` line).
fn module_version(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().filter(|l| !l.contains("=>")).find_map(|line| {
        let mut words = line.split_whitespace();
        let first = words.next()?;
        let (name, version) = if first == "require" { (words.next()?, words.next()?) } else { (first, words.next()?) };
        (name == module).then(|| version.to_string())
    })
}

/// The programs of the current pins.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kubectl: PathBuf,
    pub etcd: PathBuf,
    pub etcdctl: PathBuf,
    /// Cluster API's providers' CRDs and webhook manifests: `<provider>/crd/*.yaml` and
    /// `<provider>/webhook/manifests.yaml` for `core`, `bootstrap-kubeadm`,
    /// `controlplane-kubeadm` and `docker`.
    pub capi_config: PathBuf,
    /// Cluster API's managers, when built (`hack/controlplane/build --capi`).
    pub capi: Option<CapiBinaries>,
}

/// Cluster API's managers.
#[derive(Debug, Clone)]
pub struct CapiBinaries {
    pub core: PathBuf,
    pub kubeadm_bootstrap: PathBuf,
    pub kubeadm_control_plane: PathBuf,
    /// CAPD, with its in-memory backend.
    pub docker: PathBuf,
}

impl Binaries {
    /// Where components are built and looked for: `$CLUSTERSTACK_CONTROLPLANE_DIR`; else, in a
    /// checkout of this project, its `target/controlplane` (what `.ci/run` and the tests use);
    /// else `$XDG_CACHE_HOME/clusterstack/controlplane` (`~/.cache/...`).
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os(DIR_ENV).filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let checkout = Path::new(env!("CARGO_MANIFEST_DIR"));
        if checkout.join("hack/controlplane/build").is_file() {
            return checkout.join("target/controlplane");
        }
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        cache.join("clusterstack/controlplane")
    }

    /// The programs built into `dir` from the current pins, or what is missing.
    pub fn find(dir: &Path) -> Result<Self, ControlPlaneError> {
        let bin = |c: &Component, program: &str| -> Result<PathBuf, ControlPlaneError> {
            let home = dir.join(c.key());
            let path = home.join("bin").join(program);
            if home.join(".complete").is_file() && path.is_file() {
                Ok(path)
            } else {
                Err(ControlPlaneError::NotBuilt { dir: dir.to_path_buf(), component: c.key() })
            }
        };
        let capi_home = dir.join(CAPI.key());
        if !capi_home.join(".complete-config").is_file() {
            return Err(ControlPlaneError::NotBuilt { dir: dir.to_path_buf(), component: CAPI.key() });
        }
        let capi = capi_home.join(".complete-bin").is_file().then(|| {
            let b = capi_home.join("bin");
            CapiBinaries {
                core: b.join("cluster-api"),
                kubeadm_bootstrap: b.join("kubeadm-bootstrap"),
                kubeadm_control_plane: b.join("kubeadm-control-plane"),
                docker: b.join("capd"),
            }
        });
        Ok(Self {
            capi_config: capi_home.join("config"),
            capi,
            kube_apiserver: bin(&KUBERNETES, "kube-apiserver")?,
            kube_controller_manager: bin(&KUBERNETES, "kube-controller-manager")?,
            kubectl: bin(&KUBERNETES, "kubectl")?,
            etcd: bin(&ETCD, "etcd")?,
            etcdctl: bin(&ETCD, "etcdctl")?,
        })
    }

    /// Builds the current pins into `dir` (minutes when cold, nothing when built), Cluster API's
    /// managers too with `capi`, with the script's progress on our stderr.
    pub fn build(dir: &Path, capi: bool) -> Result<Self, ControlPlaneError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ControlPlaneError::Io { path, source }
        };
        // The script finds its modules beside itself; a copy per set of pins.
        let src = dir.join("src").join(format!("{}-{}", KUBERNETES.key(), CAPI.key()));
        for (path, text) in SOURCES.iter().copied().chain([("build", BUILD_SCRIPT)]) {
            let file = src.join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).map_err(io(parent))?;
            }
            std::fs::write(&file, text).map_err(io(&file))?;
        }
        let mut command = std::process::Command::new("bash");
        command.arg(src.join("build"));
        if capi {
            command.arg("--capi");
        }
        let status = command
            .arg(dir)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| ControlPlaneError::Build(format!("cannot run bash: {e}")))?;
        if !status.success() {
            return Err(ControlPlaneError::Build(format!("hack/controlplane/build exited with {status}")));
        }
        Self::find(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_the_require_lines_not_the_replaces() {
        let go_mod = "module x\n\nreplace k8s.io/kubernetes => k8s.io/kubernetes v9.9.9\n\nrequire (\n\tk8s.io/kubernetes v1.35.4\n\tk8s.io/api v0.35.4 // indirect\n)\nrequire go.etcd.io/etcd/server/v3 v3.6.16\n";
        assert_eq!(module_version(go_mod, "k8s.io/kubernetes").as_deref(), Some("v1.35.4"));
        assert_eq!(module_version(go_mod, "go.etcd.io/etcd/server/v3").as_deref(), Some("v3.6.16"));
        assert_eq!(module_version(go_mod, "k8s.io/nope"), None);
    }

    #[test]
    fn the_pins_name_real_versions_and_the_key_follows_them() {
        assert!(KUBERNETES.version().starts_with("v1.3"), "{}", KUBERNETES.version());
        assert!(ETCD.version().starts_with("v3.6"), "{}", ETCD.version());
        let key = KUBERNETES.key();
        assert!(key.starts_with(&format!("kubernetes-{}-", KUBERNETES.version())), "{key}");
        assert_eq!(key.len(), "kubernetes-".len() + KUBERNETES.version().len() + 1 + 12);
        assert_ne!(KUBERNETES.key(), ETCD.key());
    }

    #[test]
    fn the_key_is_the_one_the_build_script_computes() {
        // The script hashes `cat go.mod go.sum build`; run that pipeline on the committed files.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/controlplane");
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg("cat kubernetes/go.mod kubernetes/go.sum build | sha256sum | cut -c1-12; cat capi/go.mod capi/go.sum capi/build.sh build | sha256sum | cut -c1-12")
            .current_dir(&root)
            .output()
            .unwrap();
        let hashes = String::from_utf8(out.stdout).unwrap();
        let hashes: Vec<&str> = hashes.lines().collect();
        assert_eq!(KUBERNETES.key(), format!("kubernetes-{}-{}", KUBERNETES.version(), hashes[0]));
        assert_eq!(CAPI.key(), format!("capi-{}-{}", CAPI.version(), hashes[1]));
    }
}
