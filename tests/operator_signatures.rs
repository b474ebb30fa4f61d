//! Signed releases, the whole operator on the API server double.
//!
//! - Keyed: four ClusterStacks with the same signature policy (a managed key from a Secret, no
//!   transparency log: `publish --sign --key`'s air-gapped form), each following release v1 from a
//!   directory of its own: one signed with the policy's key, one unsigned, one signed with another
//!   key, one whose cluster-class tarball was swapped after signing (its `SHA256SUMS` updated too,
//!   as an attacker with write access would).
//! - Keyless: certificates from a Fulcio of our own (`support::sigstore`) for GitHub Actions
//!   identities, the policy pinning repository, workflow and ref and the instance's trusted root
//!   (a ConfigMap): a release signed in the policy's repository, and one signed by a workflow of
//!   another repository (a valid certificate of the same CA, another identity).
//! - Attestations from GitHub's API (the fake GitHub): no bundle among the assets; the API holds an
//!   attestation of another identity and one of the right identity, only others', or none.
//!
//! Only the correctly signed releases are applied; each other is refused with its reason, an Event
//! and a metric, and none of its objects is ever applied.

mod support;

use std::path::Path;

use base64::Engine;
use clusterstack::controller::runtime::tenancy::DirectoryRoots;
use clusterstack::source::SourceSpec;
use clusterstack::source::github::GitHubConfig;
use clusterstack::source::verify::keyless::KeylessSigner;
use clusterstack::source::verify::sign::{KeySigner, sign_release_dir, sign_release_dir_keyless};
use serde_json::{Value, json};
use support::apiserver::ApiServer;
use support::github::{FakeGitHub, Route};
use support::operator::{CC, CS, Operator, capi_server, condition, publish_to, release_in, settings, wait_for};
use support::sigstore::{FakeSigstore, token};

const TAG: &str = "docker-ferrol-1-27-v1";
const CLASS_TGZ: &str = "docker-ferrol-1-27-cluster-class-v1.tgz";

/// Copies the repository's release v1 into `root/<name>/<TAG>` and returns `root/<name>`.
fn release_copy(root: &Path, name: &str) -> std::path::PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases").join(TAG);
    let dir = root.join(name);
    let release = dir.join(TAG);
    std::fs::create_dir_all(&release).unwrap();
    for entry in std::fs::read_dir(&source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), release.join(entry.file_name())).unwrap();
    }
    dir
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

fn stack(ns: &str, dir: &Path) -> Value {
    json!({
        "apiVersion": CS, "kind": "ClusterStack",
        "metadata": {"name": "ferrol", "namespace": ns},
        "spec": {
            "provider": "docker", "name": "ferrol", "kubernetesVersion": "1.27", "channel": "stable",
            "versions": ["v1"], "autoSubscribe": false, "pollInterval": "1s",
            "source": {"directory": {"path": dir.display().to_string()}},
            "verify": {
                "key": {"secretRef": {"name": "release-signing"}},
                "ignoreTransparencyLog": true,
            },
        }
    })
}

fn key_secret(ns: &str, public_pem: &str) -> Value {
    let data = base64::engine::general_purpose::STANDARD.encode(public_pem);
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "release-signing", "namespace": ns},
           "data": {"cosign.pub": data}})
}

#[tokio::test]
async fn only_a_release_signed_by_the_policys_key_is_applied() {
    let namespaces = ["signed", "unsigned", "other-key", "swapped"];
    let server = capi_server(&namespaces).await;
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();

    let ours = KeySigner::generate().unwrap();
    let signer = KeySigner::from_pem(&ours.private_pem).unwrap();
    let stranger = KeySigner::from_pem(&KeySigner::generate().unwrap().private_pem).unwrap();

    let signed = release_copy(root.path(), "signed");
    assert_eq!(sign_release_dir(&signed.join(TAG), &signer).unwrap().len(), 7, "every file has a bundle");
    let unsigned = release_copy(root.path(), "unsigned");
    let other_key = release_copy(root.path(), "other-key");
    sign_release_dir(&other_key.join(TAG), &stranger).unwrap();
    let swapped = release_copy(root.path(), "swapped");
    let release = swapped.join(TAG);
    sign_release_dir(&release, &signer).unwrap();
    // After signing: another cluster class under the same name, SHA256SUMS made to agree.
    let v2_class = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("releases/docker-ferrol-1-27-v2/docker-ferrol-1-27-cluster-class-v2.tgz");
    let evil = std::fs::read(v2_class).unwrap();
    std::fs::write(release.join(CLASS_TGZ), &evil).unwrap();
    let sums = std::fs::read_to_string(release.join("SHA256SUMS")).unwrap();
    let sums: String = sums
        .lines()
        .map(
            |l| if l.ends_with(CLASS_TGZ) { format!("{}  {CLASS_TGZ}\n", sha256_hex(&evil)) } else { format!("{l}\n") },
        )
        .collect();
    std::fs::write(release.join("SHA256SUMS"), sums).unwrap();

    let mut s = settings(SourceSpec::dir(signed.clone()), cache.path());
    s.directory_roots = DirectoryRoots::new(&[root.path().to_path_buf()], cache.path());
    let op = Operator::start(&server, s);
    for (ns, dir) in [("signed", &signed), ("unsigned", &unsigned), ("other-key", &other_key), ("swapped", &swapped)] {
        server.put_object(key_secret(ns, signer.public_key_pem()));
        server.put_object(stack(ns, dir));
    }

    let expected = [("unsigned", "SignatureMissing"), ("other-key", "WrongIdentity"), ("swapped", "ArtifactMismatch")];
    wait_for_outcomes(&server, &["signed"], &expected).await;

    // The signed release's objects are applied; the others' never were.
    assert!(server.get_object(CC, "ClusterClass", Some("signed"), TAG).is_some(), "the signed class is applied");
    for (ns, reason) in expected {
        assert_refused(&server, &op, ns, reason);
    }
    // What the messages say: the asset and why.
    let message = |ns: &str| condition(&release_in(&server, ns, TAG).unwrap(), "Ready").unwrap()["message"].to_string();
    assert!(message("unsigned").contains(".sigstore.json"), "{}", message("unsigned"));
    assert!(message("other-key").contains("key"), "{}", message("other-key"));
    assert!(message("swapped").contains(CLASS_TGZ), "{}", message("swapped"));
    op.stop().await;
}

/// The Ready condition's status and reason of release v1 in `ns`.
fn ready_reason(server: &ApiServer, ns: &str) -> Option<(String, String)> {
    release_in(server, ns, TAG).and_then(|r| condition(&r, "Ready")).map(|c| {
        (c["status"].as_str().unwrap_or_default().to_string(), c["reason"].as_str().unwrap_or_default().to_string())
    })
}

/// Waits until release v1 is ready in each of `ready` and refused with its reason in each of `refused`.
async fn wait_for_outcomes(server: &ApiServer, ready: &[&str], refused: &[(&str, &str)]) {
    for ns in ready {
        wait_for(&format!("{ns}: the signed release is ready"), || {
            ready_reason(server, ns).is_some_and(|(s, _)| s == "True")
        })
        .await;
    }
    for (ns, reason) in refused {
        wait_for(&format!("{ns} refused with {reason}"), || {
            ready_reason(server, ns).is_some_and(|(s, r)| s == "False" && r == *reason)
        })
        .await;
    }
}

/// Release v1 in `ns` was refused with `reason` (condition, Event, metric) and nothing of it was
/// ever written.
fn assert_refused(server: &ApiServer, op: &Operator, ns: &str, reason: &str) {
    assert!(server.get_object(CC, "ClusterClass", Some(ns), TAG).is_none(), "{ns}: nothing applied");
    let written = server.requests().iter().any(|r| {
        r.namespace == ns
            && ["create", "update", "patch"].contains(&r.verb.as_str())
            && !["clusterstackreleases", "clusterstacks", "events", "secrets", "configmaps"]
                .contains(&r.resource.as_str())
    });
    assert!(!written, "{ns}: no object of the release was written");
    let r = release_in(server, ns, TAG).unwrap();
    let message = condition(&r, "Ready").unwrap()["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("signature check failed"), "{ns}: {message}");
    let events = server.list_objects("events.k8s.io/v1", "Event");
    assert!(
        events.iter().any(|e| e["regarding"]["namespace"] == ns && e["reason"] == reason && e["type"] == "Warning"),
        "{ns}: a {reason} Event"
    );
    let metrics = op.metrics.encode().unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("clusterstack_reconcile_failures_total")
                && l.contains(&format!("reason=\"{reason}\""))),
        "{reason} counted:\n{metrics}"
    );
}

fn ready_message(server: &ApiServer, ns: &str) -> String {
    condition(&release_in(server, ns, TAG).unwrap(), "Ready").unwrap()["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A GitHub Actions token of the workflow `release.yml` of `repository`, run for tag v1.
fn actions_token(repository: &str) -> String {
    token(
        "https://token.actions.githubusercontent.com",
        json!({
            "sub": format!("repo:{repository}:ref:refs/tags/v1"),
            "repository": repository,
            "ref": "refs/tags/v1",
            "job_workflow_ref": format!("{repository}/.github/workflows/release.yml@refs/tags/v1"),
        }),
    )
}

/// A keyless policy: the workflow `release.yml` of acme/stacks for a v* tag, GitHub Actions'
/// issuer (the default), the fake instance's root from the ConfigMap `sigstore-root`.
fn keyless_policy() -> Value {
    json!({
        "identity": {"repository": "acme/stacks", "workflow": ".github/workflows/release.yml", "ref": "refs/tags/v*"},
        "trustedRoot": {"configMapRef": {"name": "sigstore-root"}},
    })
}

fn root_config_map(ns: &str, fake: &FakeSigstore) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "sigstore-root", "namespace": ns},
           "data": {"trusted_root.json": fake.trusted_root()}})
}

#[tokio::test]
async fn a_certificate_of_another_identity_is_refused() {
    let namespaces = ["keyless", "impostor"];
    let server = capi_server(&namespaces).await;
    let root = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let fake = FakeSigstore::start().await;
    let ours = KeylessSigner::new(&actions_token("acme/stacks"), fake.url(), fake.url()).unwrap();
    // Same CA, same workflow file and tag, another repository: a valid certificate, not ours.
    let theirs = KeylessSigner::new(&actions_token("evil/stacks"), fake.url(), fake.url()).unwrap();
    let keyless = release_copy(root.path(), "keyless");
    assert_eq!(sign_release_dir_keyless(&keyless.join(TAG), &ours).await.unwrap().len(), 7);
    let impostor = release_copy(root.path(), "impostor");
    sign_release_dir_keyless(&impostor.join(TAG), &theirs).await.unwrap();
    assert_eq!(fake.log_size(), 14, "every signature is in the log");

    let mut s = settings(SourceSpec::dir(keyless.clone()), cache.path());
    s.directory_roots = DirectoryRoots::new(&[root.path().to_path_buf()], cache.path());
    let op = Operator::start(&server, s);
    for (ns, dir) in [("keyless", &keyless), ("impostor", &impostor)] {
        server.put_object(root_config_map(ns, &fake));
        let mut body = stack(ns, dir);
        body["spec"]["verify"] = keyless_policy();
        server.put_object(body);
    }
    wait_for_outcomes(&server, &["keyless"], &[("impostor", "WrongIdentity")]).await;
    assert!(server.get_object(CC, "ClusterClass", Some("keyless"), TAG).is_some(), "the signed class is applied");
    assert_refused(&server, &op, "impostor", "WrongIdentity");
    let message = ready_message(&server, "impostor");
    assert!(message.contains("https://github.com/evil/stacks"), "the message names the signer: {message}");
    op.stop().await;
}

#[tokio::test]
async fn attestations_from_githubs_api_are_verified() {
    let namespaces = ["attested", "others-only", "unattested"];
    let server = capi_server(&namespaces).await;
    let cache = tempfile::tempdir().unwrap();
    let github = FakeGitHub::start().await;
    let fake = FakeSigstore::start().await;
    let ours = KeylessSigner::new(&actions_token("acme/stacks"), fake.url(), fake.url()).unwrap();
    let theirs = KeylessSigner::new(&actions_token("evil/stacks"), fake.url(), fake.url()).unwrap();
    // The release's assets, without any bundle: what an `attest-build-provenance` job leaves.
    let mut digests = Vec::new();
    for repository in namespaces {
        publish_to(&github, "acme", repository, TAG);
    }
    // Each asset but SHA256SUMS, which needs no signature when every asset has its own.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("releases").join(TAG);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().is_some_and(|n| n != "SHA256SUMS") {
            digests.push(sha256_hex(&std::fs::read(path).unwrap()));
        }
    }
    for hex in &digests {
        let digest = clusterstack::source::verify::digest_from_hex(hex).unwrap();
        let subject = [format!("sha256:{hex}")];
        let good: Value = serde_json::from_str(&ours.bundle_for_digest(&digest).await.unwrap()).unwrap();
        let bad: Value = serde_json::from_str(&theirs.bundle_for_digest(&digest).await.unwrap()).unwrap();
        // Newest first: the impostor's attestation comes before ours.
        github.add_attestation("acme", "attested", &subject, good);
        github.add_attestation("acme", "attested", &subject, bad.clone());
        github.add_attestation("acme", "others-only", &subject, bad);
    }

    let mut s = settings(SourceSpec::github("acme", "attested"), cache.path());
    s.github = GitHubConfig { api_url: github.api_url(), token: None, include_prereleases: false };
    let op = Operator::start(&server, s);
    for ns in namespaces {
        server.put_object(root_config_map(ns, &fake));
        let mut body = stack(ns, Path::new("/unused"));
        body["spec"]["source"] = json!({"github": {"owner": "acme", "repository": ns}});
        body["spec"]["verify"] = keyless_policy();
        server.put_object(body);
    }
    let refused = [("others-only", "WrongIdentity"), ("unattested", "SignatureMissing")];
    wait_for_outcomes(&server, &["attested"], &refused).await;
    assert!(server.get_object(CC, "ClusterClass", Some("attested"), TAG).is_some(), "the attested class is applied");
    for (ns, reason) in refused {
        assert_refused(&server, &op, ns, reason);
    }
    assert!(
        ready_message(&server, "others-only").contains("no attestation of sha256:"),
        "{}",
        ready_message(&server, "others-only")
    );
    assert!(
        ready_message(&server, "unattested").contains("no attestation of sha256:"),
        "{}",
        ready_message(&server, "unattested")
    );
    // Asked by digest, in the stack's repository, once each.
    let asked = github.requests_to(Route::Attestations);
    for hex in &digests {
        let path = format!("/repos/acme/attested/attestations/sha256:{hex}");
        assert_eq!(asked.iter().filter(|r| r.uri.starts_with(&path)).count(), 1, "{path} asked once: {asked:?}");
    }
    op.stop().await;
}
