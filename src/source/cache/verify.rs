//! Checking what was downloaded: each asset against its size and the digests announced by the
//! source and by `SHA256SUMS`, and the release against the fetch policy.

use std::collections::BTreeMap;
use std::path::Path;

use super::{
    CacheError, CachedAsset, FetchPolicy, FetchedRelease, SignatureRecord, Verification, VerifiedBy, check_component,
};
use crate::source::verify::policy::{ReleasePolicy, is_signature_asset};
use crate::source::verify::{Failure, FailureReason, cosign};
use crate::source::{AssetInfo, ListedRelease, Progress, ReleaseSource, SHA256SUMS, SourceError};

pub(super) fn check_policy(
    fetched: FetchedRelease,
    policy: FetchPolicy,
    source_name: &str,
) -> Result<FetchedRelease, CacheError> {
    if policy.require_verified && fetched.verification != Verification::Verified {
        let assets = fetched
            .assets
            .iter()
            .filter(|a| a.name != SHA256SUMS && a.verified_by == VerifiedBy::None)
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        return Err(CacheError::Unverified {
            source_name: source_name.to_string(),
            release: fetched.tag().to_string(),
            assets,
        });
    }
    Ok(fetched)
}

/// Downloads one asset into `dir` and checks its size and digests.
pub(super) async fn fetch_asset(
    source: &impl ReleaseSource,
    release: &ListedRelease,
    asset: &AssetInfo,
    dir: &Path,
    progress: &dyn Progress,
    sums: &BTreeMap<String, String>,
) -> Result<CachedAsset, CacheError> {
    check_component("asset", &asset.name)?;
    let dest = dir.join(&asset.name);
    let got = source.download(release, asset, &dest, progress).await?;
    let mismatch = |what: &'static str, expected: String, actual: String| SourceError::Integrity {
        release: release.tag.clone(),
        asset: asset.name.clone(),
        what,
        expected,
        actual,
    };
    if got.size != asset.size {
        return Err(mismatch("size", asset.size.to_string(), got.size.to_string()).into());
    }
    let announced = asset.sha256.as_deref().map(str::to_ascii_lowercase);
    if let Some(expected) = &announced
        && *expected != got.sha256
    {
        return Err(mismatch("sha256", expected.clone(), got.sha256).into());
    }
    let listed = sums.get(&asset.name);
    if let Some(expected) = listed
        && *expected != got.sha256
    {
        return Err(mismatch("sha256 (SHA256SUMS)", expected.clone(), got.sha256).into());
    }
    let verified_by = match (announced.is_some(), listed.is_some()) {
        (true, true) => VerifiedBy::DigestAndSha256sums,
        (true, false) => VerifiedBy::Digest,
        (false, true) => VerifiedBy::Sha256sums,
        (false, false) => VerifiedBy::None,
    };
    Ok(CachedAsset { name: asset.name.clone(), size: got.size, sha256: got.sha256, verified_by })
}

/// Checks a downloaded release (its assets in `dir`) against a signature policy: the bundles of
/// its assets, and for `cosign` the signature of its OCI manifest. Nothing is extracted yet.
pub(super) async fn check_signatures(
    source: &impl ReleaseSource,
    release: &ListedRelease,
    policy: &ReleasePolicy,
    assets: &[CachedAsset],
    sums: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<SignatureRecord, CacheError> {
    let failed =
        |failure: Failure| CacheError::Signature { source_name: source.name(), release: release.tag.clone(), failure };
    let mut verified = None;
    if policy.wants_bundles() {
        let content: BTreeMap<String, String> = assets
            .iter()
            .filter(|a| a.name != SHA256SUMS && !is_signature_asset(&a.name))
            .map(|a| (a.name.clone(), a.sha256.clone()))
            .collect();
        let sums_digest = assets.iter().find(|a| a.name == SHA256SUMS).map(|a| a.sha256.clone());
        let sums = sums_digest.as_deref().map(|d| (d, sums));
        // Bundles are small JSON files; only those the release published are there.
        let read = |name: &str| {
            if check_component("asset", name).is_err() {
                return None;
            }
            std::fs::read(dir.join(name)).ok()
        };
        // Assets without a bundle of their own are looked up in the source's attestation store
        // (GitHub's attestations API); its errors (rate limit, 5xx, 401) are the source's.
        let attested = |sha256: String| async move { source.attestations(&sha256).await };
        verified = Some(policy.check_bundles(&content, sums, read, attested).await?.map_err(failed)?);
    }
    if policy.wants_cosign() {
        let found = source.cosign_signatures(release).await?.ok_or_else(|| {
            failed(Failure::new(
                FailureReason::SignatureMissing,
                format!("{} has no OCI manifest to carry a cosign signature", source.name()),
            ))
        })?;
        let v = cosign::verify_any(&policy.trust, &found.layers, &found.manifest_digest)
            .map_err(|f| failed(f.about(&format!("manifest {}", found.manifest_digest))))?;
        verified = Some(v);
    }
    let verified =
        verified.ok_or_else(|| failed(Failure::new(FailureReason::SignatureMissing, "nothing to verify")))?;
    tracing::info!(
        release = release.tag,
        signer = verified.signer,
        root = verified.root,
        "release signatures verified"
    );
    Ok(SignatureRecord { policy: policy.fingerprint.clone(), signer: verified.signer, root: verified.root })
}
