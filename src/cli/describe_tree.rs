//! The `describe` tree as data, built by pure functions from the objects read (so it is tested
//! without a cluster), and its rendering: box-drawing lines, colour only where the caller allows.
//!
//! One node per object: the ClusterStack, its releases (ready, objects synced `n/m`, node
//! images), the Clusters using each release's class, their ClusterAddon (hook, stage progress),
//! and the stack's rollout when the cluster serves that kind (phase, wave, per-Cluster state).

use anstyle::{AnsiColor, Style};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::api::conditions::{self, READY, STALLED};
use crate::api::{ClusterAddon, ClusterStack, ClusterStackRelease, Condition};
use crate::release::ReleaseId;

/// One object of the tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Node {
    /// The kind, e.g. `ClusterStackRelease`.
    pub kind: String,
    /// `namespace/name` for the root and Clusters, `name` below them.
    pub name: String,
    /// Whether it is ready; `None` when the object does not say (a Cluster, a rollout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Short facts, e.g. `objects 6/6`, `hook AfterControlPlaneInitialized`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub info: Vec<String>,
    /// `Reason: message` of the `Ready` (or `Stalled`) condition when not ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Age, as kubectl shows it (`5m`, `3h`, `2d`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age: Option<String>,
    /// The objects below it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
}

impl Node {
    fn new(kind: &str, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
            ready: None,
            info: vec![],
            reason: None,
            age: None,
            children: vec![],
        }
    }
}

/// Everything a ClusterStack's tree is built from.
pub struct StackInputs<'a> {
    pub stack: &'a ClusterStack,
    /// The ClusterStackReleases of its namespace (those it controls are picked).
    pub releases: &'a [ClusterStackRelease],
    /// The CAPI Clusters of its namespace, as JSON.
    pub clusters: &'a [Value],
    /// The ClusterAddons of its namespace.
    pub addons: &'a [ClusterAddon],
    /// The ClusterStackRollouts of its namespace, as JSON (empty when the kind is not served).
    pub rollouts: &'a [Value],
    pub now: Timestamp,
}

/// `5s`, `7m`, `3h`, `2d` (kubectl's short ages, rounded down).
pub fn age(created: Option<Timestamp>, now: Timestamp) -> Option<String> {
    let secs = now.duration_since(created?).as_secs().max(0);
    Some(match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    })
}

fn meta_age(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, now: Timestamp) -> Option<String> {
    age(meta.creation_timestamp.as_ref().map(|t| t.0), now)
}

fn json_age(v: &Value, now: Timestamp) -> Option<String> {
    age(v.pointer("/metadata/creationTimestamp").and_then(Value::as_str).and_then(|s| s.parse().ok()), now)
}

/// `Reason: message` of the condition that explains a not-ready object: `Stalled` when set
/// (it says why nothing moves), else `Ready`.
fn why(conds: &[Condition], ready: bool) -> Option<String> {
    if ready {
        return None;
    }
    let c =
        conditions::find(conds, STALLED).filter(|c| c.status == conditions::TRUE).or(conditions::find(conds, READY))?;
    Some(if c.message.is_empty() { c.reason.clone() } else { format!("{}: {}", c.reason, c.message) })
}

/// Whether a release belongs to the stack: controlled by it (owner uid), as the stack
/// controller creates them.
fn owned_by(release: &ClusterStackRelease, stack: &ClusterStack) -> bool {
    let Some(uid) = stack.metadata.uid.as_deref() else { return false };
    release.metadata.owner_references.iter().flatten().any(|o| o.uid == uid && o.kind == "ClusterStack")
}

/// The class a Cluster uses (`spec.topology.class`, or `classRef.name` in v1beta2).
fn cluster_class(cluster: &Value) -> Option<&str> {
    cluster
        .pointer("/spec/topology/class")
        .or_else(|| cluster.pointer("/spec/topology/classRef/name"))
        .and_then(Value::as_str)
}

fn json_name(v: &Value) -> String {
    let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if ns.is_empty() { name.to_string() } else { format!("{ns}/{name}") }
}

/// The node of one release.
pub fn release_node(release: &ClusterStackRelease, now: Timestamp) -> Node {
    let mut n = Node::new("ClusterStackRelease", release.metadata.name.clone().unwrap_or_default());
    n.age = meta_age(&release.metadata, now);
    let Some(st) = &release.status else {
        n.ready = Some(false);
        n.reason = Some("Pending: the release controller has not reported yet".into());
        return n;
    };
    n.ready = Some(st.ready);
    let inventory = crate::controller::inventory::from_release_status(st);
    let synced = inventory.entries.iter().filter(|e| e.synced).count();
    n.info.push(format!("objects {synced}/{}", inventory.len()));
    if !st.node_images.is_empty() {
        let ready = st.node_images.iter().filter(|i| i.ready).count();
        n.info.push(format!("node images {ready}/{}", st.node_images.len()));
    }
    if !st.kubernetes_version.is_empty() {
        n.info.push(format!("kubernetes {}", st.kubernetes_version));
    }
    if !st.ready && !st.phase.is_empty() {
        n.info.push(format!("phase {}", st.phase));
    }
    n.reason = why(&st.conditions, st.ready);
    n
}

/// The node of one ClusterAddon.
pub fn addon_node(addon: &ClusterAddon, now: Timestamp) -> Node {
    let mut n = Node::new("ClusterAddon", addon.metadata.name.clone().unwrap_or_default());
    n.age = meta_age(&addon.metadata, now);
    let st = addon.status.clone().unwrap_or_default();
    n.ready = Some(st.ready);
    if let Some(hook) = st.current_hook.as_ref().or(addon.spec.hook.as_ref()) {
        n.info.push(format!("hook {hook}"));
    }
    if !st.stages.is_empty() {
        let done = st.stages.iter().filter(|s| s.phase.as_deref() == Some("Done")).count();
        n.info.push(format!("stages {done}/{}", st.stages.len()));
        if let Some(s) = st.stages.iter().find(|s| s.phase.as_deref() != Some("Done")) {
            n.info.push(format!("{} {}", s.name, s.phase.as_deref().unwrap_or("Pending")));
        }
    }
    if let Some(release) = &st.release {
        n.info.push(format!("release {release}"));
    }
    n.reason = why(&st.conditions, st.ready);
    n
}

/// The node of one Cluster, with its ClusterAddon below it.
pub fn cluster_node(cluster: &Value, addons: &[ClusterAddon], now: Timestamp) -> Node {
    let mut n = Node::new("Cluster", json_name(cluster));
    n.age = json_age(cluster, now);
    if let Some(v) = cluster.pointer("/spec/topology/version").and_then(Value::as_str) {
        n.info.push(format!("version {v}"));
    }
    if let Some(phase) = cluster.pointer("/status/phase").and_then(Value::as_str) {
        n.info.push(phase.to_string());
    }
    let name = cluster.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let addon_name = crate::controller::addon::cluster_addon_name(name);
    n.children.extend(
        addons.iter().filter(|a| a.metadata.name.as_deref() == Some(addon_name.as_str())).map(|a| addon_node(a, now)),
    );
    n
}

/// The node of a rollout (read as JSON: its kind may not be served, and its types are another
/// module's).
pub fn rollout_node(rollout: &Value, now: Timestamp) -> Node {
    let mut n = Node::new("ClusterStackRollout", json_name(rollout));
    n.age = json_age(rollout, now);
    let st = &rollout["status"];
    let text = |p: &str| st.pointer(p).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(target) = text("/target").or(rollout.pointer("/spec/target").and_then(Value::as_str)) {
        n.info.push(format!("target {target}"));
    }
    if let Some(phase) = text("/phase") {
        n.info.push(format!("phase {phase}"));
    }
    if let Some(wave) = text("/currentWave") {
        n.info.push(format!("wave {wave}"));
    }
    let conds: Vec<Condition> = serde_json::from_value(st["conditions"].clone()).unwrap_or_default();
    if let Some(ready) = conditions::find(&conds, READY) {
        n.ready = Some(ready.status == conditions::TRUE);
        n.reason = why(&conds, ready.status == conditions::TRUE);
    }
    for c in st["clusters"].as_array().into_iter().flatten() {
        let s = |k: &str| c[k].as_str().unwrap_or_default();
        let mut child = Node::new("Cluster", format!("{}/{}", s("namespace"), s("name")));
        for (label, v) in [("wave", s("wave")), ("state", s("state"))] {
            if !v.is_empty() {
                child.info.push(format!("{label} {v}"));
            }
        }
        if !s("message").is_empty() {
            child.reason = Some(s("message").to_string());
        }
        n.children.push(child);
    }
    n
}

/// The tree of a ClusterStack: its releases (newest version last), each with the Clusters
/// using its class, then its rollouts.
pub fn stack_tree(input: &StackInputs<'_>) -> Node {
    let stack = input.stack;
    let ns = stack.metadata.namespace.clone().unwrap_or_default();
    let mut root = Node::new("ClusterStack", format!("{ns}/{}", stack.metadata.name.clone().unwrap_or_default()));
    root.age = meta_age(&stack.metadata, input.now);
    if let Some(st) = &stack.status {
        let ready = conditions::is_true(&st.conditions, READY);
        root.ready = Some(ready);
        if !st.latest_release.is_empty() {
            root.info.push(format!("latest {}", st.latest_release));
        }
        if !st.usable_versions.is_empty() {
            root.info.push(format!("usable {}", st.usable_versions));
        }
        root.reason = why(&st.conditions, ready);
    }
    let mut releases: Vec<&ClusterStackRelease> = input.releases.iter().filter(|r| owned_by(r, stack)).collect();
    let id = |r: &ClusterStackRelease| r.metadata.name.as_deref().and_then(|n| ReleaseId::from_tag(n).ok());
    releases.sort_by(|a, b| match (id(a), id(b)) {
        (Some(x), Some(y)) => crate::controller::stack::keep::version_order(&x, &y),
        _ => a.metadata.name.cmp(&b.metadata.name),
    });
    for r in releases {
        let mut node = release_node(r, input.now);
        if let Some(class) = id(r).map(|i| i.class_name()) {
            node.children.extend(
                input
                    .clusters
                    .iter()
                    .filter(|c| cluster_class(c) == Some(class.as_str()))
                    .map(|c| cluster_node(c, input.addons, input.now)),
            );
        }
        root.children.push(node);
    }
    let stack_name = stack.metadata.name.as_deref().unwrap_or_default();
    root.children.extend(
        input
            .rollouts
            .iter()
            .filter(|r| r.pointer("/spec/clusterStackRef/name").and_then(Value::as_str) == Some(stack_name))
            .map(|r| rollout_node(r, input.now)),
    );
    root
}

/// Everything a Cluster's tree is built from.
pub struct ClusterInputs<'a> {
    /// The CAPI Cluster, as JSON.
    pub cluster: &'a Value,
    /// The ClusterStacks, ClusterStackReleases and ClusterAddons of its namespace.
    pub stacks: &'a [ClusterStack],
    pub releases: &'a [ClusterStackRelease],
    pub addons: &'a [ClusterAddon],
    /// The ClusterStackRollouts of its namespace, as JSON (empty when the kind is not served).
    pub rollouts: &'a [Value],
    pub now: Timestamp,
}

/// The tree of one Cluster: the stack and release of its class, its ClusterAddon, and its
/// state in any rollout that lists it.
pub fn cluster_tree(input: &ClusterInputs<'_>) -> Node {
    let mut root = cluster_node(input.cluster, &[], input.now);
    let class = cluster_class(input.cluster).and_then(|c| ReleaseId::from_class_name(c).ok());
    if let Some(id) = &class {
        let tag = id.tag();
        let release = input.releases.iter().find(|r| r.metadata.name.as_deref() == Some(tag.as_str()));
        if let Some(stack) = release.and_then(|r| input.stacks.iter().find(|s| owned_by(r, s))) {
            let mut n = stack_tree(&StackInputs {
                stack,
                releases: &[],
                clusters: &[],
                addons: &[],
                rollouts: &[],
                now: input.now,
            });
            n.children.clear();
            root.children.push(n);
        }
        match release {
            Some(r) => root.children.push(release_node(r, input.now)),
            None => {
                let mut n = Node::new("ClusterStackRelease", tag);
                n.ready = Some(false);
                n.reason = Some("NotFound: no ClusterStackRelease for the Cluster's class".into());
                root.children.push(n);
            }
        }
    }
    let name = input.cluster.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let ns = input.cluster.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
    let addon_name = crate::controller::addon::cluster_addon_name(name);
    root.children.extend(
        input
            .addons
            .iter()
            .filter(|a| a.metadata.name.as_deref() == Some(addon_name.as_str()))
            .map(|a| addon_node(a, input.now)),
    );
    for rollout in input.rollouts {
        let mut n = rollout_node(rollout, input.now);
        let me = format!("{ns}/{name}");
        let Some(mine) = n.children.iter().find(|c| c.name == me).cloned() else { continue };
        n.children.clear();
        n.info.extend(mine.info.iter().map(|i| format!("this Cluster: {i}")));
        if mine.reason.is_some() {
            n.reason = mine.reason;
        }
        root.children.push(n);
    }
    root
}

const GREEN: Style = AnsiColor::Green.on_default();
const RED: Style = AnsiColor::Red.on_default();
const DIM: Style = Style::new().dimmed();
const BOLD: Style = Style::new().bold();

/// The tree as text. With `colour`, ANSI styles mark ready (green) and not ready (red); without,
/// the text is plain (and identical apart from the escape codes).
pub fn render(root: &Node, colour: bool) -> String {
    let mut out = String::new();
    line(&mut out, root, "", "", colour);
    out
}

fn paint(s: &str, style: Style, colour: bool) -> String {
    if colour { format!("{}{s}{}", style.render(), style.render_reset()) } else { s.to_string() }
}

fn line(out: &mut String, n: &Node, first: &str, rest: &str, colour: bool) {
    let mut text = format!("{first}{} {}", paint(&n.kind, BOLD, colour), n.name);
    match n.ready {
        Some(true) => text.push_str(&format!("  {}", paint("Ready", GREEN, colour))),
        Some(false) => text.push_str(&format!("  {}", paint("NotReady", RED, colour))),
        None => {}
    }
    for i in &n.info {
        text.push_str(&format!("  {i}"));
    }
    if let Some(age) = &n.age {
        text.push_str(&format!("  {}", paint(&format!("age {age}"), DIM, colour)));
    }
    out.push_str(&text);
    out.push('\n');
    let bar = if n.children.is_empty() { "   " } else { "│  " };
    if let Some(reason) = &n.reason {
        out.push_str(&format!("{rest}{bar}{}\n", paint(reason, RED, colour)));
    }
    let count = n.children.len();
    for (i, child) in n.children.iter().enumerate() {
        let last = i + 1 == count;
        let (f, r) = if last { ("└─ ", "   ") } else { ("├─ ", "│  ") };
        line(out, child, &format!("{rest}{f}"), &format!("{rest}{r}"), colour);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_round_down_like_kubectl() {
        let now: Timestamp = "2026-01-03T00:00:00Z".parse().unwrap();
        let ago = |s: i64| Some(now - jiff::SignedDuration::from_secs(s));
        assert_eq!(age(ago(59), now).as_deref(), Some("59s"));
        assert_eq!(age(ago(600), now).as_deref(), Some("10m"));
        assert_eq!(age(ago(3 * 3600), now).as_deref(), Some("3h"));
        assert_eq!(age(ago(2 * 86400), now).as_deref(), Some("2d"));
        assert_eq!(age(None, now), None);
    }

    #[test]
    fn the_tree_draws_branches_reasons_and_colour_only_when_asked() {
        let mut root = Node::new("ClusterStack", "ns/s");
        root.ready = Some(false);
        root.reason = Some("ReleasesNotReady: v2".into());
        let mut a = Node::new("ClusterStackRelease", "s-v1");
        a.ready = Some(true);
        a.info.push("objects 6/6".into());
        a.children.push(Node::new("Cluster", "ns/c1"));
        let mut b = Node::new("ClusterStackRelease", "s-v2");
        b.ready = Some(false);
        b.reason = Some("RenderFailed: line 3".into());
        root.children = vec![a, b];
        let plain = render(&root, false);
        assert_eq!(
            plain,
            "ClusterStack ns/s  NotReady\n\
             │  ReleasesNotReady: v2\n\
             ├─ ClusterStackRelease s-v1  Ready  objects 6/6\n\
             │  └─ Cluster ns/c1\n\
             └─ ClusterStackRelease s-v2  NotReady\n\
             \x20     RenderFailed: line 3\n"
        );
        let coloured = render(&root, true);
        assert!(coloured.contains('\u{1b}'));
        assert_eq!(anstream::adapter::strip_str(&coloured).to_string(), plain);
    }
}
