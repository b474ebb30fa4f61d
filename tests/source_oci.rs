//! The OCI release source and `publish` against a real registry: the CNCF distribution registry
//! Debian packages as `docker-registry`, started on 127.0.0.1 with a temporary storage directory.
//! The binary is found through `CLUSTERSTACK_REGISTRY_BIN` or `PATH`; when it is missing the
//! tests print a loud SKIPPED line, and fail under `CI=true`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clusterstack::registry::{Credentials, RegistryClient, RegistryConfig};
use clusterstack::source::oci::{self, OciSource};
use clusterstack::source::{NoProgress, ReleaseSource, SourceError};

fn registry_binary() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("CLUSTERSTACK_REGISTRY_BIN") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join("docker-registry")).find(|p| p.is_file()))
}

struct Registry {
    child: Child,
    port: u16,
    storage: tempfile::TempDir,
    _config: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// Starts a registry, or says SKIPPED (panics under CI=true) when there is no binary.
    fn start(test: &str) -> Option<Registry> {
        Self::start_with(test, false)
    }

    /// With `basic_auth`, the registry asks for `ci` / `letmein` (htpasswd, bcrypt).
    fn start_with(test: &str, basic_auth: bool) -> Option<Registry> {
        Self::start_auth(test, if basic_auth { Auth::Basic } else { Auth::None })
    }

    fn start_auth(test: &str, auth: Auth) -> Option<Registry> {
        let Some(bin) = registry_binary() else {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: docker-registry not found (CI=true): install it or set CLUSTERSTACK_REGISTRY_BIN");
            }
            eprintln!("\n*** SKIPPED {test}: docker-registry not found (set CLUSTERSTACK_REGISTRY_BIN) ***\n");
            return None;
        };
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
        let storage = tempfile::tempdir().unwrap();
        let config_dir = tempfile::tempdir().unwrap();
        let config = config_dir.path().join("config.yml");
        let mut text = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            storage.path().display()
        );
        match auth {
            Auth::None => {}
            Auth::Basic => {
                let htpasswd = config_dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("ci:{HTPASSWD_LETMEIN}\n")).unwrap();
                text.push_str(&format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display()));
            }
            Auth::Token { realm, root_pem } => {
                let bundle = config_dir.path().join("token-root.pem");
                std::fs::write(&bundle, root_pem).unwrap();
                text.push_str(&format!(
                    "auth:\n  token:\n    realm: {realm}\n    service: {TOKEN_SERVICE}\n    issuer: {TOKEN_ISSUER}\n    rootcertbundle: {}\n",
                    bundle.display()
                ));
            }
        }
        std::fs::write(&config, text).unwrap();
        let child = Command::new(&bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let registry = Registry { child, port, storage, _config: config_dir };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(registry);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the registry did not start on port {port}");
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn base(&self) -> String {
        format!("http://{}", self.host())
    }

    fn source(&self, repository: &str, page_size: usize) -> OciSource {
        OciSource::with_page_size(client(), &self.host(), repository, &self.base(), page_size)
    }

    async fn publish(&self, repository: &str, tag: &str, dir: &Path) -> String {
        oci::publish(&client(), &self.host(), repository, &self.base(), tag, dir, &NoProgress).await.unwrap()
    }
}

/// How the registry authenticates.
enum Auth {
    None,
    Basic,
    /// The token dance: the registry trusts JWTs signed by the key of `root_pem` and sends
    /// clients to `realm` for them.
    Token {
        realm: String,
        root_pem: String,
    },
}

/// bcrypt of `letmein` (cost 5), made once with Python's `bcrypt.hashpw`: a fixture.
const HTPASSWD_LETMEIN: &str = "$2b$05$/asrBEQkMIkhsvjnvPYOjuE.WsE.2m9z..6Gcg8DSXtS8ZjfVzjrC";

fn client() -> Arc<RegistryClient> {
    client_with(RegistryConfig::default())
}

fn client_with(config: RegistryConfig) -> Arc<RegistryClient> {
    clusterstack::install_crypto_provider();
    Arc::new(RegistryClient::new(config).unwrap())
}

fn credentials(host: &str, password: &str) -> RegistryConfig {
    let mut config = RegistryConfig::default();
    config.credentials.insert(host.into(), Credentials { username: "ci".into(), password: password.into() });
    config
}

#[tokio::test]
async fn basic_auth_needs_the_right_credentials() {
    let Some(reg) = Registry::start_with("basic_auth_needs_the_right_credentials", true) else { return };
    let host = reg.host();
    let files = release_dir(9);
    let good = client_with(credentials(&host, "letmein"));
    oci::publish(&good, &host, "private/stacks", &reg.base(), "docker-ferrol-1-27-v1", files.path(), &NoProgress)
        .await
        .unwrap();
    let listing = OciSource::new(good, &host, "private/stacks", &reg.base()).list().await.unwrap();
    assert_eq!(listing.releases.len(), 1);

    for config in [credentials(&host, "wrong"), RegistryConfig::default()] {
        let source = OciSource::new(client_with(config), &host, "private/stacks", &reg.base());
        let err = source.list().await.unwrap_err().to_string();
        assert!(err.contains("access denied") && err.contains(&host) && err.contains("private/stacks"), "{err}");
    }
    let bad = client_with(credentials(&host, "wrong"));
    let err =
        oci::publish(&bad, &host, "private/stacks", &reg.base(), "docker-ferrol-1-27-v2", files.path(), &NoProgress)
            .await
            .unwrap_err()
            .to_string();
    assert!(err.contains("access denied"), "{err}");
}

fn release_dir(seed: u8) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("metadata.yaml"),
        format!("apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nseed: {seed}\n"),
    )
    .unwrap();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i as u8).wrapping_mul(seed)).collect();
    std::fs::write(dir.path().join("docker-ferrol-1-27-cluster-class-v1.tgz"), big).unwrap();
    dir
}

#[tokio::test]
async fn published_release_lists_and_pulls_byte_for_byte() {
    let Some(reg) = Registry::start("published_release_lists_and_pulls_byte_for_byte") else { return };
    let files = release_dir(3);
    reg.publish("scs/stacks", "docker-ferrol-1-27-v1", files.path()).await;
    reg.publish("scs/stacks", "not-a-release", files.path()).await;
    // Publishing again uploads no blob (HEAD first) and succeeds.
    reg.publish("scs/stacks", "docker-ferrol-1-27-v1", files.path()).await;
    let source = reg.source("scs/stacks", 100);
    assert_eq!(source.cache_key(), format!("oci/{}/scs/stacks", reg.host()));
    let listing = source.list().await.unwrap();
    assert_eq!(listing.skipped, vec!["not-a-release".to_string()]);
    assert_eq!(listing.releases.len(), 1);
    let release = &listing.releases[0];
    assert_eq!(release.tag, "docker-ferrol-1-27-v1");
    let out = tempfile::tempdir().unwrap();
    for asset in &release.assets {
        assert!(asset.sha256.is_some(), "every OCI asset has a digest");
        let dest = out.path().join(&asset.name);
        let got = source.download(release, asset, &dest, &NoProgress).await.unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(files.path().join(&asset.name)).unwrap());
        assert_eq!(Some(got.sha256), asset.sha256);
    }
    // A second listing is answered from the conditional request or lists the same.
    assert_eq!(source.list().await.unwrap(), listing);
}

#[tokio::test]
async fn tags_are_listed_over_several_pages() {
    let Some(reg) = Registry::start("tags_are_listed_over_several_pages") else { return };
    let files = release_dir(5);
    for v in 1..=5 {
        reg.publish("p", &format!("docker-ferrol-1-27-v{v}"), files.path()).await;
    }
    let listing = reg.source("p", 2).list().await.unwrap();
    let mut tags: Vec<_> = listing.releases.iter().map(|r| r.tag.clone()).collect();
    tags.sort();
    assert_eq!(tags, (1..=5).map(|v| format!("docker-ferrol-1-27-v{v}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn corrupted_and_missing_blobs_keep_nothing() {
    let Some(reg) = Registry::start("corrupted_and_missing_blobs_keep_nothing") else { return };
    let files = release_dir(7);
    reg.publish("c", "docker-ferrol-1-27-v1", files.path()).await;
    let source = reg.source("c", 100);
    let listing = source.list().await.unwrap();
    let release = &listing.releases[0];
    let asset = release.assets.iter().find(|a| a.name.ends_with(".tgz")).unwrap();
    let hex = asset.sha256.clone().unwrap();
    let data = reg.storage.path().join(format!("docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]));
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[1000] ^= 0xff;
    std::fs::write(&data, &bytes).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("x");
    let err = source.download(release, asset, &dest, &NoProgress).await.unwrap_err();
    assert!(matches!(err, SourceError::Integrity { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains(&hex) && text.contains("docker-ferrol-1-27-v1"), "{text}");
    assert!(!dest.exists(), "a corrupted blob is not kept");

    std::fs::remove_file(&data).unwrap();
    let err = source.download(release, asset, &dest, &NoProgress).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&hex) && text.contains("oci://") && text.contains("/c:docker-ferrol-1-27-v1"), "{text}");
    assert!(!dest.exists());
}

#[tokio::test]
async fn a_registry_that_is_down_is_unavailable() {
    let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap();
    let host = format!("127.0.0.1:{port}");
    let source = OciSource::new(client(), &host, "r", &format!("http://{host}"));
    let err = source.list().await.unwrap_err();
    assert!(matches!(err, SourceError::Unavailable { .. }), "{err}");
    assert!(err.to_string().contains(&host), "{err}");
}

#[tokio::test]
async fn a_tag_on_a_container_image_is_skipped_not_pulled() {
    let Some(reg) = Registry::start("a_tag_on_a_container_image_is_skipped_not_pulled") else { return };
    let files = release_dir(11);
    let good = reg.publish("img", "docker-ferrol-1-27-v1", files.path()).await;
    // The same blobs as an image manifest: layers without a title annotation.
    let http = reqwest::Client::new();
    let artifact: serde_json::Value = http
        .get(format!("{}/v2/img/manifests/{good}", reg.base()))
        .header("Accept", oci::OCI_MANIFEST)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut image = artifact.clone();
    for layer in image["layers"].as_array_mut().unwrap() {
        layer.as_object_mut().unwrap().remove("annotations");
        layer["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip".into();
    }
    let put = http
        .put(format!("{}/v2/img/manifests/docker-ferrol-1-27-v2", reg.base()))
        .header("Content-Type", oci::OCI_MANIFEST)
        .body(serde_json::to_vec(&image).unwrap())
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let listing = reg.source("img", 100).list().await.unwrap();
    assert_eq!(listing.releases.iter().map(|r| r.tag.as_str()).collect::<Vec<_>>(), ["docker-ferrol-1-27-v1"]);
    assert_eq!(listing.skipped, vec!["docker-ferrol-1-27-v2".to_string()]);
}

/// Runs `script` with Python's `oras` package (PyPI `oras`; its directory in env
/// `CLUSTERSTACK_ORAS_PYTHONPATH`, else whatever `python3` imports). `None` (SKIPPED, or a panic
/// under `CI=true`) when it cannot be imported.
fn oras_python(test: &str) -> Option<Command> {
    let mut probe = Command::new("python3");
    probe.args(["-c", "import oras.client"]).stdout(Stdio::null()).stderr(Stdio::null());
    let path = std::env::var("CLUSTERSTACK_ORAS_PYTHONPATH").ok();
    if let Some(p) = &path {
        probe.env("PYTHONPATH", p);
    }
    if !probe.status().is_ok_and(|s| s.success()) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{test}: python3 cannot import oras (CI=true): set CLUSTERSTACK_ORAS_PYTHONPATH");
        }
        eprintln!("\n*** SKIPPED {test}: python3 cannot import oras (set CLUSTERSTACK_ORAS_PYTHONPATH) ***\n");
        return None;
    }
    let mut cmd = Command::new("python3");
    if let Some(p) = &path {
        cmd.env("PYTHONPATH", p);
    }
    Some(cmd)
}

#[tokio::test]
async fn oras_reads_what_we_publish_and_we_read_what_oras_pushes() {
    let test = "oras_reads_what_we_publish_and_we_read_what_oras_pushes";
    let Some(reg) = Registry::start(test) else { return };
    let Some(mut pull) = oras_python(test) else { return };
    let host = reg.host();

    // Ours -> oras, byte for byte.
    let files = release_dir(13);
    reg.publish("interop", "docker-ferrol-1-27-v1", files.path()).await;
    let out = tempfile::tempdir().unwrap();
    let status = pull
        .args(["-c", "import sys, oras.client; oras.client.OrasClient(hostname=sys.argv[1], insecure=True).pull(target=sys.argv[2], outdir=sys.argv[3])"])
        .arg(&host)
        .arg(format!("{host}/interop:docker-ferrol-1-27-v1"))
        .arg(out.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["metadata.yaml", "docker-ferrol-1-27-cluster-class-v1.tgz"] {
        assert_eq!(
            std::fs::read(out.path().join(name)).unwrap(),
            std::fs::read(files.path().join(name)).unwrap(),
            "{name}"
        );
    }

    // oras -> ours.
    let pushed = release_dir(17);
    let Some(mut push) = oras_python(test) else { return };
    let status = push
        .current_dir(pushed.path())
        .args(["-c", "import sys, oras.client; oras.client.OrasClient(hostname=sys.argv[1], insecure=True).push(target=sys.argv[2], files=sys.argv[3:])"])
        .arg(&host)
        .arg(format!("{host}/interop:docker-ferrol-1-27-v2"))
        .args(["metadata.yaml", "docker-ferrol-1-27-cluster-class-v1.tgz"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let source = reg.source("interop", 100);
    let listing = source.list().await.unwrap();
    let release = listing.releases.iter().find(|r| r.tag == "docker-ferrol-1-27-v2").unwrap();
    let dir = tempfile::tempdir().unwrap();
    for asset in &release.assets {
        let dest = dir.path().join(&asset.name);
        source.download(release, asset, &dest, &NoProgress).await.unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(pushed.path().join(&asset.name)).unwrap());
    }
    assert_eq!(release.assets.len(), 2);
}

const TOKEN_SERVICE: &str = "test-registry";
const TOKEN_ISSUER: &str = "clusterstack-test-issuer";

/// A token server on 127.0.0.1, as Docker Hub's or Harbor's: `GET /token?service=&scope=` with
/// basic credentials `ci` / `letmein` answers a JWT (ES256, its certificate in `x5c`) granting the
/// requested scope; anything else is 401. Returns its realm, the certificate (PEM) the registry
/// must trust, and the scopes it was asked for.
async fn token_server() -> (String, String, Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::extract::{Query, State};
    use axum::http::{HeaderMap, StatusCode};
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};

    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["token-issuer.test".to_string()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    let rng = ring::rand::SystemRandom::new();
    let signer = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &key.serialize_der(), &rng).unwrap();
    let x5c = STANDARD.encode(cert.der());
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));

    struct Issuer {
        signer: EcdsaKeyPair,
        rng: ring::rand::SystemRandom,
        x5c: String,
        asked: Arc<std::sync::Mutex<Vec<String>>>,
    }
    let issuer = Arc::new(Issuer { signer, rng, x5c, asked: asked.clone() });
    async fn token(
        State(issuer): State<Arc<Issuer>>,
        Query(query): Query<std::collections::HashMap<String, String>>,
        headers: HeaderMap,
    ) -> Result<axum::Json<serde_json::Value>, StatusCode> {
        let expected = format!("Basic {}", STANDARD.encode("ci:letmein"));
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return Err(StatusCode::UNAUTHORIZED);
        }
        if query.get("service").map(String::as_str) != Some(TOKEN_SERVICE) {
            return Err(StatusCode::BAD_REQUEST);
        }
        let scope = query.get("scope").cloned().unwrap_or_default();
        issuer.asked.lock().unwrap().push(scope.clone());
        // repository:NAME:ACTIONS (the name may hold no colon here).
        let mut parts = scope.splitn(3, ':');
        let (kind, name, actions) = (parts.next(), parts.next(), parts.next());
        let access = match (kind, name, actions) {
            (Some("repository"), Some(name), Some(actions)) => {
                serde_json::json!([{"type": "repository", "name": name, "actions": actions.split(',').collect::<Vec<_>>()}])
            }
            _ => serde_json::json!([]),
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let header = serde_json::json!({"typ": "JWT", "alg": "ES256", "x5c": [issuer.x5c]});
        let claims = serde_json::json!({
            "iss": TOKEN_ISSUER, "sub": "ci", "aud": TOKEN_SERVICE, "exp": now + 300, "nbf": now - 10,
            "iat": now, "jti": format!("{now}-{}", issuer.asked.lock().unwrap().len()), "access": access,
        });
        let signing_input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature = issuer.signer.sign(&issuer.rng, signing_input.as_bytes()).unwrap();
        let jwt = format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()));
        Ok(axum::Json(serde_json::json!({"token": jwt, "expires_in": 300})))
    }
    let app = axum::Router::new().route("/token", axum::routing::get(token)).with_state(issuer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let realm = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (realm, cert.pem(), asked)
}

#[tokio::test]
async fn the_token_dance_pushes_and_pulls_and_refuses_wrong_credentials() {
    let test = "the_token_dance_pushes_and_pulls_and_refuses_wrong_credentials";
    let (realm, root_pem, asked) = token_server().await;
    let Some(reg) = Registry::start_auth(test, Auth::Token { realm, root_pem }) else { return };
    let host = reg.host();
    let files = release_dir(21);
    let good = client_with(credentials(&host, "letmein"));
    oci::publish(&good, &host, "team/stacks", &reg.base(), "docker-ferrol-1-27-v1", files.path(), &NoProgress)
        .await
        .unwrap();
    // The push asked for push rights on the repository, not just what the first challenge named.
    assert!(asked.lock().unwrap().iter().any(|s| s == "repository:team/stacks:pull,push"), "{:?}", asked.lock());

    // A reader with the right credentials lists and pulls, byte for byte.
    let source = OciSource::new(client_with(credentials(&host, "letmein")), &host, "team/stacks", &reg.base());
    let listing = source.list().await.unwrap();
    let release = listing.releases.iter().find(|r| r.tag == "docker-ferrol-1-27-v1").unwrap();
    let out = tempfile::tempdir().unwrap();
    for asset in &release.assets {
        let dest = out.path().join(&asset.name);
        source.download(release, asset, &dest, &NoProgress).await.unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), std::fs::read(files.path().join(&asset.name)).unwrap());
    }
    assert!(asked.lock().unwrap().iter().any(|s| s == "repository:team/stacks:pull"), "{:?}", asked.lock());

    // Wrong or no credentials: the token server refuses, and the error names the registry,
    // the repository and the realm.
    for config in [credentials(&host, "wrong"), RegistryConfig::default()] {
        let source = OciSource::new(client_with(config), &host, "team/stacks", &reg.base());
        let err = source.list().await.unwrap_err().to_string();
        assert!(err.contains(&host) && err.contains("team/stacks") && err.contains("/token"), "{err}");
        assert!(err.contains("401"), "{err}");
    }
}
