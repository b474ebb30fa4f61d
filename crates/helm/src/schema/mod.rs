//! `values.schema.json`: validating a chart's coalesced values as Helm does.
//!
//! Helm (v4) compiles the schema with santhosh-tekuri/jsonschema (draft 2020-12 unless the
//! schema's `$schema` says otherwise, formats not asserted) and reports every violation as a
//! tree of `- at '<json pointer>': <message>` lines under the chart's name, for the parent and
//! for each subchart whose values section is present. The validator here is the `jsonschema`
//! crate without its default features: no file or network loader, so a `$ref` outside the
//! schema document is reported as an error instead of being fetched. Messages follow Helm's
//! wording for the common keywords; the order of sibling lines, which is random in Helm (Go
//! map order), is sorted by location here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{JsonType, ValidationError};
use serde_json::Value;

use super::load::Chart;

/// The first line of Helm's error for values that fail one or more charts' schemas.
pub const SCHEMA_FAILURE_HEADER: &str =
    "values don't meet the specifications of the schema(s) in the following chart(s):";

/// Validates the coalesced values of a chart whose dependencies were processed (aliases
/// applied, disabled subcharts removed) as Helm does before rendering: the chart's own
/// schema against all its values, then each subchart's against its section (the key is the
/// subchart's name, which is its alias when it has one), recursively; a section that is
/// not a mapping is reported as such. The error is Helm's whole message.
pub fn validate_chart(chart: &Chart, values: &serde_json::Map<String, Value>) -> Result<(), String> {
    let mut failures = Vec::new();
    collect_failures(chart, values, &mut failures);
    if failures.is_empty() { Ok(()) } else { Err(report(&failures)) }
}

fn collect_failures(chart: &Chart, values: &serde_json::Map<String, Value>, failures: &mut Vec<(String, String)>) {
    if let Some(schema) = &chart.schema
        && let Err(lines) = violations(schema, &Value::Object(values.clone()))
    {
        failures.push((chart.name().to_string(), lines));
    }
    for sub in &chart.dependencies {
        match values.get(sub.name()) {
            None | Some(Value::Null) => {}
            Some(Value::Object(section)) => collect_failures(sub, section, failures),
            Some(other) => failures.push((
                sub.name().to_string(),
                format!("invalid type for values: expected object (map), got {}\n", go_type_name(other)),
            )),
        }
    }
}

/// The Go type Helm names for a values section that is not a map.
fn go_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Validates `values` against the schema text of chart `chart`. The error is Helm's whole
/// message: the header line, `chart:` and the violations.
pub fn validate(chart: &str, schema: &[u8], values: &Value) -> Result<(), String> {
    match violations(schema, values) {
        Ok(()) => Ok(()),
        Err(lines) => Err(report(&[(chart.to_string(), lines)])),
    }
}

/// Helm's message for several failing charts (parent first, then subcharts as visited):
/// each entry is a chart name and its [`violations`] text.
pub fn report(failures: &[(String, String)]) -> String {
    let mut out = String::from(SCHEMA_FAILURE_HEADER);
    out.push('\n');
    for (chart, lines) in failures {
        let _ = writeln!(out, "{chart}:");
        out.push_str(lines);
    }
    out.trim_end().to_string()
}

/// Validates `values` against `schema` (the text of a `values.schema.json`). The error lists
/// the violations, one `- at '/path': message` line each (nested lines indented by two
/// spaces), ending with a newline; a schema that is not JSON or not a valid schema is
/// reported on one such line too.
pub fn violations(schema: &[u8], values: &Value) -> Result<(), String> {
    let schema: Value = match serde_json::from_slice(strip_bom(schema)) {
        Ok(schema) => schema,
        Err(e) => return Err(format!("- values.schema.json is not valid JSON: {e}\n")),
    };
    if let Some(cycle) = ref_cycle(&schema) {
        // santhosh-tekuri/jsonschema (Helm's) refuses a chain of `$ref`s that
        // comes back to itself; validating with it would never end.
        return Err(format!("- values.schema.json: {cycle} causing reference cycle\n"));
    }
    let validator = match jsonschema::options().should_validate_formats(false).build(&schema) {
        Ok(v) => v,
        Err(e) => {
            return Err(format!("- values.schema.json is not a valid schema: at '{}': {}\n", e.schema_path(), e));
        }
    };
    let errors: Vec<ValidationError<'_>> = validator.iter_errors(values).collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut out = String::new();
    write_tree(&mut out, &build_tree(&errors), 0);
    Err(out)
}

/// A chain of local `$ref`s (`#/...`) in `schema` that leads back to a
/// reference already followed: "#/a -> #/b -> #/a".
fn ref_cycle(schema: &Value) -> Option<String> {
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(items) => items.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(schema, &mut all);
    for start in all {
        let mut chain: Vec<&str> = Vec::new();
        let mut at = start;
        while let Some(pointer) = at.strip_prefix('#') {
            if chain.contains(&at) {
                chain.push(at);
                return Some(chain.join(" -> "));
            }
            chain.push(at);
            match schema.pointer(pointer).and_then(|n| n.get("$ref")).and_then(Value::as_str) {
                Some(next) => at = next,
                None => break,
            }
        }
    }
    None
}

fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

/// One line of the report, with the lines nested under it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    at: String,
    message: String,
    children: Vec<Line>,
}

/// Groups the flat errors by instance location, as Helm's validator nests the errors of a
/// property's or item's subschema under that property: a location with one line collapses
/// into it, one with several becomes "validation failed" with the lines beneath.
fn build_tree(errors: &[ValidationError<'_>]) -> Vec<Line> {
    #[derive(Default)]
    struct Node {
        own: Vec<Line>,
        children: BTreeMap<String, Node>,
    }
    fn insert(node: &mut Node, prefix: &str, rest: &[String], line: Line) {
        match rest.split_first() {
            None => node.own.push(line),
            Some((first, tail)) => {
                let at = format!("{prefix}/{first}");
                let child = node.children.entry(first.clone()).or_default();
                insert(child, &at, tail, line);
            }
        }
    }
    fn flatten(node: Node, at: &str) -> Vec<Line> {
        let mut lines = node.own;
        for (segment, child) in node.children {
            let child_at = format!("{at}/{segment}");
            let mut inner = flatten(child, &child_at);
            if inner.len() == 1 {
                lines.append(&mut inner);
            } else if !inner.is_empty() {
                lines.push(Line { at: child_at, message: "validation failed".into(), children: inner });
            }
        }
        lines
    }
    let mut root = Node::default();
    for line in merge_required(errors.iter().map(to_line).collect()) {
        let segments: Vec<String> = line.at.split('/').skip(1).map(str::to_string).collect();
        insert(&mut root, "", &segments, line);
    }
    flatten(root, "")
}

/// Helm reports the missing properties of one object on one line.
fn merge_required(lines: Vec<(Line, Option<String>)>) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    let mut missing: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    for (line, required) in lines {
        match required {
            Some(name) => match missing.get_mut(&line.at) {
                Some((_, names)) => names.push(name),
                None => {
                    missing.insert(line.at.clone(), (out.len(), vec![name]));
                    out.push(line);
                }
            },
            None => out.push(line),
        }
    }
    for (_, (index, names)) in missing {
        let quoted = quote_all(&names);
        out[index].message = if names.len() == 1 {
            format!("missing property {quoted}")
        } else {
            format!("missing properties {quoted}")
        };
    }
    out
}

fn quote_all(names: &[String]) -> String {
    names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ")
}

/// The line for one error, and the missing property's name for a `required` error.
fn to_line(error: &ValidationError<'_>) -> (Line, Option<String>) {
    let at = error.instance_path().to_string();
    let instance: &Value = error.instance();
    let mut children = Vec::new();
    let mut required = None;
    let message = match error.kind() {
        ValidationErrorKind::Type { kind } => {
            let want = match kind {
                TypeKind::Single(t) => vec![*t],
                TypeKind::Multiple(set) => set.iter().collect(),
            };
            format!("got {}, want {}", type_name(instance), want_types(&want))
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
            required = Some(name.clone());
            format!("missing property '{name}'")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            format!("additional properties {} not allowed", quote_all(unexpected))
        }
        ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            format!("unevaluated properties {} not allowed", quote_all(unexpected))
        }
        ValidationErrorKind::Enum { options } => match options.as_array() {
            Some(list) if list.len() == 1 => format!("value must be {}", display(&list[0])),
            Some(list) => format!("value must be one of {}", list.iter().map(display).collect::<Vec<_>>().join(", ")),
            None => format!("value must be one of {}", display(options)),
        },
        ValidationErrorKind::Constant { expected_value } => {
            format!("value must be {}", display(expected_value))
        }
        ValidationErrorKind::Minimum { limit } => format!("minimum: got {instance}, want {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("maximum: got {instance}, want {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("exclusiveMinimum: got {instance}, want {limit}")
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            format!("exclusiveMaximum: got {instance}, want {limit}")
        }
        ValidationErrorKind::MultipleOf { multiple_of } => {
            format!("multipleOf: got {instance}, want {}", number(*multiple_of))
        }
        ValidationErrorKind::MinLength { limit } => {
            format!("minLength: got {}, want {limit}", char_len(instance))
        }
        ValidationErrorKind::MaxLength { limit } => {
            format!("maxLength: got {}, want {limit}", char_len(instance))
        }
        ValidationErrorKind::MinItems { limit } => {
            format!("minItems: got {}, want {limit}", array_len(instance))
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("maxItems: got {}, want {limit}", array_len(instance))
        }
        ValidationErrorKind::MinProperties { limit } => {
            format!("minProperties: got {}, want {limit}", object_len(instance))
        }
        ValidationErrorKind::MaxProperties { limit } => {
            format!("maxProperties: got {}, want {limit}", object_len(instance))
        }
        ValidationErrorKind::Pattern { pattern } => {
            format!("{} does not match pattern '{pattern}'", display(instance))
        }
        ValidationErrorKind::UniqueItems => match equal_items(instance) {
            Some((i, j)) => format!("items at {i} and {j} are equal"),
            None => "items are not unique".into(),
        },
        ValidationErrorKind::Contains => "no items match contains schema".into(),
        ValidationErrorKind::FalseSchema => "false schema".into(),
        ValidationErrorKind::Not { .. } => "'not' failed".into(),
        ValidationErrorKind::AnyOf { context } => {
            children = branch_lines(context);
            "'anyOf' failed".into()
        }
        ValidationErrorKind::OneOfNotValid { context } => {
            children = branch_lines(context);
            "'oneOf' failed, none matched".into()
        }
        ValidationErrorKind::OneOfMultipleValid { context } => {
            let matched: Vec<String> = context
                .iter()
                .enumerate()
                .filter(|(_, errors)| errors.is_empty())
                .map(|(i, _)| i.to_string())
                .collect();
            if matched.len() >= 2 {
                format!("'oneOf' failed, subschemas {} matched", matched.join(", "))
            } else {
                "'oneOf' failed, more than one subschema matched".into()
            }
        }
        ValidationErrorKind::PropertyNames { error } => {
            children = build_tree(std::slice::from_ref(error.as_ref()));
            format!("invalid propertyName {}", display(error.instance()))
        }
        ValidationErrorKind::Format { format } => {
            format!("{} is not valid {format}", display(instance))
        }
        ValidationErrorKind::Referencing(e) => format!("cannot resolve a reference: {e}"),
        _ => error.to_string(),
    };
    (Line { at, message, children }, required)
}

/// The lines of each failed `anyOf`/`oneOf` branch, in branch order.
fn branch_lines(context: &[Vec<ValidationError<'static>>]) -> Vec<Line> {
    context.iter().flat_map(|errors| build_tree(errors)).collect()
}

fn write_tree(out: &mut String, lines: &[Line], depth: usize) {
    for line in lines {
        let _ = writeln!(out, "{:indent$}- at '{}': {}", "", line.at, line.message, indent = depth * 2);
        write_tree(out, &line.children, depth + 1);
    }
}

/// The JSON type of an instance as Helm's validator names it (every number is "number").
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The wanted types joined with " or ", in Helm's validator's fixed order.
fn want_types(types: &[JsonType]) -> String {
    const ORDER: [&str; 7] = ["null", "boolean", "number", "integer", "string", "array", "object"];
    let names: Vec<String> = types.iter().map(|t| t.to_string()).collect();
    let mut ordered: Vec<&str> = ORDER.iter().copied().filter(|o| names.iter().any(|n| n == o)).collect();
    // Any name outside the known list keeps its place at the end.
    for n in &names {
        if !ORDER.contains(&n.as_str()) {
            ordered.push(n);
        }
    }
    ordered.join(" or ")
}

/// A value as Helm's validator quotes it: strings in single quotes, the rest as JSON.
fn display(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

fn number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { n.to_string() }
}

fn char_len(v: &Value) -> usize {
    v.as_str().map_or(0, |s| s.chars().count())
}

fn array_len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn object_len(v: &Value) -> usize {
    v.as_object().map_or(0, serde_json::Map::len)
}

/// The first pair of equal items (JSON equality, numbers by value).
fn equal_items(v: &Value) -> Option<(usize, usize)> {
    let items = v.as_array()?;
    for (i, a) in items.iter().enumerate() {
        for (j, b) in items.iter().enumerate().skip(i + 1) {
            if json_equal(a, b) {
                return Some((i, j));
            }
        }
    }
    None
}

fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| json_equal(a, b)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests;
