//! The rules the decision applies: target resolution, spec checks, `maxConcurrent`, and what
//! "healthy" means for a moved Cluster. Pure.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::{ClusterStackRollout, ClusterStackSpec};
use crate::controller::runtime::clusters::CapiVersion;
use crate::release::{KubernetesMinor, ReleaseId, StackVersion};

use super::decide::ClusterInput;
use super::view::ReleaseView;
use super::window;

/// Parses `10m`, `500ms`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{s:?} is not a duration: {e}"))
}

/// The release a rollout targets: `latest` is the newest ready release of the stack's channel
/// (the highest stable one, or the newest of a named channel such as `ttl`); `vN` that version,
/// once ready. `Err` says why there is none.
pub fn resolve_target<'r>(
    target: &str,
    stack: &ClusterStackSpec,
    releases: &'r [ReleaseView],
) -> Result<&'r ReleaseView, String> {
    if target == "latest" {
        return stack
            .channel
            .newest(releases.iter().filter(|r| r.ready), |r| &r.id.version)
            .ok_or_else(|| format!("ClusterStack {} has no ready release yet", stack.name));
    }
    let version = StackVersion::parse_any(target)
        .map_err(|e| format!("target {target:?} is neither latest nor a version: {e}"))?;
    match releases.iter().find(|r| r.id.version == version) {
        Some(r) if r.ready => Ok(r),
        Some(r) => Err(format!("release {} is not ready yet", r.id.tag())),
        None => Err(format!(
            "release {} of ClusterStack {} does not exist (pin it in spec.versions)",
            version.dotted(),
            stack.name
        )),
    }
}

/// Checks what the API server's schema cannot: durations, windows, the health expression, waves.
pub fn validate_spec(rollout: &ClusterStackRollout) -> Result<(), String> {
    let spec = &rollout.spec;
    for (field, value) in [("soakTime", &spec.soak_time), ("progressDeadline", &spec.progress_deadline)] {
        if let Some(v) = value {
            parse_duration(v).map_err(|e| format!("spec.{field}: {e}"))?;
        }
    }
    window::validate(&spec.maintenance_windows).map_err(|e| format!("spec.{e}"))?;
    if let Some(check) = &spec.health_check {
        cel::Program::compile(&check.expression)
            .map_err(|e| format!("spec.healthCheck.expression does not compile: {e}"))?;
    }
    let mut names = std::collections::BTreeSet::new();
    for w in &spec.waves {
        if !names.insert(w.name.as_str()) {
            return Err(format!("spec.waves: the name {:?} is used twice", w.name));
        }
        if let Some(IntOrString::String(s)) = &w.max_concurrent {
            percent(s).ok_or_else(|| {
                format!("spec.waves[{}].maxConcurrent: {s:?} is not a number or a percentage", w.name)
            })?;
        }
    }
    Ok(())
}

fn percent(s: &str) -> Option<u32> {
    s.strip_suffix('%').unwrap_or(s).trim().parse().ok()
}

/// `maxConcurrent` of a wave of `size` Clusters: at least 1.
pub fn max_concurrent(value: Option<&IntOrString>, size: usize) -> usize {
    let n = match value {
        None => 1,
        Some(IntOrString::Int(n)) => usize::try_from(*n).unwrap_or(1),
        Some(IntOrString::String(s)) if s.ends_with('%') => percent(s).map_or(1, |p| (size * p as usize).div_ceil(100)),
        Some(IntOrString::String(s)) => percent(s).map_or(1, |p| p as usize),
    };
    n.max(1)
}

/// Whether a Cluster is healthy on the target: `Err` says what is missing.
pub fn health(input: &ClusterInput<'_>, target_tag: &str, check: Option<&cel::Program>) -> Result<(), String> {
    let c = input.cluster;
    let ready = match c.version {
        CapiVersion::V1beta1 => "Ready",
        CapiVersion::V1beta2 => "Available",
    };
    for type_ in ["TopologyReconciled", ready] {
        c.condition_true_now(type_)?;
    }
    if let Some(addon) = input.addon
        && addon.release.is_some()
        && !(addon.ready && addon.release.as_deref() == Some(target_tag))
    {
        return Err(format!("its ClusterAddon is not Ready on {target_tag} yet"));
    }
    if let Some(program) = check {
        let mut context = cel::Context::default();
        let document = cel::to_value(c.cel_document()).map_err(|e| format!("healthCheck: {e}"))?;
        context.add_variable_from_value("cluster", document);
        match program.execute(&context) {
            Ok(cel::Value::Bool(true)) => {}
            Ok(cel::Value::Bool(false)) => return Err("healthCheck is false".into()),
            Ok(other) => return Err(format!("healthCheck is not a boolean ({other:?})")),
            Err(e) => return Err(format!("healthCheck cannot be evaluated: {e}")),
        }
    }
    Ok(())
}

pub fn stack_release(stack: &ClusterStackSpec, id: &ReleaseId) -> bool {
    stack
        .kubernetes_version
        .parse::<KubernetesMinor>()
        .is_ok_and(|k| id.provider == stack.provider && id.name == stack.name && id.kubernetes == k)
}

/// How long ago `t` was; zero when unset or still ahead (stamps are rounded up).
pub fn since(now: Timestamp, t: Option<&Time>) -> Duration {
    t.map_or(Duration::ZERO, |t| Duration::try_from(now.duration_since(t.0)).unwrap_or(Duration::ZERO))
}
