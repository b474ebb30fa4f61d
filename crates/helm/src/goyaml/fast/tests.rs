//! The fast reader against the general one: whatever the fast reader reads, the general reader
//! reads to the same value (it may give up on anything, never answer differently).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::head::only_head;
use super::super::read::general_json;
use super::{read_head, read_json};

/// Checks one document, whole and by its head; `true` when the fast reader read it.
fn agrees(doc: &str) -> bool {
    let head = read_head(doc);
    match read_json(doc) {
        Some(fast) => {
            let general = general_json(doc);
            assert_eq!(general, Ok(fast), "the fast reader differs on {doc:?}");
            assert_eq!(head.map(Ok), Some(general.map(only_head)), "the fast head differs on {doc:?}");
            true
        }
        None => {
            assert_eq!(head, None, "the fast reader reads the head of {doc:?} but not the whole");
            false
        }
    }
}

/// Documents the fast reader must read itself (it would be no use otherwise), each checked.
#[test]
fn manifests_are_read_fast_and_alike() {
    let docs = [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  labels:\n    a: b\ndata:\n  k: v\n",
        "a: 1\nb: 0755\nc: on\nd: ~\ne: 1.5\nf: 1e3\ng: -1\nh: 2001-12-14\ni: 0x1F\nj: 1_000\nk: 190:20:30\nl: .5\n",
        "a: http://x:80/y\nb: a#b\nc: a # comment\nd: a,b[c]{d}\ne: -x\nf: ?x\ng: :x\nh: x-\n",
        "a: \"q \\\" \\\\ \\n \\t \\u00e9 \\x41 \\U0001F600 \\/ \\0\"\nb: 'it''s'\nc: ''\nd: \"\"\n\"e f\": 1\n'g': 2\n",
        "list:\n- a\n- b: 1\n  c: 2\n-\n  d: 3\n-\n- []\n- {}\nnext: x\n",
        "list:\n  - a\n  -   b: 1\n      c: 2\n  - |\n    text\n  - 'x'\n",
        "a: |\n  line 1\n\n  line 3\n    indented\n  # not a comment\nb: |-\n  stripped\n\n\nc: >\n  folded\n  text\n\n  para\nd: >-\n  x\ne: |\nf: x\n",
        "a: 'multi\n  line\n\n  quoted  '\nb: plain\n  continued\n\n  para\nc: x # c\n# comment\n\n",
        "  indented: root\n  next: 2\n",
        "- a\n- b\n",
        "# only a comment\n",
        "",
        "a: b\na: c\n",
        "a:\n  b:\n    c:\n      d: []\n",
        "annotations:\n    {}\nlabels:\n  x:\n    'y'\n  z:\n    plain\n    more\nlist:\n-\n  [a, b]\n",
        "key with spaces: v\nkey: value with spaces   \n",
        "a: ünïcödé\nb: 'ü'\n\"ö\": x\n",
    ];
    for doc in docs {
        assert!(agrees(doc), "not read fast: {doc:?}");
    }
}

/// What the fast reader leaves to the general one (so errors and rare forms come out as before).
#[test]
fn rare_forms_and_errors_are_left_to_the_general_reader() {
    let docs = [
        "a: &x 1\nb: *x\n",
        "<<: {a: 1}\n",
        "a: !!str 1\n",
        "a: [1, [2]]\n",
        "a: [1,\n  2]\n",
        "a: {b: c}\n",
        "1: x\n",
        "true: x\n",
        "~: x\n",
        "? a\n: b\n",
        "a:\tb\n",
        "a: b\r\n",
        "a: |+\n  x\n\nb: 1\n",
        "a: |2\n    x\n",
        "a: \"multi  \\\n  line\"\n",
        "---\na: 1\n",
        "a: 1\n...\n",
        "%YAML 1.1\n---\na: 1\n",
        "a: b: c\n",
        "a: b\n  c: d\n",
        "a: 'open\n",
        "a: \"x\"y\n",
        "just text\n",
        "a: x # c\n  more\n",
        "a: .inf\n",
        "a: 1\n b: 2\n",
        "a: \"\\N\"\n",
        "a: \"\\ud800\"\n",
        "a: x\u{85}y\n",
        "a: >\n  x\n    more\n",
    ];
    for doc in docs {
        assert!(read_json(doc).is_none(), "read fast, but should not be: {doc:?}");
    }
}

/// Random documents, most of them valid YAML of the kinds manifests use, many of them not:
/// whatever the fast reader reads, it reads as the general reader does.
#[test]
fn fast_agrees_with_the_general_reader_on_random_documents() {
    let seeds: u64 = std::env::var("FAST_YAML_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(4000);
    let (mut fast, mut valid) = (0, 0);
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let doc = if seed % 4 == 0 { line_soup(&mut rng) } else { document(&mut rng) };
        if std::panic::catch_unwind(|| agrees(&doc)).unwrap_or_else(|_| panic!("seed {seed}: {doc:?}")) {
            fast += usize::from(seed % 4 != 0);
        }
        // The soup is there for the errors: the share read fast is that of the documents.
        valid += usize::from(seed % 4 != 0 && general_json(&doc).is_ok());
    }
    eprintln!("{fast} of {valid} valid documents read fast");
    // The generator is meant to exercise the fast reader: most valid documents are read fast.
    assert!(fast * 2 > valid, "only {fast} of {valid} valid documents read fast");
}

const WORDS: &[&str] = &[
    "a",
    "b c",
    "1",
    "0755",
    "true",
    "on",
    "~",
    "null",
    "1.5",
    "1e3",
    "-1",
    "+1",
    "0x1f",
    "0o7",
    "1_0",
    "12:30",
    "2001-12-14",
    "a#b",
    "http://x:1/y",
    "x-y",
    "-x",
    "?x",
    ":x",
    "a,b",
    "[x]y",
    "é",
    "yes",
    "No",
    ".5",
    "1.",
    "0",
    "-0",
    "1e400",
    "9223372036854775808",
    "18446744073709551616",
    "<<",
    "=",
    "a b  c",
    "a:b",
    "a'b",
    "a\"b",
];
const BAD: &[&str] = &[
    "a: b",
    "a:",
    "&x a",
    "*x",
    "!!str 1",
    "!t x",
    "[a, b]",
    "{a: 1}",
    "- x",
    "-",
    "|",
    ">",
    "'x",
    "\"x",
    "x'",
    "@x",
    "`x",
    "%x",
    "#c",
    ".inf",
    ".nan",
    "{",
    "[",
    "a #c",
    "\"a\\qb\"",
];
const KEYS: &[&str] = &[
    "a", "b", "key", "a b", "x-y", "\"q k\"", "'s k'", "\"a\"", "a.b/c", "é", "-k", "k:x", "c", "d", "e", "f", "g  ",
    "'h' ", "i#j",
];
const BAD_KEYS: &[&str] = &["1", "true", "<<", "y", "on", "~", "? a", "&a k", "[k]", "\"k\\qx\""];

fn key(rng: &mut StdRng) -> &'static str {
    if rng.random_bool(0.05) { pick(rng, BAD_KEYS) } else { pick(rng, KEYS) }
}

fn pick<'a>(rng: &mut StdRng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

/// A scalar as text after `key: ` or `- `, in a collection at `indent`: plain, quoted (maybe
/// over lines), a block scalar, an empty flow collection, sometimes something the fast reader
/// leaves alone.
fn scalar(rng: &mut StdRng, indent: usize) -> String {
    let pad = |n: usize| " ".repeat(n);
    match rng.random_range(0..20) {
        0..=4 | 14..=17 => pick(rng, WORDS).to_string(),
        5 => format!("'{}'", pick(rng, WORDS).replace('\'', "''")),
        6 => format!("\"{}\"", pick(rng, &["a", "\\n", "\\t", "\\\"", "\\\\", "\\u00e9", "é", "a b", "", "#x"])),
        7 => {
            let lines: Vec<&str> =
                (0..rng.random_range(1..4)).map(|_| pick(rng, &["one", "two  ", "", "x'' y"])).collect();
            let more = indent + rng.random_range(0..3);
            format!("'{}'", lines.join(&format!("\n{}", pad(more))))
        }
        8 => {
            let more = indent + rng.random_range(0..4);
            let lines: Vec<&str> = (0..rng.random_range(1..4)).map(|_| pick(rng, &["w", "x y", "", "z"])).collect();
            format!(
                "{}{}",
                pick(rng, &["a", "b c"]),
                lines.iter().map(|l| format!("\n{}{l}", pad(more))).collect::<String>()
            )
        }
        9 | 10 => {
            let header = pick(rng, &["|", "|-", ">", ">-", "|+", "|2", "| # c", ">-  "]);
            let body_indent = indent + rng.random_range(0..4);
            let lines: Vec<String> = (0..rng.random_range(0..5))
                .map(|_| {
                    let extra = if rng.random_bool(0.2) { pad(rng.random_range(1..3)) } else { String::new() };
                    let text = pick(rng, &["text", "", "# hash", "a: b", "- x", "   ", "trailing  ", "'q' \"r\""]);
                    if text.is_empty() {
                        pad(rng.random_range(0..body_indent + 2))
                    } else {
                        format!("{}{extra}{text}", pad(body_indent))
                    }
                })
                .collect();
            format!("{header}{}", lines.iter().map(|l| format!("\n{l}")).collect::<String>())
        }
        11 => pick(
            rng,
            &[
                "{}",
                "[]",
                "{} # c",
                "[]   ",
                "[a]",
                "[a, \"b\"]",
                "['c',d ]",
                "[1, on, ~]",
                "[a,]",
                "[a b, c:d]",
                "[a: b]",
                "[[a]]",
                "[a # c]",
            ],
        )
        .to_string(),
        12 => format!("{} # {}", pick(rng, WORDS), pick(rng, WORDS)),
        13 => {
            // Double-quoted over lines, with escapes and escaped breaks.
            let parts: Vec<&str> = (0..rng.random_range(1..4))
                .map(|_| pick(rng, &["one", "two  ", "", "x\\ ", "y \\", "z\\", "\\t"]))
                .collect();
            let more = indent + rng.random_range(0..3);
            format!("\"{}\"", parts.join(&format!("\n{}", pad(more))))
        }
        18 => {
            // A plain scalar going on over lines that start with indicators.
            let more = indent + rng.random_range(1..3);
            let lines: Vec<&str> = (0..rng.random_range(1..3))
                .map(|_| {
                    pick(
                        rng,
                        &["`x` y", "- z", "-", "'q", "\"r", "[s", "&t", "*u", "!v", "%w", ":x", "? y", "{z}", "a,b"],
                    )
                })
                .collect();
            format!(
                "{}{}",
                pick(rng, &["a", "b c"]),
                lines.iter().map(|l| format!("\n{}{l}", pad(more))).collect::<String>()
            )
        }
        _ => pick(rng, BAD).to_string(),
    }
}

/// A random block mapping at `indent` (or a sequence), `depth` levels deep at most.
fn node(rng: &mut StdRng, indent: usize, depth: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    let sequence = rng.random_bool(0.3);
    for _ in 0..rng.random_range(1..5) {
        match rng.random_range(0..12) {
            0 => out.push_str(&format!("{pad}# {}\n", pick(rng, WORDS))),
            1 => out.push_str(&format!("{}\n", " ".repeat(rng.random_range(0..6)))),
            2 if rng.random_bool(0.1) => out.push_str(&" ".repeat(rng.random_range(1..3))),
            _ => {}
        }
        if rng.random_bool(0.05) {
            out.push('\n');
        }
        let lead = if sequence {
            let gap = " ".repeat(rng.random_range(1..3));
            if depth > 0 && rng.random_bool(0.35) {
                // `- key: ...` then the mapping's other keys under the first.
                out.push_str(&format!("{pad}-{gap}"));
                node_inline_map(rng, indent + 1 + gap.len(), depth - 1, out);
                continue;
            }
            format!("{pad}-")
        } else {
            format!("{pad}{}:", key(rng))
        };
        if rng.random_bool(0.08) {
            // The value on a line of its own.
            let more = indent + rng.random_range(0..4);
            out.push_str(&format!("{lead}\n{}{}\n", " ".repeat(more), scalar(rng, indent)));
            continue;
        }
        if depth > 0 && rng.random_bool(0.35) {
            out.push_str(&lead);
            if rng.random_bool(0.2) {
                out.push_str(" # c");
            }
            out.push('\n');
            let child = if !sequence && rng.random_bool(0.3) { indent } else { indent + rng.random_range(1..4) };
            node(rng, child, depth - 1, out);
        } else {
            out.push_str(&format!("{lead} {}\n", scalar(rng, indent)));
        }
    }
}

/// A mapping whose first key follows a `- ` at column `indent`.
fn node_inline_map(rng: &mut StdRng, indent: usize, depth: usize, out: &mut String) {
    let mut sub = String::new();
    node(rng, indent, depth, &mut sub);
    // The first line's indentation is already written by the dash.
    out.push_str(sub.strip_prefix(&" ".repeat(indent)).unwrap_or(&sub));
}

fn document(rng: &mut StdRng) -> String {
    let mut out = String::new();
    if rng.random_bool(0.1) {
        out.push_str("# head\n");
    }
    let indent = rng.random_range(0..2);
    node(rng, indent, 4, &mut out);
    if rng.random_bool(0.3) {
        out.truncate(out.trim_end_matches('\n').len());
    }
    out
}

/// Lines of every kind at random indentation: mostly invalid, which the fast reader must notice.
fn line_soup(rng: &mut StdRng) -> String {
    (0..rng.random_range(1..10))
        .map(|_| {
            let pad = " ".repeat(pick(rng, &["", " ", "  ", "   ", "    ", "      "]).len());
            let line = match rng.random_range(0..7) {
                0 => format!("{}: {}", key(rng), scalar(rng, pad.len())),
                1 => format!("{}:", key(rng)),
                2 => format!("- {}", scalar(rng, pad.len())),
                3 => format!("- {}: {}", key(rng), pick(rng, WORDS)),
                4 => pick(rng, &["-", "# c", "", "---", "...", "more text", "x'"]).to_string(),
                5 => pick(rng, WORDS).to_string(),
                _ => pick(rng, BAD).to_string(),
            };
            format!("{pad}{line}\n")
        })
        .collect()
}

/// Every YAML file of the public corpus (`../shared/helm-corpus`, when present), document by
/// document: the two readers agree, and the fast reader reads the CRDs of kube-prometheus-stack
/// (which the operator reads on every render) itself.
#[test]
fn fast_agrees_with_the_general_reader_on_the_corpus() {
    let root = std::env::var_os("CLUSTERSTACK_HELM_CORPUS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/helm-corpus"));
    if !root.is_dir() {
        assert!(std::env::var("CI").as_deref() != Ok("true"), "the corpus is missing at {}", root.display());
        eprintln!("SKIPPED: no corpus at {}", root.display());
        return;
    }
    let mut files = Vec::new();
    walk(&root, &mut files);
    let (mut fast_bytes, mut all_bytes, mut crd_fast, mut crd_all) = (0, 0, 0, 0);
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        let crd = file.to_string_lossy().contains("kube-prometheus-stack/charts/crds/crds/");
        for doc in crate::manifest_parts(&text) {
            all_bytes += doc.len();
            let read = agrees(doc);
            if read {
                fast_bytes += doc.len();
            }
            if crd {
                crd_all += doc.len();
                crd_fast += if read { doc.len() } else { 0 };
            }
        }
    }
    eprintln!(
        "corpus: {fast_bytes} of {all_bytes} bytes read fast; kube-prometheus-stack's CRDs {crd_fast} of {crd_all}"
    );
    assert!(
        crd_all > 0 && crd_fast == crd_all,
        "kube-prometheus-stack's CRDs: {crd_fast} of {crd_all} bytes read fast"
    );
}

fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}
