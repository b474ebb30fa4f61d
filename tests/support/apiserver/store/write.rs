//! POST and PUT: an incoming body normalised, a create, and the rules every update shares
//! (status or spec by endpoint, server-owned metadata kept, generation, no-op writes).

use super::*;

impl Store {
    pub(super) fn check_namespace(&self, rt: &ResourceType, ns: &str) -> Res<()> {
        if !rt.namespaced {
            return Ok(());
        }
        let ns_type = &self.types[0];
        match self.objects.get(&Self::key(ns_type, "", ns)) {
            None => Err(ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))),
            Some(st) if st.obj.pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::new(
                403,
                "Forbidden",
                format!("unable to create new content in namespace {ns} because it is being terminated"),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Normalises an incoming body: kind, namespace and server-owned metadata.
    pub(super) fn incoming(rt: &ResourceType, ns: Option<&str>, mut body: Value) -> Res<Value> {
        if !body.is_object() {
            return Err(ApiError::bad("the body must be a JSON object"));
        }
        if let Some(k) = body.get("kind").and_then(Value::as_str)
            && k != rt.kind
        {
            return Err(ApiError::bad(format!("kind {k} does not match the resource {}", rt.plural)));
        }
        if rt.kind == "Secret"
            && rt.group.is_empty()
            && let Some(Value::Object(string_data)) = body.as_object_mut().and_then(|o| o.remove("stringData"))
        {
            // As the real server: stringData is write-only and lands base64-encoded in data.
            use base64::Engine;
            for (k, v) in string_data {
                let encoded = base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap_or_default());
                body["data"][k] = json!(encoded);
            }
        }
        let m = meta_mut(&mut body);
        if rt.namespaced {
            let path_ns = ns.ok_or_else(|| ApiError::bad("a namespace is required"))?;
            match m.get("namespace").and_then(Value::as_str) {
                Some(b) if !b.is_empty() && b != path_ns => {
                    return Err(ApiError::bad(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    m.insert("namespace".into(), json!(path_ns));
                }
            }
        } else {
            m.remove("namespace");
        }
        m.remove("managedFields");
        m.remove("selfLink");
        // Empty collections are omitted, as the real server's serialisation does.
        m.retain(|k, v| {
            !(["finalizers", "labels", "annotations", "ownerReferences"].contains(&k.as_str())
                && (v.is_null()
                    || v.as_array().is_some_and(|a| a.is_empty())
                    || v.as_object().is_some_and(|o| o.is_empty())))
        });
        Ok(body)
    }

    /// POST: creates an object.
    pub fn create(&mut self, rt: &ResourceType, ns: Option<&str>, body: Value) -> Res<Value> {
        let mut obj = Self::incoming(rt, ns, body)?;
        let m = meta_mut(&mut obj);
        let name = match m.get("name").and_then(Value::as_str) {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => match m.get("generateName").and_then(Value::as_str) {
                Some(p) => format!("{p}{}", &hex::encode(rand::random::<[u8; 3]>())[..5]),
                None => return Err(ApiError::new(422, "Invalid", "metadata.name: Required value")),
            },
        };
        m.insert("name".into(), json!(name));
        if rt.group == "events.k8s.io" && rt.kind == "Event" {
            validate_event(&obj)?;
        }
        let m = meta_mut(&mut obj);
        for f in SERVER_META {
            m.remove(f);
        }
        m.insert("uid".into(), json!(uid()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.insert("generation".into(), json!(1));
        self.check_namespace(rt, ns.unwrap_or(""))?;
        let key = Self::key(rt, ns.unwrap_or(""), &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::new(
                409,
                "AlreadyExists",
                format!("{}.{} \"{name}\" already exists", rt.plural, rt.group),
            ));
        }
        if rt.status {
            // With a status subresource, status is not set through the main resource.
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
        if rt.kind == "Namespace" && rt.group.is_empty() {
            obj["status"] = json!({"phase": "Active"});
        }
        let out = self.commit(&key, rt, Some(Stored { obj, managers: BTreeMap::new() }));
        self.after_write(rt, &name);
        // Garbage collection may have removed it already (an owner that does not exist).
        Ok(self.objects.get(&key).map(|st| Self::render(rt, st)).unwrap_or(out))
    }

    /// Writes a new version of an existing object with the rules every update shares: status or
    /// spec preserved depending on the endpoint, generation bumped on spec changes, no write when
    /// nothing changed.
    pub(super) fn write_existing(
        &mut self,
        rt: &ResourceType,
        key: &Key,
        mut new: Value,
        status_only: bool,
        managers: Option<BTreeMap<String, (String, BTreeSet<FieldPath>)>>,
    ) -> Res<Value> {
        let old = self.objects.get(key).cloned().ok_or_else(|| ApiError::not_found(rt, &key.3))?;
        if status_only {
            // The status endpoint changes status only.
            let status = new.get("status").cloned();
            new = old.obj.clone();
            match status {
                Some(s) => new["status"] = s,
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        } else if rt.status {
            // The main endpoint never changes status.
            match old.obj.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    if let Some(o) = new.as_object_mut() {
                        o.remove("status");
                    }
                }
            }
        }
        // Server-owned metadata stays as it was, except finalizers and the like the client sets.
        {
            let m = meta_mut(&mut new);
            for f in SERVER_META.iter().chain(["name", "namespace"].iter()) {
                match old.obj.pointer(&format!("/metadata/{f}")) {
                    Some(v) => {
                        m.insert(f.to_string(), v.clone());
                    }
                    None => {
                        m.remove(*f);
                    }
                }
            }
        }
        if spec_part(&new) != spec_part(&old.obj) {
            let g = old.obj.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(g + 1));
        }
        // An object being deleted may lose finalizers, never gain one (the real server's
        // ValidateObjectMetaUpdate).
        if old.obj.pointer("/metadata/deletionTimestamp").is_some() {
            let finalizers = |v: &Value| -> Vec<String> {
                v.pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
                    .unwrap_or_default()
            };
            let before = finalizers(&old.obj);
            let added: Vec<String> = finalizers(&new).into_iter().filter(|f| !before.contains(f)).collect();
            if !added.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "{} \"{}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}",
                        rt.kind, key.3
                    ),
                ));
            }
        }
        let managers = managers.unwrap_or(old.managers.clone());
        if new == old.obj && managers == old.managers {
            return Ok(Self::render(rt, &old));
        }
        let terminating = new.pointer("/metadata/deletionTimestamp").is_some();
        let no_finalizers = new.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty());
        if terminating && no_finalizers {
            // The last finalizer is gone: the object goes.
            let out = self.commit(key, rt, None);
            self.after_write(rt, &key.3);
            return Ok(out);
        }
        let out = self.commit(key, rt, Some(Stored { obj: new, managers }));
        self.after_write(rt, &key.3);
        Ok(out)
    }

    pub(super) fn check_rv(old: &Value, new: &Value, rt: &ResourceType, name: &str) -> Res<()> {
        if let Some(want) = meta(new, "resourceVersion").filter(|s| !s.is_empty())
            && meta(old, "resourceVersion").as_deref() != Some(want.as_str())
        {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {}.{} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                    rt.plural, rt.group
                ),
            ));
        }
        Ok(())
    }

    /// PUT, on the object or its `/status`.
    pub fn update(&mut self, rt: &ResourceType, ns: Option<&str>, name: &str, status: bool, body: Value) -> Res<Value> {
        let new = Self::incoming(rt, ns, body)?;
        if meta(&new, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad("the name of the object does not match the name on the URL"));
        }
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let old = self.objects.get(&key).ok_or_else(|| ApiError::not_found(rt, name))?;
        Self::check_rv(&old.obj, &new, rt, name)?;
        self.write_existing(rt, &key, new, status, None)
    }
}

/// The real server's checks on a new `events.k8s.io/v1` Event (what a recorder gets wrong).
fn validate_event(obj: &Value) -> Res<()> {
    let invalid = |m: String| Err(ApiError::new(422, "Invalid", m));
    for field in ["eventTime", "reportingController", "reportingInstance", "action", "reason"] {
        if obj.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
            return invalid(format!("{field}: Required value"));
        }
    }
    if obj.get("note").and_then(Value::as_str).is_some_and(|n| n.len() > 1024) {
        return invalid("note: Too long: may not be more than 1024 bytes".into());
    }
    if !matches!(obj.get("type").and_then(Value::as_str), Some("Normal" | "Warning")) {
        return invalid("type: Invalid value: has invalid value".into());
    }
    Ok(())
}
