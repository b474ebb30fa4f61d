//! Sprig's string functions (strings.go and the goutils/xstrings helpers it wraps).

use super::{i, reg, regv, s, strval};
use crate::env::HostExt as _;
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Any, Int, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "hello", &[], |_, _| Ok(Value::str("Hello!")));
    reg(m, "abbrev", &[Int, Str], |_, a| Ok(abbrev(i(&a[0]), &s(&a[1])).into()));
    reg(m, "abbrevboth", &[Int, Int, Str], |_, a| {
        let (left, right, st) = (i(&a[0]), i(&a[1]), s(&a[2]));
        if right < 4 || (left > 0 && right < 7) {
            return Ok(st.as_ref().into());
        }
        Ok(abbreviate_full(&st, left, right).into())
    });
    reg(m, "trunc", &[Int, Str], |_, a| Ok(trunc(i(&a[0]), &s(&a[1])).into()));
    reg(m, "trim", &[Str], |_, a| Ok(s(&a[0]).trim_matches(char::is_whitespace).into()));
    reg(m, "upper", &[Str], |_, a| Ok(s(&a[0]).to_uppercase().into()));
    reg(m, "lower", &[Str], |_, a| Ok(s(&a[0]).to_lowercase().into()));
    reg(m, "title", &[Str], |_, a| Ok(title(&s(&a[0])).into()));
    reg(m, "untitle", &[Str], |_, a| Ok(untitle(&s(&a[0])).into()));
    reg(m, "substr", &[Int, Int, Str], |_, a| substr(i(&a[0]), i(&a[1]), &s(&a[2])).map(Value::from));
    reg(m, "repeat", &[Int, Str], |h, a| {
        let n = i(&a[0]);
        if n < 0 {
            return Err(super::err("strings: negative Repeat count"));
        }
        let text = s(&a[1]);
        gotmpl::room(h, "repeat", n as u128 * text.len() as u128)?;
        Ok(text.repeat(n as usize).into())
    });
    for name in ["trimall", "trimAll"] {
        reg(m, name, &[Str, Str], |_, a| {
            let cut = s(&a[0]);
            Ok(s(&a[1]).trim_matches(|c| cut.contains(c)).into())
        });
    }
    reg(m, "trimSuffix", &[Str, Str], |_, a| {
        let (suf, st) = (s(&a[0]), s(&a[1]));
        Ok(st.strip_suffix(suf.as_ref()).unwrap_or(&st).into())
    });
    reg(m, "trimPrefix", &[Str, Str], |_, a| {
        let (pre, st) = (s(&a[0]), s(&a[1]));
        Ok(st.strip_prefix(pre.as_ref()).unwrap_or(&st).into())
    });
    reg(m, "nospace", &[Str], |_, a| Ok(s(&a[0]).chars().filter(|c| !c.is_whitespace()).collect::<String>().into()));
    reg(m, "initials", &[Str], |_, a| Ok(initials(&s(&a[0])).into()));
    reg(m, "swapcase", &[Str], |_, a| Ok(swapcase(&s(&a[0])).into()));
    reg(m, "shuffle", &[Str], |h, a| {
        use rand::seq::SliceRandom;
        let mut chars: Vec<char> = s(&a[0]).chars().collect();
        chars.shuffle(&mut h.rng());
        Ok(chars.into_iter().collect::<String>().into())
    });
    reg(m, "snakecase", &[Str], |_, a| Ok(lower_case_words(&s(&a[0]), '_').into()));
    reg(m, "kebabcase", &[Str], |_, a| Ok(lower_case_words(&s(&a[0]), '-').into()));
    reg(m, "camelcase", &[Str], |_, a| Ok(pascal_case(&s(&a[0])).into()));
    reg(m, "wrap", &[Int, Str], |_, a| Ok(wrap_custom(&s(&a[1]), i(&a[0]), "\n", false).into()));
    reg(m, "wrapWith", &[Int, Str, Str], |_, a| {
        let sep = s(&a[1]);
        let sep = if sep.is_empty() { "\n".into() } else { sep };
        Ok(wrap_custom(&s(&a[2]), i(&a[0]), &sep, true).into())
    });
    reg(m, "contains", &[Str, Str], |_, a| Ok(s(&a[1]).contains(s(&a[0]).as_ref()).into()));
    reg(m, "hasPrefix", &[Str, Str], |_, a| Ok(s(&a[1]).starts_with(s(&a[0]).as_ref()).into()));
    reg(m, "hasSuffix", &[Str, Str], |_, a| Ok(s(&a[1]).ends_with(s(&a[0]).as_ref()).into()));
    regv(m, "quote", &[], Any, |_, a| {
        let out: Vec<String> = a.iter().filter(|v| !v.is_nil()).map(|v| super::gofmt::quote(&strval(v))).collect();
        Ok(out.join(" ").into())
    });
    regv(m, "squote", &[], Any, |_, a| {
        let out: Vec<String> =
            a.iter().filter(|v| !v.is_nil()).map(|v| format!("'{}'", super::format_value(v))).collect();
        Ok(out.join(" ").into())
    });
    regv(m, "cat", &[], Any, |_, a| {
        let out: Vec<String> = a.iter().filter(|v| !v.is_nil()).map(super::format_value).collect();
        Ok(out.join(" ").into())
    });
    reg(m, "indent", &[Int, Str], |h, a| Ok(indent(h, "indent", i(&a[0]), &s(&a[1]))?.into()));
    reg(m, "nindent", &[Int, Str], |h, a| Ok(format!("\n{}", indent(h, "nindent", i(&a[0]), &s(&a[1]))?).into()));
    reg(m, "replace", &[Str, Str, Str], |h, a| {
        let (old, new, text) = (s(&a[0]), s(&a[1]), s(&a[2]));
        if new.len() > old.len() {
            let hits = text.matches(old.as_ref()).count() as u128;
            gotmpl::room(h, "replace", text.len() as u128 + hits * (new.len() - old.len()) as u128)?;
        }
        Ok(text.replace(old.as_ref(), &new).into())
    });
    reg(m, "plural", &[Str, Str, Int], |_, a| Ok(if i(&a[2]) == 1 { a[0].clone() } else { a[1].clone() }));
    reg(m, "toString", &[Any], |_, a| Ok(strval(&a[0]).into()));
    reg(m, "split", &[Str, Str], |_, a| Ok(split_map(go_split(&s(&a[1]), &s(&a[0]), -1))));
    reg(m, "splitList", &[Str, Str], |_, a| {
        Ok(Value::list(go_split(&s(&a[1]), &s(&a[0]), -1).into_iter().map(Value::from).collect()))
    });
    reg(m, "splitn", &[Str, Int, Str], |_, a| Ok(split_map(go_split(&s(&a[2]), &s(&a[0]), i(&a[1])))));
    reg(m, "toStrings", &[Any], |_, a| Ok(Value::list(strslice(&a[0]).into_iter().map(Value::from).collect())));
    reg(m, "join", &[Str, Any], |h, a| {
        let (sep, parts) = (s(&a[0]), strslice(&a[1]));
        let size = parts.iter().map(|p| p.len() as u128).sum::<u128>() + sep.len() as u128 * parts.len() as u128;
        gotmpl::room(h, "join", size)?;
        Ok(parts.join(&sep).into())
    });
}

/// Sprig's `strslice`: a list's non-nil items as strings; a non-list as one item.
pub(crate) fn strslice(v: &Value) -> Vec<String> {
    match super::items(v) {
        Some(items) => items.iter().filter(|x| !x.is_nil()).map(strval).collect(),
        None if v.is_nil() => Vec::new(),
        None => vec![strval(v)],
    }
}

/// Go's `strings.SplitN` (n < 0: all).
pub(crate) fn go_split(s: &str, sep: &str, n: i64) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if sep.is_empty() {
        // explode into UTF-8 sequences
        let chars: Vec<String> = s.chars().map(String::from).collect();
        if n < 0 || chars.len() <= n as usize {
            return chars;
        }
        let n = n as usize;
        let mut out: Vec<String> = chars[..n - 1].to_vec();
        out.push(chars[n - 1..].concat());
        return out;
    }
    if n < 0 {
        return s.split(sep).map(String::from).collect();
    }
    s.splitn(n as usize, sep).map(String::from).collect()
}

fn split_map(parts: Vec<String>) -> Value {
    Value::map(parts.into_iter().enumerate().map(|(i, p)| (format!("_{i}"), Value::from(p))).collect())
}

/// Sprig's `indent`; the result's size (the padding times the lines) is
/// checked before it is built.
fn indent(h: &mut dyn Host, what: &str, n: i64, v: &str) -> Result<String, FuncError> {
    let n = n.max(0) as u128;
    let lines = v.bytes().filter(|&b| b == b'\n').count() as u128 + 1;
    gotmpl::room(h, what, v.len() as u128 + n * lines)?;
    let pad = " ".repeat(n as usize);
    Ok(format!("{pad}{}", v.replace('\n', &format!("\n{pad}"))))
}

/// Byte-indexed slicing as Go does; a cut inside a UTF-8 sequence keeps the bytes (lossy).
fn byte_slice(s: &str, from: usize, to: usize) -> String {
    match s.get(from..to) {
        Some(x) => x.to_string(),
        None => String::from_utf8_lossy(&s.as_bytes()[from..to]).into_owned(),
    }
}

fn trunc(c: i64, s: &str) -> String {
    let len = s.len() as i64;
    if c < 0 && len + c > 0 {
        return byte_slice(s, (len + c) as usize, s.len());
    }
    if c >= 0 && len > c {
        return byte_slice(s, 0, c as usize);
    }
    s.to_string()
}

fn substr(start: i64, end: i64, s: &str) -> Result<String, gotmpl::value::FuncError> {
    let len = s.len() as i64;
    let oob = |a: i64, b: i64| super::err(format!("runtime error: slice bounds out of range [{a}:{b}]"));
    if start < 0 {
        if end < 0 || end > len {
            return Err(oob(0, end));
        }
        return Ok(byte_slice(s, 0, end as usize));
    }
    if end < 0 || end > len {
        if start > len {
            return Err(oob(start, len));
        }
        return Ok(byte_slice(s, start as usize, s.len()));
    }
    if start > end {
        return Err(oob(start, end));
    }
    Ok(byte_slice(s, start as usize, end as usize))
}

fn abbrev(width: i64, s: &str) -> String {
    if width < 4 {
        return s.to_string();
    }
    abbreviate_full(s, 0, width)
}

/// goutils.AbbreviateFull (byte offsets, as Go).
fn abbreviate_full(s: &str, offset: i64, max_width: i64) -> String {
    let len = s.len() as i64;
    if s.is_empty() || max_width < 4 || len <= max_width {
        return s.to_string();
    }
    let mut offset = offset.min(len);
    if len - offset < max_width - 3 {
        offset = len - (max_width - 3);
    }
    if offset <= 4 {
        return format!("{}...", byte_slice(s, 0, (max_width - 3) as usize));
    }
    if max_width < 7 {
        return s.to_string();
    }
    if offset + max_width - 3 < len {
        let rest = byte_slice(s, offset as usize, s.len());
        return format!("...{}", abbreviate_full(&rest, 0, max_width - 3));
    }
    format!("...{}", byte_slice(s, (len - (max_width - 3)) as usize, s.len()))
}

/// Go's `strings.Title`: the first letter of each word in title case.
pub(crate) fn title(s: &str) -> String {
    let mut prev = ' ';
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if is_separator(prev) {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev = c;
    }
    out
}

fn is_separator(c: char) -> bool {
    if c.is_ascii() {
        return !(c.is_ascii_alphanumeric() || c == '_');
    }
    if c.is_alphanumeric() {
        return false;
    }
    c.is_whitespace()
}

/// goutils.Uncapitalize: the first letter of each whitespace-separated word in lower case.
fn untitle(s: &str) -> String {
    let mut next = true;
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_whitespace() {
            next = true;
            out.push(c);
        } else if next {
            out.extend(c.to_lowercase());
            next = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn initials(s: &str) -> String {
    let mut out = String::new();
    let mut gap = true;
    for b in s.bytes() {
        let c = char::from(b);
        if c.is_whitespace() || b == 0x85 || b == 0xA0 {
            gap = true;
        } else if gap {
            out.push(c);
            gap = false;
        }
    }
    out
}

fn swapcase(s: &str) -> String {
    s.chars()
        .flat_map(|c| -> Box<dyn Iterator<Item = char>> {
            if c.is_uppercase() {
                Box::new(c.to_lowercase())
            } else if c.is_lowercase() {
                Box::new(c.to_uppercase())
            } else {
                Box::new(std::iter::once(c))
            }
        })
        .collect()
}

fn is_connector(c: char) -> bool {
    c == '-' || c == '_' || c.is_whitespace()
}

/// xstrings.ToPascalCase (v1.5), as helm shows it: leading connectors
/// (`-`, `_`, space) kept; in a run of connectors all but the last kept; the
/// rune after a connector (and the first) upper-cased; a word that started
/// upper-case has its other runes lower-cased (`HTTP_server` → `HttpServer`),
/// one that started lower-case keeps them (`aBC` → `ABC`).
fn pascal_case(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() && is_connector(chars[i]) {
        out.push(chars[i]);
        i += 1;
    }
    if i == chars.len() {
        // Go's quirk: a string of connectors only repeats its last rune
        if let Some(last) = chars.last() {
            out.push(*last);
        }
        return out;
    }
    let mut word_start = true;
    let mut lower_rest = false;
    while i < chars.len() {
        let c = chars[i];
        if is_connector(c) {
            // keep this connector if another connector follows, or if it ends the string
            if chars.get(i + 1).is_none_or(|n| is_connector(*n)) {
                out.push(c);
            }
            word_start = true;
        } else if word_start {
            lower_rest = c.is_uppercase();
            out.extend(c.to_uppercase());
            word_start = false;
        } else if lower_rest {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Word {
    Invalid,
    Number,
    Upper,
    Alphabet,
    Connector,
    Punct,
    Other,
}

/// Go's `unicode.IsPunct` (category P) for ASCII; a few common others.
fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_punctuation() && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~');
    }
    matches!(c, '¡' | '§' | '«' | '¶' | '·' | '»' | '¿' | '‐'..='‧' | '‰'..='⁞' | '、'..='〃' | '〈'..='】')
}

/// xstrings' isAlphabet: letters but CJK ideographs.
fn is_alphabet(c: char) -> bool {
    c.is_alphabetic() && !matches!(c, '\u{4E00}'..='\u{9FCC}' | '\u{3400}'..='\u{4D85}' | '\u{20000}'..='\u{2B81D}')
}

/// xstrings' nextWord: the kind and byte length of the word starting `s`.
fn next_word(s: &str) -> (Word, usize) {
    let mut it = s.char_indices().peekable();
    let Some((_, r)) = it.next() else { return (Word::Invalid, 0) };
    let mut end = r.len_utf8();
    let run = |end: &mut usize, it: &mut std::iter::Peekable<std::str::CharIndices<'_>>, f: &dyn Fn(char) -> bool| {
        while let Some(&(i, c)) = it.peek() {
            if !f(c) {
                break;
            }
            *end = i + c.len_utf8();
            it.next();
        }
    };
    let wt = if is_connector(r) {
        run(&mut end, &mut it, &is_connector);
        Word::Connector
    } else if is_punct(r) {
        run(&mut end, &mut it, &is_punct);
        Word::Punct
    } else if r.is_uppercase() {
        if let Some(&(_, c)) = it.peek() {
            if c.is_uppercase() {
                let mut prev_size = c.len_utf8();
                end += c.len_utf8();
                it.next();
                let mut stopped_on = None;
                while let Some(&(i, c)) = it.peek() {
                    if !c.is_uppercase() {
                        stopped_on = Some(c);
                        break;
                    }
                    prev_size = c.len_utf8();
                    end = i + c.len_utf8();
                    it.next();
                }
                if stopped_on.is_some_and(is_alphabet) {
                    end -= prev_size;
                }
            } else if is_alphabet(c) {
                run(&mut end, &mut it, &|c| is_alphabet(c) && !c.is_uppercase());
            }
        }
        Word::Upper
    } else if is_alphabet(r) {
        run(&mut end, &mut it, &|c| is_alphabet(c) && !c.is_uppercase());
        Word::Alphabet
    } else if r.is_numeric() {
        run(&mut end, &mut it, &char::is_numeric);
        Word::Number
    } else {
        run(&mut end, &mut it, &|c| !(is_connector(c) || is_alphabet(c) || c.is_numeric() || is_punct(c)));
        Word::Other
    };
    (wt, end)
}

fn word_to_lower(out: &mut String, wt: Word, word: &str, conn: char) {
    if wt != Word::Upper && wt != Word::Connector {
        out.push_str(word);
        return;
    }
    for c in word.chars() {
        if is_connector(c) {
            out.push(conn);
        } else if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
}

/// xstrings.ToSnakeCase / ToKebabCase (camelCaseToLowerCase).
fn lower_case_words(s: &str, conn: char) -> String {
    if s.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(s.len() + 4);
    let mut rest = s;
    let take = |rest: &mut &str| -> (Word, String) {
        let (wt, n) = next_word(rest);
        let w = rest[..n].to_string();
        *rest = &rest[n..];
        (wt, w)
    };
    let (mut wt, mut word) = take(&mut rest);
    while !rest.is_empty() {
        if wt != Word::Connector {
            word_to_lower(&mut out, wt, &word, conn);
        }
        let prev = wt;
        let last = word.clone();
        (wt, word) = take(&mut rest);
        match prev {
            Word::Number => {
                while wt == Word::Alphabet || wt == Word::Number {
                    word_to_lower(&mut out, wt, &word, conn);
                    (wt, word) = take(&mut rest);
                }
                if !matches!(wt, Word::Invalid | Word::Punct | Word::Connector) {
                    out.push(conn);
                }
            }
            Word::Connector => word_to_lower(&mut out, prev, &last, conn),
            Word::Punct => {}
            _ => {
                if wt != Word::Number {
                    if wt != Word::Connector && wt != Word::Punct {
                        out.push(conn);
                    }
                    continue;
                }
                if rest.is_empty() {
                    continue;
                }
                let last = word.clone();
                (wt, word) = take(&mut rest);
                if wt != Word::Alphabet {
                    word_to_lower(&mut out, Word::Number, &last, conn);
                    if wt != Word::Connector && wt != Word::Punct {
                        out.push(conn);
                    }
                    continue;
                }
                out.push(conn);
                word_to_lower(&mut out, Word::Number, &last, conn);
                while wt == Word::Alphabet || wt == Word::Number {
                    word_to_lower(&mut out, wt, &word, conn);
                    (wt, word) = take(&mut rest);
                }
                if !matches!(wt, Word::Invalid | Word::Connector | Word::Punct) {
                    out.push(conn);
                }
            }
        }
    }
    word_to_lower(&mut out, wt, &word, conn);
    out
}

/// goutils.WrapCustom (byte-based, words split at ' ').
fn wrap_custom(s: &str, len: i64, nl: &str, long_words: bool) -> String {
    if s.is_empty() {
        return String::new();
    }
    let b = s.as_bytes();
    let wl = len.max(1) as usize;
    let total = b.len();
    let mut off = 0usize;
    let mut out = String::new();
    while total - off > wl {
        if b[off] == b' ' {
            off += 1;
            continue;
        }
        let end = wl + off + 1;
        let at = b[off..end].iter().rposition(|&x| x == b' ');
        if let Some(p) = at {
            out.push_str(&byte_slice(s, off, off + p));
            out.push_str(nl);
            off += p + 1;
        } else if long_words {
            out.push_str(&byte_slice(s, off, off + wl));
            out.push_str(nl);
            off += wl;
        } else {
            let end = wl + off;
            match b[end..].iter().position(|&x| x == b' ') {
                None => {
                    out.push_str(&byte_slice(s, off, total));
                    off = total;
                }
                Some(p) => {
                    out.push_str(&byte_slice(s, off, end + p));
                    out.push_str(nl);
                    off = end + p + 1;
                }
            }
        }
    }
    out.push_str(&byte_slice(s, off, total));
    out
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn string_functions_as_sprig() {
        assert_eq!(callv("nindent", &[Value::Int(2), st("a\nb")]), "\n  a\n  b");
        assert_eq!(callv("indent", &[Value::Int(3), st("x")]), "   x");
        assert_eq!(callv("trunc", &[Value::Int(3), st("abcdef")]), "abc");
        assert_eq!(callv("trunc", &[Value::Int(-2), st("abcdef")]), "ef");
        assert_eq!(callv("abbrev", &[Value::Int(5), st("hello world")]), "he...");
        assert_eq!(callv("abbrevboth", &[Value::Int(5), Value::Int(10), st("1234 5678 9123")]), "...5678...");
        assert_eq!(callv("title", &[st("hello wORLD-foo_bar")]), "Hello WORLD-Foo_bar");
        assert_eq!(callv("untitle", &[st("Hello World")]), "hello world");
        assert_eq!(callv("substr", &[Value::Int(1), Value::Int(3), st("hello")]), "el");
        assert_eq!(callv("substr", &[Value::Int(2), Value::Int(-1), st("hello")]), "llo");
        assert_eq!(callv("quote", &[st("a\"b"), Value::Nil, Value::Float(1.5)]), "\"a\\\"b\" \"1.5\"");
        assert_eq!(callv("quote", &[Value::Nil]), "");
        assert_eq!(callv("squote", &[st("x"), Value::Int(3)]), "'x' '3'");
        assert_eq!(callv("cat", &[st("a"), Value::Nil, Value::Int(2), li(vec![st("x")])]), "a 2 [x]");
        assert_eq!(callv("replace", &[st("-"), st("_"), st("a-b-c")]), "a_b_c");
        assert_eq!(callv("trimAll", &[st("$"), st("$$5.00$")]), "5.00");
        assert_eq!(callv("trimSuffix", &[st("-"), st("a-")]), "a");
        assert_eq!(callv("wrap", &[Value::Int(5), st("Hello World Foo")]), "Hello\nWorld\nFoo");
        assert_eq!(callv("wrapWith", &[Value::Int(5), st("\t"), st("Hello World")]), "Hello\tWorld");
        assert_eq!(callv("initials", &[st("First Try")]), "FT");
        assert_eq!(callv("swapcase", &[st("This Is")]), "tHIS iS");
        assert_eq!(callv("snakecase", &[st("FirstName")]), "first_name");
        assert_eq!(callv("snakecase", &[st("HTTPServer")]), "http_server");
        assert_eq!(callv("kebabcase", &[st("FirstName")]), "first-name");
        assert_eq!(callv("camelcase", &[st("http_server")]), "HttpServer");
        assert_eq!(callv("contains", &[st("cat"), st("catch")]), "true");
        assert_eq!(callv("plural", &[st("one"), st("many"), Value::Int(2)]), "many");
        assert_eq!(callv("toString", &[Value::Nil]), "<nil>");
        assert_eq!(callv("toString", &[Value::Float(1e6)]), "1e+06");
        assert_eq!(callv("split", &[st("$"), st("foo$bar$baz")]), "map[_0:foo _1:bar _2:baz]");
        assert_eq!(callv("splitn", &[st("$"), Value::Int(2), st("foo$bar$baz")]), "map[_0:foo _1:bar$baz]");
        assert_eq!(callv("splitList", &[st(","), st("a,b,,c")]), "[a b  c]");
        assert_eq!(callv("join", &[st("-"), li(vec![st("a"), Value::Nil, Value::Int(1)])]), "a-1");
        assert_eq!(callv("join", &[st("-"), st("solo")]), "solo");
        assert_eq!(callv("toStrings", &[li(vec![Value::Int(1), Value::Bool(true)])]), "[1 true]");
        assert_eq!(callv("repeat", &[Value::Int(3), st("ab")]), "ababab");
        assert_eq!(callv("nospace", &[st(" a b\tc ")]), "abc");
    }
}
