//! PATCH (JSON patch, merge patch, server-side apply with per-manager ownership and conflicts)
//! and DELETE (finalizers, `deletionTimestamp`, preconditions) on the store.

use super::*;

impl Store {
    /// PATCH, on the object or its `/status`. Apply creates a missing object.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        status: bool,
        kind: PatchType,
        body: &[u8],
        manager: Option<&str>,
        force: bool,
    ) -> Res<Value> {
        let key = Self::key(rt, ns.unwrap_or(""), name);
        if kind == PatchType::Apply {
            return self.apply(rt, ns, name, status, body, manager, force);
        }
        let old = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        let mut doc = Self::render(rt, &old);
        match kind {
            PatchType::Json => {
                let mut ops: json_patch::Patch =
                    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid JSON patch: {e}")))?;
                // As the real server's JSON patch library: testing a missing field against null holds.
                ops.0.retain(|op| match op {
                    json_patch::PatchOperation::Test(t) => {
                        !(t.value.is_null() && doc.pointer(t.path.as_str()).is_none())
                    }
                    _ => true,
                });
                json_patch::patch(&mut doc, &ops)
                    .map_err(|e| ApiError::new(422, "Invalid", format!("the JSON patch could not be applied: {e}")))?;
            }
            _ => {
                let p: Value =
                    serde_json::from_slice(body).map_err(|e| ApiError::bad(format!("invalid merge patch: {e}")))?;
                json_patch::merge(&mut doc, &p);
            }
        }
        let new = Self::incoming(rt, ns, doc)?;
        Self::check_rv(&old.obj, &new, rt, name)?;
        self.write_existing(rt, &key, new, status, None)
    }

    /// Server-side apply with simplified field ownership: each manager owns the leaf paths it
    /// applied; lists are atomic; conflicts are checked against other apply managers only.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &mut self,
        rt: &ResourceType,
        ns: Option<&str>,
        name: &str,
        status: bool,
        body: &[u8],
        manager: Option<&str>,
        force: bool,
    ) -> Res<Value> {
        let manager = manager.ok_or_else(|| {
            ApiError::bad(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            )
        })?;
        let config: Value =
            serde_saphyr::from_slice(body).map_err(|e| ApiError::bad(format!("invalid apply body: {e}")))?;
        if config.get("apiVersion").is_none() || config.get("kind").is_none() {
            return Err(ApiError::bad("apply configurations must carry apiVersion and kind"));
        }
        let mut config = Self::incoming(rt, ns, config)?;
        if meta(&config, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad("the name of the object does not match the name on the URL"));
        }
        meta_mut(&mut config).insert("name".into(), json!(name));
        // Only the part of the configuration the endpoint writes is owned.
        if let Some(o) = config.as_object_mut() {
            if status {
                o.retain(|k, _| k == "status" || k == "apiVersion" || k == "kind" || k == "metadata");
                meta_mut(&mut config).retain(|k, _| k == "name" || k == "namespace");
            } else if rt.status {
                o.remove("status");
            }
        }
        let mut paths = BTreeSet::new();
        leaf_paths(&config, &mut vec![], &mut paths);
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let Some(old) = self.objects.get(&key).cloned() else {
            if status {
                return Err(ApiError::not_found(rt, name));
            }
            let created = self.create(rt, ns, config)?;
            if let Some(st) = self.objects.get_mut(&key) {
                st.managers.insert(manager.to_string(), (now(), paths));
                let st = st.clone();
                return Ok(Self::render(rt, &st));
            }
            return Ok(created);
        };
        Self::check_rv(&old.obj, &config, rt, name)?;
        let mut managers = old.managers.clone();
        // Conflicts: fields another manager owns with a different value.
        let mut conflicts = Vec::new();
        for (other, (_, owned)) in managers.iter_mut().filter(|(m, _)| m.as_str() != manager) {
            let mut lost = Vec::new();
            for p in &paths {
                // An empty map claims the map, not its entries: it conflicts with nobody who
                // owns an entry (the real server's field sets hold `f:data: {}` beside
                // another manager's `f:data/f:a`).
                let empty_map = get_path(&config, p).and_then(Value::as_object).is_some_and(|m| m.is_empty());
                for q in owned.iter().filter(|q| overlaps(p, q) && !(empty_map && q.len() > p.len())) {
                    if get_path(&old.obj, p) != get_path(&config, p) {
                        conflicts.push(format!("conflict with \"{other}\": .{}", p.join(".")));
                        lost.push(q.clone());
                    }
                }
            }
            if force {
                for q in lost {
                    owned.remove(&q);
                }
            }
        }
        if !force && !conflicts.is_empty() {
            return Err(ApiError::new(
                409,
                "Conflict",
                format!("Apply failed with {} conflicts: {}", conflicts.len(), conflicts.join("; ")),
            ));
        }
        managers.retain(|_, (_, owned)| !owned.is_empty());
        let previous = managers.get(manager).map(|(_, p)| p.clone()).unwrap_or_default();
        let mut new = old.obj.clone();
        for gone in previous.difference(&paths) {
            let still_owned = managers.iter().any(|(m, (_, o))| m != manager && o.iter().any(|q| overlaps(q, gone)));
            if !still_owned {
                remove_path(&mut new, gone);
            }
        }
        deep_merge(&mut new, &config);
        let time = match managers.get(manager) {
            Some((t, p)) if *p == paths && new == old.obj => t.clone(),
            _ => now(),
        };
        managers.insert(manager.to_string(), (time, paths));
        self.write_existing(rt, &key, new, status, Some(managers))
    }

    /// DELETE: checks the preconditions (uid, then resourceVersion, as the real server does),
    /// marks objects with finalizers, removes the others.
    pub fn delete(&mut self, rt: &ResourceType, ns: Option<&str>, name: &str, pre: &Preconditions) -> Res<Value> {
        let key = Self::key(rt, ns.unwrap_or(""), name);
        let old = self.objects.get(&key).cloned().ok_or_else(|| ApiError::not_found(rt, name))?;
        for (what, want, field) in [
            ("UID", pre.uid.as_deref(), "uid"),
            ("ResourceVersion", pre.resource_version.as_deref(), "resourceVersion"),
        ] {
            if let Some(want) = want
                && meta(&old.obj, field).as_deref() != Some(want)
            {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Precondition failed: {what} in precondition: {want}, {what} in object meta: {}",
                        meta(&old.obj, field).unwrap_or_default()
                    ),
                ));
            }
        }
        self.delete_key(&key, rt)
    }

    pub(super) fn delete_key(&mut self, key: &Key, rt: &ResourceType) -> Res<Value> {
        let Some(old) = self.objects.get(key).cloned() else { return Err(ApiError::not_found(rt, &key.3)) };
        let has_finalizers =
            old.obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        let is_namespace = rt.kind == "Namespace" && rt.group.is_empty();
        if has_finalizers || is_namespace {
            if old.obj.pointer("/metadata/deletionTimestamp").is_some() {
                return Ok(Self::render(rt, &old));
            }
            let mut st = old;
            meta_mut(&mut st.obj).insert("deletionTimestamp".into(), json!(now()));
            meta_mut(&mut st.obj).insert("deletionGracePeriodSeconds".into(), json!(0));
            if is_namespace {
                st.obj["status"] = json!({"phase": "Terminating"});
            }
            let out = self.commit(key, rt, Some(st));
            self.after_write(rt, &key.3);
            return Ok(out);
        }
        let out = self.commit(key, rt, None);
        self.after_write(rt, &key.3);
        Ok(out)
    }
}
