//! Tests of `.helmignore` rules and the glob matchers, against what Go and helm do.

use super::*;

#[test]
fn parse_skips_blank_lines_and_comments() {
    let rules = IgnoreRules::parse_only("#ignore\n\n\t#ignore\nfoo\nbar/*\nbaz/bar/foo.txt\n\none/more\n")
        .expect("valid rules");
    assert_eq!(rules.len(), 4);
    let globs: Vec<&str> = rules.patterns.iter().map(|p| p.glob.as_str()).collect();
    assert_eq!(globs, ["foo", "bar/*", "baz/bar/foo.txt", "one/more"]);
}

#[test]
fn parse_rejects_double_star_and_bad_globs_naming_the_line() {
    let err = IgnoreRules::parse_only("ok\nfoo/**/bar\n").expect_err("** is refused");
    assert!(err.contains("line 2") && err.contains("double-star"), "{err}");
    for bad in ["[z-", "[]", "a[", "x\\", "[a-]", "*[", "ab[^"] {
        let err = IgnoreRules::parse_only(bad).expect_err(bad);
        assert!(err.contains("syntax error in pattern"), "{bad}: {err}");
    }
}

#[test]
fn parse_drops_a_bom_and_trims_spaces() {
    let rules = IgnoreRules::parse_only("\u{feff}  *.txt  \n").expect("valid");
    assert!(rules.ignored("a.txt", false));
}

#[test]
fn defaults_ignore_dot_files_in_templates() {
    let mut rules = IgnoreRules::empty();
    rules.add_defaults();
    assert_eq!(rules.len(), 1);
    assert!(rules.ignored("templates/.dotfile", false));
    assert!(!rules.ignored("templates/a.yaml", false));
    assert!(!rules.ignored(".dotfile", false));
    assert!(!rules.ignored("templates/sub/.dotfile", false));
}

/// The table of Helm's own `TestIgnore`, with the fixtures' kinds (directories:
/// `cargo`, `mast`).
#[test]
fn helm_ignore_table() {
    let dirs = ["cargo", "cargo/", "mast/", "."];
    let table: &[(&str, &str, bool)] = &[
        ("helm.txt", "helm.txt", true),
        ("helm.*", "helm.txt", true),
        ("helm.*", "rudder.txt", false),
        ("*.txt", "tiller.txt", true),
        ("*.txt", "cargo/a.txt", true),
        ("cargo/*.txt", "cargo/a.txt", true),
        ("cargo/*.*", "cargo/a.txt", true),
        ("cargo/*.txt", "mast/a.txt", false),
        ("ru[c-e]?er.txt", "rudder.txt", true),
        ("templates/.?*", "templates/.dotfile", true),
        (".*", ".", false),
        (".*", "./", false),
        (".*", ".joonix", true),
        (".*", "helm.txt", false),
        (".*", "", false),
        ("cargo/", "cargo", true),
        ("cargo/", "cargo/", true),
        ("cargo/", "mast/", false),
        ("helm.txt/", "helm.txt", false),
        ("!helm.txt", "helm.txt", false),
        ("!helm.txt", "tiller.txt", true),
        ("!*.txt", "cargo", true),
        ("!cargo/", "mast/", true),
        ("/a.txt", "a.txt", true),
        ("/a.txt", "cargo/a.txt", false),
        ("/cargo/a.txt", "cargo/a.txt", true),
    ];
    for (pattern, name, expect) in table {
        let rules = IgnoreRules::parse_only(pattern).expect(pattern);
        let is_dir = dirs.contains(name);
        assert_eq!(rules.ignored(name, is_dir), *expect, "{name:?} against {pattern:?}");
    }
}

#[test]
fn first_decision_wins_and_negations_fall_through() {
    // A negation first: everything it does not match is ignored right away.
    let rules = IgnoreRules::parse_only("!keep.txt\n*.txt\n").expect("valid");
    assert!(rules.ignored("other.yaml", false));
    assert!(rules.ignored("keep.txt", false), "falls through to *.txt");
    // The usual order: the positive rule decides first.
    let rules = IgnoreRules::parse_only("*.txt\n!keep.txt\n").expect("valid");
    assert!(rules.ignored("keep.txt", false));
    // Helm: a negation ignores every path it does not match.
    assert!(rules.ignored("a.yaml", false));
    // A negated directory rule ignores every file.
    let rules = IgnoreRules::parse_only("!docs/\n").expect("valid");
    assert!(rules.ignored("README.md", false));
    assert!(!rules.ignored("docs", true));
}

#[test]
fn base_name_rules_match_at_any_depth_and_path_rules_do_not() {
    let rules = IgnoreRules::parse_only(".git\n*.swp\nci/*.yaml\n").expect("valid");
    assert!(rules.ignored(".git", true));
    assert!(rules.ignored("charts/sub/.git", true));
    assert!(rules.ignored("templates/x.yaml.swp", false));
    assert!(rules.ignored("ci/values.yaml", false));
    assert!(!rules.ignored("charts/sub/ci/values.yaml", false));
    assert!(!rules.ignored("ci/deep/values.yaml", false));
}

#[test]
fn go_match_semantics() {
    let table: &[(&str, &str, bool)] = &[
        ("abc", "abc", true),
        ("*", "abc", true),
        ("*c", "abc", true),
        ("a*", "a", true),
        ("a*", "abc", true),
        ("a*", "ab/c", false),
        ("a*/b", "abc/b", true),
        ("a*/b", "a/c/b", false),
        ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/f", true),
        ("a*b*c*d*e*/f", "axbxcxdxe/xxx/f", false),
        ("a*b*c*d*e*/f", "axbxcxdxexxx/fff", false),
        ("a*b?c*x", "abxbbxdbxebxczzx", true),
        ("a*b?c*x", "abxbbxdbxebxczzy", false),
        ("ab[c]", "abc", true),
        ("ab[b-d]", "abc", true),
        ("ab[e-g]", "abc", false),
        ("ab[^c]", "abc", false),
        ("ab[^b-d]", "abc", false),
        ("ab[^e-g]", "abc", true),
        ("a\\*b", "a*b", true),
        ("a\\*b", "ab", false),
        ("a?b", "a☺b", true),
        ("a[^a]b", "a☺b", true),
        ("a???b", "a☺b", false),
        ("a[^a][^a][^a]b", "a☺b", false),
        ("[a-ζ]*", "α", true),
        ("*[a-ζ]", "A", false),
        ("a?b", "a/b", false),
        ("a*b", "a/b", false),
        ("[\\]a]", "]", true),
        ("[\\-]", "-", true),
        ("[x\\-]", "x", true),
        ("[x\\-]", "-", true),
        ("[x\\-]", "z", false),
        ("[\\-x]", "x", true),
        ("[\\-x]", "-", true),
        ("[\\-x]", "a", false),
        ("*x", "xxx", true),
    ];
    for (pattern, name, expect) in table {
        assert_eq!(go_match(pattern, name), Ok(*expect), "{pattern:?} on {name:?}");
    }
    let bad: &[(&str, &str)] = &[
        ("[]a]", "]"),
        ("[-]", "-"),
        ("[x-]", "x"),
        ("[x-]", "-"),
        ("[x-]", "z"),
        ("[-x]", "x"),
        ("[-x]", "-"),
        ("[-x]", "a"),
        ("\\", "a"),
        ("[a-b-c]", "a"),
        ("[", "a"),
        ("[^", "a"),
        ("[^bc", "a"),
        ("a[", "a"),
        ("a[", "ab"),
        ("a[", "x"),
        ("a/b[", "x"),
        ("*x[", "a"),
        ("[a-b-c]", "z"),
    ];
    for (pattern, name) in bad {
        assert_eq!(go_match(pattern, name), Err(BadPattern), "{pattern:?} on {name:?}");
    }
}

/// What `helm template` printed for `.Files.Glob` over a chart with `a.txt`,
/// `cfg/{x.yaml,y.yml}` and `files/{b.txt,e.conf,sub/c.txt,sub/deep/d.txt}`.
#[test]
fn files_glob_as_helm_prints_it() {
    let files =
        ["a.txt", "cfg/x.yaml", "cfg/y.yml", "files/b.txt", "files/e.conf", "files/sub/c.txt", "files/sub/deep/d.txt"];
    let table: &[(&str, &[&str])] = &[
        ("**/*.txt", &["files/b.txt", "files/sub/c.txt", "files/sub/deep/d.txt"]),
        ("*.txt", &["a.txt"]),
        ("files/*", &["files/b.txt", "files/e.conf"]),
        ("files/**", &["files/b.txt", "files/e.conf", "files/sub/c.txt", "files/sub/deep/d.txt"]),
        ("files/**.txt", &["files/b.txt", "files/sub/c.txt", "files/sub/deep/d.txt"]),
        ("**.txt", &["a.txt", "files/b.txt", "files/sub/c.txt", "files/sub/deep/d.txt"]),
        ("cfg/*.{yaml,yml}", &["cfg/x.yaml", "cfg/y.yml"]),
        ("files/[!b]*", &["files/e.conf"]),
        ("files/[^b]*", &["files/b.txt"]),
        ("files/?.txt", &["files/b.txt"]),
        ("**", &files),
        ("files/**/*.txt", &["files/sub/c.txt", "files/sub/deep/d.txt"]),
        ("files/{b,e}.*", &["files/b.txt", "files/e.conf"]),
        ("*", &["a.txt"]),
        ("[a-c].txt", &["a.txt"]),
        ("files/*/*.txt", &["files/sub/c.txt"]),
        ("files/{sub/{c,x},b}.txt", &["files/b.txt", "files/sub/c.txt"]),
        ("files/[", &[]),
        ("files/{b", &[]),
    ];
    for (pattern, expect) in table {
        let got: Vec<&str> = files.iter().copied().filter(|f| glob_match(pattern, f, true) == Ok(true)).collect();
        assert_eq!(&got, expect, "{pattern:?}");
    }
}

#[test]
fn parse_puts_the_default_rule_after_the_charts_rules() {
    let rules = IgnoreRules::parse("!templates/.keep\n").expect("valid");
    assert_eq!(rules.len(), 2);
    // Every decision Helm's evaluation takes is "ignored", so the order never changes
    // the outcome: a negation cannot rescue a dot file from the default rule.
    assert!(rules.ignored("templates/.keep", false));
    assert!(IgnoreRules::default().ignored("templates/.x", false));
    assert!(!IgnoreRules::empty().ignored("templates/.x", false));
    assert_eq!(glob_match("[z-", "x", false), Err("syntax error in pattern".into()));
}
