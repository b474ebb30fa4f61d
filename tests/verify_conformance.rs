//! The Sigstore conformance suite's bundle-verification cases (`../shared/sigstore-conformance`,
//! read in place, never copied), each run through `clusterstack verify-bundle` as the suite's
//! driver runs a client: twice, with the artifact's path and with its `sha256:` digest, with
//! `--key` for managed-key cases and `--trusted-root` where the case has its own root. A case named
//! `*_fail` must exit non-zero, every other one zero.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The suite, or `None` (skipped loudly) when it is missing; with `CI=true` a missing suite fails.
fn require_suite() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = match std::env::var_os("CLUSTERSTACK_SIGSTORE_CONFORMANCE").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        // `<repo>/../shared`; from a worktree under `<root>/wt/<branch>`, `<root>/shared`.
        None => {
            let near = root.join("../shared/sigstore-conformance");
            if near.is_dir() { near } else { root.join("../../shared/sigstore-conformance") }
        }
    };
    if dir.join("CASES.tsv").is_file() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the Sigstore conformance suite is not at ../shared/sigstore-conformance");
    }
    eprintln!(
        "\n*** SKIPPED: verify_conformance: no Sigstore conformance suite (../shared/sigstore-conformance \
         beside the workspace, or set CLUSTERSTACK_SIGSTORE_CONFORMANCE) ***\n"
    );
    None
}

struct Case {
    name: String,
    pass: bool,
    artifact: String,
    bundle: String,
    trusted_root: Option<String>,
    identity: String,
    issuer: String,
    digest: String,
    key: Option<String>,
}

fn cases(suite: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(suite.join("CASES.tsv")).expect("CASES.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (c_case, c_expected, c_artifact, c_bundle, c_root) =
        (col("case"), col("expected"), col("artifact"), col("bundle"), col("trusted_root"));
    let (c_identity, c_issuer, c_digest, c_key, c_source) = (
        col("certificate_identity"),
        col("oidc_issuer"),
        col("artifact_digest"),
        col("key"),
        col("trusted_root_source"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            let opt = |v: &str| (v != "-").then(|| v.to_string());
            Case {
                name: f[c_case].rsplit('/').next().unwrap_or(f[c_case]).to_string(),
                pass: match f[c_expected] {
                    "pass" => true,
                    "fail" => false,
                    other => panic!("{}: expected {other:?}", f[c_case]),
                },
                artifact: f[c_artifact].to_string(),
                bundle: f[c_bundle].to_string(),
                // `default-production`: the driver passes no root and the client uses its own.
                trusted_root: (f[c_source] == "case").then(|| f[c_root].to_string()),
                identity: f[c_identity].to_string(),
                issuer: f[c_issuer].to_string(),
                digest: f[c_digest].to_string(),
                key: opt(f[c_key]),
            }
        })
        .collect()
}

#[test]
fn every_conformance_case_gives_its_expected_result() {
    let Some(suite) = require_suite() else { return };
    let cases = cases(&suite);
    assert_eq!(cases.len(), 70, "the suite has 70 cases");
    assert_eq!(cases.iter().filter(|c| c.pass).count(), 21, "21 of them valid");
    let mut wrong = Vec::new();
    let mut runs = 0;
    for case in &cases {
        for subject in [&case.artifact, &case.digest] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_clusterstack"));
            cmd.current_dir(&suite).arg("verify-bundle").arg("--bundle").arg(&case.bundle);
            match &case.key {
                Some(key) => cmd.arg("--key").arg(key),
                None => cmd
                    .arg("--certificate-identity")
                    .arg(&case.identity)
                    .arg("--certificate-oidc-issuer")
                    .arg(&case.issuer),
            };
            if let Some(root) = &case.trusted_root {
                cmd.arg("--trusted-root").arg(root);
            }
            let out = cmd.arg(subject).output().expect("run clusterstack");
            runs += 1;
            if out.status.success() != case.pass {
                wrong.push(format!(
                    "{} ({}): expected {}, exit {:?}: {}{}",
                    case.name,
                    if subject.starts_with("sha256:") { "digest" } else { "path" },
                    if case.pass { "pass" } else { "fail" },
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout).trim(),
                    String::from_utf8_lossy(&out.stderr).trim(),
                ));
            }
        }
    }
    assert_eq!(runs, 140);
    assert!(wrong.is_empty(), "{} of {runs} runs gave the wrong result:\n{}", wrong.len(), wrong.join("\n"));
}

/// The identity rules of a policy (repository, workflow, ref pattern) on a real GitHub Actions
/// certificate: the suite's `happy-path-v0.3` bundle, signed by the workflow
/// `sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml`
/// on `refs/heads/main`, proved against the built-in public-good root (the policy's default roots
/// are public-good and GitHub's instance).
#[test]
fn a_policy_names_the_repository_workflow_and_ref_that_signed() {
    use clusterstack::api::{VerifyIdentity, VerifySpec};
    use clusterstack::source::verify::FailureReason;
    use clusterstack::source::verify::policy::{ReleasePolicy, Resolved};
    let Some(suite) = require_suite() else { return };
    let case = suite.join("test/assets/bundle-verify/happy-path-v0.3");
    let bundle = std::fs::read(case.join("bundle.sigstore.json")).unwrap();
    let artifact = std::fs::read(suite.join("test/assets/bundle-verify/a.txt")).unwrap();
    let digest = clusterstack::source::verify::sha256_of(&artifact);
    let check = |identity: VerifyIdentity| {
        let spec = VerifySpec { identity: Some(identity), ..Default::default() };
        let policy = ReleasePolicy::new(&spec, &Resolved::default()).expect("a policy");
        policy.trust.verify(&bundle, &digest)
    };
    let repo = "sigstore-conformance/extremely-dangerous-public-oidc-beacon";
    let right = VerifyIdentity {
        repository: Some(repo.into()),
        workflow: Some(".github/workflows/extremely-dangerous-oidc-beacon.yml".into()),
        ref_pattern: Some("refs/heads/*".into()),
        ..Default::default()
    };
    let verified = check(right.clone()).expect("the right identity verifies");
    assert!(verified.signer.ends_with("extremely-dangerous-oidc-beacon.yml@refs/heads/main"), "{verified:?}");
    assert_eq!(verified.root, "public-good");
    let wrong = [
        VerifyIdentity { repository: Some("sigstore-conformance/other".into()), ..right.clone() },
        VerifyIdentity { workflow: Some(".github/workflows/release.yml".into()), ..right.clone() },
        VerifyIdentity { ref_pattern: Some("refs/tags/v*".into()), ..right.clone() },
        VerifyIdentity { issuer: Some("https://accounts.google.com".into()), ..right.clone() },
        VerifyIdentity { subject: Some("someone@example.com".into()), repository: None, ..Default::default() },
    ];
    for identity in wrong {
        let failure = check(identity.clone()).expect_err("another identity is refused");
        assert_eq!(failure.reason, FailureReason::WrongIdentity, "{identity:?}: {failure}");
    }
    // Another artifact under the right identity: the signature does not cover it.
    let other = clusterstack::source::verify::sha256_of(b"another artifact");
    let spec = VerifySpec { identity: Some(right), ..Default::default() };
    let policy = ReleasePolicy::new(&spec, &Resolved::default()).unwrap();
    assert_eq!(policy.trust.verify(&bundle, &other).unwrap_err().reason, FailureReason::ArtifactMismatch);
}

/// A release checked with its bundles from an attestation store (what GitHub's attestations API
/// serves for a public repository: a DSSE in-toto attestation by the public-good instance): the
/// suite's `happy-path-intoto-in-dsse-v3` attests `a.txt`. Among several attestations one that
/// satisfies the policy is enough; when none does, the most telling failure is reported; none at
/// all is `SignatureMissing`, naming the store.
#[tokio::test]
async fn a_release_is_covered_by_an_attestation_from_the_store() {
    use std::collections::BTreeMap;

    use clusterstack::api::{VerifyIdentity, VerifySpec};
    use clusterstack::source::verify::FailureReason;
    use clusterstack::source::verify::policy::{ReleasePolicy, Resolved};
    let Some(suite) = require_suite() else { return };
    let cases = suite.join("test/assets/bundle-verify");
    let read = |case: &str| std::fs::read(cases.join(case).join("bundle.sigstore.json")).unwrap();
    let attestation = read("happy-path-intoto-in-dsse-v3");
    let broken = read("dsse-invalid-sig_fail");
    let artifact = std::fs::read(cases.join("a.txt")).unwrap();
    let sha256 = clusterstack::source::verify::sha256_of(&artifact).to_hex();
    let assets = BTreeMap::from([("a.txt".to_string(), sha256.clone())]);
    let policy = |repository: &str| {
        let identity = VerifyIdentity {
            repository: Some(repository.into()),
            workflow: Some(".github/workflows/extremely-dangerous-oidc-beacon.yml".into()),
            ..Default::default()
        };
        ReleasePolicy::new(&VerifySpec { identity: Some(identity), ..Default::default() }, &Resolved::default())
            .unwrap()
    };
    let right = policy("sigstore-conformance/extremely-dangerous-public-oidc-beacon");
    let asked = std::sync::Mutex::new(Vec::new());
    let check = async |policy: &ReleasePolicy, store: Option<Vec<Vec<u8>>>| {
        let attested = |digest: String| {
            asked.lock().unwrap().push(digest);
            let store = store.clone();
            async move { Ok::<_, std::convert::Infallible>(store) }
        };
        policy.check_bundles(&assets, None, |_| None, attested).await.unwrap()
    };

    let verified = check(&right, Some(vec![broken.clone(), attestation.clone()])).await.expect("one verifies");
    assert!(verified.signer.ends_with("extremely-dangerous-oidc-beacon.yml@refs/heads/main"), "{verified:?}");
    assert_eq!(asked.lock().unwrap().as_slice(), std::slice::from_ref(&sha256), "asked for the asset's digest");

    let wrong = policy("sigstore-conformance/other");
    let failure = check(&wrong, Some(vec![broken.clone(), attestation])).await.unwrap_err();
    assert_eq!(failure.reason, FailureReason::WrongIdentity, "{failure}");
    assert!(failure.message.contains(&format!("no attestation of sha256:{sha256} verifies")), "{failure}");

    let failure = check(&right, Some(vec![broken])).await.unwrap_err();
    assert_eq!(failure.reason, FailureReason::BadProof, "{failure}");
    let failure = check(&right, Some(Vec::new())).await.unwrap_err();
    assert_eq!(failure.reason, FailureReason::SignatureMissing, "{failure}");
    assert!(failure.message.contains("no attestation of sha256:"), "{failure}");
    let failure = check(&right, None).await.unwrap_err();
    assert_eq!(failure.reason, FailureReason::SignatureMissing, "{failure}");
    assert!(!failure.message.contains("attestation"), "a source without a store: {failure}");
}
