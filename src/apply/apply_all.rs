//! Apply: puts objects on a cluster by server-side apply, one stage ([`super::order`]) at a time,
//! waiting for applied CRDs to be established before what follows. Never deletes anything.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::Value;

use super::discovery::Resolved;
use super::inventory::{Action, Change, ChangeSet, Identity, Inventory, ObjectKey};
use super::{
    Applier, ApplyError, DEFAULT_CRD_TIMEOUT, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner, describe,
    forbidden_message, order,
};

/// What to apply for whom.
#[derive(Debug, Clone)]
pub struct ApplyOptions {
    /// The release that owns the objects.
    pub owner: ReleaseOwner,
    /// The inventory of the previous pass: the resourceVersions it recorded tell a changed
    /// object from an unchanged one without reading it first.
    pub previous: Inventory,
    /// How long to wait for applied CRDs to become established.
    pub crd_timeout: Duration,
    /// Refuse every object that is cluster-scoped or in another namespace than the owner's (a
    /// release in the management cluster: one namespace's release must not write into another
    /// namespace or the whole cluster; `docs/security.md`). Addons into a workload cluster are
    /// not confined: that cluster is the tenant's own.
    pub confined: bool,
}

impl ApplyOptions {
    /// Options with no previous inventory and the default CRD timeout.
    pub fn new(owner: ReleaseOwner) -> Self {
        Self { owner, previous: Inventory::default(), crd_timeout: DEFAULT_CRD_TIMEOUT, confined: false }
    }

    /// Confines the objects to the owner's namespace (see [`ApplyOptions::confined`]).
    pub fn confined(mut self) -> Self {
        self.confined = true;
        self
    }

    /// Sets the previous inventory.
    pub fn with_previous(mut self, previous: Inventory) -> Self {
        self.previous = previous;
        self
    }
}

/// How an object refused by [`ApplyOptions::confined`] is reported.
pub const CONFINED_PREFIX: &str = "refused (tenancy):";

fn is_crd(key: &ObjectKey) -> bool {
    key.group == "apiextensions.k8s.io" && key.kind == "CustomResourceDefinition"
}

/// resourceVersions of the previous inventory by identity (any API version).
type RecordedVersions = HashMap<Identity, String>;

impl Applier {
    /// Applies `objects` in the given order (CRDs first, waiting until they are established),
    /// one stage at a time and up to the applier's concurrency within a stage. One object's
    /// failure is recorded in its [`Change`] and does not stop the others. Deletes nothing: what
    /// the previous inventory has and `objects` has not is [`super::stale`], for
    /// [`Applier::prune`].
    pub async fn apply(&self, objects: &[DynamicObject], opts: &ApplyOptions) -> Result<ChangeSet, ApplyError> {
        let mut set = ChangeSet { changes: Vec::with_capacity(objects.len()) };
        if objects.is_empty() {
            return Ok(set);
        }
        // Discovery must work at all, or every object would fail the same way.
        self.discovery.resolve(&GroupVersionKind::gvk("", "v1", "Namespace")).await.map_err(ApplyError::Discovery)?;
        let recorded: RecordedVersions = opts
            .previous
            .entries
            .iter()
            .filter(|e| e.synced)
            .map(|e| {
                // A compact inventory (a release's status) keeps no versions: our last apply's,
                // remembered in memory, stand in.
                let identity = e.key.identity();
                let rv = if e.resource_version.is_empty() {
                    self.applied_version(&identity.group, &identity.kind, &identity.namespace, &identity.name)
                        .unwrap_or_default()
                } else {
                    e.resource_version.clone()
                };
                (identity, rv)
            })
            .collect();

        for run in order::runs(objects) {
            // The futures are made before the stream (they are lazy): a closure over borrowed
            // objects held across `.await` makes the caller's future fail the `Send` check when it
            // is spawned (rustc #102211), as the operator's reconcilers are.
            let pending: Vec<_> = run.iter().map(|obj| self.apply_one(obj, opts, &recorded)).collect();
            let mut changes: Vec<Change> = futures::stream::iter(pending).buffered(self.concurrency).collect().await;
            let crds: Vec<ObjectKey> =
                changes.iter().filter(|c| is_crd(&c.key) && c.action.is_applied()).map(|c| c.key.clone()).collect();
            if !crds.is_empty() {
                let not_established = self.wait_established(&crds, opts.crd_timeout).await;
                for c in changes.iter_mut().filter(|c| not_established.contains(&c.key.name) && is_crd(&c.key)) {
                    c.action = Action::Failed;
                    c.error = format!(
                        "CustomResourceDefinition {} was applied but is not established after {}",
                        c.key.name,
                        humantime::format_duration(opts.crd_timeout)
                    );
                }
                // The new kinds must resolve for the objects that follow.
                if let Err(e) = self.discovery.refresh().await {
                    tracing::warn!(error = %e, "refreshing discovery after applying CRDs failed");
                }
            }
            set.changes.extend(changes);
        }

        tracing::info!(
            release = %opts.owner.release,
            namespace = %opts.owner.namespace,
            objects = set.changes.len(),
            created = set.changes.iter().filter(|c| c.action == Action::Created).count(),
            configured = set.changes.iter().filter(|c| c.action == Action::Configured).count(),
            failed = set.failed(),
            "applied release objects"
        );
        Ok(set)
    }

    /// The keys `objects` will have once applied (namespaces defaulted or dropped by their kinds'
    /// scope), for an inventory written before the apply. A kind the cluster does not serve yet
    /// (a CRD of the same render adds it) keeps the namespace it names, else the owner's.
    pub async fn planned_keys(&self, objects: &[DynamicObject], owner: &ReleaseOwner) -> Vec<ObjectKey> {
        let mut keys = Vec::with_capacity(objects.len());
        for obj in objects {
            keys.push(match self.prepare(obj, owner).await {
                Ok(p) => p.key,
                Err(mut e) => {
                    if e.key.namespace.is_empty() {
                        e.key.namespace = owner.namespace.clone();
                    }
                    e.key
                }
            });
        }
        keys
    }

    /// Applies one object; never fails, the change says how it went.
    async fn apply_one(&self, obj: &DynamicObject, opts: &ApplyOptions, previous: &RecordedVersions) -> Change {
        let owner = &opts.owner;
        let fail = |key: ObjectKey, error: String| {
            tracing::warn!(object = %key, %error, "applying an object failed");
            Change::failed(key, error)
        };
        let Prepared { key, resolved, body } = match self.prepare(obj, owner).await {
            Ok(p) => p,
            Err(e) => return fail(e.key, e.message),
        };
        if opts.confined {
            let outside = if !resolved.namespaced {
                Some("it is cluster-scoped".to_string())
            } else if key.namespace != owner.namespace {
                Some(format!("it names namespace {}", key.namespace))
            } else {
                None
            };
            if let Some(why) = outside {
                return fail(
                    key,
                    format!(
                        "{CONFINED_PREFIX} a release applies only namespaced objects into its own namespace {}, and {why}",
                        owner.namespace
                    ),
                );
            }
        }
        let api = self.api(&resolved, &key.namespace);
        // One request: the apply's answer carries the object's resourceVersion; an unchanged
        // object keeps the version recorded at the last apply, so a different one means the apply
        // changed something (drift corrected, or a new desired state). Nothing is read first.
        let identity = key.identity();
        let params = PatchParams::apply(self.field_manager).force();
        match api.patch(&key.name, &params, &Patch::Apply(&body)).await {
            Ok(applied) => {
                let after = applied.resource_version().unwrap_or_default();
                let action = match previous.get(&identity) {
                    None => Action::Created,
                    Some(rv) if rv.is_empty() || *rv != after => Action::Configured,
                    Some(_) => Action::Unchanged,
                };
                match action {
                    Action::Created => tracing::debug!(object = %key, "applied (new to the inventory)"),
                    Action::Configured => tracing::info!(object = %key, "changed by apply"),
                    _ => tracing::trace!(object = %key, "unchanged"),
                }
                self.record_applied(identity, after.clone());
                Change { key, action, error: String::new(), resource_version: after }
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                let error = forbidden_message(&key.group, &resolved.resource.plural, "patch");
                fail(key, error)
            }
            Err(e) => fail(key, format!("server-side apply failed: {}", describe(&e))),
        }
    }

    /// Makes a rendered object ready to apply: its kind resolved, its namespace defaulted (or
    /// dropped for a cluster-scoped kind), our release labels set, server-owned metadata removed.
    /// Shared by apply and diff, so a diff sends exactly what an apply would.
    pub(super) async fn prepare(&self, obj: &DynamicObject, owner: &ReleaseOwner) -> Result<Prepared, PrepareError> {
        let mut key = ObjectKey::of(obj);
        let fail = |key: ObjectKey, message: String| PrepareError { key, message, unserved: false };
        if key.kind.is_empty() || key.version.is_empty() {
            return Err(fail(key, "the object has no apiVersion or kind".into()));
        }
        if key.name.is_empty() {
            return Err(fail(key, "the object has no metadata.name".into()));
        }
        let resolved = match self.discovery.resolve(&key.gvk()).await {
            Ok(Some(r)) => r,
            Ok(None) => {
                let message = format!("the cluster serves no kind {} in {}", key.kind, key.gvk().api_version());
                return Err(PrepareError { key, message, unserved: true });
            }
            Err(e) => return Err(fail(key, format!("discovery failed: {}", describe(&e)))),
        };
        // Namespaced kinds default to the release's namespace; cluster-scoped kinds never get one.
        key.namespace = if resolved.namespaced {
            obj.namespace().filter(|n| !n.is_empty()).unwrap_or_else(|| owner.namespace.clone())
        } else {
            String::new()
        };
        match apply_body(obj, &key, owner) {
            Ok(body) => Ok(Prepared { key, resolved, body }),
            Err(e) => Err(fail(key, format!("the object cannot be serialised: {e}"))),
        }
    }

    /// Waits until the named CRDs are established; returns those that were not in time.
    async fn wait_established(&self, crds: &[ObjectKey], timeout: Duration) -> HashSet<String> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let waits = crds.iter().map(|k| {
            let api = api.clone();
            async move {
                let cond = kube::runtime::wait::conditions::is_crd_established();
                let done =
                    tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api, &k.name, cond)).await;
                match done {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => {
                        tracing::warn!(crd = %k.name, error = %e, "waiting for a CRD to be established failed");
                        Some(k.name.clone())
                    }
                    Err(_) => {
                        tracing::warn!(crd = %k.name, "CRD not established in time");
                        Some(k.name.clone())
                    }
                }
            }
        });
        futures::future::join_all(waits).await.into_iter().flatten().collect()
    }
}

/// The apply body: the object without server-owned metadata, in `key`'s namespace (none for
/// cluster-scoped kinds), with the owner's labels.
fn apply_body(obj: &DynamicObject, key: &ObjectKey, owner: &ReleaseOwner) -> Result<Value, serde_json::Error> {
    let mut body = serde_json::to_value(obj)?;
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        for server_owned in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "deletionTimestamp",
            "selfLink",
        ] {
            meta.remove(server_owned);
        }
        if key.namespace.is_empty() {
            meta.remove("namespace");
        } else {
            meta.insert("namespace".into(), Value::String(key.namespace.clone()));
        }
        let labels = meta.entry("labels").or_insert_with(|| Value::Object(Default::default()));
        if !labels.is_object() {
            *labels = Value::Object(Default::default());
        }
        if let Some(labels) = labels.as_object_mut() {
            labels.insert(RELEASE_LABEL.into(), Value::String(owner.release.clone()));
            labels.insert(RELEASE_NAMESPACE_LABEL.into(), Value::String(owner.namespace.clone()));
        }
    }
    Ok(body)
}

/// A rendered object ready for server-side apply.
pub(super) struct Prepared {
    pub(super) key: ObjectKey,
    pub(super) resolved: Resolved,
    pub(super) body: Value,
}

/// Why an object cannot be sent at all.
pub(super) struct PrepareError {
    pub(super) key: ObjectKey,
    pub(super) message: String,
    /// The cluster serves no such kind (perhaps a CRD of the same render would add it).
    pub(super) unserved: bool,
}
