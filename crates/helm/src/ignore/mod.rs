//! `.helmignore`: which files of a chart directory Helm leaves out.
//!
//! The rules follow Helm's `pkg/ignore` exactly, quirks included:
//!
//! - one pattern a line; blank lines and lines starting with `#` are skipped; leading and
//!   trailing white space is trimmed (there is no escape for it); a UTF-8 BOM on the first
//!   line is dropped; there are no inline comments;
//! - the glob language is Go's `path/filepath.Match` (`*`, `?`, `[...]`, `[^...]`, ranges,
//!   `\` escapes); a pattern Go would reject, or one containing `**`, is an error;
//! - `!pat` negates, `pat/` only matches directories, `/pat` is anchored at the chart root,
//!   a pattern with a `/` is matched against the whole relative path and one without against
//!   the base name only;
//! - rules are evaluated in order and the first decision wins. A negated rule decides
//!   "ignored" for every path it does *not* match (and for every file when it is a directory
//!   rule) and lets a matching path fall through to the next rule, as Helm's evaluation does;
//! - `""`, `.` and `./` are never ignored; Helm adds `templates/.?*` (dot files under
//!   `templates/`) after the chart's own rules: [`IgnoreRules::parse`] and
//!   [`IgnoreRules::default`] include it, [`IgnoreRules::empty`] does not.
//!
//! Helm applies the top chart's `.helmignore` to the whole directory tree it loads,
//! `charts/<dir>/` subcharts included (their own `.helmignore` files are not read), and does
//! not apply it to charts loaded from an archive. A directory that is ignored is skipped
//! with all its contents.

/// A parsed `.helmignore`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRules {
    patterns: Vec<Pattern>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    /// The glob without its `!`, trailing `/` and leading `/`.
    glob: String,
    negate: bool,
    must_dir: bool,
    kind: MatchKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MatchKind {
    /// `/pat`: the whole relative path.
    Rooted,
    /// `a/pat`: the whole relative path.
    Path,
    /// `pat`: the base name only.
    Base,
}

/// What Helm applies to a chart directory without a `.helmignore`: the default rule only.
impl Default for IgnoreRules {
    fn default() -> Self {
        let mut rules = Self::empty();
        rules.add_defaults();
        rules
    }
}

impl IgnoreRules {
    /// No rules: nothing is ignored.
    pub fn empty() -> Self {
        Self { patterns: Vec::new() }
    }

    /// Parses the text of a `.helmignore` and adds Helm's default rule after its rules, as
    /// Helm's directory loader does. The error names the line and the pattern.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Self::parse_only(text)?;
        rules.add_defaults();
        Ok(rules)
    }

    /// Parses the text of a `.helmignore` without adding the default rule.
    pub fn parse_only(text: &str) -> Result<Self, String> {
        let mut rules = Self::empty();
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        for (index, line) in text.lines().enumerate() {
            rules.add_rule(line).map_err(|e| format!("line {}: {e}", index + 1))?;
        }
        Ok(rules)
    }

    /// Adds Helm's default rule: dot files under `templates/` are ignored.
    pub fn add_defaults(&mut self) {
        // A constant, valid pattern.
        let _ = self.add_rule("templates/.?*");
    }

    /// The number of rules (blank lines and comments excluded).
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    fn add_rule(&mut self, line: &str) -> Result<(), String> {
        let rule = line.trim();
        if rule.is_empty() || rule.starts_with('#') {
            return Ok(());
        }
        if rule.contains("**") {
            return Err(format!("{rule:?}: double-star (**) syntax is not supported"));
        }
        // Go checks the raw rule (with its `!` and slashes) by matching it against "abc".
        if go_match(rule, "abc").is_err() {
            return Err(format!("{rule:?}: syntax error in pattern"));
        }
        let mut glob = rule;
        let negate = match glob.strip_prefix('!') {
            Some(rest) => {
                glob = rest;
                true
            }
            None => false,
        };
        let must_dir = match glob.strip_suffix('/') {
            Some(rest) => {
                glob = rest;
                true
            }
            None => false,
        };
        let kind = if let Some(rest) = glob.strip_prefix('/') {
            glob = rest;
            MatchKind::Rooted
        } else if glob.contains('/') {
            MatchKind::Path
        } else {
            MatchKind::Base
        };
        self.patterns.push(Pattern { glob: glob.to_string(), negate, must_dir, kind });
        Ok(())
    }

    /// Whether `path` (relative to the chart root, `/`-separated, without a leading `./`)
    /// is ignored. `is_dir` tells whether it is a directory.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." || path == "./" {
            return false;
        }
        for p in &self.patterns {
            if p.negate {
                if p.must_dir && !is_dir {
                    return true;
                }
                if !p.matches(path) {
                    return true;
                }
                continue;
            }
            if p.must_dir && !is_dir {
                continue;
            }
            if p.matches(path) {
                return true;
            }
        }
        false
    }
}

impl Pattern {
    fn matches(&self, path: &str) -> bool {
        let subject = match self.kind {
            MatchKind::Rooted | MatchKind::Path => path,
            MatchKind::Base => go_base(path),
        };
        go_match(&self.glob, subject).unwrap_or(false)
    }
}

/// Go's `filepath.Base` for `/`-separated paths.
fn go_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    match trimmed.rfind('/') {
        Some(i) => &trimmed[i + 1..],
        None => trimmed,
    }
}

/// A malformed pattern, as Go's `filepath.ErrBadPattern`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadPattern;

/// Go's `path/filepath.Match` on a Unix system: `*` matches any run of non-`/` characters,
/// `?` one non-`/` character, `[...]` a character class (`^` negates, `a-z` ranges, `\`
/// escapes), `\c` the character `c`. The whole pattern must be well formed, even where the
/// match fails early (as Go checks since 1.16).
pub fn go_match(pattern: &str, name: &str) -> Result<bool, BadPattern> {
    let mut pattern = pattern;
    let mut name = name;
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing star matches the rest unless it holds a separator.
            return Ok(!name.contains('/'));
        }
        let here = match_chunk(chunk, name);
        if let Ok(Some(t)) = here
            && (t.is_empty() || !pattern.is_empty())
        {
            name = t;
            continue;
        }
        here?;
        if star {
            // Try skipping 1, 2, ... characters of `name`, never a separator.
            for (i, c) in name.char_indices() {
                if c == '/' {
                    break;
                }
                let next = i + c.len_utf8();
                if let Some(t) = match_chunk(chunk, &name[next..])? {
                    if pattern.is_empty() && !t.is_empty() {
                        continue;
                    }
                    name = t;
                    continue 'pattern;
                }
            }
        }
        // No match: the rest of the pattern must still be well formed.
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, "")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// Splits off the leading stars and the chunk up to the next star outside a class.
fn scan_chunk(pattern: &str) -> (bool, &str, &str) {
    let trimmed = pattern.trim_start_matches('*');
    let star = trimmed.len() != pattern.len();
    let bytes = trimmed.as_bytes();
    let mut in_range = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if i + 1 < bytes.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    // The scan stops only at an ASCII `*` or at the end: a character boundary.
    let split = i.min(trimmed.len());
    (star, &trimmed[..split], &trimmed[split..])
}

/// Matches `chunk` (no stars) at the start of `s`: `Some(rest)` on a match. A malformed
/// chunk is an error even when the match already failed.
fn match_chunk<'a>(chunk: &str, s: &'a str) -> Result<Option<&'a str>, BadPattern> {
    let mut chunk = chunk;
    let mut s = s;
    let mut failed = false;
    while let Some(c) = chunk.chars().next() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match c {
            '[' => {
                let mut r = '\0';
                if !failed {
                    // `s` is not empty here.
                    if let Some(first) = s.chars().next() {
                        r = first;
                        s = &s[first.len_utf8()..];
                    }
                }
                chunk = &chunk[1..];
                let negated = match chunk.strip_prefix('^') {
                    Some(rest) => {
                        chunk = rest;
                        true
                    }
                    None => false,
                };
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if ranges > 0 && chunk.starts_with(']') {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = get_esc(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if let Some(rest) = chunk.strip_prefix('-') {
                        let (h, rest) = get_esc(rest)?;
                        hi = h;
                        chunk = rest;
                    }
                    if lo <= r && r <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            '?' => {
                if !failed && let Some(first) = s.chars().next() {
                    if first == '/' {
                        failed = true;
                    }
                    s = &s[first.len_utf8()..];
                }
                chunk = &chunk[1..];
            }
            _ => {
                let mut literal = c;
                if c == '\\' {
                    chunk = &chunk[1..];
                    literal = chunk.chars().next().ok_or(BadPattern)?;
                }
                // Go compares bytes here; comparing the character and stepping over it
                // is the same for valid UTF-8.
                if !failed {
                    match s.strip_prefix(literal) {
                        Some(rest) => s = rest,
                        None => {
                            failed = true;
                        }
                    }
                }
                chunk = &chunk[literal.len_utf8()..];
            }
        }
    }
    if failed { Ok(None) } else { Ok(Some(s)) }
}

/// A possibly escaped character of a class; the class must go on after it.
fn get_esc(chunk: &str) -> Result<(char, &str), BadPattern> {
    let mut chunk = chunk;
    match chunk.chars().next() {
        None | Some('-') | Some(']') => return Err(BadPattern),
        Some('\\') => {
            chunk = &chunk[1..];
            if chunk.is_empty() {
                return Err(BadPattern);
            }
        }
        Some(_) => {}
    }
    let c = chunk.chars().next().ok_or(BadPattern)?;
    let rest = &chunk[c.len_utf8()..];
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((c, rest))
}

/// The glob of a `.helmignore` rule (`double_star == false`: Go's `filepath.Match`, an
/// invalid pattern is an error) or of `.Files.Glob` (`double_star == true`: the
/// `github.com/gobwas/glob` language with `/` as separator, which Helm compiles: `*` and `?`
/// stop at `/`, `**` crosses it, `[abc]`, `[a-z]`, `[!abc]` (`^` is an ordinary character
/// there), `{a,b}` alternatives, `\` escapes). Helm's `Files.Glob` returns no files for a
/// pattern gobwas cannot compile, so such a pattern matches nothing here.
pub fn glob_match(pattern: &str, name: &str, double_star: bool) -> Result<bool, String> {
    if double_star {
        Ok(files_glob_match(pattern, name))
    } else {
        go_match(pattern, name).map_err(|_| "syntax error in pattern".to_string())
    }
}

/// One element of a gobwas glob.
#[derive(Debug, Clone, PartialEq)]
enum GlobNode {
    Char(char),
    /// `*`: any run without `/`.
    Any,
    /// `**`: any run.
    Super,
    /// `?`: one character but `/`.
    Single,
    /// `[...]`: characters and ranges, `[!...]` negated.
    Class {
        negated: bool,
        items: Vec<(char, char)>,
    },
    /// `{a,b}`: alternatives.
    Alt(Vec<Vec<GlobNode>>),
}

/// At most this many nodes in a `.Files.Glob` pattern, and this much matching work.
const GLOB_MAX_NODES: usize = 1024;
const GLOB_MAX_STEPS: usize = 1_000_000;

/// `.Files.Glob` matching (see [`glob_match`]); false for a pattern gobwas rejects.
pub fn files_glob_match(pattern: &str, name: &str) -> bool {
    let chars: Vec<char> = pattern.chars().collect();
    let mut pos = 0;
    let mut count = 0;
    let Some(nodes) = parse_glob(&chars, &mut pos, false, &mut count) else {
        return false;
    };
    if pos != chars.len() {
        return false;
    }
    let name: Vec<char> = name.chars().collect();
    let mut steps = 0;
    glob_here(&nodes, &[], &name, &mut steps)
}

/// Parses up to the end, or in an alternative up to its `,` or `}` (left unconsumed).
fn parse_glob(p: &[char], pos: &mut usize, in_alt: bool, count: &mut usize) -> Option<Vec<GlobNode>> {
    let mut nodes = Vec::new();
    while *pos < p.len() {
        *count += 1;
        if *count > GLOB_MAX_NODES {
            return None;
        }
        let c = p[*pos];
        match c {
            ',' | '}' if in_alt => return Some(nodes),
            '*' => {
                if p.get(*pos + 1) == Some(&'*') {
                    *pos += 2;
                    nodes.push(GlobNode::Super);
                } else {
                    *pos += 1;
                    nodes.push(GlobNode::Any);
                }
            }
            '?' => {
                *pos += 1;
                nodes.push(GlobNode::Single);
            }
            '\\' => {
                let escaped = *p.get(*pos + 1)?;
                *pos += 2;
                nodes.push(GlobNode::Char(escaped));
            }
            '[' => {
                *pos += 1;
                let negated = p.get(*pos) == Some(&'!');
                if negated {
                    *pos += 1;
                }
                let mut items = Vec::new();
                loop {
                    let lo = *p.get(*pos)?;
                    if lo == ']' {
                        *pos += 1;
                        break;
                    }
                    let lo = if lo == '\\' {
                        *pos += 1;
                        *p.get(*pos)?
                    } else {
                        lo
                    };
                    *pos += 1;
                    if p.get(*pos) == Some(&'-') && p.get(*pos + 1).is_some_and(|c| *c != ']') {
                        let hi = p[*pos + 1];
                        *pos += 2;
                        if hi < lo {
                            return None;
                        }
                        items.push((lo, hi));
                    } else {
                        items.push((lo, lo));
                    }
                }
                if items.is_empty() {
                    return None;
                }
                nodes.push(GlobNode::Class { negated, items });
            }
            '{' => {
                *pos += 1;
                let mut branches = Vec::new();
                loop {
                    branches.push(parse_glob(p, pos, true, count)?);
                    match p.get(*pos) {
                        Some(',') => *pos += 1,
                        Some('}') => {
                            *pos += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
                nodes.push(GlobNode::Alt(branches));
            }
            other => {
                *pos += 1;
                nodes.push(GlobNode::Char(other));
            }
        }
    }
    if in_alt { None } else { Some(nodes) }
}

/// Matches `nodes` followed by the continuation `then` (stack of sequences still to match,
/// innermost last) against the whole of `name`.
fn glob_here(nodes: &[GlobNode], then: &[&[GlobNode]], name: &[char], steps: &mut usize) -> bool {
    *steps += 1;
    if *steps > GLOB_MAX_STEPS {
        return false;
    }
    let Some((first, rest)) = nodes.split_first() else {
        return match then.split_last() {
            Some((next, outer)) => glob_here(next, outer, name, steps),
            None => name.is_empty(),
        };
    };
    match first {
        GlobNode::Char(c) => name.first() == Some(c) && glob_here(rest, then, &name[1..], steps),
        GlobNode::Single => name.first().is_some_and(|c| *c != '/') && glob_here(rest, then, &name[1..], steps),
        GlobNode::Class { negated, items } => match name.first() {
            Some(c) => {
                let hit = items.iter().any(|(lo, hi)| lo <= c && c <= hi);
                hit != *negated && glob_here(rest, then, &name[1..], steps)
            }
            None => false,
        },
        GlobNode::Any | GlobNode::Super => {
            let crosses = *first == GlobNode::Super;
            for skip in 0..=name.len() {
                if glob_here(rest, then, &name[skip..], steps) {
                    return true;
                }
                if skip < name.len() && name[skip] == '/' && !crosses {
                    return false;
                }
            }
            false
        }
        GlobNode::Alt(branches) => {
            let mut stack: Vec<&[GlobNode]> = then.to_vec();
            stack.push(rest);
            branches.iter().any(|branch| glob_here(branch, &stack, name, steps))
        }
    }
}

#[cfg(test)]
mod tests;
