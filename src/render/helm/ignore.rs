//! `.helmignore` rules and the glob matching Helm uses for them and for
//! `.Files.Glob`.

/// One rule of a `.helmignore` file.
#[derive(Debug, Clone)]
struct Rule {
    pattern: String,
    negate: bool,
    must_dir: bool,
    /// Matched against the whole relative path (the rule has a `/`), or else
    /// against the base name.
    full_path: bool,
}

/// The rules of a `.helmignore`, plus Helm's default (`templates/.?*`).
#[derive(Debug, Clone)]
pub struct IgnoreRules {
    rules: Vec<Rule>,
}

impl Default for IgnoreRules {
    fn default() -> Self {
        Self { rules: vec![Rule { pattern: "templates/.?*".into(), negate: false, must_dir: false, full_path: true }] }
    }
}

impl IgnoreRules {
    /// Parses a `.helmignore` file (its rules come after the default one).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = IgnoreRules::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.contains("**") {
                return Err(format!("line {}: double-star (**) syntax is not supported", i + 1));
            }
            let (negate, rest) = match line.strip_prefix('!') {
                Some(r) => (true, r),
                None => (false, line),
            };
            let must_dir = rest.ends_with('/') && rest.len() > 1;
            let rest = rest.trim_end_matches('/');
            let rest = rest.strip_prefix('/').unwrap_or(rest);
            if rest.is_empty() {
                continue;
            }
            // Validate the pattern as Go's filepath.Match would.
            if glob_match(rest, "", false).is_err() {
                return Err(format!("line {}: bad pattern {rest:?}", i + 1));
            }
            rules.rules.push(Rule { pattern: rest.into(), negate, must_dir, full_path: rest.contains('/') });
        }
        Ok(rules)
    }

    /// Whether `path` (relative to the chart, `/`-separated) is ignored.
    /// Helm's semantics, including its peculiar negation.
    pub fn ignored(&self, path: &str, is_dir: bool) -> bool {
        if path.is_empty() || path == "." {
            return false;
        }
        let base = path.rsplit('/').next().unwrap_or(path);
        for rule in &self.rules {
            let subject = if rule.full_path { path } else { base };
            let matched = glob_match(&rule.pattern, subject, false).unwrap_or(false);
            if rule.negate {
                if rule.must_dir && !is_dir {
                    return true;
                }
                if !matched {
                    return true;
                }
                continue;
            }
            if rule.must_dir && !is_dir {
                continue;
            }
            if matched {
                return true;
            }
        }
        false
    }
}

/// Go's `filepath.Match` (`*` and `?` stop at `/`), or with `double_star`
/// the globbing of `.Files.Glob` where `**` crosses directories.
/// An invalid pattern (unclosed `[`) is an error.
pub fn glob_match(pattern: &str, name: &str, double_star: bool) -> Result<bool, String> {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    check_classes(&p)?;
    Ok(match_from(&p, &n, double_star))
}

fn check_classes(p: &[char]) -> Result<(), String> {
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '\\' => i += 2,
            '[' => {
                let close = p[i + 1..].iter().position(|c| *c == ']');
                match close {
                    Some(c) => i += c + 2,
                    None => return Err("syntax error in pattern".into()),
                }
            }
            _ => i += 1,
        }
    }
    Ok(())
}

fn match_from(p: &[char], n: &[char], double_star: bool) -> bool {
    if p.is_empty() {
        return n.is_empty();
    }
    match p[0] {
        '*' => {
            let crosses = double_star && p.get(1) == Some(&'*');
            let rest = if crosses { &p[2..] } else { &p[1..] };
            // `**/` also matches no directory at all.
            if crosses && rest.first() == Some(&'/') && match_from(&rest[1..], n, double_star) {
                return true;
            }
            for i in 0..=n.len() {
                if match_from(rest, &n[i..], double_star) {
                    return true;
                }
                if i < n.len() && n[i] == '/' && !crosses {
                    return false;
                }
            }
            false
        }
        '?' => !n.is_empty() && n[0] != '/' && match_from(&p[1..], &n[1..], double_star),
        '[' => {
            let Some(close) = p[1..].iter().position(|c| *c == ']').map(|c| c + 1) else { return false };
            if n.is_empty() || n[0] == '/' {
                return false;
            }
            let class = &p[1..close];
            let (negated, class) = match class.first() {
                Some('^') | Some('!') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut j = 0;
            while j < class.len() {
                if j + 2 < class.len() && class[j + 1] == '-' {
                    if class[j] <= n[0] && n[0] <= class[j + 2] {
                        hit = true;
                    }
                    j += 3;
                } else {
                    if class[j] == n[0] {
                        hit = true;
                    }
                    j += 1;
                }
            }
            hit != negated && match_from(&p[close + 1..], &n[1..], double_star)
        }
        '\\' if p.len() > 1 => !n.is_empty() && n[0] == p[1] && match_from(&p[2..], &n[1..], double_star),
        c => !n.is_empty() && n[0] == c && match_from(&p[1..], &n[1..], double_star),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_filepath_match() {
        assert!(glob_match("*.yaml", "a.yaml", false).unwrap_or(false));
        assert!(!glob_match("*.yaml", "dir/a.yaml", false).unwrap_or(true));
        assert!(glob_match("dir/*.y?ml", "dir/a.yaml", false).unwrap_or(false));
        assert!(glob_match("[a-c]x", "bx", false).unwrap_or(false));
        assert!(!glob_match("[^a-c]x", "bx", false).unwrap_or(true));
        assert!(glob_match("files/**", "files/a/b.txt", true).unwrap_or(false));
        assert!(glob_match("**/*.txt", "a.txt", true).unwrap_or(false));
        assert!(glob_match("[", "x", false).is_err());
    }

    #[test]
    fn helmignore_rules() {
        let rules = IgnoreRules::parse("# comment\n*.bak\nsecret/\ndocs/*.md\n").expect("parses");
        assert!(rules.ignored("a.bak", false));
        assert!(rules.ignored("templates/x.bak", false));
        assert!(rules.ignored("secret", true));
        assert!(!rules.ignored("secret", false));
        assert!(rules.ignored("docs/a.md", false));
        assert!(!rules.ignored("other/a.md", false));
        assert!(!rules.ignored("templates/cm.yaml", false));
        // The default rule: dot files in templates/.
        assert!(rules.ignored("templates/.hidden", false));
        assert!(IgnoreRules::parse("a/**/b").is_err());
    }
}
