//! Out-of-band writes (a test's direct edits), and what follows a write: a CRD's resources registered or removed (with their objects), CRDs
//! established, and garbage collection of dependents and of deleted namespaces' contents.

use super::*;

impl Store {
    /// Side effects of writes: CRDs (un)register their resources, owners' dependents and
    /// namespaces' contents are collected.
    pub(super) fn after_write(&mut self, rt: &ResourceType, name: &str) {
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            self.sync_crd(name);
        }
        self.collect_garbage();
    }

    /// Makes the resources of an established CRD servable, and forgets those of a removed one
    /// (deleting their objects, as a real cluster does).
    pub(super) fn sync_crd(&mut self, name: &str) {
        let key = (
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
            String::new(),
            name.to_string(),
        );
        let crd = self.objects.get(&key).map(|s| s.obj.clone());
        let established = crd.as_ref().is_some_and(|c| {
            c.pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"))
        });
        let old_types: Vec<ResourceType> =
            self.types.iter().filter(|t| t.crd.as_deref() == Some(name)).cloned().collect();
        self.types.retain(|t| t.crd.as_deref() != Some(name));
        if let (Some(crd), true) = (&crd, established) {
            let spec = &crd["spec"];
            let names = &spec["names"];
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            for v in spec["versions"].as_array().into_iter().flatten().filter(|v| v["served"] != false) {
                self.types.push(ResourceType {
                    group: s(&spec["group"]),
                    version: s(&v["name"]),
                    kind: s(&names["kind"]),
                    plural: s(&names["plural"]),
                    singular: names["singular"]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| s(&names["kind"]).to_lowercase()),
                    namespaced: spec["scope"] != "Cluster",
                    status: v.pointer("/subresources/status").is_some(),
                    crd: Some(name.to_string()),
                    short_names: names["shortNames"].as_array().into_iter().flatten().map(s).collect(),
                });
            }
        }
        if crd.is_none() {
            // The CRD is gone: so are its objects.
            for t in old_types.iter().take(1) {
                let keys: Vec<Key> =
                    self.objects.keys().filter(|k| k.0 == t.group && k.1 == t.plural).cloned().collect();
                for k in keys {
                    self.commit(&k, t, None);
                }
            }
        }
    }

    /// Sets a CRD's `Established` and `NamesAccepted` conditions, which makes its resources servable.
    pub fn establish_crd(&mut self, name: &str) {
        let key = (
            "apiextensions.k8s.io".to_string(),
            "customresourcedefinitions".to_string(),
            String::new(),
            name.to_string(),
        );
        let Some(mut st) = self.objects.get(&key).cloned() else { return };
        let t = now();
        let cond = |ty: &str, reason: &str| json!({"type": ty, "status": "True", "reason": reason, "message": "", "lastTransitionTime": t});
        st.obj["status"] = json!({
            "conditions": [cond("NamesAccepted", "NoConflicts"), cond("Established", "InitialNamesAccepted")],
            "acceptedNames": st.obj["spec"]["names"].clone(),
            "storedVersions": st.obj["spec"]["versions"].as_array().into_iter().flatten()
                .filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>(),
        });
        let rt = self.types.iter().find(|t| t.plural == "customresourcedefinitions").cloned();
        if let Some(rt) = rt {
            self.commit(&key, &rt, Some(st));
            self.sync_crd(name);
        }
    }

    /// Deletes objects none of whose owners (by uid) exist any more, and finishes deleting
    /// terminating namespaces that are empty. Runs until nothing changes. Only queued objects
    /// are checked (see [`Store::gc_queue`]), so a write costs its own dependents, not a scan.
    pub(super) fn collect_garbage(&mut self) {
        if self.collecting {
            return;
        }
        self.collecting = true;
        loop {
            while let Some(k) = self.gc_queue.pop_first() {
                let orphan = self.objects.get(&k).is_some_and(|s| {
                    s.obj.pointer("/metadata/deletionTimestamp").is_none()
                        && owner_uids(&s.obj).is_some_and(|o| !o.iter().any(|u| self.uids.contains(u)))
                });
                if orphan && let Some(rt) = self.type_of_key(&k) {
                    let _ = self.delete_key(&k, &rt);
                }
            }
            if !self.collect_namespaces() {
                break;
            }
        }
        self.collecting = false;
    }

    /// Terminating namespaces: deletes their contents, then themselves once empty and without
    /// finalizers. Whether anything changed.
    fn collect_namespaces(&mut self) -> bool {
        let mut changed = false;
        for ns in self.terminating.clone() {
            let inside: Vec<Key> = self
                .objects
                .iter()
                .filter(|(k, s)| k.2 == ns && s.obj.pointer("/metadata/deletionTimestamp").is_none())
                .map(|(k, _)| k.clone())
                .collect();
            for k in &inside {
                if let Some(rt) = self.type_of_key(k) {
                    let _ = self.delete_key(k, &rt);
                    changed = true;
                }
            }
            let empty = !self.objects.keys().any(|k| k.2 == ns);
            let nskey = (String::new(), "namespaces".to_string(), String::new(), ns.clone());
            let no_finalizers = self.objects.get(&nskey).is_some_and(|s| {
                s.obj.pointer("/metadata/finalizers").and_then(Value::as_array).is_none_or(|f| f.is_empty())
            });
            if empty && no_finalizers {
                let rt = self.types[0].clone();
                self.commit(&nskey, &rt, None);
                changed = true;
            }
        }
        changed
    }

    /// Drops `key` from the dependents of `owner`.
    pub(super) fn unindex_dependent(&mut self, owner: &str, key: &Key) {
        if let Some(set) = self.dependents.get_mut(owner) {
            set.remove(key);
            if set.is_empty() {
                self.dependents.remove(owner);
            }
        }
    }

    /// Creates or replaces an object directly, as an out-of-band edit (no validation but the kind).
    pub fn put_direct(&mut self, mut obj: Value) -> Res<Value> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let rt = self
            .resource_for_kind(&api_version, &kind)
            .ok_or_else(|| ApiError::new(404, "NotFound", format!("no resource for {api_version} {kind}")))?;
        let ns = meta(&obj, "namespace").unwrap_or_else(|| "default".into());
        let name = meta(&obj, "name").ok_or_else(|| ApiError::bad("metadata.name is required"))?;
        let key = Self::key(&rt, &ns, &name);
        if self.objects.contains_key(&key) {
            meta_mut(&mut obj).remove("resourceVersion");
            let new = Self::incoming(&rt, Some(&ns), obj)?;
            let st = self.objects.get(&key).cloned().map(|s| s.managers);
            // Out-of-band writes change status too.
            let status = new.get("status").cloned();
            let out = self.write_existing(&rt, &key, new, false, st)?;
            if let (Some(s), true) = (status, rt.status) {
                let mut cur = self.objects.get(&key).map(|s| s.obj.clone()).unwrap_or_default();
                cur["status"] = s;
                return self.write_existing(&rt, &key, cur, true, None);
            }
            Ok(out)
        } else {
            // Out-of-band creations keep their status too (a test's Cluster starts Ready), where
            // a client's create through a status subresource would drop it.
            let status = obj.get("status").cloned();
            let out = self.create(&rt, if rt.namespaced { Some(&ns) } else { None }, obj)?;
            match (status, rt.status) {
                (Some(s), true) => {
                    let mut cur = self.objects.get(&key).map(|s| s.obj.clone()).unwrap_or_default();
                    cur["status"] = s;
                    self.write_existing(&rt, &key, cur, true, None)
                }
                _ => Ok(out),
            }
        }
    }
}
