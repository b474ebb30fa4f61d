//! `publish --sign` then `pull` with a policy, end to end against the real registry (Debian's
//! `docker-registry`): a key pair from `clusterstack keygen`, a release published signed (a bundle
//! per file, pushed with it, and a cosign signature where cosign looks: the tag
//! `sha256-<manifest hex>.sig`), what was signed verified with our verifier, and pulls under a
//! policy: the signed release passes, another key and an unsigned release are refused. And keyless:
//! `publish --sign --identity-token` against a Fulcio and a Rekor of our own (127.0.0.1), what it
//! signed verified under that instance's trusted root and the token's identity, refused under
//! another identity or another root; and in a GitHub Actions job, with the job's own token.

#[path = "support/registry.rs"]
mod registry;
#[path = "support/sigstore.rs"]
mod sigstore;

use std::path::Path;
use std::process::{Command, Output};

use axum::response::IntoResponse;

use clusterstack::source::verify::cosign::{self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING};
use registry::Registry;

const TAG: &str = "docker-ferrol-1-27-v1";

fn clusterstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clusterstack")).args(args).output().expect("run clusterstack")
}

fn ok(out: &Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "exit {:?}: {text}", out.status.code());
    text
}

fn fails(out: &Output) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "expected a failure: {text}");
    text
}

fn release_copy(root: &Path, tag: &str) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases").join(tag);
    let dir = root.join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    dir
}

async fn get_json(url: &str, accept: &str) -> (reqwest::StatusCode, Vec<u8>) {
    let resp = reqwest::Client::new().get(url).header("Accept", accept).send().await.unwrap();
    (resp.status(), resp.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn publish_sign_then_pull_with_a_policy() {
    clusterstack::install_crypto_provider();
    let Some(registry) = Registry::start("publish_sign_then_pull_with_a_policy") else { return };
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str| work.path().join(p).display().to_string();
    ok(&clusterstack(&["keygen", &w("release")]));
    ok(&clusterstack(&["keygen", &w("stranger")]));
    assert!(fails(&clusterstack(&["keygen", &w("release")])).contains("exists"), "a key is never overwritten");

    let repo = format!("oci://{}/stacks", registry.host());
    let dir = release_copy(work.path(), TAG);
    let dir_s = dir.display().to_string();
    let published = ok(&clusterstack(&["publish", "--sign", "--key", &w("release.key"), &dir_s, &repo]));
    let digest = published
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{repo}:{TAG}@")))
        .unwrap_or_else(|| panic!("no digest in {published}"))
        .to_string();

    // A bundle per file, verified with our verifier (and refused for another key or file).
    let pubkey = w("release.pub");
    let bundle = format!("{dir_s}/metadata.yaml.sigstore.json");
    let metadata = format!("{dir_s}/metadata.yaml");
    let verify = |key: &str, artifact: &str| {
        clusterstack(&["verify-bundle", "--bundle", &bundle, "--key", key, "--insecure-ignore-tlog", artifact])
    };
    ok(&verify(&pubkey, &metadata));
    assert!(fails(&verify(&w("stranger.pub"), &metadata)).contains("WrongIdentity"));
    assert!(fails(&verify(&pubkey, &format!("{dir_s}/hashes.json"))).contains("ArtifactMismatch"));
    assert!(
        fails(&clusterstack(&["verify-bundle", "--bundle", &bundle, "--key", &pubkey, &metadata])).contains("BadProof")
    );

    // The registry: the bundles are files of the artifact; the signature is where cosign looks.
    let base = format!("http://{}/v2/stacks", registry.host());
    let (status, body) =
        get_json(&format!("{base}/manifests/{TAG}"), "application/vnd.oci.image.manifest.v1+json").await;
    assert!(status.is_success());
    let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let titles: Vec<&str> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["annotations"]["org.opencontainers.image.title"].as_str())
        .collect();
    assert_eq!(titles.iter().filter(|t| t.ends_with(".sigstore.json")).count(), 7, "{titles:?}");
    let sig_tag = cosign::signature_tag(&digest);
    assert_eq!(sig_tag, format!("sha256-{}.sig", digest.trim_start_matches("sha256:")));
    let (status, body) =
        get_json(&format!("{base}/manifests/{sig_tag}"), "application/vnd.oci.image.manifest.v1+json").await;
    assert!(status.is_success(), "no {sig_tag} in the registry");
    let sig_manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let layer = &sig_manifest["layers"][0];
    assert_eq!(layer["mediaType"], SIMPLE_SIGNING);
    assert!(layer["annotations"][SIGNATURE_ANNOTATION].as_str().is_some_and(|s| !s.is_empty()));
    let (_, payload) = get_json(&format!("{base}/blobs/{}", layer["digest"].as_str().unwrap()), "*/*").await;
    let payload: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(payload["critical"]["image"]["docker-manifest-digest"], digest.as_str());
    assert_eq!(payload["critical"]["identity"]["docker-reference"], format!("{}/stacks", registry.host()));
    assert_eq!(payload["critical"]["type"], "cosign container image signature");

    // An unsigned release beside it.
    let unsigned = release_copy(&work.path().join("u"), "docker-ferrol-1-27-v2");
    ok(&clusterstack(&["publish", &unsigned.display().to_string(), &repo]));

    // Pull with policies: both kinds of signature, the policy's key given as a file.
    let policy = w("policy.yaml");
    std::fs::write(&policy, "kind: both\nkey: {secretRef: {name: release-signing}}\nignoreTransparencyLog: true\n")
        .unwrap();
    let pull = |tag: &str, key: &str, cache: &str| {
        clusterstack(&[
            "pull",
            tag,
            "--source",
            &repo,
            "--cache",
            &w(cache),
            "--verify-policy",
            &policy,
            "--verify-key",
            key,
        ])
    };
    let pulled = ok(&pull(TAG, &pubkey, "cache"));
    assert!(work.path().join("cache").join(format!("oci/{}/stacks/{TAG}/manifest.json", registry.host())).is_file());
    assert!(pulled.contains("signed    by key"), "{pulled}");
    let refused = fails(&pull(TAG, &w("stranger.pub"), "cache"));
    assert!(refused.contains("WrongIdentity"), "{refused}");
    let refused = fails(&pull("docker-ferrol-1-27-v2", &pubkey, "cache2"));
    assert!(refused.contains("SignatureMissing"), "{refused}");
    // Nothing of a refused release is extracted into the cache.
    let cached = work.path().join("cache2").join(format!("oci/{}/stacks", registry.host()));
    assert!(work.path().join("cache2/.tmp").is_dir(), "the cache was opened");
    assert!(!cached.join("docker-ferrol-1-27-v2").exists(), "a refused release is not in the cache");
    assert!(
        std::fs::read_dir(work.path().join("cache2/.tmp")).unwrap().next().is_none(),
        "nor half of it in the cache's work area"
    );

    // cosign alone: the manifest's signature covers the whole release.
    std::fs::write(&policy, "kind: cosign\nkey: {secretRef: {name: release-signing}}\nignoreTransparencyLog: true\n")
        .unwrap();
    ok(&pull(TAG, &pubkey, "cache3"));
    assert!(fails(&pull("docker-ferrol-1-27-v2", &pubkey, "cache3")).contains("SignatureMissing"));
}

/// Keyless: a certificate from the fake Fulcio for the token's identity, every signature logged in
/// the fake Rekor, then verified by `verify-bundle` and by `pull` under a policy pinning the
/// identity and the fake instance's trusted root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_sign_keyless_then_verify_and_pull_under_the_identity() {
    clusterstack::install_crypto_provider();
    let Some(registry) = Registry::start("publish_sign_keyless_then_verify_and_pull_under_the_identity") else {
        return;
    };
    let fake = sigstore::FakeSigstore::start().await;
    let work = tempfile::tempdir().unwrap();
    let w = |p: &str| work.path().join(p).display().to_string();
    std::fs::write(w("trusted_root.json"), fake.trusted_root()).unwrap();
    let issuer = "https://issuer.example.test";
    let token = sigstore::token(issuer, serde_json::json!({"email": "release@example.test", "email_verified": true}));

    let repo = format!("oci://{}/keyless", registry.host());
    let dir = release_copy(work.path(), TAG);
    let dir_s = dir.display().to_string();
    let publish = |dir: &str, extra: &[&str]| {
        let mut args = vec!["publish", "--sign", "--fulcio-url", fake.url(), "--rekor-url", fake.url()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&[dir, &repo]);
        Command::new(env!("CARGO_BIN_EXE_clusterstack"))
            .args(&args)
            // No token but the flag's: not the environment's, not a CI's ambient one.
            .env_remove("SIGSTORE_ID_TOKEN")
            .env_remove("GITHUB_ACTIONS")
            .env_remove("GITLAB_CI")
            .env_remove("BUILDKITE")
            .env_remove("CIRCLECI")
            .output()
            .expect("run clusterstack")
    };
    let refused = fails(&publish(&dir_s, &[]));
    assert!(refused.contains("--identity-token"), "no token, no keyless signing: {refused}");
    let published = ok(&publish(&dir_s, &["--identity-token", &token]));
    assert!(published.contains("as release@example.test"), "{published}");
    // Seven files and the manifest's cosign signature: eight certificates, eight log entries.
    assert_eq!(fake.issued(), vec!["release@example.test"; 8]);
    assert_eq!(fake.log_size(), 8);

    // The bundles: v0.3, a certificate, a log entry with its inclusion proof and checkpoint.
    let bundle = format!("{dir_s}/metadata.yaml.sigstore.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&bundle).unwrap()).unwrap();
    assert_eq!(json["mediaType"], "application/vnd.dev.sigstore.bundle.v0.3+json");
    assert!(json["verificationMaterial"]["certificate"]["rawBytes"].is_string(), "{json}");
    let entry = &json["verificationMaterial"]["tlogEntries"][0];
    assert!(entry["inclusionProof"]["checkpoint"]["envelope"].is_string(), "{json}");
    assert!(entry["inclusionPromise"]["signedEntryTimestamp"].is_string(), "{json}");

    // Our verifier: the token's identity under the fake's root passes; anything else does not.
    let metadata = format!("{dir_s}/metadata.yaml");
    let verify = |identity: &str, issuer: &str, root: Option<&str>, artifact: &str| {
        let mut args = vec!["verify-bundle", "--bundle", &bundle, "--certificate-identity", identity];
        args.extend_from_slice(&["--certificate-oidc-issuer", issuer]);
        if let Some(root) = root {
            args.extend_from_slice(&["--trusted-root", root]);
        }
        args.push(artifact);
        clusterstack(&args)
    };
    let root = w("trusted_root.json");
    ok(&verify("release@example.test", issuer, Some(&root), &metadata));
    let wrong = fails(&verify("mallory@example.test", issuer, Some(&root), &metadata));
    assert!(wrong.contains("WrongIdentity"), "{wrong}");
    let wrong = fails(&verify("release@example.test", "https://other-issuer.test", Some(&root), &metadata));
    assert!(wrong.contains("WrongIdentity"), "{wrong}");
    let unknown = fails(&verify("release@example.test", issuer, None, &metadata));
    assert!(unknown.contains("UnknownRoot"), "the public-good root does not know the fake CA: {unknown}");
    let swapped = fails(&verify("release@example.test", issuer, Some(&root), &format!("{dir_s}/hashes.json")));
    assert!(swapped.contains("ArtifactMismatch"), "{swapped}");

    // Pull under a policy pinning the identity and the instance: both kinds of signature.
    let policy = w("policy.yaml");
    let write_policy = |subject: &str| {
        let text = format!(
            "kind: both\nidentity: {{subject: {subject}, issuer: \"{issuer}\"}}\n\
             trustedRoot: {{configMapRef: {{name: sigstore-root}}}}\n"
        );
        std::fs::write(&policy, text).unwrap();
    };
    let pull = |cache: &str| {
        clusterstack(&[
            "pull",
            TAG,
            "--source",
            &repo,
            "--cache",
            &w(cache),
            "--verify-policy",
            &policy,
            "--verify-trusted-root",
            &root,
        ])
    };
    write_policy("release@example.test");
    let pulled = ok(&pull("cache"));
    assert!(pulled.contains("signed    by release@example.test"), "{pulled}");
    write_policy("mallory@example.test");
    let refused = fails(&pull("cache2"));
    assert!(refused.contains("WrongIdentity"), "{refused}");
    assert!(!work.path().join("cache2").join(format!("oci/{}/keyless/{TAG}", registry.host())).exists());

    // In a GitHub Actions job with `id-token: write`: no flag, the job's own token, asked for the
    // audience `sigstore` with the request token, names the workflow.
    let actions = sigstore::token(
        "https://token.actions.githubusercontent.com",
        serde_json::json!({
            "sub": "repo:acme/stacks:ref:refs/tags/v1", "repository": "acme/stacks", "ref": "refs/tags/v1",
            "job_workflow_ref": "acme/stacks/.github/workflows/release.yml@refs/tags/v1",
        }),
    );
    let token_service = axum::Router::new().route(
        "/token",
        axum::routing::get(move |headers: axum::http::HeaderMap, query: axum::extract::RawQuery| async move {
            let authorized = headers.get("authorization").is_some_and(|v| v == "Bearer request-secret");
            let audience = query.0.is_some_and(|q| q.split('&').any(|p| p == "audience=sigstore"));
            match authorized && audience {
                true => axum::Json(serde_json::json!({"value": actions})).into_response(),
                false => axum::http::StatusCode::FORBIDDEN.into_response(),
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let token_url = format!("http://{}/token?api-version=2.0", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, token_service).await });
    let actions_dir = release_copy(&work.path().join("actions"), TAG);
    let actions_repo = format!("oci://{}/actions", registry.host());
    let published = ok(&Command::new(env!("CARGO_BIN_EXE_clusterstack"))
        .args(["publish", "--sign", "--fulcio-url", fake.url(), "--rekor-url", fake.url()])
        .args([&actions_dir.display().to_string(), &actions_repo])
        .env_remove("SIGSTORE_ID_TOKEN")
        .env("GITHUB_ACTIONS", "true")
        .env("ACTIONS_ID_TOKEN_REQUEST_URL", &token_url)
        .env("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "request-secret")
        .output()
        .expect("run clusterstack"));
    let workflow = "https://github.com/acme/stacks/.github/workflows/release.yml@refs/tags/v1";
    assert!(published.contains("as repo:acme/stacks:ref:refs/tags/v1"), "the job's token was used: {published}");
    std::fs::write(
        &policy,
        "kind: both\nidentity: {repository: acme/stacks, workflow: .github/workflows/release.yml, ref: 'refs/tags/v*'}\n\
         trustedRoot: {configMapRef: {name: sigstore-root}}\n",
    )
    .unwrap();
    let pulled = ok(&clusterstack(&[
        "pull",
        TAG,
        "--source",
        &actions_repo,
        "--cache",
        &w("cache3"),
        "--verify-policy",
        &policy,
        "--verify-trusted-root",
        &root,
    ]));
    assert!(pulled.contains(&format!("signed    by {workflow}")), "{pulled}");
    // The first release was signed by release@example.test: not this workflow.
    let refused = fails(&clusterstack(&[
        "pull",
        TAG,
        "--source",
        &repo,
        "--cache",
        &w("cache4"),
        "--verify-policy",
        &policy,
        "--verify-trusted-root",
        &root,
    ]));
    assert!(refused.contains("WrongIdentity"), "{refused}");
}
