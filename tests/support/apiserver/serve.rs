//! One API request against the store: the verb's write or read, `dryRun=All` on a copy of the
//! store, and the content type of a PATCH.

use super::*;

pub(super) fn serve(
    shared: &Arc<Shared>,
    t: &Target,
    verb: &str,
    query: &BTreeMap<String, String>,
    content_type: &str,
    body: &Bytes,
) -> Response {
    let rt = {
        let store = lock(&shared.store);
        store.resource(&t.group, &t.version, &t.resource)
    };
    let Some(rt) = rt else {
        return status_response(&ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({}/{} {})", t.group, t.version, t.resource),
        ));
    };
    if rt.namespaced != t.namespace.is_some() && !(verb == "list" || verb == "watch") {
        return status_response(&ApiError::new(
            404,
            "NotFound",
            format!("{} is {}namespaced", rt.plural, if rt.namespaced { "" } else { "not " }),
        ));
    }
    let status_sub = match t.subresource.as_str() {
        "" => false,
        "status" if rt.status => true,
        other => {
            return status_response(&ApiError::new(
                404,
                "NotFound",
                format!("subresource {other} not served for {}", rt.plural),
            ));
        }
    };
    let ns = t.namespace.as_deref();
    let labels = match LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or("")) {
        Ok(l) => l,
        Err(e) => return status_response(&ApiError::new(400, "BadRequest", e)),
    };
    let fields = match FieldSelector::parse(query.get("fieldSelector").map(String::as_str).unwrap_or("")) {
        Ok(f) => f,
        Err(e) => return status_response(&ApiError::new(400, "BadRequest", e)),
    };
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::new(400, "BadRequest", format!("invalid JSON body: {e}")))
    };
    // A delete carries its options (dryRun among them) in a DeleteOptions body.
    let delete_dry = (verb == "delete")
        .then(|| serde_json::from_slice::<Value>(body).ok())
        .flatten()
        .and_then(|o| o.pointer("/dryRun/0").and_then(Value::as_str).map(str::to_string));
    if let Some(dry) = query.get("dryRun").cloned().or(delete_dry)
        && matches!(verb, "create" | "update" | "patch" | "delete")
    {
        return match dry_run(shared, &rt, t, verb, &dry, query, content_type, body) {
            Ok((code, v)) => json_response(code, &v),
            Err(e) => status_response(&e),
        };
    }
    let result: Result<(StatusCode, Value), ApiError> = match verb {
        "watch" => return watch::watch(shared, &rt, ns, labels, fields, query),
        "get" => lock(&shared.store).get(&rt, ns.unwrap_or(""), &t.name).map(|v| (StatusCode::OK, v)),
        "list" => {
            let store = lock(&shared.store);
            let items = store.list(&rt, ns, &labels, &fields);
            Ok((
                StatusCode::OK,
                json!({"kind": format!("{}List", rt.kind), "apiVersion": rt.api_version(),
                       "metadata": {"resourceVersion": store.resource_version().to_string()}, "items": items}),
            ))
        }
        "create" => parse_body().and_then(|b| {
            let out = lock(&shared.store).create(&rt, ns, b)?;
            Ok((StatusCode::CREATED, establish_if_crd(shared, &rt, out)))
        }),
        "update" => parse_body()
            .and_then(|b| lock(&shared.store).update(&rt, ns, &t.name, status_sub, b).map(|v| (StatusCode::OK, v))),
        "patch" => {
            let kind = patch_type(content_type);
            let force = query.get("force").is_some_and(|f| f == "true");
            let manager = query.get("fieldManager").map(String::as_str);
            let existed = lock(&shared.store).get(&rt, ns.unwrap_or(""), &t.name).is_ok();
            lock(&shared.store).patch(&rt, ns, &t.name, status_sub, kind, body, manager, force).map(|v| {
                if existed { (StatusCode::OK, v) } else { (StatusCode::CREATED, establish_if_crd(shared, &rt, v)) }
            })
        }
        "delete" => {
            let opts: Value =
                if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(json!({})) };
            let pre = Preconditions::of(&opts);
            lock(&shared.store).delete(&rt, ns, &t.name, &pre).map(|v| (StatusCode::OK, v))
        }
        _ => Err(ApiError::new(405, "MethodNotAllowed", format!("{verb} is not supported by the test server"))),
    };
    match result {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => status_response(&e),
    }
}

pub(super) fn patch_type(content_type: &str) -> PatchType {
    if content_type.starts_with("application/apply-patch") {
        PatchType::Apply
    } else if content_type.starts_with("application/json-patch") {
        PatchType::Json
    } else if content_type.starts_with("application/strategic-merge-patch") {
        PatchType::Strategic
    } else {
        PatchType::Merge
    }
}

/// A `dryRun` write: run on a copy of the store, answered as the real server's dry-run storage
/// answers (an update keeps the live `resourceVersion`, a create has none), nothing kept.
#[allow(clippy::too_many_arguments)]
pub(super) fn dry_run(
    shared: &Arc<Shared>,
    rt: &ResourceType,
    t: &Target,
    verb: &str,
    dry: &str,
    query: &BTreeMap<String, String>,
    content_type: &str,
    body: &Bytes,
) -> Result<(StatusCode, Value), ApiError> {
    if dry != "All" {
        return Err(ApiError::new(
            400,
            "BadRequest",
            format!("dryRun: Unsupported value: \"{dry}\": supported values: \"All\""),
        ));
    }
    let ns = t.namespace.as_deref();
    let status_sub = t.subresource == "status";
    let mut copy = lock(&shared.store).dry_run_copy();
    let live = copy.get(rt, ns.unwrap_or(""), &t.name).ok();
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body).map_err(|e| ApiError::new(400, "BadRequest", format!("invalid JSON body: {e}")))
    };
    let (code, mut out) = match verb {
        "create" => (StatusCode::CREATED, copy.create(rt, ns, parse_body()?)?),
        "update" => (StatusCode::OK, copy.update(rt, ns, &t.name, status_sub, parse_body()?)?),
        "patch" => {
            let force = query.get("force").is_some_and(|f| f == "true");
            let manager = query.get("fieldManager").map(String::as_str);
            let out = copy.patch(rt, ns, &t.name, status_sub, patch_type(content_type), body, manager, force)?;
            (if live.is_some() { StatusCode::OK } else { StatusCode::CREATED }, out)
        }
        _ => {
            let opts: Value =
                if body.is_empty() { json!({}) } else { serde_json::from_slice(body).unwrap_or(json!({})) };
            (StatusCode::OK, copy.delete(rt, ns, &t.name, &Preconditions::of(&opts))?)
        }
    };
    if let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        match live.as_ref().and_then(|l| l.pointer("/metadata/resourceVersion")) {
            Some(rv) if verb != "create" => {
                m.insert("resourceVersion".into(), rv.clone());
            }
            _ => {
                m.remove("resourceVersion");
            }
        }
    }
    Ok((code, out))
}
