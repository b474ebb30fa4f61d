//! `clusterstack describe clusterstack NAME` / `describe cluster NS/NAME`: one tree of a stack's
//! state (or one Cluster's), like `clusterctl describe cluster`. This file reads the objects;
//! [`super::describe_tree`] builds the tree from them and renders it.

use std::path::PathBuf;

use clap::ValueEnum;
use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::api::{ClusterAddon, ClusterStack, ClusterStackRelease};
use crate::apply::DiscoveryCache;

use super::CliError;
use super::describe_tree::{self, ClusterInputs, StackInputs};

/// Show one tree of a ClusterStack (or a Cluster): releases, Clusters, addons, rollout.
#[derive(Debug, clap::Args)]
pub struct DescribeArgs {
    /// What to describe.
    #[arg(value_enum)]
    pub kind: DescribeKind,
    /// Its name, or NAMESPACE/NAME.
    pub name: String,
    /// The namespace (when NAME does not name one).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Output format: a tree for people, or the same tree as JSON.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Tree)]
    pub output: Output,
    /// The kubeconfig file. Default: $KUBECONFIG, else ~/.kube/config, else in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DescribeKind {
    /// A ClusterStack, its releases and the Clusters using them.
    #[value(alias = "cs")]
    Clusterstack,
    /// A Cluster API Cluster, its release and addons.
    Cluster,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Tree,
    Json,
}

fn read_error(what: &str) -> impl FnOnce(kube::Error) -> CliError + '_ {
    move |e| CliError::Usage(format!("reading {what} failed: {e}"))
}

pub async fn run(args: DescribeArgs) -> Result<(), CliError> {
    let (ns, name) = match args.name.split_once('/') {
        Some((ns, name)) => (ns.to_string(), name.to_string()),
        None => (args.namespace.clone(), args.name.clone()),
    };
    let client = super::diff::client(args.kubeconfig.as_ref()).await?;
    let discovery = DiscoveryCache::new(client.clone());
    let now = jiff::Timestamp::now();
    let releases: Vec<ClusterStackRelease> = list(&client, &ns, "ClusterStackReleases").await?;
    let addons: Vec<ClusterAddon> = list(&client, &ns, "ClusterAddons").await?;
    let rollouts =
        list_dynamic(&client, &discovery, &ns, "clusterstack.x-k8s.io", &["v1alpha1"], "ClusterStackRollout").await?;
    let tree = match args.kind {
        DescribeKind::Clusterstack => {
            let stacks: Api<ClusterStack> = Api::namespaced(client.clone(), &ns);
            let stack = stacks
                .get_opt(&name)
                .await
                .map_err(read_error("the ClusterStack"))?
                .ok_or_else(|| CliError::Usage(format!("ClusterStack {ns}/{name} not found")))?;
            let clusters =
                list_dynamic(&client, &discovery, &ns, "cluster.x-k8s.io", &["v1beta2", "v1beta1"], "Cluster").await?;
            describe_tree::stack_tree(&StackInputs {
                stack: &stack,
                releases: &releases,
                clusters: &clusters,
                addons: &addons,
                rollouts: &rollouts,
                now,
            })
        }
        DescribeKind::Cluster => {
            let clusters =
                list_dynamic(&client, &discovery, &ns, "cluster.x-k8s.io", &["v1beta2", "v1beta1"], "Cluster").await?;
            let cluster = clusters
                .iter()
                .find(|c| c.pointer("/metadata/name").and_then(Value::as_str) == Some(name.as_str()))
                .ok_or_else(|| CliError::Usage(format!("Cluster {ns}/{name} not found")))?;
            let stacks: Vec<ClusterStack> = list(&client, &ns, "ClusterStacks").await?;
            describe_tree::cluster_tree(&ClusterInputs {
                cluster,
                stacks: &stacks,
                releases: &releases,
                addons: &addons,
                rollouts: &rollouts,
                now,
            })
        }
    };
    match args.output {
        Output::Json => {
            let text = serde_json::to_string_pretty(&tree).map_err(|e| CliError::Usage(e.to_string()))?;
            println!("{text}");
        }
        Output::Tree => print!("{}", describe_tree::render(&tree, stdout_colour())),
    }
    Ok(())
}

/// Whether stdout gets colours: a terminal, and `NO_COLOR` unset (https://no-color.org).
fn stdout_colour() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

async fn list<K>(client: &Client, ns: &str, what: &str) -> Result<Vec<K>, CliError>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    Ok(api.list(&ListParams::default()).await.map_err(read_error(what))?.items)
}

/// The objects of a kind read as JSON, in the first of `versions` the cluster serves; none when
/// it serves none (a cluster without the rollout kind, or without Cluster API).
async fn list_dynamic(
    client: &Client,
    discovery: &DiscoveryCache,
    ns: &str,
    group: &str,
    versions: &[&str],
    kind: &str,
) -> Result<Vec<Value>, CliError> {
    for version in versions {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let resolved = discovery.resolve(&gvk).await.map_err(read_error("the API resources"))?;
        let Some(resolved) = resolved else { continue };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resolved.resource);
        let items = api.list(&ListParams::default()).await.map_err(read_error(kind))?.items;
        return Ok(items.into_iter().filter_map(|o| serde_json::to_value(o).ok()).collect());
    }
    Ok(Vec::new())
}
