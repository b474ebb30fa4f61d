//! Differential tests against the real `helm` (v4): each case is a template
//! expression rendered by helm and by this engine with the same values; the
//! outputs must be equal. The helm binary is found as every differential test
//! finds it (this crate's `tests/support/helm.rs`: `CLUSTERSTACK_HELM`, `.ci/install-helm`'s
//! `target/tools`, a helm v4 on PATH); without one the test says it was
//! skipped, and with `CI=true` a missing helm fails it.

use std::process::Command;

use base64::Engine as _;

use crate::{goyaml, helm_func_map};
use gotmpl::{ExecOptions, Templates, Value, execute_with};

#[path = "../../tests/support/helm.rs"]
mod helm_support;

const VALUES: &str = r#"
str: hello
empty: ""
num: 3
float: 1.5
big: 1000000
yes: yes
list: [b, a, c, a]
nested:
  a: {x: 1, y: [1, 2]}
  b: "two"
ver: v1.30.10
multi: "line1\nline2\n"
"#;

/// (expression, rendered through `toString | b64enc`)
const CASES: &[&str] = &[
    // strings
    r#"nindent 4 "a\nb""#,
    r#"indent 2 "x""#,
    r#"trunc 3 "abcdef""#,
    r#"trunc -2 "abcdef""#,
    r#"abbrev 5 "hello world""#,
    r#"abbrevboth 5 10 "1234 5678 9123""#,
    r#"title "hello wORLD-foo_bar x.y""#,
    r#"untitle "Hello World""#,
    r#"substr 1 3 "hello""#,
    r#"quote .Values.str 1 nil 1.5"#,
    r#"quote .Values.missing"#,
    r#"squote .Values.num"#,
    r#"cat "a" nil 2 .Values.list"#,
    r#"replace "-" "_" "a-b-c""#,
    r#"trimAll "$" "$$5.00$""#,
    r#"wrap 5 "Hello World Foo""#,
    r#"wrapWith 5 "\t" "Hello World""#,
    r#"initials "First Try""#,
    r#"swapcase "This Is""#,
    r#"snakecase "FirstName""#,
    r#"kebabcase "FirstName""#,
    r#"camelcase "http_server""#,
    r#"split "$" "foo$bar$baz""#,
    r#"splitn "$" 2 "foo$bar$baz""#,
    r#"splitList "," "a,b,,c""#,
    r#"join "-" .Values.list"#,
    r#"sortAlpha .Values.list"#,
    r#"toString .Values.big"#,
    r#"toString .Values.float"#,
    r#"toString nil"#,
    r#"toStrings (list 1 true "x")"#,
    r#"repeat 3 "ab""#,
    r#"nospace " a b c ""#,
    r#"plural "one" "many" 2"#,
    // regex
    r#"regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W""#,
    r#"regexReplaceAll "a(x*)b" "-ab-axxb-" "$1W""#,
    r#"regexFindAll "[2,4,6,8]" "123456789" -1"#,
    r#"regexSplit "z+" "pizza" -1"#,
    r#"regexMatch "^v\\d+" .Values.ver"#,
    r#"regexQuoteMeta "1.2.3""#,
    // lists
    r#"first .Values.list"#,
    r#"rest .Values.list"#,
    r#"last .Values.list"#,
    r#"initial .Values.list"#,
    r#"uniq .Values.list"#,
    r#"without .Values.list "a""#,
    r#"has "a" .Values.list"#,
    r#"compact (list "a" "" 0 nil true)"#,
    r#"slice .Values.list 1 3"#,
    r#"concat .Values.list (list 1 2)"#,
    r#"chunk 3 .Values.list"#,
    r#"reverse .Values.list"#,
    r#"append .Values.list "z""#,
    r#"prepend .Values.list "z""#,
    r#"until 3"#,
    r#"untilStep 0 10 3"#,
    r#"seq 5 -1 1"#,
    // dicts
    r#"dict "a" 1 "b""#,
    r#"get .Values.nested "b""#,
    r#"get .Values.nested "zz""#,
    r#"hasKey .Values.nested "a""#,
    r#"pluck "b" .Values.nested (dict "b" 3)"#,
    r#"keys .Values.nested | sortAlpha"#,
    r#"pick .Values.nested "b""#,
    r#"omit .Values.nested "b""#,
    r#"dig "a" "y" "def" .Values.nested"#,
    r#"dig "a" "zz" "def" .Values.nested"#,
    r#"merge (dict "a" 1 "n" (dict "x" 1)) (dict "a" 2 "b" 3 "n" (dict "x" 2 "y" 3))"#,
    r#"mergeOverwrite (dict "a" 1 "k" true "n" (dict "x" 1)) (dict "a" 2 "k" false "n" (dict "x" 2 "y" 3))"#,
    r#"$d := dict "a" 1 }}{{ $_ := set $d "b" 2 }}{{ $_ := unset $d "a" }}{{ $d"#,
    r#"deepCopy .Values.nested"#,
    // defaults
    r#"default "d" .Values.empty"#,
    r#"default "d" .Values.missing"#,
    r#"default "d" 0"#,
    r#"empty .Values.nested"#,
    r#"coalesce nil "" "x""#,
    r#"ternary "y" "n" true"#,
    r#"all 1 "" "#,
    r#"any 0 "x""#,
    // reflection
    r#"typeOf .Values.num"#,
    r#"typeOf .Values.list"#,
    r#"typeOf .Values.nested"#,
    r#"typeOf (int64 1)"#,
    r#"kindOf .Values.str"#,
    r#"kindIs "invalid" .Values.missing"#,
    r#"typeIs "float64" .Values.float"#,
    r#"deepEqual (list 1) (list 1)"#,
    // math & conversions
    r#"add 1 2 .Values.num"#,
    r#"add1 .Values.float"#,
    r#"sub 5 7"#,
    r#"div 7 2"#,
    r#"mod 7 2"#,
    r#"mul 2 3 4"#,
    r#"max 1 9 3"#,
    r#"min 1 -9 3"#,
    r#"addf 0.1 0.2"#,
    r#"mulf 1.1 3"#,
    r#"divf 10 3"#,
    r#"subf 1 0.9"#,
    r#"maxf 1.5 2"#,
    r#"floor 1.7"#,
    r#"ceil "1.2""#,
    r#"round 123.5555 3"#,
    r#"int .Values.float"#,
    r#"int "42""#,
    r#"int64 "0x1F""#,
    r#"float64 "1.25""#,
    r#"atoi "12x""#,
    r#"toDecimal "0777""#,
    r#"len .Values.list | add1"#,
    // encoding
    r#"b64enc "hello""#,
    r#"b64dec "aGVsbG8=""#,
    r#"b32enc "hello""#,
    r#"sha256sum "abc""#,
    r#"sha1sum "abc""#,
    r#"adler32sum "Wikipedia""#,
    r#"toJson .Values.nested"#,
    r#"toJson (dict "a" "<x&y>")"#,
    r#"toRawJson (dict "a" "<x&y>")"#,
    r#"toPrettyJson .Values.nested"#,
    r#"fromJson "{\"a\": [1, \"x\"]}""#,
    r#"fromJsonArray "[1, 2]""#,
    r#"toYaml .Values"#,
    r#"toYaml .Values.list"#,
    r#"toYaml .Values.str"#,
    r#"toYaml (dict "a" "true" "b" "1.0" "c" "" "d" "yes" "e" "2024-01-02" "f" "a: b" "g" "- x" "h" "*x")"#,
    r#"toYaml (dict "long" "word word word word word word word word word word word word word word word word word word word word")"#,
    r#"toYaml (dict "lit" "a\n\nb" "keep" "x\n\n" "lead" " x\ny")"#,
    r#"toYaml (dict "a10" 1 "a2" 2 "B" 3 "_x" 4)"#,
    r#"toYaml (list (list 1 2) (dict "k" (list)))"#,
    r#"toYaml 1234567.5"#,
    r#"fromYaml "a: yes\nb: on\nc: 0777\nd: 1_000\ne: 2024-01-02\nf: ~\n1: x\ny: 1""#,
    r#"fromYaml "- 1""#,
    r#"fromYamlArray "- 1\n- a""#,
    r#"toToml (dict "a" 1 "s" "x" "t" (dict "k" 2))"#,
    r#"fromToml "a = 1\n[b]\nc = \"x\"""#,
    // semver
    r#"semverCompare ">=1.21.0-0" .Values.ver"#,
    r#"semverCompare "^1.2.3" "1.9.0""#,
    r#"semverCompare "~1.2.3" "1.3.0""#,
    r#"semverCompare ">=1.19-0 <1.30-0" .Values.ver"#,
    r#"(semver .Values.ver).Minor"#,
    r#"semver "1.2.3-beta.1+m""#,
    // paths & urls
    r#"base "/a/b.txt""#,
    r#"dir "/a/b/c""#,
    r#"clean "a/../../b//c/.""#,
    r#"ext "a/b.tar.gz""#,
    r#"urlParse "https://u:p@example.com:8443/a%20b?x=1#frag""#,
    r#"urlJoin (dict "scheme" "http" "host" "h:80" "path" "p q" "query" "a=b")"#,
    // dates with fixed inputs
    r#"date "2006-01-02 15:04:05" 0"#,
    r#"dateInZone "Mon Jan _2 15:04:05 MST 2006" 86400 "UTC""#,
    r#"htmlDateInZone 0 "UTC""#,
    r#"duration "95""#,
    r#"durationRound "2h10m5s""#,
    r#"toDate "2006-01-02" "2020-01-01" | unixEpoch"#,
    r#"dateModify "1h30m" (toDate "2006-01-02 15:04" "2020-01-01 10:00") | date "15:04""#,
    // crypto with fixed inputs
    r#"derivePassword 1 "long" "password" "user" "example.com""#,
    r#"decryptAES "secretkey" (encryptAES "secretkey" "plaintext")"#,
    r#"htpasswd "user" "pass" | len"#,
    r#"len (randAlphaNum 12)"#,
    r#"len (uuidv4)"#,
    r#"(genCA "x" 10).Cert | substr 0 27"#,
    r#"lookup "v1" "Secret" "ns" "x""#,
    // chart idioms and types
    r##"tpl "{{ .Values.str }}-{{ .Values.missing }}-{{ .Values.num | add1 }}" ."##,
    r##"tpl (toYaml .Values.nested) ."##,
    r##"default (dict "a" 1) .Values.missing | toYaml | nindent 2"##,
    r##"required "need str" .Values.str"##,
    r##"required "need list" .Values.list | len"##,
    r##"toJson (dict "b64" (b64enc (toJson .Values.nested)))"##,
    r##"list (typeOf (add 1 2)) (typeOf (atoi "1")) (typeOf (now)) (typeOf (semver "1.0.0")) (typeOf (genCA "x" 1)) (typeOf (fromYaml "a: 1")) (typeOf (float64 1)) (typeOf (dict)) (kindOf (semver "1.0.0")) (kindOf (now))"##,
    r##"(semver "1.2.3").Compare (semver "1.3.0")"##,
    r##"list ((semver "v1.2.3-rc.1+b").Original) ((semver "1.2").String) ((semver "1.2.3").IncMinor)"##,
    r##"$ca := genCA "ca" 365 }}{{ $c := genSignedCert "svc" (list "10.0.0.1") (list "svc.ns") 365 $ca }}{{ list (hasPrefix "-----BEGIN CERTIFICATE-----" $c.Cert) (hasPrefix "-----BEGIN RSA PRIVATE KEY-----" $c.Key)"##,
    r##"list (printf "%v" (dict "a" (list 1 "x"))) (printf "%s" (list "a")) (print 1.0 2 "x") (printf "%d" (len .Values.list))"##,
    r##"range $k, $v := .Values.nested }}{{ $k }}={{ toJson $v }};{{ end }}{{ """##,
    r##"with .Values.nested.a }}{{ toYaml . | indent 4 }}{{ end }}{{ """##,
    r##"list (empty (list)) (empty 0.0) (empty (dict)) (empty "") (empty false) (empty nil) (empty .Values.nested)"##,
    r##"list (int 3.9) (int -3.9) (int64 "12") (float64 "x") (toString 1e21) (toString 0.000001) (toString -0.0)"##,
    r##"toToml (dict "f" 1.5 "b" true "s" "q\"x" "l" (list 1 2) "k.y" "v" "sp ace" 1 "t" (dict "u" (dict "v" 1) "w" 2) "arr" (list (dict "a" 1) (dict "b" 2)) "n" nil)"##,
    r##"toToml .Values"##,
    // case conversions on odd input
    r##"list (snakecase "-2") (snakecase "<false>") (snakecase "<1000000>") (snakecase "HTTPServer") (snakecase "NoHTTPS") (snakecase "GO_PATH") (snakecase "GO PATH") (snakecase "a1b2") (snakecase "abc123DEF") (snakecase "v1.2.3") (snakecase "already_snake_case_1") (snakecase "x--y") (snakecase "Ünïcode Wörds")"##,
    r##"list (kebabcase "FirstName") (kebabcase "a_b c") (kebabcase "ID2Name") (kebabcase "2Fast2Furious")"##,
    r##"list (camelcase "- a\n- b") (camelcase "-") (camelcase "a") (camelcase "__a_b__") (camelcase "hello world") (camelcase "x-y_z w") (camelcase "HTTP_server") (camelcase "xYz") (camelcase "aBC def") (camelcase "HTTPServer") (camelcase "já_xÉ") (camelcase "ab__cd") (camelcase "a_") (camelcase "a-_b") (camelcase "1a")"##,
    r##"list (float64 "0x1F") (float64 "1_000") (float64 "1e3") (int "0x1F") (int "1_000") (int64 "0b11") (float64 "inf") (int "1.0") (int " 1")"##,
    // YAML edge cases
    r##"toYaml (list "@x" "%x" "`x" "{{x}}" "http://x:80/p" "#c" "a #b" "a#b" "~" "null" "Null" "0x1F" "1e3" "1_000" "0o17" ".5" "+1" "-" "=" "<<" "1:20" "2024-01-02T10:00:00Z" "é" "tab\tx" "cr\r\nx" "? x" "x:" "[a]" "{a}" "!x" "&x" "|x" ">x" "'x" "\"x" "a: b: c" "0" "-1.5" "1." "." "y" "N" "off" "True" "nan" ".NaN" "-.inf" "12:30:45" "0b101" "0777" "08" "1e" "a\\b")"##,
    r##"toYaml (dict "k" "trailing " "k2" " leading" "k3" "multi \nline" "k4" "multi\n line" "k5" "x\n" "k6" "\n" "k7" "\nx" "k8" "a\n\n\nb\n\n")"##,
    r##"toYaml (dict "nospace" "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz")"##,
    r##"toYaml (dict "quoted" "true words and more words and more words and more words and more words and more words and more" "single" "'a' words and more words and more words and more words and more words and more words")"##,
    r##"toYaml (list (dict "name" "a" "items" (list (dict "x" 1) (dict "y" (list 1 2)))) (list) (dict))"##,
    r##"toYaml (dict "a" (list (list (list 1))))"##,
    r##"toYaml (dict "f" 1.0 "g" 0.1 "h" 1e21 "i" 1e20 "j" 123456789.0 "k" -0.5 "l" 100000.0 "m" (int64 5) "n" 1e-7)"##,
    r##"toYaml (dict "emoji" "😀 x" "nbsp" "a\u00a0b")"##,
    r##"toYaml .Values.nested | indent 2"##,
    r##"toYaml (dict "k" (dict "deep" (dict "er" (list "a" (dict "b" "c" "d" (list "e"))))))"##,
    r##"toJson (list 1.0 1.5 1e21 1e-7 "\u2028" "\t")"##,
    r##"fromYaml "a: &x {k: 1}\nb: *x\nc:\n  <<: *x\n  j: 2\nd: !!str 123\ne: !!binary aGVsbG8=\n'q': \"w\"\n1.5: f\ntrue: t\n0x10: h\nl: [1, [2, {m: n}]]\n# comment\n""##,
    r##"fromYaml "---\na: 1\n---\nb: 2\n""##,
    r##"fromYaml """##,
    r##"list (fromYaml "<nil>") (fromYaml "%YAML") (fromYaml "a: [") (fromYaml "*x") (fromYaml "&a") (fromYaml "!x y") (fromYaml "a: b: c") (fromYaml "- a\nb: c") (fromYaml "a:\n- b\n c") (fromYaml "{a: 1") (fromYaml "'x") (fromYaml "@x") (fromYaml "a: @b") (fromYaml "[a, b") (fromYaml "x: 1\ny: [\n")"##,
    r##"fromYaml "a: 1e3\nb: .5\nc: +1\nd: 0o17\ne: 0b11\nf: -0x1A\ng: 1:20\nh: 12e\ni: 0.1e+2\nj: 9223372036854775808\nk: 0777\nl: 09""##,
    r##"fromYaml "a: |\n  x\n  y\nb: >\n  folded\n  text\nc: 'it''s'\nd: \"esc\\ttab\"""##,
    r##"toYaml (fromYaml "a: [1, 2.5, x, true, null]\nb: {c: 1}")"##,
];

fn case_template(i: usize, c: &str) -> String {
    // a nested define per case, so `$var` cases work: the define's output is encoded
    format!("{{{{- define \"c{i}\" }}}}{{{{ {c} }}}}{{{{ end -}}}}\n")
}

fn full_text() -> String {
    let mut out = String::new();
    for (i, c) in CASES.iter().enumerate() {
        out.push_str(&case_template(i, c));
    }
    out.push_str("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: diff\ndata:\n");
    for i in 0..CASES.len() {
        out.push_str(&format!("  c{i}: {{{{ include \"c{i}\" . | b64enc | quote }}}}\n"));
    }
    out
}

fn decode(output: &str) -> Vec<(usize, String)> {
    output
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('c')?;
            let (n, v) = rest.split_once(": ")?;
            let n: usize = n.parse().ok()?;
            let b = base64::engine::general_purpose::STANDARD.decode(v.trim_matches('"')).ok()?;
            Some((n, String::from_utf8_lossy(&b).into_owned()))
        })
        .collect()
}

#[test]
fn sprig_and_helm_functions_match_real_helm() {
    let Some(helm) = helm_support::require_helm("sprig_and_helm_functions_match_real_helm") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("diff");
    std::fs::create_dir_all(chart.join("templates")).expect("mkdir");
    std::fs::write(chart.join("Chart.yaml"), "apiVersion: v2\nname: diff\nversion: 0.1.0\n").expect("write");
    std::fs::write(chart.join("values.yaml"), VALUES).expect("write");
    let text = full_text();
    std::fs::write(chart.join("templates/cm.yaml"), &text).expect("write");
    let out = Command::new(&helm).args(["template", "x"]).arg(&chart).output().expect("run helm");
    assert!(out.status.success(), "helm failed: {}", String::from_utf8_lossy(&out.stderr));
    let theirs = decode(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(theirs.len(), CASES.len(), "helm output: {}", String::from_utf8_lossy(&out.stdout));

    let funcs = helm_func_map();
    let mut set = Templates::new();
    set.add("diff/templates/cm.yaml", &text, &funcs).expect("parse");
    let values = goyaml::yaml_to_value(VALUES).expect("values");
    let data = Value::map([("Values".to_string(), values)].into_iter().collect());
    let mut env = crate::RenderEnv::new(Some(1), jiff::Zoned::now());
    let ours = execute_with(&set, "diff/templates/cm.yaml", &data, &funcs, &ExecOptions::default(), &mut env)
        .expect("execute");
    let ours = decode(&ours);
    let mut bad = Vec::new();
    for ((i, h), (_, o)) in theirs.iter().zip(ours.iter()) {
        if h != o {
            bad.push(format!("{}\n  helm: {h:?}\n  ours: {o:?}", CASES[*i]));
        }
    }
    assert!(bad.is_empty(), "{} of {} cases differ:\n{}", bad.len(), CASES.len(), bad.join("\n"));
}
