//! Masterminds/semver v3 as Sprig's `semver` and `semverCompare` use it:
//! its version parsing (leading zeros coerced, `v` prefix, missing minor and
//! patch), its ordering and its constraint language (`>=1.21.0-0`, `^`, `~`,
//! `x`/`*` wildcards, `a - b` ranges, `,`/space for and, `||` for or, and its
//! prerelease rule: a prerelease version satisfies a constraint group only
//! when the group names a prerelease).

use std::cmp::Ordering;
use std::rc::Rc;
use std::sync::LazyLock;

use super::{reg, s};
use gotmpl::func::{FuncMap, Param};
use gotmpl::value::{FuncError, Object, Value};

use Param::String as Str;

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "semver", &[Str], |_, a| Ok(Value::Object(Rc::new(Version::parse(&s(&a[0])).map_err(FuncError::msg)?))));
    reg(m, "semverCompare", &[Str, Str], |_, a| {
        let c = Constraints::parse(&s(&a[0])).map_err(FuncError::msg)?;
        let v = Version::parse(&s(&a[1])).map_err(FuncError::msg)?;
        Ok(c.check(&v).into())
    });
}

const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";
/// Go's `\s`, which is ASCII white space without `\v` (regexp/syntax: `\s == [\t\n\f\r ]`).
/// The regex crate's `\s` is Unicode's, which also takes the four expressions below 2.0 MiB to
/// build instead of 0.7 MiB, in every render that compares versions.
const WS: &str = r"[\t\n\f\r ]";

fn re(p: &str) -> regex::Regex {
    regex::Regex::new(p).expect("static regex")
}

static LOOSE: LazyLock<regex::Regex> = LazyLock::new(|| {
    re(
        r"^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?$",
    )
});
static CONSTRAINT: LazyLock<regex::Regex> = LazyLock::new(|| re(&format!(r"^{WS}*({OPS}){WS}*({CV}){WS}*$")));
static RANGE: LazyLock<regex::Regex> = LazyLock::new(|| re(&format!(r"{WS}*({CV}){WS}+-{WS}+({CV}){WS}*")));
static FIND: LazyLock<regex::Regex> = LazyLock::new(|| re(&format!(r"({OPS}){WS}*({CV})")));
static VALID: LazyLock<regex::Regex> =
    LazyLock::new(|| re(&format!(r"^({WS}*({OPS}){WS}*({CV}){WS}*)((?:{WS}+|,{WS}*)({OPS}){WS}*({CV}){WS}*)*$")));

/// A parsed version (`*semver.Version`).
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: String,
    pub metadata: String,
    pub original: String,
}

fn only(s: &str, f: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(f)
}

fn allowed(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

impl Version {
    /// `semver.NewVersion` (coercing).
    pub fn parse(v: &str) -> Result<Version, String> {
        let m = LOOSE.captures(v).ok_or("invalid semantic version")?;
        let seg = |i: usize| -> Result<u64, String> {
            match m.get(i) {
                None => Ok(0),
                Some(x) => x.as_str().trim_start_matches('.').parse::<u64>().map_err(|e| {
                    format!(
                        "error parsing version segment: strconv.ParseUint: parsing {}: {}",
                        super::gofmt::quote(x.as_str().trim_start_matches('.')),
                        if matches!(e.kind(), std::num::IntErrorKind::PosOverflow) {
                            "value out of range"
                        } else {
                            "invalid syntax"
                        }
                    )
                }),
            }
        };
        let ver = Version {
            major: seg(1)?,
            minor: seg(2)?,
            patch: seg(3)?,
            pre: m.get(5).map(|x| x.as_str().to_string()).unwrap_or_default(),
            metadata: m.get(8).map(|x| x.as_str().to_string()).unwrap_or_default(),
            original: v.to_string(),
        };
        if !ver.pre.is_empty() {
            for p in ver.pre.split('.') {
                if p.is_empty() {
                    return Err("invalid prerelease string".into());
                } else if only(p, |c| c.is_ascii_digit()) {
                    if p.len() > 1 && p.starts_with('0') {
                        return Err("version segment starts with 0".into());
                    }
                } else if !only(p, allowed) {
                    return Err("invalid prerelease string".into());
                }
            }
        }
        if !ver.metadata.is_empty() && ver.metadata.split('.').any(|p| p.is_empty() || !only(p, allowed)) {
            return Err("invalid metadata string".into());
        }
        Ok(ver)
    }

    pub fn compare(&self, o: &Version) -> Ordering {
        self.major.cmp(&o.major).then(self.minor.cmp(&o.minor)).then(self.patch.cmp(&o.patch)).then_with(|| {
            match (self.pre.is_empty(), o.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prerelease(&self.pre, &o.pre),
            }
        })
    }

    fn render(&self) -> String {
        let mut out = format!("{}.{}.{}", self.major, self.minor, self.patch);
        if !self.pre.is_empty() {
            out.push('-');
            out.push_str(&self.pre);
        }
        if !self.metadata.is_empty() {
            out.push('+');
            out.push_str(&self.metadata);
        }
        out
    }
}

fn compare_prerelease(v: &str, o: &str) -> Ordering {
    let sp: Vec<&str> = v.split('.').collect();
    let op: Vec<&str> = o.split('.').collect();
    for i in 0..sp.len().max(op.len()) {
        let d = compare_pre_part(sp.get(i).copied().unwrap_or(""), op.get(i).copied().unwrap_or(""));
        if d != Ordering::Equal {
            return d;
        }
    }
    Ordering::Equal
}

fn compare_pre_part(s: &str, o: &str) -> Ordering {
    if s == o {
        return Ordering::Equal;
    }
    if s.is_empty() {
        return Ordering::Less;
    }
    if o.is_empty() {
        return Ordering::Greater;
    }
    match (s.parse::<u64>(), o.parse::<u64>()) {
        (Err(_), Err(_)) => {
            if s > o {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (_, Err(_)) => Ordering::Less,
        (Err(_), _) => Ordering::Greater,
        (Ok(a), Ok(b)) => {
            if a > b {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
    }
}

impl Object for Version {
    fn type_name(&self) -> &str {
        "*semver.Version"
    }
    fn field(&self, name: &str) -> Option<Value> {
        Some(match name {
            "Major" => Value::Int(self.major as i64),
            "Minor" => Value::Int(self.minor as i64),
            "Patch" => Value::Int(self.patch as i64),
            "Prerelease" => Value::str(self.pre.as_str()),
            "Metadata" => Value::str(self.metadata.as_str()),
            "Original" => Value::str(self.original.as_str()),
            "String" => Value::str(self.render()),
            "IncMajor" => Value::Object(Rc::new(
                Version {
                    major: self.major + 1,
                    minor: 0,
                    patch: 0,
                    pre: String::new(),
                    metadata: String::new(),
                    original: String::new(),
                }
                .with_original(),
            )),
            "IncMinor" => Value::Object(Rc::new(
                Version {
                    minor: self.minor + 1,
                    patch: 0,
                    pre: String::new(),
                    metadata: String::new(),
                    original: String::new(),
                    ..self.clone()
                }
                .with_original(),
            )),
            "IncPatch" => {
                let patch = if self.pre.is_empty() { self.patch + 1 } else { self.patch };
                Value::Object(Rc::new(
                    Version {
                        patch,
                        pre: String::new(),
                        metadata: String::new(),
                        original: String::new(),
                        ..self.clone()
                    }
                    .with_original(),
                ))
            }
            _ => return None,
        })
    }
    fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
        let other = || -> Result<Version, FuncError> {
            match args.first() {
                Some(Value::Object(o)) if o.type_name() == "*semver.Version" => {
                    Version::parse(&o.go_string()).map_err(FuncError::msg)
                }
                Some(Value::String(s)) => Version::parse(s).map_err(FuncError::msg),
                _ => Err(FuncError::msg(format!(
                    "wrong type for value; expected *semver.Version; got {}",
                    args.first().map(Value::type_name).unwrap_or_default()
                ))),
            }
        };
        Some(match method {
            "Compare" => other().map(|o| {
                Value::Int(match self.compare(&o) {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                })
            }),
            "LessThan" => other().map(|o| (self.compare(&o) == Ordering::Less).into()),
            "LessThanEqual" => other().map(|o| (self.compare(&o) != Ordering::Greater).into()),
            "GreaterThan" => other().map(|o| (self.compare(&o) == Ordering::Greater).into()),
            "GreaterThanEqual" => other().map(|o| (self.compare(&o) != Ordering::Less).into()),
            "Equal" => other().map(|o| (self.compare(&o) == Ordering::Equal).into()),
            _ => return None,
        })
    }
    fn go_string(&self) -> String {
        self.render()
    }
    fn to_data(&self) -> Value {
        Value::str(self.render())
    }
}

impl Version {
    fn with_original(mut self) -> Self {
        self.original = self.render();
        self
    }
}

#[derive(Debug)]
struct Constraint {
    op: String,
    con: Version,
    minor_dirty: bool,
    patch_dirty: bool,
    dirty: bool,
}

/// semver v3.5's bounds on a constraint: its length and its `||` groups.
const MAX_CONSTRAINT_LEN: usize = 512;
const MAX_CONSTRAINT_GROUPS: usize = 32;

/// Helm's `IsCompatibleRange`: whether `version` satisfies `constraint`; a constraint or version
/// that does not parse (the empty constraint among them) is not compatible.
pub fn is_compatible_range(constraint: &str, version: &str) -> bool {
    match (Constraints::parse(constraint), Version::parse(version)) {
        (Ok(c), Ok(v)) => c.check(&v),
        _ => false,
    }
}

/// A parsed constraint (`semver.NewConstraint`).
pub struct Constraints {
    groups: Vec<(Vec<Constraint>, bool)>,
}

fn is_x(s: &str) -> bool {
    matches!(s, "x" | "*" | "X")
}

impl Constraints {
    pub fn parse(c: &str) -> Result<Constraints, String> {
        if c.len() > MAX_CONSTRAINT_LEN {
            return Err(format!("constraint string is too long (max {MAX_CONSTRAINT_LEN} bytes)"));
        }
        let c = rewrite_range(c);
        if c.split("||").count() > MAX_CONSTRAINT_GROUPS {
            return Err(format!("too many constraint groups (max {MAX_CONSTRAINT_GROUPS})"));
        }
        let mut groups = Vec::new();
        for part in c.split("||") {
            if !VALID.is_match(part) {
                return Err(format!("improper constraint: {}", super::gofmt::quote(part)));
            }
            let found: Vec<String> = FIND.find_iter(part).map(|m| m.as_str().to_string()).collect();
            let found = if found.is_empty() { vec![part.to_string()] } else { found };
            let mut list = Vec::new();
            let mut has_pre = false;
            for f in found {
                let pc = parse_constraint(&f)?;
                if !pc.con.pre.is_empty() {
                    has_pre = true;
                }
                list.push(pc);
            }
            groups.push((list, has_pre));
        }
        Ok(Constraints { groups })
    }

    pub fn check(&self, v: &Version) -> bool {
        self.groups.iter().any(|(list, pre)| list.iter().all(|c| c.check(v, *pre)))
    }
}

fn rewrite_range(i: &str) -> String {
    let mut out = i.to_string();
    for caps in RANGE.captures_iter(i) {
        let (Some(whole), Some(a), Some(b)) = (caps.get(0), caps.get(1), caps.get(11)) else { continue };
        out = out.replacen(whole.as_str(), &format!(">= {}, <= {} ", a.as_str(), b.as_str()), 1);
    }
    out
}

fn parse_constraint(c: &str) -> Result<Constraint, String> {
    if c.is_empty() {
        return Ok(Constraint {
            op: String::new(),
            con: Version::parse("0.0.0")?,
            minor_dirty: false,
            patch_dirty: false,
            dirty: true,
        });
    }
    let m = CONSTRAINT.captures(c).ok_or_else(|| format!("improper constraint: {}", super::gofmt::quote(c)))?;
    let g = |i: usize| m.get(i).map(|x| x.as_str()).unwrap_or("");
    let (major, minor, patch, pre) = (g(3), g(4), g(5), g(6));
    let (mut minor_dirty, mut patch_dirty, mut dirty) = (false, false, false);
    let ver = if is_x(major) || major.is_empty() {
        dirty = true;
        format!("0.0.0{pre}")
    } else if is_x(minor.trim_start_matches('.')) || minor.is_empty() {
        minor_dirty = true;
        dirty = true;
        format!("{major}.0.0{pre}")
    } else if is_x(patch.trim_start_matches('.')) || patch.is_empty() {
        dirty = true;
        patch_dirty = true;
        format!("{major}{minor}.0{pre}")
    } else {
        g(2).to_string()
    };
    let con = Version::parse(&ver).map_err(|_| "constraint parser error".to_string())?;
    Ok(Constraint { op: g(1).to_string(), con, minor_dirty, patch_dirty, dirty })
}

impl Constraint {
    fn check(&self, v: &Version, include_pre: bool) -> bool {
        if !v.pre.is_empty() && !include_pre {
            return false;
        }
        let c = &self.con;
        let cmp = v.compare(c);
        match self.op.as_str() {
            "" | "=" => {
                if self.dirty {
                    self.tilde(v)
                } else {
                    cmp == Ordering::Equal
                }
            }
            "!=" => {
                if self.dirty {
                    if c.major != v.major {
                        return true;
                    }
                    if c.minor != v.minor && !self.minor_dirty {
                        return true;
                    } else if self.minor_dirty {
                        return false;
                    } else if c.patch != v.patch && !self.patch_dirty {
                        return true;
                    } else if self.patch_dirty {
                        if !v.pre.is_empty() || !c.pre.is_empty() {
                            return compare_prerelease(&v.pre, &c.pre) != Ordering::Equal;
                        }
                        return false;
                    }
                }
                cmp != Ordering::Equal
            }
            ">" => {
                if !self.dirty {
                    return cmp == Ordering::Greater;
                }
                if v.major > c.major {
                    true
                } else if v.major < c.major || self.minor_dirty {
                    false
                } else if self.patch_dirty {
                    v.minor > c.minor
                } else {
                    cmp == Ordering::Greater
                }
            }
            "<" => cmp == Ordering::Less,
            ">=" | "=>" => cmp != Ordering::Less,
            "<=" | "=<" => {
                if !self.dirty {
                    return cmp != Ordering::Greater;
                }
                !(v.major > c.major || (v.major == c.major && v.minor > c.minor && !self.minor_dirty))
            }
            "~" | "~>" => self.tilde(v),
            "^" => {
                if cmp == Ordering::Less {
                    return false;
                }
                if c.major > 0 || self.minor_dirty {
                    return v.major == c.major;
                }
                if v.major > 0 {
                    return false;
                }
                if c.minor > 0 || self.patch_dirty {
                    return v.minor == c.minor;
                }
                if v.minor > 0 {
                    return false;
                }
                c.patch == v.patch
            }
            _ => false,
        }
    }

    fn tilde(&self, v: &Version) -> bool {
        let c = &self.con;
        if v.compare(c) == Ordering::Less {
            return false;
        }
        if c.major == 0 && c.minor == 0 && c.patch == 0 && !self.minor_dirty && !self.patch_dirty {
            return true;
        }
        if v.major != c.major {
            return false;
        }
        if v.minor != c.minor && !self.minor_dirty {
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use super::*;

    fn check(c: &str, v: &str) -> bool {
        Constraints::parse(c).expect("constraint").check(&Version::parse(v).expect("version"))
    }

    #[test]
    fn constraints_as_masterminds() {
        assert!(check(">=1.21.0-0", "v1.30.10"));
        assert!(check(">=1.21.0-0", "1.21.0-rc.1"));
        assert!(!check(">=1.21.0", "1.22.0-rc.1"));
        assert!(check(">= 1.19-0 < 1.30-0", "1.29.3"));
        assert!(!check(">= 1.19-0 < 1.30-0", "1.30.0"));
        assert!(check("^1.2.3", "1.9.0"));
        assert!(!check("^1.2.3", "2.0.0"));
        assert!(check("^0.2.3", "0.2.9"));
        assert!(!check("^0.2.3", "0.3.0"));
        assert!(check("~1.2.3", "1.2.9"));
        assert!(!check("~1.2.3", "1.3.0"));
        assert!(check("1.2.x", "1.2.7"));
        assert!(check("*", "3.0.0"));
        assert!(check("<1.0.0 || >=2.0.0", "2.1.0"));
        assert!(check(">1.0, <2.0", "1.5.0"));
        assert!(check("1.2 - 1.4.5", "1.4.5"));
        assert!(!check("1.2 - 1.4.5", "1.4.6"));
        assert!(check("!=1.2.3", "1.2.4"));
        assert!(check(">1.2", "1.3.0"));
        assert!(!check(">1.2", "1.2.5"));
        assert!(check("<=1.2", "1.2.9"));
        assert!(check(">=1.16.0-0", "v1.28.0+k3s1"));
    }

    #[test]
    fn semver_functions() {
        assert_eq!(callv("semverCompare", &[st(">=1.21-0"), st("1.30.10")]), "true");
        assert_eq!(callv("semverCompare", &[st("foo"), st("1.30.10")]), "ERR improper constraint: \"foo\"");
        assert_eq!(callv("semverCompare", &[st(">1"), st("x.y")]), "ERR invalid semantic version");
        let v = call("semver", &[st("v1.2.3-beta.1+meta")]).expect("semver");
        let Value::Object(o) = &v else { panic!("not an object") };
        assert_eq!(super::super::format_value(&o.field("Major").expect("major")), "1");
        assert_eq!(super::super::format_value(&o.field("Prerelease").expect("pre")), "beta.1");
        assert_eq!(o.go_string(), "1.2.3-beta.1+meta");
        assert_eq!(v.type_name(), "*semver.Version");
        let w = call("semver", &[st("1.3.0")]).expect("semver");
        assert_eq!(super::super::format_value(&o.call("Compare", &[w]).expect("m").expect("ok")), "-1");
        assert!(Version::parse("1.2.3-01").is_err());
        // Go's `\s` is ASCII white space without `\v`: a no-break space or a vertical tab between
        // the operator and the version is no white space to Masterminds/semver.
        for odd in ["\u{a0}", "\u{2003}", "\u{b}"] {
            let constraint = format!(">={odd}1.0");
            let r = callv("semverCompare", &[st(&constraint), st("1.2.0")]);
            assert!(r.starts_with("ERR improper constraint"), "{constraint:?}: {r}");
        }
        assert_eq!(callv("semverCompare", &[st(">=\t1.0 \r\n"), st("1.2.0")]), "true");
        assert_eq!(Version::parse("01.2").expect("coerced").go_string(), "1.2.0");
    }
}
