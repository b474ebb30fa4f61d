//! Signed releases on the real server: four ClusterStacks with the same signature policy (a
//! managed key from a Secret, no transparency log: `publish --sign --key`'s air-gapped form), each
//! following release v1 of the in-memory sample from a directory of its own: signed with the
//! policy's key, unsigned, signed with another key, and signed then its cluster-class tarball
//! swapped (its `SHA256SUMS` made to agree, as an attacker with write access would). And a fifth
//! with a keyless policy (a GitHub Actions workflow of acme/stacks, the trusted root of a Sigstore
//! of our own from a ConfigMap) whose release carries valid certificates of that instance for a
//! workflow of another repository. Only the first is applied; each other is refused with its
//! reason and an Event, and nothing of it is ever written (the audit log shows every request the
//! operator made).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use clusterstack::source::verify::keyless::KeylessSigner;
use clusterstack::source::verify::sign::{KeySigner, sign_release_dir, sign_release_dir_keyless};
use serde_json::{Value, json};

use super::support::real::{RealCluster, WAIT, wait_until};
use super::support::sigstore::{FakeSigstore, token};
use super::{CS, V1, condition, release};

const CLASS_TGZ: &str = "inmemory-ferrol-1-35-cluster-class-v1.tgz";

/// Copies the repository's release v1 into `root/<name>/<V1>` and returns `root/<name>`.
fn release_copy(root: &Path, name: &str) -> PathBuf {
    let source = super::releases_dir().join(V1);
    let dir = root.join(name);
    let release = dir.join(V1);
    std::fs::create_dir_all(&release).expect("a release directory");
    for entry in std::fs::read_dir(&source).expect("release v1").flatten() {
        std::fs::copy(entry.path(), release.join(entry.file_name())).expect("a release file");
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
            "provider": "inmemory", "name": "ferrol", "kubernetesVersion": "1.35", "channel": "stable",
            "versions": ["v1"], "autoSubscribe": false, "pollInterval": "1s",
            "source": {"directory": {"path": dir.display().to_string()}},
            "verify": {"key": {"secretRef": {"name": "release-signing"}}, "ignoreTransparencyLog": true},
        }
    })
}

pub async fn only_a_release_signed_by_the_policys_key_is_applied(c: Arc<RealCluster>) {
    let k = c.admin().await;
    let root = c.scratch.path().join("signed-releases");
    let ours = KeySigner::generate().expect("a key");
    let signer = KeySigner::from_pem(&ours.private_pem).expect("our key");
    let stranger = KeySigner::from_pem(&KeySigner::generate().expect("a key").private_pem).expect("another key");

    let signed = release_copy(&root, "signed");
    sign_release_dir(&signed.join(V1), &signer).expect("signed");
    let unsigned = release_copy(&root, "unsigned");
    let other_key = release_copy(&root, "other-key");
    sign_release_dir(&other_key.join(V1), &stranger).expect("signed by another key");
    let swapped = release_copy(&root, "swapped");
    let release_dir = swapped.join(V1);
    sign_release_dir(&release_dir, &signer).expect("signed");
    // After signing: another cluster class under the same name, SHA256SUMS made to agree.
    let evil =
        std::fs::read(super::releases_dir().join("inmemory-ferrol-1-35-v2/inmemory-ferrol-1-35-cluster-class-v2.tgz"))
            .expect("v2's class");
    std::fs::write(release_dir.join(CLASS_TGZ), &evil).expect("swapped");
    let sums = std::fs::read_to_string(release_dir.join("SHA256SUMS")).expect("SHA256SUMS");
    let sums: String = sums
        .lines()
        .map(
            |l| if l.ends_with(CLASS_TGZ) { format!("{}  {CLASS_TGZ}\n", sha256_hex(&evil)) } else { format!("{l}\n") },
        )
        .collect();
    std::fs::write(release_dir.join("SHA256SUMS"), sums).expect("SHA256SUMS");

    // Valid certificates of the policy's instance, for the same workflow file and tag of another
    // repository.
    let sigstore = FakeSigstore::start().await;
    let claims = json!({
        "sub": "repo:evil/stacks:ref:refs/tags/v1", "repository": "evil/stacks", "ref": "refs/tags/v1",
        "job_workflow_ref": "evil/stacks/.github/workflows/release.yml@refs/tags/v1",
    });
    let impostor = KeylessSigner::new(
        &token("https://token.actions.githubusercontent.com", claims),
        sigstore.url(),
        sigstore.url(),
    )
    .expect("a keyless signer");
    let other_identity = release_copy(&root, "other-identity");
    sign_release_dir_keyless(&other_identity.join(V1), &impostor).await.expect("signed keyless");

    let args = vec![
        format!("--default-source=dir:{}", signed.display()),
        format!("--allowed-directory-roots={}", root.display()),
    ];
    let _op = c.operator("signatures", &args);
    let key = base64::engine::general_purpose::STANDARD.encode(signer.public_key_pem());
    let mut namespaces = Vec::new();
    let stacks = [
        ("signed", &signed),
        ("unsigned", &unsigned),
        ("other-key", &other_key),
        ("swapped", &swapped),
        ("other-identity", &other_identity),
    ];
    for (name, dir) in stacks {
        let ns = c.namespace(name).await;
        k.apply(
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "release-signing", "namespace": ns},
                        "data": {"cosign.pub": key}}),
        )
        .await;
        let mut body = stack(&ns, dir);
        if name == "other-identity" {
            k.apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "sigstore-root", "namespace": ns},
                            "data": {"trusted_root.json": sigstore.trusted_root()}}))
                .await;
            body["spec"]["verify"] = json!({
                "identity": {"repository": "acme/stacks", "workflow": ".github/workflows/release.yml", "ref": "refs/tags/v*"},
                "trustedRoot": {"configMapRef": {"name": "sigstore-root"}},
            });
        }
        k.apply(&body).await;
        namespaces.push((name, ns));
    }
    let ready = |ns: String| {
        let k = &k;
        async move {
            let r = release(k, &ns, V1).await?;
            let c = condition(&r, "Ready")?;
            Some((c["status"].as_str()?.to_string(), c["reason"].as_str()?.to_string(), c["message"].to_string()))
        }
    };
    let signed_ns = namespaces[0].1.clone();
    wait_until("the signed release Ready", WAIT, || async {
        ready(signed_ns.clone()).await.filter(|(s, _, _)| s == "True")
    })
    .await;
    assert!(k.get(super::CAPI, "ClusterClass", Some(&signed_ns), V1).await.is_some(), "the signed class is applied");

    for ((name, ns), (reason, names)) in namespaces[1..].iter().zip([
        ("SignatureMissing", ".sigstore.json"),
        ("WrongIdentity", "key"),
        ("ArtifactMismatch", CLASS_TGZ),
        ("WrongIdentity", "https://github.com/evil/stacks"),
    ]) {
        let (_, _, message) = wait_until(&format!("{name} refused with {reason}"), WAIT, || async {
            ready(ns.clone()).await.filter(|(s, r, _)| s == "False" && r == reason)
        })
        .await;
        assert!(message.contains("signature check failed") && message.contains(names), "{name}: {message}");
        assert!(k.get(super::CAPI, "ClusterClass", Some(ns), V1).await.is_none(), "{name}: nothing applied");
        let events = k.list("events.k8s.io/v1", "Event", Some(ns), None).await;
        assert!(
            events.iter().any(|e| e["reason"] == reason && e["type"] == "Warning"),
            "{name}: a {reason} Event: {events:#?}"
        );
    }
    // Nothing of a refused release was ever written: only the stack's and the release's own
    // status, its creation and Events.
    let written: Vec<_> = c
        .audit()
        .into_iter()
        .filter(|e| {
            namespaces[1..].iter().any(|(_, ns)| &e.namespace == ns)
                && ["create", "update", "patch"].contains(&e.verb.as_str())
                && !["clusterstackreleases", "clusterstacks", "events"].contains(&e.resource.as_str())
        })
        .collect();
    assert!(written.is_empty(), "objects of refused releases written: {written:#?}");
    for (_, ns) in &namespaces {
        c.drop_namespace(ns).await;
    }
}
