//! Discovery as the real API server answers it: `/api`, `/apis`, group and group-version
//! documents, the aggregated form (`as=APIGroupDiscoveryList`) and `/version`.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use clusterstack::util::lock;
use serde_json::{Value, json};

use super::store::{ApiError, ResourceType};
use super::{Shared, json_response, status_response};

pub(super) fn discovery(shared: &Shared, segs: &[String], accept: &str) -> Response {
    let store = lock(&shared.store);
    let aggregated = accept.contains("as=APIGroupDiscoveryList");
    let resource_json = |t: &ResourceType| {
        let verbs = ["create", "delete", "get", "list", "patch", "update", "watch"];
        json!({"name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
               "verbs": verbs, "shortNames": t.short_names})
    };
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in &store.types {
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, vs)) if !vs.contains(&t.version) => vs.push(t.version.clone()),
            Some(_) => {}
            None => groups.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    let gv = |g: &str, v: &str| if g.is_empty() { v.to_string() } else { format!("{g}/{v}") };
    let aggregated_group = |g: &str, vs: &[String]| {
        let versions: Vec<Value> = vs
            .iter()
            .map(|v| {
                let resources: Vec<Value> = store
                    .types
                    .iter()
                    .filter(|t| t.group == g && t.version == *v)
                    .map(|t| {
                        let subs: Vec<Value> = if t.status {
                            vec![json!({"subresource": "status", "responseKind": {"group": t.group, "version": t.version, "kind": t.kind}, "verbs": ["get", "patch", "update"]})]
                        } else {
                            vec![]
                        };
                        json!({"resource": t.plural, "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
                               "scope": if t.namespaced { "Namespaced" } else { "Cluster" }, "singularResource": t.singular,
                               "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                               "shortNames": t.short_names, "subresources": subs})
                    })
                    .collect();
                json!({"version": v, "resources": resources, "freshness": "Current"})
            })
            .collect();
        json!({"metadata": {"name": g}, "versions": versions})
    };
    let agg_list = |items: Vec<Value>| {
        let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items});
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")],
            body.to_string(),
        )
            .into_response()
    };
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["version"] => json_response(
            StatusCode::OK,
            &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-clusterstack-test", "platform": "linux/amd64"}),
        ),
        ["api"] if aggregated => {
            agg_list(groups.iter().filter(|(g, _)| g.is_empty()).map(|(g, vs)| aggregated_group(g, vs)).collect())
        }
        ["api"] => json_response(
            StatusCode::OK,
            &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        ["apis"] if aggregated => {
            agg_list(groups.iter().filter(|(g, _)| !g.is_empty()).map(|(g, vs)| aggregated_group(g, vs)).collect())
        }
        ["apis"] | ["apis", _] => {
            let group_json = |g: &str, vs: &[String]| {
                let versions: Vec<Value> = vs.iter().map(|v| json!({"groupVersion": gv(g, v), "version": v})).collect();
                json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
            };
            if let ["apis", name] = segs.as_slice() {
                return match groups.iter().find(|(g, _)| g == name) {
                    Some((g, vs)) => {
                        let mut v = group_json(g, vs);
                        v["kind"] = json!("APIGroup");
                        v["apiVersion"] = json!("v1");
                        json_response(StatusCode::OK, &v)
                    }
                    None => status_response(&ApiError::new(404, "NotFound", format!("group {name} not found"))),
                };
            }
            let list: Vec<Value> =
                groups.iter().filter(|(g, _)| !g.is_empty()).map(|(g, vs)| group_json(g, vs)).collect();
            json_response(StatusCode::OK, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": list}))
        }
        ["api", v] | ["apis", _, v] => {
            let g = if segs[0] == "api" { "" } else { segs[1] };
            let mut resources = Vec::new();
            for t in store.types.iter().filter(|t| t.group == g && t.version == *v) {
                resources.push(resource_json(t));
                if t.status {
                    resources.push(
                        json!({"name": format!("{}/status", t.plural), "singularName": "", "namespaced": t.namespaced,
                                          "kind": t.kind, "verbs": ["get", "patch", "update"]}),
                    );
                }
            }
            if resources.is_empty() {
                return status_response(&ApiError::new(404, "NotFound", format!("{} not served", gv(g, v))));
            }
            json_response(
                StatusCode::OK,
                &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv(g, v), "resources": resources}),
            )
        }
        _ => status_response(&ApiError::new(404, "NotFound", "unknown discovery path")),
    }
}
