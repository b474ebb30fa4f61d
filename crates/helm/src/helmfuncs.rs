//! Helm's own template functions (pkg/engine/funcs.go and the late-bound
//! ones of engine.go): `include`, `tpl`, `required`, `fail`, YAML/JSON/TOML
//! conversion, `lookup` (always empty, as `helm template` has no cluster)
//! and `getHostByName` (empty: DNS lookups are off by default).

use std::collections::BTreeMap;

use super::goyaml;
use super::sprig::{self, gofmt};
use crate::env::HostExt as _;
use gotmpl::func::{FuncMap, Host, Param, TextError};
use gotmpl::value::{FuncError, Value};

use Param::{Any, String as Str};

fn reg(
    m: &mut FuncMap,
    name: &'static str,
    params: &[Param],
    body: impl Fn(&mut dyn Host, &[Value]) -> Result<Value, FuncError> + Send + Sync + 'static,
) {
    m.insert(name, gotmpl::func::Func::new(gotmpl::func::Signature::fixed(params), body));
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_string(),
        other => gofmt::format_value(other),
    }
}

/// Helm's functions (those it adds to or replaces in Sprig's map).
pub fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    reg(&mut m, "include", &[Str, Any], |h, a| Ok(include(h, &text(&a[0]), &a[1])?.into()));
    reg(&mut m, "tpl", &[Str, Any], |h, a| Ok(tpl(h, &text(&a[0]), &a[1])?.into()));
    reg(&mut m, "required", &[Str, Any], |_, a| match &a[1] {
        Value::Nil => Err(FuncError::Fail(text(&a[0]))),
        Value::String(s) if s.is_empty() => Err(FuncError::Fail(text(&a[0]))),
        v => Ok(v.clone()),
    });
    reg(&mut m, "fail", &[Str], |_, a| Err(FuncError::Fail(text(&a[0]))));
    reg(&mut m, "lookup", &[Str, Str, Str, Str], |_, _| Ok(Value::empty_map()));
    reg(&mut m, "getHostByName", &[Str], |_, _| Ok(Value::str("")));

    reg(&mut m, "toYaml", &[Any], |_, a| Ok(trim_nl(goyaml::value_to_yaml(&a[0])).into()));
    reg(&mut m, "mustToYaml", &[Any], |_, a| {
        Ok(trim_nl(goyaml::marshal(&a[0]).map_err(|e| FuncError::msg(format!("error marshaling into JSON: {e}")))?)
            .into())
    });
    reg(&mut m, "toYamlPretty", &[Any], |_, a| Ok(trim_nl(goyaml::pretty(&a[0])).into()));
    reg(&mut m, "fromYaml", &[Str], |_, a| Ok(from_yaml(&text(&a[0]))));
    reg(&mut m, "fromYamlArray", &[Str], |_, a| Ok(from_yaml_array(&text(&a[0]))));
    reg(&mut m, "toJson", &[Any], |_, a| Ok(sprig::go_json(&a[0], true, None).unwrap_or_default().into()));
    reg(&mut m, "mustToJson", &[Any], |_, a| Ok(sprig::go_json(&a[0], true, None)?.into()));
    reg(&mut m, "fromJson", &[Str], |_, a| Ok(from_json(&text(&a[0]))));
    reg(&mut m, "fromJsonArray", &[Str], |_, a| Ok(from_json_array(&text(&a[0]))));
    reg(&mut m, "toToml", &[Any], |_, a| Ok(to_toml(&a[0]).unwrap_or_else(|e| e).into()));
    reg(&mut m, "mustToToml", &[Any], |_, a| Ok(to_toml(&a[0]).map_err(FuncError::msg)?.into()));
    reg(&mut m, "fromToml", &[Str], |_, a| Ok(from_toml(&text(&a[0]))));
    m
}

/// Sprig's functions with Helm's on top, as `engine.funcMap()` builds them.
pub fn helm_func_map() -> FuncMap {
    let mut m = sprig::funcs();
    let helm = funcs();
    for name in helm.names().collect::<Vec<_>>() {
        if let Some(f) = helm.get(name) {
            m.insert(name, f.clone());
        }
    }
    m
}

fn trim_nl(s: String) -> String {
    match s.strip_suffix('\n') {
        Some(t) => t.to_string(),
        None => s,
    }
}

fn go_kind_word(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "array",
        Value::Map(_) => "object",
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        _ => "number",
    }
}

fn with_error(msg: String) -> Value {
    let mut m = BTreeMap::new();
    m.insert("Error".to_string(), Value::str(msg));
    Value::map(m)
}

/// Helm's `fromYaml`: a map; an error goes into its `Error` key.
pub fn from_yaml(text: &str) -> Value {
    match goyaml::yaml_to_value(text) {
        Ok(Value::Map(m)) => Value::Map(m),
        Ok(Value::Nil) => Value::empty_map(),
        Ok(other) => with_error(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_kind_word(&other)
        )),
        Err(e) => with_error(e),
    }
}

/// Helm's `fromYamlArray`: a list; an error becomes its only item.
pub fn from_yaml_array(text: &str) -> Value {
    match goyaml::yaml_to_value(text) {
        Ok(Value::List(l)) => Value::List(l),
        Ok(Value::Nil) => Value::list(vec![]),
        Ok(other) => Value::list(vec![Value::str(format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {} into Go value of type []interface {{}}",
            go_kind_word(&other)
        ))]),
        Err(e) => Value::list(vec![Value::str(e)]),
    }
}

/// Helm's `fromJson`: a map; an error goes into its `Error` key.
pub fn from_json(text: &str) -> Value {
    match sprig::from_json(text) {
        Ok(Value::Map(m)) => Value::Map(m),
        Ok(Value::Nil) => Value::empty_map(),
        Ok(other) => with_error(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_kind_word(&other)
        )),
        Err(e) => with_error(e.to_string()),
    }
}

/// Helm's `fromJsonArray`: a list; an error becomes its only item.
pub fn from_json_array(text: &str) -> Value {
    match sprig::from_json(text) {
        Ok(Value::List(l)) => Value::List(l),
        // json.Unmarshal of `null` leaves the slice nil.
        Ok(Value::Nil) => Value::nil_list(),
        Ok(other) => Value::list(vec![Value::str(format!(
            "json: cannot unmarshal {} into Go value of type []interface {{}}",
            go_kind_word(&other)
        ))]),
        Err(e) => Value::list(vec![Value::str(e.to_string())]),
    }
}

/// BurntSushi/toml's encoder output for a map: plain keys first, then
/// `[tables]` (indented two spaces per level) and `[[arrays of tables]]`;
/// nil values skipped; floats always with a decimal point.
pub fn to_toml(v: &Value) -> Result<String, String> {
    let Value::Map(m) = v else {
        return Err(format!("toml: top-level values must be Go maps or structs, not {}", v.kind_name()));
    };
    let mut out = String::new();
    toml_table(&mut out, &m.borrow(), &mut Vec::new())?;
    Ok(out)
}

fn toml_key(k: &str) -> String {
    if !k.is_empty() && k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-') {
        k.to_string()
    } else {
        toml_string(k)
    }
}

fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn is_table(v: &Value) -> bool {
    matches!(v, Value::Map(_)) || matches!(v, Value::Object(_))
}

fn is_table_array(v: &Value) -> bool {
    matches!(v, Value::List(l) if !l.is_empty() && l.iter().all(is_table))
}

fn toml_inline(v: &Value) -> Result<String, String> {
    Ok(match v {
        Value::Bool(b) => b.to_string(),
        Value::Int(i) | Value::Int64(i) => i.to_string(),
        Value::Float(f) => {
            if f.is_nan() {
                "nan".into()
            } else if f.is_infinite() {
                if *f > 0.0 { "inf".into() } else { "-inf".into() }
            } else {
                // strconv 'g' formatting, ".0" added to whole numbers
                let g = gofmt::format_float_g(*f);
                if g.bytes().all(|c| c.is_ascii_digit() || c == b'-') { format!("{g}.0") } else { g }
            }
        }
        Value::String(s) => toml_string(s),
        Value::Bytes(b) => toml_string(&String::from_utf8_lossy(b)),
        Value::List(items) => {
            let parts: Vec<String> = items.iter().filter(|x| !x.is_nil()).map(toml_inline).collect::<Result<_, _>>()?;
            format!("[{}]", parts.join(", "))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .borrow()
                .iter()
                .filter(|(_, x)| !x.is_nil())
                .map(|(k, x)| Ok(format!("{} = {}", toml_key(k), toml_inline(x)?)))
                .collect::<Result<_, String>>()?;
            format!("{{{}}}", parts.join(", "))
        }
        Value::Object(o) => toml_inline(&o.to_data())?,
        Value::Nil => return Err("toml: cannot encode a nil value".into()),
    })
}

fn toml_table(out: &mut String, m: &BTreeMap<String, Value>, path: &mut Vec<String>) -> Result<(), String> {
    let indent = "  ".repeat(path.len());
    for (k, v) in m {
        if v.is_nil() || is_table(v) || is_table_array(v) {
            continue;
        }
        out.push_str(&format!("{indent}{} = {}\n", toml_key(k), toml_inline(v)?));
    }
    for (k, v) in m {
        let data = match v {
            Value::Object(o) => o.to_data(),
            other => other.clone(),
        };
        if let Value::Map(sub) = &data {
            path.push(toml_key(k));
            // a blank line before top-level tables only
            if path.len() == 1 && !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!("{indent}[{}]\n", path.join(".")));
            toml_table(out, &sub.borrow(), path)?;
            path.pop();
        } else if is_table_array(&data)
            && let Value::List(items) = &data
        {
            path.push(toml_key(k));
            for item in items.iter() {
                let item = match item {
                    Value::Object(o) => o.to_data(),
                    other => other.clone(),
                };
                if let Value::Map(sub) = &item {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&format!("{indent}[[{}]]\n", path.join(".")));
                    toml_table(out, &sub.borrow(), path)?;
                }
            }
            path.pop();
        }
    }
    Ok(())
}

/// Helm's `fromToml`: a map (integers as int64, floats as float64,
/// datetimes as their text); an error goes into its `Error` key.
pub fn from_toml(text: &str) -> Value {
    match text.parse::<toml::Table>() {
        Ok(t) => toml_to_value(&toml::Value::Table(t)),
        Err(e) => with_error(format!("toml: {}", e.message())),
    }
}

fn toml_to_value(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::str(s.as_str()),
        toml::Value::Integer(i) => Value::Int64(*i),
        toml::Value::Float(f) => Value::Float(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::str(d.to_string()),
        toml::Value::Array(a) => Value::list(a.iter().map(toml_to_value).collect()),
        toml::Value::Table(t) => Value::map(t.iter().map(|(k, v)| (k.clone(), toml_to_value(v))).collect()),
    }
}

/// Helm's limit on nested `include`s of one template name.
const MAX_INCLUDE_NESTING: usize = 1000;

/// Helm's `include`: the named template of the set being rendered, stopped
/// after 1000 nested inclusions of one name with Helm's words.
fn include(h: &mut dyn Host, name: &str, data: &Value) -> Result<String, FuncError> {
    if let Some(env) = h.env() {
        let count = env.includes.entry(name.to_string()).or_insert(0);
        if *count > MAX_INCLUDE_NESTING {
            return Err(FuncError::Limit(format!(
                "rendering template has a nested reference name: {name}: unable to execute template"
            )));
        }
        *count += 1;
    }
    let r = h.execute_template(name, data);
    if let Some(c) = h.env().and_then(|env| env.includes.get_mut(name)) {
        *c -= 1;
    }
    r
}

/// Helm's `tpl`: `text` rendered as a template that sees the chart's
/// definitions; every `<no value>` dropped; errors worded as Helm wraps them.
fn tpl(h: &mut dyn Host, text: &str, data: &Value) -> Result<String, FuncError> {
    match h.execute_text(text, data) {
        Ok(s) => Ok(if s.contains("<no value>") { s.replace("<no value>", "") } else { s }),
        Err(TextError::Parse(m)) => Err(FuncError::Message(format!("cannot parse template {text:?}: {m}"))),
        Err(TextError::Exec(FuncError::Message(m))) => {
            Err(FuncError::Message(format!("error during tpl function execution for {text:?}: {m}")))
        }
        Err(TextError::Exec(FuncError::Fail(m))) => {
            Err(FuncError::Fail(format!("error during tpl function execution for {text:?}: {m}")))
        }
        Err(TextError::Exec(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sprig::testhost::*;

    fn h(name: &str, args: &[Value]) -> String {
        match call_in(&helm_func_map(), name, args) {
            Ok(v) => gofmt::format_value(&v),
            Err(e) => format!("ERR {e:?}"),
        }
    }

    #[test]
    fn helm_functions() {
        assert_eq!(h("required", &[st("need x"), Value::Nil]), "ERR Fail(\"need x\")");
        assert_eq!(h("required", &[st("need x"), st("")]), "ERR Fail(\"need x\")");
        assert_eq!(h("required", &[st("need x"), li(vec![])]), "[]");
        assert_eq!(h("fail", &[st("boom")]), "ERR Fail(\"boom\")");
        assert_eq!(h("include", &[st("t"), Value::Int(1)]), "include(t,1)");
        assert_eq!(h("tpl", &[st("{{ . }}"), Value::Int(1)]), "tpl({{ . }},1)");
        assert_eq!(h("lookup", &[st("v1"), st("Secret"), st("ns"), st("x")]), "map[]");
        assert_eq!(h("toYaml", &[dict(&[("a", li(vec![Value::Float(1.0)]))])]), "a:\n- 1");
        assert_eq!(h("toYaml", &[Value::Nil]), "null");
        assert_eq!(h("fromYaml", &[st("a: 1\nb: [x]")]), "map[a:1 b:[x]]");
        assert_eq!(
            h("fromYaml", &[st("- 1")]),
            "map[Error:error unmarshaling JSON: while decoding JSON: json: cannot unmarshal array into Go value of type map[string]interface {}]"
        );
        assert_eq!(h("fromYamlArray", &[st("- 1\n- a")]), "[1 a]");
        assert_eq!(h("fromJson", &[st("{\"a\": 1}")]), "map[a:1]");
        assert!(h("fromJson", &[st("{")]).starts_with("map[Error:unexpected end of JSON input"));
        assert_eq!(h("fromJsonArray", &[st("[1, \"x\"]")]), "[1 x]");
        assert_eq!(h("toJson", &[dict(&[("a", st("<"))])]), "{\"a\":\"\\u003c\"}");
        assert_eq!(
            h("toToml", &[dict(&[("a", Value::Float(1.0)), ("s", st("x")), ("t", dict(&[("k", Value::Int(2))]))])]),
            "a = 1.0\ns = \"x\"\n\n[t]\n  k = 2\n"
        );
        assert_eq!(h("fromToml", &[st("a = 1\n[b]\nc = \"x\"")]), "map[a:1 b:map[c:x]]");
        assert!(h("fromToml", &[st("a = ")]).starts_with("map[Error:toml:"));
        assert!(!helm_func_map().contains("env"));
        assert!(!helm_func_map().contains("expandenv"));
        assert!(helm_func_map().contains("nindent"));
    }
}
