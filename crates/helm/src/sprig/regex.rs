//! Sprig's regular expressions (Go's RE2 `regexp` on the `regex` crate:
//! `\d`, `\w`, `\s` and `\b` are ASCII-only, as in Go).

use std::borrow::Cow;

use super::{i, reg, s};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Int, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    for (name, must) in [("regexMatch", false), ("mustRegexMatch", true)] {
        reg(m, name, &[Str, Str], move |_, a| match compile(&s(&a[0])) {
            Ok(re) => Ok(re.is_match(&s(&a[1])).into()),
            Err(e) if must => Err(e),
            Err(_) => Ok(false.into()),
        });
    }
    for (name, must) in [("regexFindAll", false), ("mustRegexFindAll", true)] {
        reg(m, name, &[Str, Str, Int], move |_, a| {
            let re = compile_or(&s(&a[0]), must)?;
            let text = s(&a[1]);
            let n = i(&a[2]);
            let found = re.find_iter(&text).take(if n < 0 { usize::MAX } else { n as usize });
            Ok(Value::list(found.map(|x| Value::from(x.as_str())).collect()))
        });
    }
    for (name, must) in [("regexFind", false), ("mustRegexFind", true)] {
        reg(m, name, &[Str, Str], move |_, a| {
            let re = compile_or(&s(&a[0]), must)?;
            Ok(re.find(&s(&a[1])).map(|x| x.as_str().to_string()).unwrap_or_default().into())
        });
    }
    for (name, must) in [("regexReplaceAll", false), ("mustRegexReplaceAll", true)] {
        reg(m, name, &[Str, Str, Str], move |_, a| {
            let re = compile_or(&s(&a[0]), must)?;
            Ok(re.replace_all(&s(&a[1]), s(&a[2]).as_ref()).into_owned().into())
        });
    }
    for (name, must) in [("regexReplaceAllLiteral", false), ("mustRegexReplaceAllLiteral", true)] {
        reg(m, name, &[Str, Str, Str], move |_, a| {
            let re = compile_or(&s(&a[0]), must)?;
            Ok(re.replace_all(&s(&a[1]), regex::NoExpand(&s(&a[2]))).into_owned().into())
        });
    }
    for (name, must) in [("regexSplit", false), ("mustRegexSplit", true)] {
        reg(m, name, &[Str, Str, Int], move |_, a| {
            let re = compile_or(&s(&a[0]), must)?;
            Ok(Value::list(split(&re, &s(&a[0]), &s(&a[1]), i(&a[2])).into_iter().map(Value::from).collect()))
        });
    }
    reg(m, "regexQuoteMeta", &[Str], |_, a| Ok(quote_meta(&s(&a[0])).into()));
}

/// Compiles with Go's message on error; the non-`must` variants panic in Go
/// (`regexp.MustCompile`), which the engine reports as an error as well.
fn compile_or(pattern: &str, must: bool) -> Result<regex::Regex, FuncError> {
    compile(pattern)
        .map_err(|e| if must { e } else { FuncError::msg(format!("regexp: Compile({}): {e}", go_backquote(pattern))) })
}

/// Go's regexp `quote`: backquoted when possible.
fn go_backquote(s: &str) -> String {
    if s.contains('`') || s.chars().any(|c| c.is_control() && c != '\t') {
        super::gofmt::quote(s)
    } else {
        format!("`{s}`")
    }
}

pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, FuncError> {
    regex::Regex::new(&go_syntax(pattern)).map_err(|e| {
        let text = e.to_string();
        // Go's error codes for the regex crate's usual complaints
        let whole = pattern.to_string();
        let (code, part) = if text.contains("unclosed group") {
            ("missing closing )", whole)
        } else if text.contains("unopened group") {
            ("unexpected )", whole)
        } else if text.contains("unclosed character class") {
            ("missing closing ]", pattern.rfind('[').map(|i| pattern[i..].to_string()).unwrap_or_default())
        } else if text.contains("repetition operator missing expression") {
            ("missing argument to repetition operator", whole)
        } else if text.contains("unrecognized escape") {
            ("invalid escape sequence", whole)
        } else if text.contains("invalid character class range") {
            ("invalid character class range", whole)
        } else if text.contains("decimal")
            || text.contains("repetition quantifier")
            || text.contains("counted repetition")
        {
            ("invalid repeat count", whole)
        } else {
            let last = text.lines().last().unwrap_or("invalid pattern").trim().to_string();
            return FuncError::msg(format!("error parsing regexp: {last}"));
        };
        FuncError::msg(format!("error parsing regexp: {code}: `{part}`"))
    })
}

/// Rewrites Perl classes to their ASCII meaning, as Go's RE2 has them.
fn go_syntax(p: &str) -> Cow<'_, str> {
    if !p.contains('\\') {
        return Cow::Borrowed(p);
    }
    let mut out = String::with_capacity(p.len() + 16);
    let mut in_class = false;
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let rep = match (n, in_class) {
                    ('d', false) => Some("[0-9]"),
                    ('d', true) => Some("0-9"),
                    ('D', false) => Some("[^0-9]"),
                    ('w', false) => Some("[0-9A-Za-z_]"),
                    ('w', true) => Some("0-9A-Za-z_"),
                    ('W', false) => Some("[^0-9A-Za-z_]"),
                    ('s', false) => Some("[\\t\\n\\f\\r ]"),
                    ('s', true) => Some("\\t\\n\\f\\r "),
                    ('S', false) => Some("[^\\t\\n\\f\\r ]"),
                    ('b', false) => Some("(?-u:\\b)"),
                    ('B', false) => Some("(?-u:\\B)"),
                    _ => None,
                };
                match rep {
                    Some(r) => out.push_str(r),
                    None => {
                        out.push('\\');
                        out.push(n);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            '[' if in_class && chars.peek() == Some(&':') => {
                // [:alpha:] inside a class
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Go's `Regexp.Split`.
fn split(re: &regex::Regex, expr: &str, s: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if !expr.is_empty() && s.is_empty() {
        return vec![String::new()];
    }
    let limit = if n < 0 { usize::MAX } else { n as usize };
    let matches: Vec<(usize, usize)> = re.find_iter(s).take(limit).map(|m| (m.start(), m.end())).collect();
    let mut out = Vec::new();
    let (mut beg, mut end) = (0usize, 0usize);
    for (ms, me) in matches {
        if n > 0 && out.len() == (n - 1) as usize {
            break;
        }
        end = ms;
        if me != 0 {
            out.push(s[beg..end].to_string());
        }
        beg = me;
    }
    if end != s.len() {
        out.push(s[beg..].to_string());
    }
    out
}

/// Go's `regexp.QuoteMeta`.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn regex_functions_as_go() {
        assert_eq!(callv("regexMatch", &[st("^[a-z]+\\d$"), st("abc1")]), "true");
        assert_eq!(callv("regexMatch", &[st("\\d"), st("٣")]), "false");
        assert_eq!(callv("regexFindAll", &[st("[2,4,6,8]"), st("123456789"), Value::Int(-1)]), "[2 4 6 8]");
        assert_eq!(callv("regexFindAll", &[st("[2,4,6,8]"), st("123456789"), Value::Int(2)]), "[2 4]");
        assert_eq!(callv("regexFind", &[st("[a-zA-Z][1-9]"), st("abcd1234")]), "d1");
        assert_eq!(callv("regexReplaceAll", &[st("a(x*)b"), st("-ab-axxb-"), st("${1}W")]), "-W-xxW-");
        assert_eq!(callv("regexReplaceAll", &[st("a(x*)b"), st("-ab-axxb-"), st("$1W")]), "---");
        assert_eq!(callv("regexReplaceAllLiteral", &[st("a(x*)b"), st("-ab-axxb-"), st("${1}")]), "-${1}-${1}-");
        assert_eq!(callv("regexSplit", &[st("z+"), st("pizza"), Value::Int(-1)]), "[pi a]");
        assert_eq!(callv("regexSplit", &[st("z+"), st("pizza"), Value::Int(1)]), "[pizza]");
        assert_eq!(callv("regexQuoteMeta", &[st("1.2.3")]), "1\\.2\\.3");
        assert_eq!(callv("mustRegexMatch", &[st("[a"), st("x")]), "ERR error parsing regexp: missing closing ]: `[a`");
        assert_eq!(callv("regexMatch", &[st("("), st("x")]), "false");
        assert_eq!(
            callv("regexFind", &[st("("), st("x")]),
            "ERR regexp: Compile(`(`): error parsing regexp: missing closing ): `(`"
        );
    }
}
