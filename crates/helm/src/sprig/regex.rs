//! Sprig's regular expressions (Go's RE2 `regexp` on the `regex` crate:
//! `\d`, `\w`, `\s` and `\b` are ASCII-only, as in Go).

use std::borrow::Cow;

use super::{i, reg, s};
use crate::env::HostExt as _;
use gotmpl::Host;
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Int, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    for (name, must) in [("regexMatch", false), ("mustRegexMatch", true)] {
        reg(m, name, &[Str, Str], move |h, a| match compile_cached(h, &s(&a[0])) {
            Ok(re) => Ok(re.is_match(&s(&a[1])).into()),
            Err(e) if must => Err(e),
            Err(_) => Ok(false.into()),
        });
    }
    for (name, must) in [("regexFindAll", false), ("mustRegexFindAll", true)] {
        reg(m, name, &[Str, Str, Int], move |h, a| {
            let re = compile_or(h, &s(&a[0]), must)?;
            let text = s(&a[1]);
            let n = i(&a[2]);
            let found = re.find_iter(&text).take(if n < 0 { usize::MAX } else { n as usize });
            let found: Vec<Value> = found.map(|x| Value::from(x.as_str())).collect();
            // Go's FindAllString: nil when nothing matches.
            Ok(if found.is_empty() { Value::nil_list() } else { Value::list(found) })
        });
    }
    for (name, must) in [("regexFind", false), ("mustRegexFind", true)] {
        reg(m, name, &[Str, Str], move |h, a| {
            let re = compile_or(h, &s(&a[0]), must)?;
            Ok(re.find(&s(&a[1])).map(|x| x.as_str().to_string()).unwrap_or_default().into())
        });
    }
    for (name, must) in [("regexReplaceAll", false), ("mustRegexReplaceAll", true)] {
        reg(m, name, &[Str, Str, Str], move |h, a| {
            let re = compile_or(h, &s(&a[0]), must)?;
            Ok(re.replace_all(&s(&a[1]), s(&a[2]).as_ref()).into_owned().into())
        });
    }
    for (name, must) in [("regexReplaceAllLiteral", false), ("mustRegexReplaceAllLiteral", true)] {
        reg(m, name, &[Str, Str, Str], move |h, a| {
            let re = compile_or(h, &s(&a[0]), must)?;
            Ok(re.replace_all(&s(&a[1]), regex::NoExpand(&s(&a[2]))).into_owned().into())
        });
    }
    for (name, must) in [("regexSplit", false), ("mustRegexSplit", true)] {
        reg(m, name, &[Str, Str, Int], move |h, a| {
            let re = compile_or(h, &s(&a[0]), must)?;
            Ok(Value::list(split(&re, &s(&a[0]), &s(&a[1]), i(&a[2])).into_iter().map(Value::from).collect()))
        });
    }
    reg(m, "regexQuoteMeta", &[Str], |_, a| Ok(quote_meta(&s(&a[0])).into()));
}

/// Compiles with Go's message on error; the non-`must` variants panic in Go
/// (`regexp.MustCompile`), which the engine reports as an error as well.
fn compile_or(h: &mut dyn Host, pattern: &str, must: bool) -> Result<regex::Regex, FuncError> {
    compile_cached(h, pattern)
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

/// How many compiled patterns a render keeps; patterns built from values could be endless.
const MAX_CACHED: usize = 256;

/// Compiles `pattern`, once per render: Go compiles at every call, but charts call the same
/// expression for every object (argo-workflows' version label: two per object), and compiling
/// costs far more than matching.
fn compile_cached(h: &mut dyn Host, pattern: &str) -> Result<regex::Regex, FuncError> {
    if let Some(re) = h.env().and_then(|env| env.regexes.get(pattern)) {
        return Ok(re.clone());
    }
    let re = compile(pattern)?;
    if let Some(env) = h.env()
        && env.regexes.len() < MAX_CACHED
    {
        env.regexes.insert(pattern.to_string(), re.clone());
    }
    Ok(re)
}

pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, FuncError> {
    regex::RegexBuilder::new(&go_syntax(pattern)).octal(true).build().map_err(|e| {
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

/// Translates Go's RE2 syntax (as Go's `regexp/syntax` parses it) to the regex
/// crate's where the same text means something else or is refused there:
/// - `\d`, `\w`, `\s`, `\b` are ASCII-only in Go (and `\s` has no `\v`);
/// - inside a class Go reads `-` after a class escape (`[\w-.]`), `[` (other
///   than `[:name:]`), `&&`, `--` and `~~` as literals, where the regex crate
///   sees ranges, nested classes and set operations: such characters are escaped;
/// - `\<`, `\>` are the literal punctuation in Go, word boundaries here;
/// - `\Q...\E` quotes literally; a `{` that opens no valid repeat is a literal.
///
/// Octal escapes (`\101`) are enabled on the builder. Anything Go refuses is
/// left as it is, for the regex crate to refuse as well.
fn go_syntax(p: &str) -> Cow<'_, str> {
    if !p.contains(['\\', '[', '{']) {
        return Cow::Borrowed(p);
    }
    let c: Vec<char> = p.chars().collect();
    let mut out = String::with_capacity(p.len() + 16);
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '\\' if i + 1 < c.len() => {
                let n = c[i + 1];
                i += 2;
                match n {
                    'Q' => {
                        // literal up to `\E` or the end
                        while i < c.len() && !(c[i] == '\\' && c.get(i + 1) == Some(&'E')) {
                            push_literal(&mut out, c[i]);
                            i += 1;
                        }
                        i = (i + 2).min(c.len());
                    }
                    'b' => out.push_str("(?-u:\\b)"),
                    'B' => out.push_str("(?-u:\\B)"),
                    '<' | '>' => out.push(n),
                    _ => match perl_class(n, false) {
                        Some(r) => out.push_str(r),
                        None => {
                            out.push('\\');
                            out.push(n);
                        }
                    },
                }
            }
            '[' => i = class(&c, i, &mut out),
            '{' if !is_repeat(&c[i..]) => {
                out.push_str("\\{");
                i += 1;
            }
            ch => {
                out.push(ch);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// Go's ASCII Perl classes, inside a class or not.
fn perl_class(n: char, in_class: bool) -> Option<&'static str> {
    Some(match (n, in_class) {
        ('d', false) => "[0-9]",
        ('d', true) => "0-9",
        ('D', _) => "[^0-9]",
        ('w', false) => "[0-9A-Za-z_]",
        ('w', true) => "0-9A-Za-z_",
        ('W', _) => "[^0-9A-Za-z_]",
        ('s', false) => "[\\t\\n\\f\\r ]",
        ('s', true) => "\\t\\n\\f\\r ",
        ('S', _) => "[^\\t\\n\\f\\r ]",
        _ => return None,
    })
}

/// A literal character, escaped when the regex crate would read it otherwise.
fn push_literal(out: &mut String, ch: char) {
    if "\\.+*?()|[]{}^$-&~#".contains(ch) {
        out.push('\\');
    }
    out.push(ch);
}

/// Go's `{n}`, `{n,}`, `{n,m}`; anything else makes `{` a literal in Go.
fn is_repeat(c: &[char]) -> bool {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let s = *i;
        while c.get(*i).is_some_and(char::is_ascii_digit) {
            *i += 1;
        }
        *i > s
    };
    if !digits(&mut i) {
        return false;
    }
    if c.get(i) == Some(&',') {
        i += 1;
        digits(&mut i);
    }
    c.get(i) == Some(&'}')
}

/// Translates the class opening at `c[start]` (a `[`) as Go's `parseClass`
/// reads it; returns the index after it. An unclosed class is copied as it
/// is, for the regex crate's error.
fn class(c: &[char], start: usize, out: &mut String) -> usize {
    let mut t = String::from("[");
    let mut i = start + 1;
    if c.get(i) == Some(&'^') {
        t.push('^');
        i += 1;
    }
    let mut first = true;
    while i < c.len() {
        if c[i] == ']' && !first {
            t.push(']');
            out.push_str(&t);
            return i + 1;
        }
        first = false;
        // [:alpha:]
        if c[i] == '['
            && c.get(i + 1) == Some(&':')
            && let Some(len) = c[i + 2..].windows(2).position(|w| w == [':', ']'])
        {
            t.extend(&c[i..i + 2 + len + 2]);
            i += 2 + len + 2;
            continue;
        }
        if c[i] == '\\' {
            let n = c.get(i + 1).copied();
            if let Some(r) = n.and_then(|n| perl_class(n, true)) {
                t.push_str(r);
                i += 2;
                continue;
            }
            if matches!(n, Some('p' | 'P')) {
                // \pL or \p{Greek}
                let end = if c.get(i + 2) == Some(&'{') {
                    c[i..].iter().position(|&x| x == '}').map_or(c.len(), |e| i + e + 1)
                } else {
                    (i + 3).min(c.len())
                };
                t.extend(&c[i..end]);
                i = end;
                continue;
            }
        }
        i = class_char(c, i, &mut t);
        // a range: `-` not followed by the closing `]`
        if c.get(i) == Some(&'-') && c.get(i + 1).is_some_and(|&x| x != ']') {
            t.push('-');
            i = class_char(c, i + 1, &mut t);
        }
    }
    out.extend(&c[start..]);
    c.len()
}

/// One character of a class (a literal or an escape) at `c[i]`; returns the
/// index after it.
fn class_char(c: &[char], i: usize, t: &mut String) -> usize {
    if c[i] != '\\' {
        push_literal(t, c[i]);
        return i + 1;
    }
    let Some(&n) = c.get(i + 1) else {
        t.push('\\');
        return i + 1;
    };
    if n.is_ascii_punctuation() {
        push_literal(t, n);
        return i + 2;
    }
    // \x41, \x{263a}, octal, \n...: the same text in both syntaxes
    let end = match n {
        'x' if c.get(i + 2) == Some(&'{') => c[i..].iter().position(|&x| x == '}').map_or(c.len(), |e| i + e + 1),
        'x' => (i + 4).min(c.len()),
        '0'..='7' => {
            let mut e = i + 2;
            while e < c.len() && e < i + 4 && ('0'..='7').contains(&c[e]) {
                e += 1;
            }
            e
        }
        _ => i + 2,
    };
    t.extend(&c[i..end]);
    end
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
    use super::super::format_value;
    use super::super::testhost::*;
    use super::MAX_CACHED;
    use gotmpl::value::Value;

    /// Go patterns whose meaning differs in the regex crate's syntax; each
    /// result checked with helm v4.2.3 (`tests/charts/sprig/templates/regexp.yaml`).
    #[test]
    fn go_regexp_syntax() {
        let all = |p: &str, t: &str| callv("regexFindAll", &[st(p), st(t), Value::Int(-1)]);
        assert_eq!(callv("regexMatch", &[st("^[\\w-\\.]+$"), st("mymaster")]), "true");
        assert_eq!(callv("mustRegexMatch", &[st("^[\\w-]+$"), st("a-b")]), "true");
        assert_eq!(all("[\\w-]+", "a-b c.d"), "[a-b c d]");
        assert_eq!(all("[\\d-x]+", "1-2x y"), "[1-2x]");
        assert_eq!(all("[a&&b]", "a&b c"), "[a & b]");
        assert_eq!(all("[a~~b]", "~ab"), "[~ a b]");
        assert_eq!(all("[+--]", "+,-."), "[+ , -]");
        assert_eq!(all("[[a]", "[ab"), "[[ a]");
        assert_eq!(all("[[:digit:]x]+", "12x a"), "[12x]");
        assert_eq!(callv("regexReplaceAll", &[st("\\<b\\>"), st("<b> b"), st("B")]), "B b");
        assert_eq!(all("\\Qa.b\\E+", "a.bb axb"), "[a.bb]");
        assert_eq!(all("a{,2}", "a{,2} aa"), "[a{,2}]");
        assert_eq!(callv("regexReplaceAll", &[st("x{"), st("x{y"), st("_")]), "_y");
        assert_eq!(callv("regexSplit", &[st("{name}"), st("a{name}b"), Value::Int(-1)]), "[a b]");
        assert_eq!(all("\\101+", "AAb"), "[AA]");
        assert_eq!(all("[\\s]", "a\u{b}b c"), "[ ]");
        assert_eq!(all("[\\Da]+", "1ab2"), "[ab]");
        assert_eq!(callv("regexSplit", &[st("[\\s,-]+"), st("a, b-c"), Value::Int(-1)]), "[a b c]");
    }

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

    /// A render compiles each pattern once and answers every call with its own pattern; a
    /// pattern that does not compile is not kept, and the cache stops growing at its bound.
    #[test]
    fn a_render_compiles_each_pattern_once() {
        let funcs = super::super::funcs();
        let mut host = TestHost::new();
        let mut call = |name: &str, args: &[Value]| {
            let f = funcs.get(name).expect("registered");
            format_value(&(f.body)(&mut host, args).unwrap_or_else(|e| Value::str(format!("ERR {e}"))))
        };
        assert_eq!(call("regexMatch", &[st("^a+$"), st("aaa")]), "true");
        assert_eq!(call("regexMatch", &[st("^b+$"), st("aaa")]), "false");
        assert_eq!(call("regexMatch", &[st("^a+$"), st("aab")]), "false");
        assert_eq!(call("regexReplaceAll", &[st("^a+$"), st("aa"), st("x")]), "x");
        assert_eq!(call("mustRegexMatch", &[st("[a"), st("x")]), "ERR error parsing regexp: missing closing ]: `[a`");
        assert_eq!(host.env.regexes.len(), 2);
        let mut host = TestHost::new();
        let f = funcs.get("regexMatch").expect("registered");
        for n in 0..MAX_CACHED + 10 {
            let matched = (f.body)(&mut host, &[st(&format!("^{n}$")), st(&n.to_string())]).expect("compiles");
            assert_eq!(format_value(&matched), "true");
        }
        assert_eq!(host.env.regexes.len(), MAX_CACHED);
    }
}
