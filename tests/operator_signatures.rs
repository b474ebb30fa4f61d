//! Signed releases, the whole operator on the API server double: four ClusterStacks with the same
//! signature policy (a managed key from a Secret, no transparency log: `publish --sign --key`'s
//! air-gapped form), each following release v1 from a directory of its own: one signed with the
//! policy's key, one unsigned, one signed with another key, one whose cluster-class tarball was
//! swapped after signing (its `SHA256SUMS` updated too, as an attacker with write access would).
//! Only the first is applied; each other is refused with its reason, an Event and a metric, and
//! none of its objects is ever applied.

mod support;

use std::path::Path;

use base64::Engine;
use clusterstack::controller::runtime::tenancy::DirectoryRoots;
use clusterstack::source::SourceSpec;
use clusterstack::source::verify::sign::{KeySigner, sign_release_dir};
use serde_json::{Value, json};
use support::operator::{CC, CS, Operator, capi_server, condition, release_in, settings, wait_for};

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

    let ready_reason = |ns: &str| {
        release_in(&server, ns, TAG).and_then(|r| condition(&r, "Ready")).map(|c| {
            (c["status"].as_str().unwrap_or_default().to_string(), c["reason"].as_str().unwrap_or_default().to_string())
        })
    };
    wait_for("the signed release is ready", || ready_reason("signed").is_some_and(|(s, _)| s == "True")).await;
    let expected = [("unsigned", "SignatureMissing"), ("other-key", "WrongIdentity"), ("swapped", "ArtifactMismatch")];
    for (ns, reason) in expected {
        wait_for(&format!("{ns} refused with {reason}"), || {
            ready_reason(ns).is_some_and(|(s, r)| s == "False" && r == reason)
        })
        .await;
    }

    // The signed release's objects are applied; the others' never were.
    assert!(server.get_object(CC, "ClusterClass", Some("signed"), TAG).is_some(), "the signed class is applied");
    for (ns, reason) in expected {
        assert!(server.get_object(CC, "ClusterClass", Some(ns), TAG).is_none(), "{ns}: nothing applied");
        let written = server.requests().iter().any(|r| {
            r.namespace == ns
                && ["create", "update", "patch"].contains(&r.verb.as_str())
                && r.resource != "clusterstackreleases"
                && r.resource != "clusterstacks"
                && r.resource != "events"
                && r.resource != "secrets"
        });
        assert!(!written, "{ns}: no object of the release was written");
        let r = release_in(&server, ns, TAG).unwrap();
        let message = condition(&r, "Ready").unwrap()["message"].as_str().unwrap_or_default().to_string();
        assert!(message.contains("signature check failed"), "{ns}: {message}");
        let events = server.list_objects("events.k8s.io/v1", "Event");
        assert!(
            events.iter().any(|e| e["regarding"]["namespace"] == ns && e["reason"] == reason && e["type"] == "Warning"),
            "{ns}: a {reason} Event"
        );
        let metrics = op.metrics.encode().unwrap();
        assert!(
            metrics.lines().any(|l| l.starts_with("clusterstack_reconcile_failures_total")
                && l.contains(&format!("reason=\"{reason}\""))),
            "{reason} counted:\n{metrics}"
        );
    }
    // What the messages say: the asset and why.
    let message = |ns: &str| condition(&release_in(&server, ns, TAG).unwrap(), "Ready").unwrap()["message"].to_string();
    assert!(message("unsigned").contains(".sigstore.json"), "{}", message("unsigned"));
    assert!(message("other-key").contains("key"), "{}", message("other-key"));
    assert!(message("swapped").contains(CLASS_TGZ), "{}", message("swapped"));
    op.stop().await;
}
