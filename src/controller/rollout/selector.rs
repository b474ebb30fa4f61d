//! `metav1.LabelSelector` matching: `matchLabels` and `matchExpressions` (`In`, `NotIn`,
//! `Exists`, `DoesNotExist`), all ANDed; an empty selector matches everything. An unknown
//! operator matches nothing (the API server refuses it anyway).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` match `selector`; `None` matches everything.
pub fn matches(selector: Option<&LabelSelector>, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Some(selector) = selector else { return true };
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    let by_labels = selector.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    let by_expressions = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    by_labels && by_expressions
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn req(key: &str, op: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    #[test]
    fn match_labels_and_expressions() {
        let l = labels(&[("rollout", "canary"), ("env", "prod")]);
        assert!(matches(None, Some(&l)));
        assert!(matches(Some(&LabelSelector::default()), None));
        let s = LabelSelector { match_labels: Some(labels(&[("rollout", "canary")])), match_expressions: None };
        assert!(matches(Some(&s), Some(&l)));
        assert!(!matches(Some(&s), Some(&labels(&[("env", "prod")]))));
        let s = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![req("env", "In", &["prod", "stage"]), req("tier", "DoesNotExist", &[])]),
        };
        assert!(matches(Some(&s), Some(&l)));
        assert!(!matches(Some(&s), Some(&labels(&[("env", "dev")]))));
        let s = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "NotIn", &["prod"])]) };
        assert!(!matches(Some(&s), Some(&l)));
        assert!(matches(Some(&s), None));
        let s = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "Exists", &[])]) };
        assert!(matches(Some(&s), Some(&l)));
        let s = LabelSelector { match_labels: None, match_expressions: Some(vec![req("env", "Weird", &[])]) };
        assert!(!matches(Some(&s), Some(&l)));
    }
}
