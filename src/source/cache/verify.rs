//! Checking what was downloaded: each asset against its size and the digests announced by the
//! source and by `SHA256SUMS`, and the release against the fetch policy.

use std::collections::BTreeMap;
use std::path::Path;

use super::{CacheError, CachedAsset, FetchPolicy, FetchedRelease, Verification, VerifiedBy, check_component};
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
