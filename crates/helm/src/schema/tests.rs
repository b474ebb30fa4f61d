//! Tests of values schema validation and its helm-shaped error report.

use super::*;
use serde_json::json;

fn check(schema: Value, values: Value) -> Result<(), String> {
    violations(schema.to_string().as_bytes(), &values)
}

#[test]
fn valid_values_pass() {
    let schema = json!({"type": "object", "properties": {"replicas": {"type": "integer"}}});
    assert_eq!(check(schema, json!({"replicas": 3})), Ok(()));
}

#[test]
fn whole_message_names_the_chart_and_paths_in_helms_words() {
    let schema = json!({
        "type": "object",
        "required": ["image"],
        "properties": {
            "replicaCount": {"type": "integer"},
            "mode": {"enum": ["a", "b"]},
            "port": {"minimum": 1, "maximum": 10},
            "name": {"minLength": 3, "pattern": "^z"},
            "tags": {"type": "array", "uniqueItems": true, "items": {"type": "integer"}},
            "nested": {"type": "object", "properties": {"a": {"type": "object",
                "properties": {"b": {"type": "string"}}}}}
        }
    });
    let values = json!({
        "replicaCount": "x", "mode": "c", "port": 0, "name": "ab",
        "tags": [1, 1], "nested": {"a": {"b": 5}}
    });
    let err = validate("s1", schema.to_string().as_bytes(), &values).expect_err("invalid");
    // helm template prints these lines (in a random order; sorted here).
    let expected = "values don't meet the specifications of the schema(s) in the following chart(s):
s1:
- at '': missing property 'image'
- at '/mode': value must be one of 'a', 'b'
- at '/name': validation failed
  - at '/name': minLength: got 2, want 3
  - at '/name': 'ab' does not match pattern '^z'
- at '/nested/a/b': got number, want string
- at '/port': minimum: got 0, want 1
- at '/replicaCount': got string, want integer
- at '/tags': items at 0 and 1 are equal";
    assert_eq!(err, expected);
}

#[test]
fn nested_groups_types_and_combinators() {
    let schema = json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "replicaCount": {"type": ["integer", "null"]},
            "mode": {"const": "a"},
            "tags": {"type": "array", "minItems": 3, "maxItems": 1},
            "nested": {"type": "object", "maxProperties": 0, "properties": {
                "a": {"required": ["z", "y"], "properties": {"b": {"not": {"type": "integer"}}}}}},
            "extra": {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
            "one": {"oneOf": [{"type": "string"}, {"type": "boolean"}]},
            "many": {"oneOf": [{"type": "integer"}, {"minimum": 1}]},
            "f": {"enum": ["z"]},
            "m": {"multipleOf": 2},
            "no": false
        }
    });
    let values = json!({
        "replicaCount": "x", "mode": "b", "tags": [1, 2],
        "nested": {"a": {"b": 5}}, "extra": 1, "one": 1, "many": 2, "f": "q", "m": 3,
        "no": 1, "zzz": 1
    });
    let err = check(schema, values).expect_err("invalid");
    for line in [
        "- at '': additional properties 'zzz' not allowed\n",
        "- at '/extra': 'anyOf' failed\n  - at '/extra': got number, want string\n  - at '/extra': got number, want boolean\n",
        "- at '/one': 'oneOf' failed, none matched\n  - at '/one': got number, want string\n",
        "- at '/many': 'oneOf' failed, subschemas 0, 1 matched\n",
        "- at '/mode': value must be 'a'\n",
        "- at '/f': value must be 'z'\n",
        "- at '/m': multipleOf: got 3, want 2\n",
        "- at '/no': false schema\n",
        "- at '/nested': validation failed\n  - at '/nested': maxProperties: got 1, want 0\n  - at '/nested/a': validation failed\n    - at '/nested/a': missing properties 'z', 'y'\n    - at '/nested/a/b': 'not' failed\n",
        "- at '/replicaCount': got string, want null or integer\n",
        "- at '/tags': validation failed\n  - at '/tags': minItems: got 2, want 3\n  - at '/tags': maxItems: got 2, want 1\n",
    ] {
        assert!(err.contains(line), "missing {line:?} in\n{err}");
    }
}

#[test]
fn several_charts_in_one_report() {
    let msg = report(&[
        ("parent".into(), "- at '/a': got string, want integer\n".into()),
        ("sub".into(), "- at '': missing property 'x'\n".into()),
    ]);
    assert_eq!(
        msg,
        format!(
            "{SCHEMA_FAILURE_HEADER}\nparent:\n- at '/a': got string, want integer\nsub:\n- at '': missing property 'x'"
        )
    );
}

#[test]
fn formats_are_not_asserted_as_in_helm() {
    let schema = json!({"properties": {"mail": {"format": "email"}}});
    assert_eq!(check(schema, json!({"mail": "nope"})), Ok(()));
}

#[test]
fn ref_cycles_are_refused_as_helm_does() {
    // helm v4.2.3: "... resolve to ...#/definitions/a causing reference cycle"
    let schema = json!({"definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},
            "properties": {"a": {"$ref": "#/definitions/a"}}});
    let e = violations(schema.to_string().as_bytes(), &json!({"a": 1})).expect_err("refused");
    assert!(e.contains("reference cycle") && e.contains("#/definitions/a -> #/definitions/b"), "{e}");
    let recursive = json!({"$defs": {"n": {"properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"});
    assert!(violations(recursive.to_string().as_bytes(), &json!({"next": {}})).is_ok(), "a recursive schema is fine");
}

#[test]
fn local_refs_resolve_and_remote_refs_are_errors_not_fetches() {
    let schema = json!({"properties": {"l": {"$ref": "#/$defs/x"}}, "$defs": {"x": {"type": "string"}}});
    assert_eq!(check(schema, json!({"l": 5})), Err("- at '/l': got number, want string\n".into()));
    let schema = json!({"properties": {"l": {"$ref": "https://example.invalid/s.json"}}});
    let err = check(schema, json!({"l": 5})).expect_err("no network");
    assert!(err.contains("not a valid schema"), "{err}");
}

#[test]
fn broken_schema_text_is_reported() {
    let err = violations(b"{not json", &json!({})).expect_err("bad json");
    assert!(err.contains("values.schema.json is not valid JSON"), "{err}");
    let err = violations(b"\xEF\xBB\xBF{\"type\": 5}", &json!({})).expect_err("bad schema");
    assert!(err.contains("not a valid schema"), "{err}");
}

/// `helm template r .` on this chart prints exactly this error (line order aside).
#[test]
fn parent_and_aliased_subchart_schemas_through_render_chart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: &[(&str, &str)] = &[
        (
            "Chart.yaml",
            "apiVersion: v2\nname: parent\nversion: 1.0.0\ndependencies:\n- name: sub\n  version: 0.1.0\n  alias: db\n",
        ),
        ("values.yaml", "replicas: 2\ndb:\n  port: \"x\"\n"),
        ("values.schema.json", r#"{"properties":{"replicas":{"type":"string"}}}"#),
        ("charts/sub/Chart.yaml", "apiVersion: v2\nname: sub\nversion: 0.1.0\n"),
        ("charts/sub/values.yaml", "port: 5432\n"),
        ("charts/sub/values.schema.json", r#"{"properties":{"port":{"type":"integer"}},"required":["name"]}"#),
        ("charts/sub/templates/cm.yaml", "a: {{ .Values.port }}\n"),
    ];
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let chart = crate::load_chart(dir.path()).expect("loads");
    let opts = crate::HelmOptions::new("r", "default");
    let err = crate::render_chart(&chart, &opts).expect_err("schemas fail").to_string();
    let expected = format!(
        "{SCHEMA_FAILURE_HEADER}\nparent:\n- at '/replicas': got number, want string\ndb:\n- at '': missing property 'name'\n- at '/port': got string, want integer"
    );
    assert!(err.ends_with(&expected), "{err}");

    // Valid user values on top pass both schemas.
    let opts = crate::HelmOptions {
        values: json!({"replicas": "2", "db": {"port": 1, "name": "n"}}),
        ..crate::HelmOptions::new("r", "default")
    };
    let manifests = crate::render_chart(&chart, &opts).expect("renders");
    assert_eq!(manifests.len(), 1);
    assert!(manifests[0].content.contains("a: 1"), "{manifests:?}");
}
