//! Whether a Cluster's topology variables fit a ClusterClass's `spec.variables`: what Cluster
//! API's Cluster webhook refuses when the class changes, found before the move. Required
//! variables must be set (or have a schema default), set values must be valid against their
//! `openAPIV3Schema`, and a variable the class does not define is refused.

use serde_json::Value;

use super::class::Refusal;
use super::view::Variable;

/// One `spec.variables` entry of a ClusterClass.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassVariable {
    pub name: String,
    pub required: bool,
    /// `schema.openAPIV3Schema`; `Null` when absent.
    pub schema: Value,
}

/// Reads `spec.variables` of a ClusterClass object (v1beta1 and v1beta2 share the shape).
pub fn class_variables(class: &Value) -> Vec<ClassVariable> {
    class["spec"]["variables"]
        .as_array()
        .map(|vars| {
            vars.iter()
                .filter_map(|v| {
                    Some(ClassVariable {
                        name: v["name"].as_str()?.to_string(),
                        required: v["required"].as_bool().unwrap_or(false),
                        schema: v["schema"]["openAPIV3Schema"].clone(),
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Validators compiled once per decision, used for every Cluster.
pub struct Checker<'a> {
    vars: Vec<(&'a ClassVariable, Result<jsonschema::Validator, String>)>,
}

impl<'a> Checker<'a> {
    pub fn new(vars: &'a [ClassVariable]) -> Self {
        let vars = vars
            .iter()
            .map(|v| {
                let schema = if v.schema.is_null() {
                    Value::Object(Default::default())
                } else {
                    openapi_to_json_schema(&v.schema)
                };
                let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string());
                (v, validator)
            })
            .collect();
        Self { vars }
    }

    /// `Err` names the first variable that does not fit, and why, with the field and rule of
    /// Cluster API's own refusal (`ValidateClusterVariables`).
    pub fn check(&self, class: &str, values: &[Variable]) -> Result<(), Refusal> {
        let refuse = |field: String, message: String| Err(Refusal { field, message });
        for value in values {
            if !self.vars.iter().any(|(v, _)| v.name == value.name) {
                return refuse(format!("spec.topology.variables[{}]", value.name), "variable is not defined".into());
            }
        }
        for (var, validator) in &self.vars {
            match values.iter().find(|v| v.name == var.name) {
                None if var.required && var.schema.get("default").is_none() => {
                    return refuse(
                        "spec.topology.variables".into(),
                        format!("required variable {:?} must be set", var.name),
                    );
                }
                None => {}
                Some(set) => match validator {
                    Err(e) => {
                        return refuse(
                            format!("spec.topology.variables[{}]", var.name),
                            format!("the schema of ClusterClass {class} is invalid: {e}"),
                        );
                    }
                    Ok(validator) => {
                        if let Some(error) = validator.iter_errors(&set.value).next() {
                            let at = error.instance_path().to_string().replace('/', ".");
                            return refuse(
                                format!("spec.topology.variables[{}].value{at}", var.name),
                                format!("Invalid value: {}: {error}", set.value),
                            );
                        }
                    }
                },
            }
        }
        Ok(())
    }
}

/// OpenAPI v3 schema to JSON Schema: `nullable: true` allows `null`; the `x-kubernetes-*`
/// extensions are ignored by JSON Schema anyway.
fn openapi_to_json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let v = match k.as_str() {
                    "properties" | "patternProperties" | "definitions" => match v {
                        Value::Object(props) => {
                            Value::Object(props.iter().map(|(n, s)| (n.clone(), openapi_to_json_schema(s))).collect())
                        }
                        other => other.clone(),
                    },
                    "items" | "additionalProperties" | "not" => openapi_to_json_schema(v),
                    "allOf" | "anyOf" | "oneOf" => match v {
                        Value::Array(items) => Value::Array(items.iter().map(openapi_to_json_schema).collect()),
                        other => other.clone(),
                    },
                    _ => v.clone(),
                };
                out.insert(k.clone(), v);
            }
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::String(t)) = map.get("type")
            {
                out.insert("type".into(), serde_json::json!([t, "null"]));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class() -> Vec<ClassVariable> {
        class_variables(&json!({"spec": {"variables": [
            {"name": "workerCount", "required": true, "schema": {"openAPIV3Schema": {"type": "integer", "minimum": 1}}},
            {"name": "region", "required": false, "schema": {"openAPIV3Schema": {"type": "string", "enum": ["eu", "us"]}}},
            {"name": "image", "required": true, "schema": {"openAPIV3Schema": {"type": "string", "default": "kindest/node"}}},
            {"name": "extra", "schema": {"openAPIV3Schema": {"type": "object", "nullable": true,
                "properties": {"size": {"type": "integer"}}}}}
        ]}}))
    }

    fn vars(v: Value) -> Vec<Variable> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn valid_values_fit() {
        let c = class();
        let checker = Checker::new(&c);
        assert_eq!(
            checker.check("cc", &vars(json!([{"name": "workerCount", "value": 3}, {"name": "region", "value": "eu"}]))),
            Ok(())
        );
        // `image` is required but defaulted by its schema; `extra` is nullable.
        assert_eq!(
            checker.check("cc", &vars(json!([{"name": "workerCount", "value": 1}, {"name": "extra", "value": null}]))),
            Ok(())
        );
    }

    #[test]
    fn a_missing_required_variable_is_named() {
        let c = class();
        let err = Checker::new(&c).check("cc-v4", &vars(json!([{"name": "region", "value": "eu"}]))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Cluster API would refuse it: spec.topology.variables: required variable \"workerCount\" must be set"
        );
    }

    #[test]
    fn an_invalid_value_is_named_with_the_reason() {
        let c = class();
        let err = Checker::new(&c).check("cc", &vars(json!([{"name": "workerCount", "value": 0}]))).unwrap_err();
        assert_eq!(err.field, "spec.topology.variables[workerCount].value");
        assert!(err.message.starts_with("Invalid value: 0: "), "{err}");
        assert!(err.message.contains("minimum"), "{err}");
        let err = Checker::new(&c)
            .check(
                "cc",
                &vars(json!([{"name": "workerCount", "value": 2}, {"name": "extra", "value": {"size": "big"}}])),
            )
            .unwrap_err();
        assert_eq!(err.field, "spec.topology.variables[extra].value.size", "{err}");
    }

    #[test]
    fn an_undefined_variable_is_refused() {
        let c = class();
        let err = Checker::new(&c)
            .check("cc", &vars(json!([{"name": "workerCount", "value": 2}, {"name": "gone", "value": 1}])))
            .unwrap_err();
        assert_eq!(err.field, "spec.topology.variables[gone]");
        assert_eq!(err.message, "variable is not defined");
    }
}
