//! Naming a source: `github:OWNER/REPO` or `dir:PATH`, from a user's string,
//! from the Go operator's environment, or from a ClusterStack's `spec.source`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::api::{DirectorySource, GitHubSource, OciSource, ReleaseSourceSpec, SecretKeyRef};

use super::github::{self, Token};

/// The default source when nothing else is configured.
pub const DEFAULT_DIR: &str = "releases";

/// Environment variables of the Go operator, honoured for compatibility.
pub const ENV_GIT_ORG_NAME: &str = "GIT_ORG_NAME";
/// See [`ENV_GIT_ORG_NAME`].
pub const ENV_GIT_REPOSITORY_NAME: &str = "GIT_REPOSITORY_NAME";
/// See [`ENV_GIT_ORG_NAME`].
pub const ENV_GIT_ACCESS_TOKEN: &str = "GIT_ACCESS_TOKEN";
/// The usual GitHub token variable, used when `GIT_ACCESS_TOKEN` is unset.
pub const ENV_GITHUB_TOKEN: &str = "GITHUB_TOKEN";

/// Where releases come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceSpec {
    /// The releases of a GitHub repository.
    GitHub {
        owner: String,
        repository: String,
        /// For the operator: the Secret holding the token. The command line
        /// takes its token from the environment or a file instead.
        token_secret_ref: Option<SecretKeyRef>,
    },
    /// A local directory with one subdirectory per release tag.
    Dir { path: PathBuf },
    /// The tags of a repository of an OCI registry: `oci://HOST[:PORT]/REPOSITORY`.
    Oci {
        /// Registry host, with its port when not the default.
        host: String,
        /// Repository path, e.g. `sovereigncloudstack/cluster-stacks`.
        repository: String,
        /// For the operator: the Secret holding `username`/`password` or `token`.
        credentials_secret_ref: Option<SecretKeyRef>,
    },
}

/// A source string that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("source {input:?}: expected github:OWNER/REPO, dir:PATH or oci://HOST/REPOSITORY")]
    UnknownKind { input: String },
    #[error(
        "source {input:?}: a GitHub source is github:OWNER/REPO, with non-empty OWNER and REPO made of letters, digits, '-', '_' and '.'"
    )]
    BadGitHub { input: String },
    #[error("source {input:?}: the directory path is empty")]
    EmptyDir { input: String },
    #[error(
        "source {input:?}: an OCI source is oci://HOST[:PORT]/REPOSITORY, REPOSITORY made of lower-case '/' separated components"
    )]
    BadOci { input: String },
    #[error("spec.source: set exactly one of github, directory and oci")]
    CrdAmbiguous,
}

impl SourceSpec {
    /// A GitHub source without a token Secret.
    pub fn github(owner: impl Into<String>, repository: impl Into<String>) -> Self {
        SourceSpec::GitHub { owner: owner.into(), repository: repository.into(), token_secret_ref: None }
    }

    /// A directory source.
    pub fn dir(path: impl Into<PathBuf>) -> Self {
        SourceSpec::Dir { path: path.into() }
    }

    /// An OCI source without a credentials Secret, from `oci://HOST/REPOSITORY`.
    pub fn oci(url: &str) -> Result<Self, SpecError> {
        url.parse::<SourceSpec>().and_then(|s| match s {
            SourceSpec::Oci { .. } => Ok(s),
            _ => Err(SpecError::BadOci { input: url.to_string() }),
        })
    }

    /// Converts a ClusterStack's `spec.source`.
    pub fn from_crd(spec: &ReleaseSourceSpec) -> Result<Self, SpecError> {
        if let Some(oci) = &spec.oci {
            if spec.github.is_some() || spec.directory.is_some() {
                return Err(SpecError::CrdAmbiguous);
            }
            let SourceSpec::Oci { host, repository, .. } = Self::oci(&format!("oci://{}", oci.repository))? else {
                return Err(SpecError::BadOci { input: oci.repository.clone() });
            };
            return Ok(SourceSpec::Oci {
                host,
                repository,
                credentials_secret_ref: oci.credentials_secret_ref.clone(),
            });
        }
        match (&spec.github, &spec.directory) {
            (Some(gh), None) => {
                if !valid_github_name(&gh.owner) || !valid_github_name(&gh.repository) {
                    return Err(SpecError::BadGitHub { input: format!("github:{}/{}", gh.owner, gh.repository) });
                }
                Ok(SourceSpec::GitHub {
                    owner: gh.owner.clone(),
                    repository: gh.repository.clone(),
                    token_secret_ref: gh.token_secret_ref.clone(),
                })
            }
            (None, Some(dir)) if !dir.path.is_empty() => Ok(SourceSpec::dir(&dir.path)),
            (None, Some(_)) => Err(SpecError::EmptyDir { input: "dir:".into() }),
            _ => Err(SpecError::CrdAmbiguous),
        }
    }

    /// The CRD's `spec.source` naming this source (the inverse of [`from_crd`](Self::from_crd)).
    pub fn to_crd(&self) -> ReleaseSourceSpec {
        let none = ReleaseSourceSpec { github: None, directory: None, oci: None };
        match self {
            SourceSpec::GitHub { owner, repository, token_secret_ref } => ReleaseSourceSpec {
                github: Some(GitHubSource {
                    owner: owner.clone(),
                    repository: repository.clone(),
                    token_secret_ref: token_secret_ref.clone(),
                }),
                ..none
            },
            SourceSpec::Dir { path } => {
                ReleaseSourceSpec { directory: Some(DirectorySource { path: path.display().to_string() }), ..none }
            }
            SourceSpec::Oci { host, repository, credentials_secret_ref } => ReleaseSourceSpec {
                oci: Some(OciSource {
                    repository: format!("{host}/{repository}"),
                    credentials_secret_ref: credentials_secret_ref.clone(),
                }),
                ..none
            },
        }
    }

    /// The default source from the environment: the Go operator's
    /// `GIT_ORG_NAME` + `GIT_REPOSITORY_NAME` when both are set, else its
    /// `OCI_REGISTRY` + `OCI_REPOSITORY`, else `dir:releases`. `env` looks a
    /// variable up (`std::env::var` in real use).
    pub fn default_from_env(env: impl Fn(&str) -> Option<String>) -> Result<Self, SpecError> {
        let get = |k: &str| env(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        match (get(ENV_GIT_ORG_NAME), get(ENV_GIT_REPOSITORY_NAME)) {
            (Some(owner), Some(repo)) => format!("github:{owner}/{repo}").parse(),
            _ => match (get(super::oci::ENV_OCI_REGISTRY), get(super::oci::ENV_OCI_REPOSITORY)) {
                (Some(registry), Some(repo)) => {
                    // The Go operator's OCI_REGISTRY may carry a scheme; the host is what counts.
                    let host = registry
                        .trim_start_matches("oci://")
                        .trim_start_matches("https://")
                        .trim_start_matches("http://")
                        .trim_end_matches('/');
                    Self::oci(&format!("oci://{host}/{}", repo.trim_matches('/')))
                }
                _ => Ok(SourceSpec::dir(DEFAULT_DIR)),
            },
        }
    }
}

/// The token from the environment: `GIT_ACCESS_TOKEN` (Go operator), else
/// `GITHUB_TOKEN`. Empty values count as unset.
pub fn token_from_env(env: impl Fn(&str) -> Option<String>) -> Option<Token> {
    [ENV_GIT_ACCESS_TOKEN, ENV_GITHUB_TOKEN]
        .into_iter()
        .filter_map(&env)
        .map(Token::new)
        .find(|t| !t.expose().is_empty())
}

/// Whether `s` is a plausible GitHub owner or repository name. Keeps `/`,
/// `..` and friends out of URLs and cache paths.
fn valid_github_name(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A registry host with an optional port: letters, digits, '.', '-', or a bracketed IPv6 address.
fn valid_oci_host(host: &str) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, tail)) if ip.parse::<std::net::Ipv6Addr>().is_ok() => ("v6", tail.strip_prefix(':')),
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (host, None),
        },
    };
    !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'))
        && port.is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A repository path as the distribution spec allows it (lower-case components separated by '/',
/// with '.', '_', '-' inside), which also keeps it safe as a cache path.
fn valid_oci_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.split('/').all(|c| {
            !c.is_empty()
                && c.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && c.bytes().last().is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
                && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
        })
}

impl FromStr for SourceSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(rest) = s.strip_prefix("github:") {
            let bad = || SpecError::BadGitHub { input: s.to_string() };
            let (owner, repo) = rest.split_once('/').ok_or_else(bad)?;
            if !valid_github_name(owner) || !valid_github_name(repo) {
                return Err(bad());
            }
            Ok(SourceSpec::github(owner, repo))
        } else if let Some(rest) = s.strip_prefix("oci://") {
            let bad = || SpecError::BadOci { input: s.to_string() };
            let (host, repository) = rest.split_once('/').ok_or_else(bad)?;
            if !valid_oci_host(host) || !valid_oci_repository(repository) {
                return Err(bad());
            }
            Ok(SourceSpec::Oci {
                host: host.to_string(),
                repository: repository.to_string(),
                credentials_secret_ref: None,
            })
        } else if let Some(rest) = s.strip_prefix("dir:") {
            if rest.is_empty() {
                return Err(SpecError::EmptyDir { input: s.to_string() });
            }
            Ok(SourceSpec::dir(rest))
        } else {
            Err(SpecError::UnknownKind { input: s.to_string() })
        }
    }
}

impl fmt::Display for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceSpec::GitHub { owner, repository, .. } => write!(f, "github:{owner}/{repository}"),
            SourceSpec::Dir { path } => write!(f, "dir:{}", path.display()),
            SourceSpec::Oci { host, repository, .. } => write!(f, "oci://{host}/{repository}"),
        }
    }
}

/// The GitHub API URL from the environment (`GITHUB_API_URL`), else the public API.
pub fn api_url_from_env(env: impl Fn(&str) -> Option<String>) -> String {
    env("GITHUB_API_URL").filter(|v| !v.trim().is_empty()).unwrap_or_else(|| github::DEFAULT_API_URL.to_string())
}

/// GitHub client settings from the environment alone (`GITHUB_API_URL`,
/// `GIT_ACCESS_TOKEN` / `GITHUB_TOKEN`), for processes without flags.
pub fn github_config_from_env(env: impl Fn(&str) -> Option<String>) -> github::GitHubConfig {
    github::GitHubConfig { api_url: api_url_from_env(&env), token: token_from_env(&env), include_prereleases: false }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DirectorySource, GitHubSource};

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn parses_and_prints_both_kinds() {
        let gh: SourceSpec = "github:SovereignCloudStack/cluster-stacks".parse().unwrap();
        assert_eq!(gh, SourceSpec::github("SovereignCloudStack", "cluster-stacks"));
        assert_eq!(gh.to_string(), "github:SovereignCloudStack/cluster-stacks");
        let dir: SourceSpec = "dir:./releases".parse().unwrap();
        assert_eq!(dir, SourceSpec::dir("./releases"));
        assert_eq!(dir.to_string(), "dir:./releases");
    }

    #[test]
    fn parses_oci_sources() {
        let s: SourceSpec = "oci://127.0.0.1:5000/scs/cluster-stacks".parse().unwrap();
        assert_eq!(
            s,
            SourceSpec::Oci {
                host: "127.0.0.1:5000".into(),
                repository: "scs/cluster-stacks".into(),
                credentials_secret_ref: None
            }
        );
        assert_eq!(s.to_string(), "oci://127.0.0.1:5000/scs/cluster-stacks");
        assert!("oci://[::1]:5000/a".parse::<SourceSpec>().is_ok());
        for bad in [
            "oci://",
            "oci://host",
            "oci://host/",
            "oci://host/Upper",
            "oci://host/a/../b",
            "oci://h:x/a",
            "oci://h/a//b",
        ] {
            assert!(bad.parse::<SourceSpec>().is_err(), "{bad} should be rejected");
        }
        let spec = SourceSpec::default_from_env(env(&[
            ("OCI_REGISTRY", "https://registry.scs.community"),
            ("OCI_REPOSITORY", "kaas/cluster-stacks"),
        ]));
        assert_eq!(spec.unwrap().to_string(), "oci://registry.scs.community/kaas/cluster-stacks");
        let both = SourceSpec::default_from_env(env(&[
            ("GIT_ORG_NAME", "o"),
            ("GIT_REPOSITORY_NAME", "r"),
            ("OCI_REGISTRY", "r.io"),
            ("OCI_REPOSITORY", "x"),
        ]));
        assert_eq!(both.unwrap(), SourceSpec::github("o", "r"));
    }

    #[test]
    fn rejects_malformed_strings() {
        for bad in ["releases", "github:owner", "github:/repo", "github:a/b/c", "github:../x", "dir:", "gitlab:a/b"] {
            assert!(bad.parse::<SourceSpec>().is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn go_operator_environment_is_the_default() {
        let spec = SourceSpec::default_from_env(env(&[("GIT_ORG_NAME", "org"), ("GIT_REPOSITORY_NAME", "stacks")]));
        assert_eq!(spec.unwrap(), SourceSpec::github("org", "stacks"));
        let only_org = SourceSpec::default_from_env(env(&[("GIT_ORG_NAME", "org")]));
        assert_eq!(only_org.unwrap(), SourceSpec::dir("releases"));
        assert_eq!(SourceSpec::default_from_env(env(&[])).unwrap(), SourceSpec::dir("releases"));
    }

    #[test]
    fn token_prefers_the_go_variable_and_skips_empty_ones() {
        let t = token_from_env(env(&[("GIT_ACCESS_TOKEN", "go"), ("GITHUB_TOKEN", "gh")])).unwrap();
        assert_eq!(t.expose(), "go");
        let t = token_from_env(env(&[("GIT_ACCESS_TOKEN", "  "), ("GITHUB_TOKEN", "gh\n")])).unwrap();
        assert_eq!(t.expose(), "gh");
        assert!(token_from_env(env(&[])).is_none());
        assert_eq!(api_url_from_env(env(&[])), github::DEFAULT_API_URL);
        assert_eq!(api_url_from_env(env(&[("GITHUB_API_URL", "http://127.0.0.1:1")])), "http://127.0.0.1:1");
        let config = github_config_from_env(env(&[("GITHUB_API_URL", "http://127.0.0.1:1"), ("GITHUB_TOKEN", "t")]));
        assert_eq!(config.api_url, "http://127.0.0.1:1");
        assert_eq!(config.token.map(|t| t.expose().to_string()).as_deref(), Some("t"));
    }

    #[test]
    fn converts_the_crd_source() {
        let secret = SecretKeyRef { name: "gh".into(), key: None };
        let crd = ReleaseSourceSpec {
            github: Some(GitHubSource {
                owner: "o".into(),
                repository: "r".into(),
                token_secret_ref: Some(secret.clone()),
            }),
            directory: None,
            oci: None,
        };
        assert_eq!(
            SourceSpec::from_crd(&crd).unwrap(),
            SourceSpec::GitHub { owner: "o".into(), repository: "r".into(), token_secret_ref: Some(secret) }
        );
        let crd =
            ReleaseSourceSpec { github: None, directory: Some(DirectorySource { path: "/srv/r".into() }), oci: None };
        assert_eq!(SourceSpec::from_crd(&crd).unwrap(), SourceSpec::dir("/srv/r"));
        let both = ReleaseSourceSpec {
            github: Some(GitHubSource { owner: "o".into(), repository: "r".into(), token_secret_ref: None }),
            directory: Some(DirectorySource { path: "/x".into() }),
            oci: None,
        };
        assert_eq!(SourceSpec::from_crd(&both), Err(SpecError::CrdAmbiguous));
    }

    #[test]
    fn crd_form_round_trips() {
        for text in ["github:o/r", "dir:/srv/releases", "oci://registry.example:5000/stacks/docker"] {
            let spec: SourceSpec = text.parse().unwrap();
            let crd = spec.to_crd();
            assert_eq!(SourceSpec::from_crd(&crd).unwrap(), spec, "{text}");
            assert_eq!(SourceSpec::from_crd(&crd).unwrap().to_string(), text);
        }
    }
}
