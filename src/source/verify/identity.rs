//! The identity a keyless signature must carry: the OIDC issuer, and either an exact subject
//! (the certificate's SAN, as `cosign --certificate-identity`) or a GitHub Actions workload:
//! repository, workflow file and ref pattern, read from the SAN and Fulcio's CI claims.

use sigstore_verify::crypto::CertificateInfo;

use super::{Failure, FailureReason};

/// GitHub Actions' OIDC issuer, the default.
pub const GITHUB_ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

/// Who must have signed, for keyless signatures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The OIDC issuer; default [`GITHUB_ACTIONS_ISSUER`].
    pub issuer: Option<String>,
    /// The certificate's SAN exactly (an email, a URI).
    pub subject: Option<String>,
    /// `OWNER/REPO` the workflow ran in (the certificate's source repository).
    pub repository: Option<String>,
    /// The workflow file within the signing repository, e.g. `.github/workflows/release.yml`.
    pub workflow: Option<String>,
    /// A glob over the ref the workflow ran for, e.g. `refs/tags/v*` (`*` matches any run of
    /// characters, `/` included).
    pub ref_pattern: Option<String>,
}

impl Identity {
    pub fn issuer(&self) -> &str {
        self.issuer.as_deref().unwrap_or(GITHUB_ACTIONS_ISSUER)
    }

    /// Subject and issuer for `sigstore-verify`'s exact match, when that is all there is to check.
    pub fn exact_policy(&self) -> Option<(String, String)> {
        let only_subject = self.repository.is_none() && self.workflow.is_none() && self.ref_pattern.is_none();
        match &self.subject {
            Some(subject) if only_subject => Some((subject.clone(), self.issuer().to_string())),
            _ => None,
        }
    }

    /// Something to check beyond the issuer (a policy naming no one would accept anyone whom
    /// the issuer vouches for).
    pub fn is_specific(&self) -> bool {
        self.subject.is_some() || self.repository.is_some()
    }

    /// Checks the verified certificate's claims (the issuer was checked by `sigstore-verify`).
    pub fn check(&self, cert: &CertificateInfo) -> Result<(), Failure> {
        let san = cert.identity.as_ref().map(|s| s.as_str().to_string()).unwrap_or_default();
        let wrong = |what: String| Failure::new(FailureReason::WrongIdentity, what);
        if let Some(subject) = &self.subject
            && san != *subject
        {
            return Err(wrong(format!("signed by {san:?}, expected {subject:?}")));
        }
        let claims = &cert.ci_claims;
        if let Some(repository) = &self.repository {
            let want = format!("https://github.com/{}", repository.trim_matches('/'));
            let got = claims.source_repository_uri.as_deref().unwrap_or("");
            if !got.eq_ignore_ascii_case(&want) {
                return Err(wrong(format!("signed in repository {got:?}, expected {want:?} (signer {san:?})")));
            }
        }
        // The SAN of a GitHub Actions certificate is the workflow that signed:
        // https://github.com/OWNER/REPO/.github/workflows/FILE@REF.
        let (signer_path, signer_ref) = match san.strip_prefix("https://github.com/").and_then(|s| s.rsplit_once('@')) {
            Some((path, r)) => (path.to_string(), r.to_string()),
            None => (String::new(), String::new()),
        };
        if let Some(workflow) = &self.workflow {
            let workflow = workflow.trim_start_matches('/');
            let repository = self.repository.as_deref().map(|r| r.trim_matches('/'));
            let ok = match repository {
                Some(r) => signer_path.eq_ignore_ascii_case(&format!("{r}/{workflow}")),
                None => signer_path.ends_with(&format!("/{workflow}")),
            };
            if !ok {
                return Err(wrong(format!("signed by workflow {san:?}, expected {workflow}")));
            }
        }
        if let Some(pattern) = &self.ref_pattern {
            let source_ref = claims.source_repository_ref.as_deref().unwrap_or(&signer_ref);
            if !glob(pattern, source_ref) {
                return Err(wrong(format!("signed for ref {source_ref:?}, expected {pattern:?} (signer {san:?})")));
            }
        }
        Ok(())
    }
}

/// `*` matches any run of characters (`/` too), every other character itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_refs() {
        assert!(glob("refs/tags/v*", "refs/tags/v1.2.3"));
        assert!(glob("refs/heads/main", "refs/heads/main"));
        assert!(!glob("refs/heads/main", "refs/heads/main2"));
        assert!(glob("refs/*/release-*", "refs/heads/release-1.0"));
        assert!(!glob("refs/tags/v*", "refs/heads/v1"));
        assert!(glob("*", ""));
        assert!(!glob("a*a", "a"));
    }

    #[test]
    fn only_a_subject_is_an_exact_policy() {
        let exact = Identity { subject: Some("me@example.com".into()), ..Default::default() };
        assert_eq!(exact.exact_policy(), Some(("me@example.com".into(), GITHUB_ACTIONS_ISSUER.into())));
        let github = Identity { repository: Some("o/r".into()), ..Default::default() };
        assert_eq!(github.exact_policy(), None);
        assert!(github.is_specific());
        assert!(!Identity::default().is_specific());
    }
}
