//! Budgets for CEL stage conditions: an expression is bounded in size and
//! nesting before it is parsed, its cost is estimated statically (as
//! Kubernetes bounds CEL) before it runs, and a panic inside the CEL crate
//! is an error, never the end of the operator.
//!
//! The cost of an expression is the number of steps it may take: every node
//! is one step, a comprehension (`all`, `exists`, `map`, `filter`) costs its
//! body times the length of what it iterates. A list literal's length is
//! known; a list from the objects is assumed [`ASSUMED_LIST_LEN`] long when
//! the file is read, and is the longest list of the bound objects when the
//! condition runs, so the estimate is an upper bound of the real work.

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr};

/// The longest condition accepted (Kubernetes' validation rules are shorter).
pub const MAX_EXPRESSION_BYTES: usize = 4096;
/// How deep brackets and parentheses may nest before the parser sees them.
pub const MAX_NESTING: usize = 32;
/// The most steps a condition may take, as Kubernetes' per-call CEL limit.
pub const MAX_COST: f64 = 1_000_000.0;
/// The length assumed for a list from the objects when the file is read.
pub const ASSUMED_LIST_LEN: f64 = 100.0;

/// Compiles `source` within the budgets; `list_len` is the longest list a
/// comprehension can iterate (see the module's doc).
pub fn compile(source: &str, list_len: f64) -> Result<cel::Program, String> {
    if source.len() > MAX_EXPRESSION_BYTES {
        return Err(format!("expression of {} bytes is over the limit of {MAX_EXPRESSION_BYTES} bytes", source.len()));
    }
    let mut depth = 0usize;
    for c in source.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(format!("expression nests deeper than {MAX_NESTING} brackets"));
                }
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let program = std::panic::catch_unwind(|| cel::Program::compile(source))
        .map_err(|_| "the CEL parser failed on this expression".to_string())?
        .map_err(|e| e.to_string())?;
    let cost = cost(program.expression(), list_len);
    if cost > MAX_COST {
        return Err(format!("estimated cost {cost:.0} is over the CEL cost limit ({MAX_COST:.0})"));
    }
    Ok(program)
}

/// Runs `program`, a panic inside the CEL crate being an error.
pub fn execute(program: &cel::Program, context: &cel::Context) -> Result<cel::Value, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(context)))
        .map_err(|_| "the CEL interpreter failed on this expression".to_string())?
        .map_err(|e| e.to_string())
}

/// The longest list (or string, which `size` and `matches` walk) in `value`:
/// what a comprehension over the objects can iterate at most.
pub fn longest_list(value: &serde_json::Value) -> f64 {
    match value {
        serde_json::Value::Array(items) => items.iter().map(longest_list).fold(items.len() as f64, f64::max),
        serde_json::Value::Object(m) => m.values().map(longest_list).fold(m.len() as f64, f64::max),
        _ => 1.0,
    }
}

fn cost(e: &IdedExpr, n: f64) -> f64 {
    let sum = |xs: &mut dyn Iterator<Item = &IdedExpr>| xs.map(|x| cost(x, n)).sum::<f64>();
    match &e.expr {
        Expr::Comprehension(c) => {
            let len = size(&c.iter_range, n);
            1.0 + cost(&c.iter_range, n)
                + cost(&c.accu_init, n)
                + len * (1.0 + cost(&c.loop_cond, n) + cost(&c.loop_step, n))
                + cost(&c.result, n)
        }
        Expr::Call(call) => 1.0 + sum(&mut call.target.iter().map(|t| &**t).chain(call.args.iter())),
        Expr::List(l) => 1.0 + sum(&mut l.elements.iter()),
        Expr::Map(m) => 1.0 + m.entries.iter().map(|x| entry_cost(&x.expr, n)).sum::<f64>(),
        Expr::Struct(s) => 1.0 + s.entries.iter().map(|x| entry_cost(&x.expr, n)).sum::<f64>(),
        Expr::Select(s) => 1.0 + cost(&s.operand, n),
        _ => 1.0,
    }
}

fn entry_cost(e: &EntryExpr, n: f64) -> f64 {
    match e {
        EntryExpr::StructField(f) => cost(&f.value, n),
        EntryExpr::MapEntry(m) => cost(&m.key, n) + cost(&m.value, n),
    }
}

/// How many items iterating `e` visits at most.
fn size(e: &IdedExpr, n: f64) -> f64 {
    match &e.expr {
        Expr::List(l) => l.elements.len() as f64,
        Expr::Map(m) => m.entries.len() as f64,
        // `map` and `filter` give at most as many items as they iterate.
        Expr::Comprehension(c) => size(&c.iter_range, n),
        Expr::Call(call) if call.func_name == "_+_" => call.args.iter().map(|a| size(a, n)).sum(),
        _ => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_70_kb_expression_is_an_error() {
        let junk = "a.b(c[".repeat(12_000);
        assert!(compile(&junk, ASSUMED_LIST_LEN).expect_err("too long").contains("4096 bytes"));
        let nested = format!("{}1{}", "(".repeat(40), ")".repeat(40));
        assert!(compile(&nested, ASSUMED_LIST_LEN).expect_err("too deep").contains("nests deeper"));
        // Shorter malformed input: the parser's own error.
        for bad in ["a.all(", "[1,2", "x.map(y, ", "'unterminated", "1 +* 2", ")))((("] {
            assert!(compile(bad, ASSUMED_LIST_LEN).is_err(), "{bad}");
        }
    }

    #[test]
    fn nested_comprehensions_over_big_ranges_are_refused_before_running() {
        let ten = "[0,1,2,3,4,5,6,7,8,9]";
        let mut expr = "true".to_string();
        for v in ["a", "b", "c", "d", "e", "f", "g"] {
            expr = format!("{ten}.all({v}, {expr})");
        }
        assert!(expr.len() < 260);
        let e = compile(&expr, ASSUMED_LIST_LEN).expect_err("refused");
        assert!(e.contains("cost limit"), "{e}");
        let map = format!(
            "{ten}.map(a, {ten}.map(b, {ten}.map(c, {ten}.map(d, {ten}.map(e, {ten}.map(f, [a,b,c,d,e,f]))))))"
        );
        assert!(compile(&map, ASSUMED_LIST_LEN).expect_err("refused").contains("cost limit"));
    }

    #[test]
    fn ordinary_conditions_fit_and_big_objects_count() {
        let cond = "obj.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')";
        assert!(compile(cond, ASSUMED_LIST_LEN).is_ok());
        let nested = "obj.items.all(i, obj.items.all(j, obj.items.exists(k, i == j && j == k)))";
        assert!(compile(nested, 10.0).is_ok());
        assert!(compile(nested, 1000.0).expect_err("too costly").contains("cost limit"));
        let obj = serde_json::json!({"items": (0..500).collect::<Vec<_>>()});
        assert_eq!(longest_list(&obj), 500.0);
    }
}
