//! Sprig's list functions (list.go).

use super::{deep_equal, err, items, kind, reg, regv, to_int64};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Any, Int};

/// The items of `v` or Sprig's error for `what` ("Cannot find first on type string").
fn need(v: &Value, msg: &str) -> Result<Vec<Value>, FuncError> {
    if v.is_nil() {
        return Err(err("runtime error: invalid memory address or nil pointer dereference"));
    }
    items(v).ok_or_else(|| err(format!("{msg} {}", kind(v))))
}

fn list(v: Vec<Value>) -> Value {
    Value::list(v)
}

pub(super) fn register(m: &mut FuncMap) {
    for name in ["list", "tuple"] {
        regv(m, name, &[], Any, |_, a| Ok(list(a.to_vec())));
    }
    for name in ["append", "push", "mustAppend", "mustPush"] {
        reg(m, name, &[Any, Any], |_, a| {
            let mut l = need(&a[0], "Cannot push on type")?;
            l.push(a[1].clone());
            Ok(list(l))
        });
    }
    for name in ["prepend", "mustPrepend"] {
        reg(m, name, &[Any, Any], |_, a| {
            let mut l = need(&a[0], "Cannot prepend on type")?;
            l.insert(0, a[1].clone());
            Ok(list(l))
        });
    }
    for name in ["first", "mustFirst"] {
        reg(m, name, &[Any], |_, a| {
            Ok(need(&a[0], "Cannot find first on type")?.first().cloned().unwrap_or(Value::Nil))
        });
    }
    for name in ["last", "mustLast"] {
        reg(m, name, &[Any], |_, a| Ok(need(&a[0], "Cannot find last on type")?.last().cloned().unwrap_or(Value::Nil)));
    }
    for name in ["rest", "mustRest"] {
        reg(m, name, &[Any], |_, a| {
            let l = need(&a[0], "Cannot find rest on type")?;
            Ok(if l.is_empty() { Value::nil_list() } else { list(l[1..].to_vec()) })
        });
    }
    for name in ["initial", "mustInitial"] {
        reg(m, name, &[Any], |_, a| {
            let l = need(&a[0], "Cannot find initial on type")?;
            Ok(if l.is_empty() { Value::nil_list() } else { list(l[..l.len() - 1].to_vec()) })
        });
    }
    for name in ["reverse", "mustReverse"] {
        reg(m, name, &[Any], |_, a| {
            let mut l = need(&a[0], "Cannot find reverse on type")?;
            l.reverse();
            Ok(list(l))
        });
    }
    for name in ["compact", "mustCompact"] {
        reg(m, name, &[Any], |_, a| {
            let l = need(&a[0], "Cannot compact on type")?;
            Ok(list(l.into_iter().filter(|x| !x.is_empty()).collect()))
        });
    }
    for name in ["uniq", "mustUniq"] {
        reg(m, name, &[Any], |_, a| {
            let l = need(&a[0], "Cannot find uniq on type")?;
            let mut out: Vec<Value> = Vec::new();
            for x in l {
                if !out.iter().any(|y| deep_equal(&x, y)) {
                    out.push(x);
                }
            }
            Ok(list(out))
        });
    }
    for name in ["without", "mustWithout"] {
        regv(m, name, &[Any], Any, |_, a| {
            let l = need(&a[0], "Cannot find without on type")?;
            let omit = &a[1..];
            Ok(list(l.into_iter().filter(|x| !omit.iter().any(|o| deep_equal(x, o))).collect()))
        });
    }
    for name in ["has", "mustHas"] {
        reg(m, name, &[Any, Any], |_, a| {
            if a[1].is_nil() {
                return Ok(false.into());
            }
            let l = items(&a[1]).ok_or_else(|| err(format!("Cannot find has on type {}", kind(&a[1]))))?;
            Ok(l.iter().any(|x| deep_equal(&a[0], x)).into())
        });
    }
    for name in ["slice", "mustSlice"] {
        regv(m, name, &[Any], Any, |_, a| {
            if a[0].is_nil() {
                return Err(err("runtime error: invalid memory address or nil pointer dereference"));
            }
            let l = items(&a[0])
                .ok_or_else(|| err(format!("list should be type of slice or array but {}", kind(&a[0]))))?;
            if l.is_empty() {
                return Ok(Value::Nil);
            }
            let start = a.get(1).map(to_int64).unwrap_or(0);
            let end = a.get(2).map(to_int64).unwrap_or(l.len() as i64);
            if start < 0 || end < start || end as usize > l.len() {
                return Err(err("reflect.Value.Slice: slice index out of bounds"));
            }
            Ok(list(l[start as usize..end as usize].to_vec()))
        });
    }
    regv(m, "concat", &[], Any, |_, a| {
        let mut out = Vec::new();
        for l in a {
            if l.is_nil() {
                return Err(err("runtime error: invalid memory address or nil pointer dereference"));
            }
            out.extend(items(l).ok_or_else(|| err(format!("Cannot concat type {} as list", kind(l))))?);
        }
        // Sprig appends to a nil slice: no items at all leave it nil.
        Ok(if out.is_empty() { Value::nil_list() } else { list(out) })
    });
    for name in ["chunk", "mustChunk"] {
        reg(m, name, &[Int, Any], |_, a| {
            let size = to_int64(&a[0]);
            let l = need(&a[1], "Cannot chunk type")?;
            if size <= 0 {
                return Err(err("runtime error: makeslice: len out of range"));
            }
            Ok(list(l.chunks(size as usize).map(|c| list(c.to_vec())).collect()))
        });
    }
    reg(m, "sortAlpha", &[Any], |_, a| {
        let mut out = match items(&a[0]) {
            Some(_) => super::strings::strslice(&a[0]),
            None => vec![super::strval(&a[0])],
        };
        out.sort();
        Ok(list(out.into_iter().map(Value::from).collect()))
    });
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    fn abc() -> Value {
        li(vec![st("a"), st("b"), st("c")])
    }

    #[test]
    fn list_functions_as_sprig() {
        assert_eq!(callv("first", &[abc()]), "a");
        assert_eq!(callv("first", &[li(vec![])]), "<nil>");
        assert_eq!(callv("last", &[abc()]), "c");
        assert_eq!(callv("rest", &[abc()]), "[b c]");
        assert_eq!(callv("initial", &[abc()]), "[a b]");
        assert_eq!(callv("append", &[abc(), st("d")]), "[a b c d]");
        assert_eq!(callv("prepend", &[abc(), st("z")]), "[z a b c]");
        assert_eq!(callv("reverse", &[abc()]), "[c b a]");
        assert_eq!(callv("uniq", &[li(vec![Value::Int(1), Value::Int(1), st("1")])]), "[1 1]");
        assert_eq!(callv("without", &[abc(), st("b"), st("c")]), "[a]");
        assert_eq!(callv("has", &[st("b"), abc()]), "true");
        assert_eq!(callv("has", &[abc(), st("b")]), "ERR Cannot find has on type string");
        assert_eq!(callv("has", &[st("b"), Value::Nil]), "false");
        assert_eq!(
            callv("compact", &[li(vec![st("a"), st(""), Value::Nil, Value::Int(0), Value::Bool(true)])]),
            "[a true]"
        );
        assert_eq!(callv("slice", &[abc(), Value::Int(1)]), "[b c]");
        assert_eq!(callv("slice", &[abc(), Value::Int(1), Value::Int(2)]), "[b]");
        assert_eq!(callv("concat", &[abc(), li(vec![st("d")])]), "[a b c d]");
        assert_eq!(callv("chunk", &[Value::Int(2), abc()]), "[[a b] [c]]");
        assert_eq!(callv("sortAlpha", &[li(vec![st("b"), Value::Int(10), st("a")])]), "[10 a b]");
        assert_eq!(callv("first", &[st("x")]), "ERR Cannot find first on type string");
        assert_eq!(callv("tuple", &[st("x"), Value::Int(1)]), "[x 1]");
    }
}
