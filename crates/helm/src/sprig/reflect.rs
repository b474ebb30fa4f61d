//! Sprig's reflection functions (reflect.go).

use super::{deep_equal, reg, s};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::Value;

use Param::{Any, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "typeOf", &[Any], |_, a| Ok(a[0].type_name().into()));
    reg(m, "typeIs", &[Str, Any], |_, a| Ok((s(&a[0]) == a[1].type_name()).into()));
    reg(m, "typeIsLike", &[Str, Any], |_, a| {
        let t = a[1].type_name();
        let target = s(&a[0]);
        Ok((t == target || t == format!("*{target}")).into())
    });
    reg(m, "kindOf", &[Any], |_, a| Ok(kind_of(&a[0]).into()));
    reg(m, "kindIs", &[Str, Any], |_, a| Ok((s(&a[0]) == kind_of(&a[1])).into()));
    reg(m, "deepEqual", &[Any, Any], |_, a| Ok(deep_equal(&a[0], &a[1]).into()));
}

/// `reflect.Kind` names: objects whose Go type is not a pointer (`time.Time`,
/// Sprig's `certificate`) are structs.
fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Object(o) => match o.type_name() {
            // Helm's named slice and map types
            "common.VersionSet" | "chartutil.VersionSet" => "slice",
            "files.Files" | "engine.files" => "map",
            t if t.starts_with('*') => "ptr",
            t if t.starts_with('[') => "slice",
            t if t.starts_with("map[") => "map",
            _ => "struct",
        },
        other => other.kind_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn reflection_as_go() {
        assert_eq!(callv("typeOf", &[Value::Float(1.0)]), "float64");
        assert_eq!(callv("typeOf", &[Value::Nil]), "<nil>");
        assert_eq!(callv("kindOf", &[dict(&[])]), "map");
        assert_eq!(callv("kindIs", &[st("invalid"), Value::Nil]), "true");
        assert_eq!(callv("kindIs", &[st("slice"), li(vec![])]), "true");
        assert_eq!(callv("typeIs", &[st("int64"), Value::Int64(1)]), "true");
        assert_eq!(callv("typeIsLike", &[st("string"), st("x")]), "true");
        assert_eq!(callv("deepEqual", &[li(vec![Value::Int(1)]), li(vec![Value::Int(1)])]), "true");
        assert_eq!(callv("deepEqual", &[Value::Int(1), Value::Int64(1)]), "false");
    }
}
