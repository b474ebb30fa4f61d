//! Sprig's paths (Go's `path` and, for the `os*` variants on Linux,
//! `path/filepath`) and URLs (url.go, Go's `net/url` rules).

use std::collections::BTreeMap;

use super::{reg, s};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Value};

use Param::{Map as PMap, String as Str};

pub(super) fn register(m: &mut FuncMap) {
    for (name, f) in [("base", base as fn(&str) -> String), ("dir", dir), ("clean", clean), ("ext", ext)] {
        reg(m, name, &[Str], move |_, a| Ok(f(&s(&a[0])).into()));
    }
    for (name, f) in [("osBase", base as fn(&str) -> String), ("osDir", dir), ("osClean", clean), ("osExt", ext)] {
        reg(m, name, &[Str], move |_, a| Ok(f(&s(&a[0])).into()));
    }
    for name in ["isAbs", "osIsAbs"] {
        reg(m, name, &[Str], |_, a| Ok(s(&a[0]).starts_with('/').into()));
    }
    reg(m, "getHostByName", &[Str], |_, _| Ok(Value::str("")));
    reg(m, "urlParse", &[Str], |_, a| url_parse(&s(&a[0])));
    reg(m, "urlJoin", &[PMap], |_, a| url_join(&a[0]));
}

/// Go's `path.Clean`.
pub(crate) fn clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

fn dir(p: &str) -> String {
    let d = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    clean(d)
}

fn ext(p: &str) -> String {
    for (i, c) in p.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return p[i..].to_string();
        }
    }
    String::new()
}

fn unescape(s: &str, plus_space: bool) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hexv = s.get(i + 1..i + 3).filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
                let Some(h) = hexv else {
                    let bad = s.get(i..(i + 3).min(s.len())).unwrap_or("%");
                    return Err(format!("invalid URL escape {}", super::gofmt::quote(bad)));
                };
                out.push(u8::from_str_radix(h, 16).map_err(|e| e.to_string())?);
                i += 3;
            }
            b'+' if plus_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `url.Parse`, reduced to the parts `urlParse` returns.
fn url_parse(raw: &str) -> Result<Value, FuncError> {
    let fail = |e: String| FuncError::msg(format!("unable to parse url: parse {}: {e}", super::gofmt::quote(raw)));
    let (rest, fragment) = match raw.split_once('#') {
        Some((r, f)) => (r, unescape(f, false).map_err(fail)?),
        None => (raw, String::new()),
    };
    let mut scheme = String::new();
    let mut rest = rest.to_string();
    if let Some(colon) = rest.find(':') {
        let cand = &rest[..colon];
        let valid = cand.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && cand.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if valid {
            scheme = cand.to_ascii_lowercase();
            rest = rest[colon + 1..].to_string();
        } else if colon == 0 {
            return Err(fail("missing protocol scheme".into()));
        }
    }
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r.to_string(), q.to_string()),
        None => (rest, String::new()),
    };
    let mut out = BTreeMap::new();
    let (mut host, mut userinfo, mut path, mut opaque) = (String::new(), String::new(), String::new(), String::new());
    if !scheme.is_empty() && !rest.starts_with('/') {
        opaque = rest;
    } else if let Some(after) = rest.strip_prefix("//") {
        let (authority, p) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        let (ui, h) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        if let Some(ui) = ui {
            userinfo = match ui.split_once(':') {
                Some((u, p)) => format!("{}:{}", unescape(u, false).map_err(fail)?, unescape(p, false).map_err(fail)?),
                None => unescape(ui, false).map_err(fail)?,
            };
        }
        host = unescape(h, false).map_err(fail)?;
        path = unescape(p, false).map_err(fail)?;
    } else {
        path = unescape(&rest, false).map_err(fail)?;
    }
    let hostname = if let Some(stripped) = host.strip_prefix('[') {
        stripped.split(']').next().unwrap_or("").to_string()
    } else {
        match host.rfind(':') {
            Some(i) if host[i + 1..].bytes().all(|c| c.is_ascii_digit()) => host[..i].to_string(),
            _ => host.clone(),
        }
    };
    out.insert("scheme".to_string(), Value::from(scheme));
    out.insert("host".to_string(), Value::from(host));
    out.insert("hostname".to_string(), Value::from(hostname));
    out.insert("path".to_string(), Value::from(path));
    out.insert("query".to_string(), Value::from(query));
    out.insert("opaque".to_string(), Value::from(opaque));
    out.insert("fragment".to_string(), Value::from(fragment));
    out.insert("userinfo".to_string(), Value::from(userinfo));
    Ok(Value::map(out))
}

fn escape(s: &str, keep: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || keep.as_bytes().contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Go's `url.URL.String` of the dict's parts.
fn url_join(d: &Value) -> Result<Value, FuncError> {
    let get = |k: &str| -> Result<String, FuncError> {
        let Value::Map(m) = d else { return Ok(String::new()) };
        match m.borrow().get(k) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.to_string()),
            Some(other) => Err(FuncError::msg(format!(
                "unable to parse {k} key, must be of type string, but {} found",
                other.kind_name()
            ))),
        }
    };
    let (scheme, host, path, query, opaque, fragment, userinfo) =
        (get("scheme")?, get("host")?, get("path")?, get("query")?, get("opaque")?, get("fragment")?, get("userinfo")?);
    let mut out = String::new();
    if !scheme.is_empty() {
        out.push_str(&scheme);
        out.push(':');
    }
    if !opaque.is_empty() {
        out.push_str(&opaque);
    } else {
        if !scheme.is_empty() || !host.is_empty() || !userinfo.is_empty() {
            if !host.is_empty() || !path.is_empty() || !userinfo.is_empty() {
                out.push_str("//");
            }
            if !userinfo.is_empty() {
                match userinfo.split_once(':') {
                    Some((u, p)) => out.push_str(&format!("{}:{}", escape(u, "!$&'()*+,;="), escape(p, "!$&'()*+,;="))),
                    None => out.push_str(&escape(&userinfo, "!$&'()*+,;=")),
                }
                out.push('@');
            }
            out.push_str(&escape(&host, "!$&'()*+,;=:[]"));
        }
        if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
            out.push('/');
        }
        out.push_str(&escape(&path, "/!$&'()*+,;=:@"));
    }
    if !query.is_empty() {
        out.push('?');
        out.push_str(&query);
    }
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(&escape(&fragment, "/!$&'()*+,;=:@?"));
    }
    Ok(out.into())
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use gotmpl::value::Value;

    #[test]
    fn paths_as_go() {
        assert_eq!(callv("base", &[st("/a/b.txt")]), "b.txt");
        assert_eq!(callv("base", &[st("/a/b/")]), "b");
        assert_eq!(callv("base", &[st("")]), ".");
        assert_eq!(callv("dir", &[st("/a/b/c")]), "/a/b");
        assert_eq!(callv("dir", &[st("c")]), ".");
        assert_eq!(callv("clean", &[st("a/../../b//c/.")]), "../b/c");
        assert_eq!(callv("clean", &[st("/../a")]), "/a");
        assert_eq!(callv("ext", &[st("a/b.tar.gz")]), ".gz");
        assert_eq!(callv("ext", &[st("a.b/c")]), "");
        assert_eq!(callv("isAbs", &[st("/x")]), "true");
    }

    #[test]
    fn urls_as_go() {
        assert_eq!(
            callv("urlParse", &[st("https://u:p@example.com:8443/a%20b?x=1#frag")]),
            "map[fragment:frag host:example.com:8443 hostname:example.com opaque: path:/a b query:x=1 scheme:https userinfo:u:p]"
        );
        assert_eq!(
            callv("urlParse", &[st("mailto:x@y")]),
            "map[fragment: host: hostname: opaque:x@y path: query: scheme:mailto userinfo:]"
        );
        let d = dict(&[("scheme", st("http")), ("host", st("h:80")), ("path", st("p q")), ("query", st("a=b"))]);
        assert_eq!(callv("urlJoin", &[d]), "http://h:80/p%20q?a=b");
        assert_eq!(
            callv("urlJoin", &[dict(&[("host", Value::Int(1))])]),
            "ERR unable to parse host key, must be of type string, but int found"
        );
    }
}
