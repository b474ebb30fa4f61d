//! Helm's values: reading values files, enabling dependencies by
//! `condition` and `tags`, `import-values`, and coalescing chart defaults,
//! subchart sections and globals under the user's values.

use serde_json::Value;

use super::load::{Chart, Dependency};

type Map = serde_json::Map<String, Value>;

/// The key whose table flows from a parent into every subchart.
pub const GLOBAL_KEY: &str = "global";

/// Parses a values file as Helm does (go-yaml v2 through sigs.k8s.io/yaml:
/// `yes`/`on` are booleans, keys included; several documents coalesced, the
/// later winning): an empty one is an empty map; anything but a map is an error.
pub fn parse_values(text: &str) -> Result<Value, String> {
    super::yaml::read_values(text).map(Value::Object)
}

/// Merges `src` into `dst`, `dst` winning (Helm's `coalesceTablesFullKey`).
/// Unless `merge`, a null in `dst` deletes the key where `src` has a value
/// for it; a null in `dst` for a key `src` lacks (or holds null) stays.
pub fn coalesce_tables(dst: &mut Map, src: Map, merge: bool) {
    for (key, val) in src {
        match dst.get_mut(&key) {
            Some(dv) if dv.is_null() && !merge && !val.is_null() => {
                dst.remove(&key);
            }
            None => {
                dst.insert(key, val);
            }
            Some(dv) => {
                if let (Value::Object(d), Value::Object(s)) = (dv, val) {
                    coalesce_tables(d, s, merge);
                }
                // A table over a scalar, or a scalar over a table: the
                // destination stays (Helm warns and skips).
            }
        }
    }
}

/// Helm's `cleanNilValues`: null entries of maps removed, at every depth of
/// maps (lists are left alone).
fn clean_nil_values(m: &mut Map) {
    m.retain(|_, v| !v.is_null());
    for v in m.values_mut() {
        if let Value::Object(sub) = v {
            clean_nil_values(sub);
        }
    }
}

/// The values a chart renders with: its defaults (and its subcharts',
/// with globals) coalesced under the user's values.
pub fn coalesce_values(chart: &Chart, user: &Map) -> Result<Map, String> {
    let mut dest = user.clone();
    coalesce(chart, &mut dest, false)?;
    Ok(dest)
}

fn coalesce(chart: &Chart, dest: &mut Map, merge: bool) -> Result<(), String> {
    coalesce_chart_values(chart, dest, merge);
    coalesce_deps(chart, dest, merge)
}

fn coalesce_chart_values(chart: &Chart, v: &mut Map, merge: bool) {
    let Some(defaults) = chart.values.as_object() else { return };
    for (key, val) in defaults {
        match v.get_mut(key) {
            Some(value) if value.is_null() && !merge => {
                v.remove(key);
            }
            Some(Value::Object(dest)) => {
                if let Value::Object(src) = val {
                    // A subchart's section keeps its nulls for the subchart's own pass;
                    // a chart's own defaults lose theirs (Helm's `childChartMergeTrue`).
                    let merge = merge || chart.dependencies.iter().any(|d| d.name() == key);
                    let mut src = src.clone();
                    if !merge {
                        clean_nil_values(&mut src);
                    }
                    coalesce_tables(dest, src, merge);
                }
            }
            Some(_) => {}
            None => {
                let mut val = val.clone();
                if !merge {
                    match &mut val {
                        Value::Null => continue,
                        Value::Object(sub) => clean_nil_values(sub),
                        _ => {}
                    }
                }
                v.insert(key.clone(), val);
            }
        }
    }
}

fn coalesce_deps(chart: &Chart, dest: &mut Map, merge: bool) -> Result<(), String> {
    for sub in &chart.dependencies {
        let name = sub.name().to_string();
        let mut section = match dest.remove(&name) {
            None => Map::new(),
            Some(Value::Object(m)) => m,
            Some(other) => return Err(format!("type mismatch on {name}: {other} is not a table")),
        };
        coalesce_globals(&mut section, dest);
        coalesce(sub, &mut section, merge)?;
        dest.insert(name, Value::Object(section));
    }
    Ok(())
}

/// Copies the parent's `global` table into a subchart's section, the
/// parent's entries winning.
fn coalesce_globals(dest: &mut Map, src: &Map) {
    let mut dg = match dest.get(GLOBAL_KEY) {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return,
    };
    let sg = match src.get(GLOBAL_KEY) {
        None => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return,
    };
    for (key, val) in sg {
        match val {
            Value::Object(table) => {
                let mut vv = table;
                match dg.get(&key) {
                    None => {
                        dg.insert(key, Value::Object(vv));
                    }
                    Some(Value::Object(destv)) => {
                        coalesce_tables(&mut vv, destv.clone(), true);
                        dg.insert(key, Value::Object(vv));
                    }
                    Some(_) => {}
                }
            }
            val => {
                if !matches!(dg.get(&key), Some(Value::Object(_))) {
                    dg.insert(key, val);
                }
            }
        }
    }
    dest.insert(GLOBAL_KEY.into(), Value::Object(dg));
}

/// A value at a dotted path (`a.b.c`) of a table.
pub fn path_value<'a>(values: &'a Map, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    let mut cur = values.get(parts.next()?)?;
    for p in parts {
        cur = cur.as_object()?.get(p)?;
    }
    Some(cur)
}

/// Helm's dependency processing before rendering: aliases applied,
/// disabled subcharts (by `condition` and `tags`) removed, `import-values`
/// copied into the parents' defaults. A dependency the chart does not vendor fails, as
/// `helm template` checks the chart it renders (its subcharts' lists are not checked).
pub fn process_dependencies(chart: &mut Chart, user: &Map) -> Result<(), String> {
    // helm names every missing dependency at once.
    let missing: Vec<&str> = chart
        .metadata
        .dependencies
        .iter()
        .filter(|r| !chart.dependencies.iter().any(|c| c.name() == r.name))
        .map(|r| r.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!("found in Chart.yaml, but missing in charts/ directory: {}", missing.join(", ")));
    }
    process_enabled(chart, user, "")?;
    process_imports(chart)
}

/// Whether `Chart.yaml` (or `requirements.yaml`) has a `dependencies` list: helm processes a
/// chart's dependencies, and its subcharts' in turn, only then (`dependencies: []` counts).
fn lists_dependencies(chart: &Chart) -> bool {
    chart.raw_metadata.get("dependencies").is_some_and(|d| !d.is_null())
}

/// Whether the vendored `chart` is the one `req` asks for: its name, and its version within the
/// dependency's range (helm's `IsCompatibleRange`; no range, or one that does not parse, holds
/// for no version).
fn satisfies(req: &Dependency, chart: &Chart) -> bool {
    chart.name() == req.name
        && crate::sprig::semver::is_compatible_range(
            req.version.as_deref().unwrap_or_default(),
            chart.metadata.version.as_deref().unwrap_or_default(),
        )
}

/// The name helm gives a dependency once processed: its alias, if any, whether or not a chart
/// took it (`condition` and `tags` disable by this name).
fn dependency_name(req: &Dependency) -> &str {
    req.alias.as_deref().filter(|a| !a.is_empty()).unwrap_or(&req.name)
}

fn process_enabled(chart: &mut Chart, values: &Map, path: &str) -> Result<(), String> {
    if !lists_dependencies(chart) {
        return Ok(());
    }
    let reqs = chart.metadata.dependencies.clone();
    // A chart of charts/ that no dependency takes stays under its own name; one that a
    // dependency takes (name and version) is taken once per such dependency, under its alias.
    let mut deps: Vec<Chart> =
        chart.dependencies.iter().filter(|c| !reqs.iter().any(|r| satisfies(r, c))).cloned().collect();
    for req in &reqs {
        let Some(found) = chart.dependencies.iter().find(|c| satisfies(req, c)) else { continue };
        let mut dep = found.clone();
        if let Some(alias) = req.alias.as_deref().filter(|a| !a.is_empty()) {
            dep.metadata.name = alias.to_string();
            if let Some(m) = dep.raw_metadata.as_object_mut() {
                m.insert("name".into(), Value::String(alias.to_string()));
            }
        }
        deps.push(dep);
    }
    chart.dependencies = deps;
    let cvals = coalesce_values(chart, values)?;
    // Tags first, then conditions, which win.
    let tags = cvals.get("tags").and_then(Value::as_object);
    let mut disabled = Vec::new();
    for req in &reqs {
        let mut enabled = true;
        if let Some(tags) = tags
            && !req.tags.is_empty()
        {
            let (mut has_true, mut has_false) = (false, false);
            for t in &req.tags {
                match tags.get(t) {
                    Some(Value::Bool(true)) => has_true = true,
                    Some(Value::Bool(false)) => has_false = true,
                    _ => {}
                }
            }
            if !has_true && has_false {
                enabled = false;
            }
        }
        if let Some(cond) = req.condition.as_deref() {
            for c in cond.trim().split(',') {
                if c.is_empty() {
                    continue;
                }
                if let Some(Value::Bool(b)) = path_value(&cvals, &format!("{path}{c}")) {
                    enabled = *b;
                    break;
                }
            }
        }
        if !enabled {
            disabled.push(dependency_name(req).to_string());
        }
    }
    chart.dependencies.retain(|d| !disabled.iter().any(|n| n == d.name()));
    chart.metadata.dependencies.retain(|r| !disabled.iter().any(|n| n == dependency_name(r)));
    for dep in &mut chart.dependencies {
        let sub_path = format!("{path}{}.", dep.name());
        process_enabled(dep, &cvals, &sub_path)?;
    }
    Ok(())
}

fn process_imports(chart: &mut Chart) -> Result<(), String> {
    for dep in &mut chart.dependencies {
        process_imports(dep)?;
    }
    let reqs = chart.metadata.dependencies.clone();
    if reqs.iter().all(|r| r.import_values.is_empty()) {
        return Ok(());
    }
    let cvals = coalesce_values(chart, &Map::new())?;
    let mut imported = Map::new();
    for req in &reqs {
        let name = req.alias.as_deref().filter(|a| !a.is_empty()).unwrap_or(&req.name);
        for iv in &req.import_values {
            let (child, parent) = match iv {
                Value::String(s) => (format!("exports.{s}"), ".".to_string()),
                Value::Object(m) => (
                    m.get("child").and_then(Value::as_str).unwrap_or_default().to_string(),
                    m.get("parent").and_then(Value::as_str).unwrap_or(".").to_string(),
                ),
                _ => continue,
            };
            let Some(Value::Object(table)) = path_value(&cvals, &format!("{name}.{child}")) else {
                // Helm warns about a missing table and goes on.
                continue;
            };
            let at = path_to_map(&parent, table.clone());
            coalesce_tables(&mut imported, at, false);
        }
    }
    // The parent's own values win over what it imports.
    let mut defaults = chart.values.as_object().cloned().unwrap_or_default();
    coalesce_tables(&mut defaults, imported, false);
    chart.values = Value::Object(defaults);
    Ok(())
}

fn path_to_map(path: &str, data: Map) -> Map {
    if path == "." || path.is_empty() {
        return data;
    }
    let mut out = Value::Object(data);
    for part in path.rsplit('.') {
        let mut m = Map::new();
        m.insert(part.to_string(), out);
        out = Value::Object(m);
    }
    match out {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn user_values_win_and_null_deletes() {
        let mut dst = map(json!({"a": 1, "b": null, "t": {"x": 1}}));
        coalesce_tables(&mut dst, map(json!({"a": 2, "b": 3, "c": 4, "t": {"x": 2, "y": 3}})), false);
        assert_eq!(Value::Object(dst), json!({"a": 1, "c": 4, "t": {"x": 1, "y": 3}}));
    }

    #[test]
    fn path_to_map_nests() {
        assert_eq!(Value::Object(path_to_map("a.b", map(json!({"x": 1})))), json!({"a": {"b": {"x": 1}}}));
    }

    #[test]
    fn values_documents() {
        assert_eq!(parse_values("").expect("empty"), json!({}));
        assert_eq!(parse_values("a: 1").expect("map"), json!({"a": 1}));
        assert!(parse_values("- 1").is_err());
    }

    /// What `helm template` prints for `.Values | toJson` (checked against helm v4 when these
    /// cases were found by the differential tests).
    #[test]
    fn nulls_as_helm_coalesces_them() {
        let chart = |values: Value| Chart {
            label: "c".into(),
            metadata: serde_json::from_value(json!({"name": "c"})).expect("metadata"),
            raw_metadata: json!({"name": "c"}),
            values,
            schema: None,
            templates: Vec::new(),
            files: Vec::new(),
            dependencies: Vec::new(),
        };
        let c = chart(json!({"top": null, "m": {"a": null, "deep": {"x": null, "y": 1}}, "l": [1, null, {"a": null}]}));
        let out = coalesce_values(&c, &Map::new()).expect("coalesces");
        assert_eq!(Value::Object(out), json!({"l": [1, null, {"a": null}], "m": {"deep": {"y": 1}}}));
        let user = map(json!({"m": {"b": null, "deep": {"z": null}}, "u": null}));
        let out = coalesce_values(&c, &user).expect("coalesces");
        assert_eq!(
            Value::Object(out),
            json!({"l": [1, null, {"a": null}], "m": {"b": null, "deep": {"y": 1, "z": null}}, "u": null})
        );
        // A parent's null for a subchart key does not delete the subchart's default.
        let mut parent = chart(json!({"sub": {"keep": null, "n": 1}}));
        let mut sub = chart(json!({"keep": "here"}));
        sub.metadata.name = "sub".into();
        parent.dependencies.push(sub);
        let out = coalesce_values(&parent, &Map::new()).expect("coalesces");
        assert_eq!(out.get("sub"), Some(&json!({"keep": "here", "n": 1, "global": {}})));
        // The user's null does.
        let out = coalesce_values(&parent, &map(json!({"sub": {"keep": null}}))).expect("coalesces");
        assert_eq!(out.get("sub"), Some(&json!({"n": 1, "global": {}})));
    }
}
