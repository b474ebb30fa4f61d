//! GitHub's JSON and header formats, parsed without I/O so they are unit-tested alone.

use serde::Deserialize;

use crate::release::ReleaseId;
use crate::source::{AssetInfo, AssetLocator, ListedRelease};

/// One element of `GET /repos/{o}/{r}/releases`, only the fields we use.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawRelease {
    pub tag_name: String,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub prerelease: bool,
    #[serde(default)]
    pub assets: Vec<RawAsset>,
}

/// One asset of a [`RawRelease`].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RawAsset {
    pub id: u64,
    pub name: String,
    pub size: u64,
    /// `"sha256:<hex>"`, or null on assets uploaded before GitHub computed digests.
    #[serde(default)]
    pub digest: Option<String>,
}

/// What one raw release becomes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sorted {
    Release(ListedRelease),
    /// A tag that is not a cluster-stack release.
    Foreign(String),
    /// A draft, or a pre-release nobody asked for.
    Ignored,
}

/// Turns a raw release into a listed one; `Err` names the asset whose digest is malformed.
pub(crate) fn sort_release(raw: &RawRelease, include_prereleases: bool) -> Result<Sorted, String> {
    if raw.draft || (raw.prerelease && !include_prereleases) {
        return Ok(Sorted::Ignored);
    }
    // A tag in the class (dot) form is listed under the tag (dash) form, as the other sources do.
    let Ok(id) = ReleaseId::parse_any(&raw.tag_name) else {
        return Ok(Sorted::Foreign(raw.tag_name.clone()));
    };
    let mut assets = Vec::with_capacity(raw.assets.len());
    for asset in &raw.assets {
        let sha256 = match &asset.digest {
            None => None,
            Some(digest) => parse_digest(digest)
                .map_err(|why| format!("release {} asset {}: digest {digest:?} {why}", raw.tag_name, asset.name))?,
        };
        assets.push(AssetInfo {
            name: asset.name.clone(),
            size: asset.size,
            sha256,
            locator: AssetLocator::GitHub { id: asset.id },
        });
    }
    Ok(Sorted::Release(ListedRelease { tag: id.tag(), id, prerelease: raw.prerelease, assets }))
}

/// `"sha256:<64 hex>"` → lowercase hex. Other algorithms yield `None` (nothing we can check),
/// a malformed sha256 is an error: accepting it silently would disable the integrity check.
pub(crate) fn parse_digest(digest: &str) -> Result<Option<String>, &'static str> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err("has no '<algorithm>:' prefix");
    };
    if !algorithm.eq_ignore_ascii_case("sha256") {
        return Ok(None);
    }
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("is not 64 hexadecimal digits");
    }
    Ok(Some(hex.to_ascii_lowercase()))
}

/// The `rel="next"` target of a `Link` header (RFC 8288), as GitHub writes it:
/// `<https://...&page=2>; rel="next", <https://...&page=5>; rel="last"`.
pub(crate) fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let is_next = params.split(';').any(|param| {
            let Some((key, value)) = param.trim().split_once('=') else { return false };
            key.trim().eq_ignore_ascii_case("rel")
                && value.trim().trim_matches('"').split_ascii_whitespace().any(|rel| rel.eq_ignore_ascii_case("next"))
        });
        is_next.then(|| target.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_link_is_found_among_others() {
        let header = r#"<https://api.github.com/repositories/1/releases?per_page=100&page=1>; rel="prev", <https://api.github.com/repositories/1/releases?per_page=100&page=3>; rel="next", <https://api.github.com/repositories/1/releases?per_page=100&page=9>; rel="last""#;
        assert_eq!(
            next_link(header).as_deref(),
            Some("https://api.github.com/repositories/1/releases?per_page=100&page=3")
        );
    }

    #[test]
    fn no_next_link_on_the_last_page() {
        let header = r#"<https://x/releases?page=1>; rel="first", <https://x/releases?page=2>; rel="prev""#;
        assert_eq!(next_link(header), None);
        assert_eq!(next_link(""), None);
        assert_eq!(next_link("garbage"), None);
    }

    #[test]
    fn digests() {
        let hex = "AB".repeat(32);
        assert_eq!(parse_digest(&format!("sha256:{hex}")), Ok(Some("ab".repeat(32))));
        assert_eq!(parse_digest("sha512:0011"), Ok(None));
        assert!(parse_digest("sha256:abc").is_err());
        assert!(parse_digest(&format!("sha256:{}", "g".repeat(64))).is_err());
        assert!(parse_digest("deadbeef").is_err());
    }

    fn raw(tag: &str, draft: bool, prerelease: bool) -> RawRelease {
        RawRelease {
            tag_name: tag.to_string(),
            draft,
            prerelease,
            assets: vec![RawAsset {
                id: 7,
                name: "metadata.yaml".into(),
                size: 12,
                digest: Some(format!("sha256:{}", "0F".repeat(32))),
            }],
        }
    }

    #[test]
    fn sorting_releases() {
        let tag = "docker-ferrol-1-27-v2";
        let Ok(Sorted::Release(release)) = sort_release(&raw(tag, false, false), false) else {
            panic!("a stable release is listed");
        };
        assert_eq!(release.tag, tag);
        assert_eq!(release.id, ReleaseId::from_tag(tag).unwrap());
        assert_eq!(
            release.assets,
            vec![AssetInfo {
                name: "metadata.yaml".into(),
                size: 12,
                sha256: Some("0f".repeat(32)),
                locator: AssetLocator::GitHub { id: 7 }
            }]
        );
        assert_eq!(sort_release(&raw(tag, true, false), true), Ok(Sorted::Ignored));
        assert_eq!(sort_release(&raw(tag, false, true), false), Ok(Sorted::Ignored));
        assert!(matches!(sort_release(&raw(tag, false, true), true), Ok(Sorted::Release(r)) if r.prerelease));
        assert_eq!(
            sort_release(&raw("openstack-csp-helper-v0.2.0", false, false), false),
            Ok(Sorted::Foreign("openstack-csp-helper-v0.2.0".into()))
        );
        let mut bad = raw(tag, false, false);
        bad.assets[0].digest = Some("sha256:nothex".into());
        let err = sort_release(&bad, false).unwrap_err();
        assert!(err.contains("metadata.yaml") && err.contains(tag), "{err}");
    }
}
