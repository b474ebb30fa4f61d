//! Sprig's dictionaries (dict.go) and defaults (defaults.go, minus JSON which
//! lives in encoding.rs).

use std::rc::Rc;

use super::{err, reg, regv, s, strval};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Map, Value};

use Param::{Any, Bool, Map as PMap, String as Str};

fn nil_map_assign() -> FuncError {
    err("assignment to entry in nil map")
}

fn map_of(v: &Value) -> Option<&Map> {
    match v {
        Value::Map(m) => Some(m),
        _ => None,
    }
}

pub(super) fn register(m: &mut FuncMap) {
    regv(m, "dict", &[], Any, |_, a| {
        let mut d = std::collections::BTreeMap::new();
        for pair in a.chunks(2) {
            let key = strval(&pair[0]);
            d.insert(key, pair.get(1).cloned().unwrap_or_else(|| Value::str("")));
        }
        Ok(Value::map(d))
    });
    reg(m, "get", &[PMap, Str], |_, a| {
        Ok(map_of(&a[0]).and_then(|d| d.borrow().get(s(&a[1]).as_ref()).cloned()).unwrap_or_else(|| Value::str("")))
    });
    reg(m, "set", &[PMap, Str, Any], |_, a| {
        let d = map_of(&a[0]).ok_or_else(nil_map_assign)?;
        d.borrow_mut().insert(s(&a[1]).into_owned(), a[2].clone());
        Ok(a[0].clone())
    });
    reg(m, "unset", &[PMap, Str], |_, a| {
        if let Some(d) = map_of(&a[0]) {
            d.borrow_mut().remove(s(&a[1]).as_ref());
        }
        Ok(a[0].clone())
    });
    reg(m, "hasKey", &[PMap, Str], |_, a| {
        Ok(map_of(&a[0]).is_some_and(|d| d.borrow().contains_key(s(&a[1]).as_ref())).into())
    });
    regv(m, "pluck", &[Str], PMap, |_, a| {
        let key = s(&a[0]);
        let out = a[1..].iter().filter_map(map_of).filter_map(|d| d.borrow().get(key.as_ref()).cloned()).collect();
        Ok(Value::list(out))
    });
    regv(m, "keys", &[], PMap, |_, a| {
        let out = a
            .iter()
            .filter_map(map_of)
            .flat_map(|d| d.borrow().keys().map(|k| Value::str(k.as_str())).collect::<Vec<_>>())
            .collect();
        Ok(Value::list(out))
    });
    regv(m, "pick", &[PMap], Str, |_, a| {
        let mut res = std::collections::BTreeMap::new();
        if let Some(d) = map_of(&a[0]) {
            let d = d.borrow();
            for k in &a[1..] {
                let k = s(k);
                if let Some(v) = d.get(k.as_ref()) {
                    res.insert(k.into_owned(), v.clone());
                }
            }
        }
        Ok(Value::map(res))
    });
    regv(m, "omit", &[PMap], Str, |_, a| {
        let omit: Vec<String> = a[1..].iter().map(|k| s(k).into_owned()).collect();
        let res = map_of(&a[0])
            .map(|d| {
                d.borrow().iter().filter(|(k, _)| !omit.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
            })
            .unwrap_or_default();
        Ok(Value::map(res))
    });
    reg(m, "values", &[PMap], |_, a| {
        Ok(Value::list(map_of(&a[0]).map(|d| d.borrow().values().cloned().collect()).unwrap_or_default()))
    });
    for (name, overwrite) in
        [("merge", false), ("mustMerge", false), ("mergeOverwrite", true), ("mustMergeOverwrite", true)]
    {
        regv(m, name, &[PMap], PMap, move |_, a| {
            let dst = match &a[0] {
                Value::Map(d) => d.clone(),
                _ => Rc::new(std::cell::RefCell::new(Default::default())),
            };
            for src in a[1..].iter().filter_map(map_of) {
                merge_into(&dst, src, overwrite);
            }
            Ok(Value::Map(dst))
        });
    }
    for name in ["deepCopy", "mustDeepCopy"] {
        reg(m, name, &[Any], |_, a| {
            if a[0].holds_itself() {
                // Go's copystructure recurses without end on such a value.
                return Err(err("deepCopy: the value holds itself"));
            }
            Ok(a[0].deep_copy())
        });
    }
    regv(m, "dig", &[], Any, |_, a| {
        if a.len() < 3 {
            return Err(err("dig needs at least three arguments"));
        }
        let last = &a[a.len() - 1];
        let mut cur = map_of(last).cloned().ok_or_else(|| {
            err(format!("interface conversion: interface {{}} is {}, not map[string]interface {{}}", last.type_name()))
        })?;
        let def = a[a.len() - 2].clone();
        let keys = &a[..a.len() - 2];
        for (n, k) in keys.iter().enumerate() {
            let k = k
                .as_str()
                .ok_or_else(|| err(format!("interface conversion: interface {{}} is {}, not string", k.type_name())))?;
            let step = cur.borrow().get(k).cloned();
            let Some(step) = step else { return Ok(def) };
            if n + 1 == keys.len() {
                return Ok(step);
            }
            cur = map_of(&step).cloned().ok_or_else(|| {
                err(format!(
                    "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                    step.type_name()
                ))
            })?;
        }
        Ok(def)
    });

    // defaults.go
    regv(m, "default", &[Any], Any, |_, a| {
        Ok(match a.get(1) {
            Some(g) if !g.is_empty() => g.clone(),
            _ => a[0].clone(),
        })
    });
    reg(m, "empty", &[Any], |_, a| Ok(a[0].is_empty().into()));
    regv(m, "coalesce", &[], Any, |_, a| Ok(a.iter().find(|v| !v.is_empty()).cloned().unwrap_or(Value::Nil)));
    regv(m, "all", &[], Any, |_, a| Ok(a.iter().all(|v| !v.is_empty()).into()));
    regv(m, "any", &[], Any, |_, a| Ok(a.iter().any(|v| !v.is_empty()).into()));
    reg(m, "ternary", &[Any, Any, Bool], |_, a| Ok(if a[2].is_true() { a[0].clone() } else { a[1].clone() }));
}

/// mergo's `Merge`/`MergeWithOverwrite` of `map[string]interface{}` as Sprig
/// uses it: deep into nested maps, in place; without overwrite a key of `dst`
/// keeps its value unless that is empty; with overwrite every non-nil... and
/// nil source values replace the destination's (mergo's map rules).
pub(crate) fn merge_into(dst: &Map, src: &Map, overwrite: bool) {
    if Rc::ptr_eq(dst, src) {
        return;
    }
    let entries: Vec<(String, Value)> = src.borrow().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (k, sv) in entries {
        let dv = dst.borrow().get(&k).cloned();
        if sv.is_nil() {
            if overwrite {
                dst.borrow_mut().insert(k, Value::Nil);
            }
            continue;
        }
        if let (Value::Map(sm), Some(Value::Map(dm))) = (&sv, &dv) {
            merge_into(dm, sm, overwrite);
        }
        if let Some(d) = &dv
            && !d.is_empty()
        {
            if matches!(sv, Value::List(_) | Value::Bytes(_)) && !overwrite {
                continue;
            }
            if matches!((&sv, d), (Value::Map(_), Value::Map(_))) {
                continue;
            }
        }
        if overwrite || dv.as_ref().is_none_or(Value::is_empty) {
            dst.borrow_mut().insert(k, sv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn dict_functions_as_sprig() {
        let d = dict(&[("a", Value::Int(1))]);
        assert_eq!(callv("dict", &[st("x"), Value::Int(1), Value::Int(2)]), "map[2: x:1]");
        assert_eq!(callv("get", &[d.clone(), st("a")]), "1");
        assert_eq!(callv("get", &[d.clone(), st("zz")]), "");
        call("set", &[d.clone(), st("b"), st("two")]).expect("set");
        assert_eq!(format!("{d:?}"), "{\"a\": Int(1), \"b\": String(\"two\")}");
        call("unset", &[d.clone(), st("a")]).expect("unset");
        assert_eq!(callv("hasKey", &[d.clone(), st("a")]), "false");
        assert_eq!(callv("hasKey", &[d.clone(), st("b")]), "true");
        assert_eq!(callv("pluck", &[st("b"), d.clone(), dict(&[("b", Value::Int(9))]), dict(&[])]), "[two 9]");
        assert_eq!(callv("keys", &[dict(&[("z", Value::Nil), ("a", Value::Nil)])]), "[a z]");
        let big = dict(&[("a", Value::Int(1)), ("b", Value::Int(2)), ("c", Value::Int(3))]);
        assert_eq!(callv("pick", &[big.clone(), st("a"), st("c"), st("q")]), "map[a:1 c:3]");
        assert_eq!(callv("omit", &[big.clone(), st("a")]), "map[b:2 c:3]");
        assert_eq!(callv("values", &[big]), "[1 2 3]");
    }

    #[test]
    fn merge_first_wins_deep_and_in_place() {
        let dst = dict(&[
            ("a", st("dst")),
            ("empty", st("")),
            ("n", dict(&[("x", Value::Int(1))])),
            ("l", li(vec![st("d")])),
        ]);
        let src = dict(&[
            ("a", st("src")),
            ("empty", st("filled")),
            ("new", Value::Bool(false)),
            ("n", dict(&[("x", Value::Int(2)), ("y", Value::Int(3))])),
            ("l", li(vec![st("s")])),
            ("nil", Value::Nil),
        ]);
        let out = callv("merge", &[dst.clone(), src.clone()]);
        assert_eq!(out, "map[a:dst empty:filled l:[d] n:map[x:1 y:3] new:false]");
        assert_eq!(super::super::format_value(&dst), out);
        let dst2 = dict(&[
            ("a", st("dst")),
            ("k", Value::Bool(true)),
            ("n", dict(&[("x", Value::Int(1)), ("z", Value::Int(0))])),
        ]);
        let out = callv("mergeOverwrite", &[dst2, src]);
        assert_eq!(out, "map[a:src empty:filled k:true l:[s] n:map[x:2 y:3 z:0] new:false nil:<nil>]");
    }

    #[test]
    fn dig_and_defaults() {
        let d = dict(&[("a", dict(&[("b", st("found"))]))]);
        assert_eq!(callv("dig", &[st("a"), st("b"), st("def"), d.clone()]), "found");
        assert_eq!(callv("dig", &[st("a"), st("x"), st("def"), d.clone()]), "def");
        assert_eq!(callv("default", &[st("d"), st("")]), "d");
        assert_eq!(callv("default", &[st("d"), Value::Int(0)]), "d");
        assert_eq!(callv("default", &[st("d")]), "d");
        assert_eq!(callv("default", &[st("d"), Value::Bool(true)]), "true");
        assert_eq!(callv("empty", &[dict(&[])]), "true");
        assert_eq!(callv("empty", &[Value::Float(0.0)]), "true");
        assert_eq!(callv("coalesce", &[Value::Nil, st(""), st("x")]), "x");
        assert_eq!(callv("coalesce", &[Value::Nil]), "<nil>");
        assert_eq!(callv("all", &[st("a"), Value::Int(0)]), "false");
        assert_eq!(callv("any", &[st(""), Value::Int(1)]), "true");
        assert_eq!(callv("ternary", &[st("y"), st("n"), Value::Bool(false)]), "n");
        let copy = call("deepCopy", std::slice::from_ref(&d)).expect("copy");
        call("set", &[copy, st("a"), st("changed")]).expect("set");
        assert_eq!(callv("dig", &[st("a"), st("b"), st("def"), d]), "found");
    }
}
