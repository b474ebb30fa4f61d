//! Generation of the CustomResourceDefinitions from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{ClusterAddon, ClusterStack, ClusterStackRelease, ClusterStackRollout};

/// Every CRD of the project, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![ClusterStack::crd(), ClusterStackRelease::crd(), ClusterAddon::crd(), ClusterStackRollout::crd()]
}

/// The file name a CRD is kept under in `crds/`: `<group>_<plural>.yaml`,
/// the naming controller-gen uses.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as a YAML document.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

/// All CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in all_crds() {
        out.push_str("---\n");
        out.push_str(&crd_yaml(&crd)?);
    }
    Ok(out)
}
