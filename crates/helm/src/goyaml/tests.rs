//! go-yaml's reading and sigs.k8s.io/yaml's writing, case by case.

use super::*;
use gotmpl::value::Value;

/// go-yaml (libyaml) reads a double-quoted scalar continued at column 0, as
/// `openstack/scs`'s cluster class renders it; the value is folded as usual.
#[test]
fn quoted_scalars_continued_left_of_their_block_are_read() {
    let text = "spec:\n  a:\n    description: \"one two\nthree 'x' # not a comment\n  four\"\n    b: 'it''s\nok'\n    c: |\n      \"open\n    d: 0755\n";
    let v = super::yaml_to_value(text).expect("reads").to_json();
    assert_eq!(v["spec"]["a"]["description"], "one two three 'x' # not a comment four");
    assert_eq!(v["spec"]["a"]["b"], "it's ok");
    assert_eq!(v["spec"]["a"]["c"], "\"open\n");
    assert_eq!(v["spec"]["a"]["d"], 493);
}

/// libyaml reads the end of the input as no line break: a block scalar that ends the text
/// without one keeps no final line break, whatever its chomping; one followed by a line break,
/// or by more content, keeps it.
#[test]
fn a_block_scalar_ending_the_text_without_a_line_break_has_none() {
    let read = |t: &str| super::yaml_to_value(t).expect("reads").to_json();
    assert_eq!(read("a: |\n  x")["a"], "x");
    assert_eq!(read("a: |+\n  x")["a"], "x");
    assert_eq!(read("a: >\n  x\n  y")["a"], "x y");
    assert_eq!(read("a: |-\n  x")["a"], "x");
    assert_eq!(read("a: |\n  x\n")["a"], "x\n");
    assert_eq!(read("a: |\n  x\nb: c")["a"], "x\n");
    assert_eq!(read("a: |\n  x\n# end")["a"], "x\n");
}

fn m(pairs: &[(&str, Value)]) -> Value {
    Value::map(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

#[test]
fn to_yaml_as_sigs_yaml() {
    let v = m(&[
        ("name", Value::str("x")),
        ("list", Value::list(vec![Value::str("a"), m(&[("k", Value::Float(1.0)), ("b", Value::Bool(true))])])),
        ("nested", m(&[("empty", Value::list(vec![])), ("map", m(&[]))])),
        (
            "quoted",
            Value::list(vec![
                Value::str("true"),
                Value::str("1.0"),
                Value::str(""),
                Value::str("yes"),
                Value::str("2024-01-02"),
            ]),
        ),
        ("multi", Value::str("line1\nline2\n")),
        ("nil", Value::Nil),
        ("float", Value::Float(1.5)),
        ("big", Value::Float(1234567.5)),
        ("colon", Value::str("a: b")),
        ("dash", Value::str("- x")),
        ("star", Value::str("*x")),
        ("tab", Value::str("a\tb")),
    ]);
    let want = "big: 1.2345675e+06
colon: 'a: b'
dash: '- x'
float: 1.5
list:
- a
- b: true
  k: 1
multi: |
  line1
  line2
name: x
nested:
  empty: []
  map: {}
nil: null
quoted:
- \"true\"
- \"1.0\"
- \"\"
- \"yes\"
- \"2024-01-02\"
star: '*x'
tab: \"a\\tb\"
";
    assert_eq!(value_to_yaml(&v), want);
}

#[test]
fn key_order_is_natural() {
    let v = m(&[("a10", Value::Nil), ("a2", Value::Nil), ("B", Value::Nil), ("_x", Value::Nil), ("a", Value::Nil)]);
    assert_eq!(value_to_yaml(&v), "_x: null\nB: null\na: null\na2: null\na10: null\n");
}

#[test]
fn long_strings_fold_and_literals_keep() {
    let long = "word ".repeat(20).trim_end().to_string();
    let v = m(&[("k", Value::str(long.as_str()))]);
    let out = value_to_yaml(&v);
    assert_eq!(out, format!("k: {}\n  {}\n", "word ".repeat(16).trim_end(), "word ".repeat(4).trim_end()));
    let lit = m(&[("k", Value::str("a\n\nb"))]);
    assert_eq!(value_to_yaml(&lit), "k: |-\n  a\n\n  b\n");
    let nested = m(&[("l", Value::list(vec![Value::list(vec![Value::str("x")]), Value::str(" lead")]))]);
    assert_eq!(value_to_yaml(&nested), "l:\n- - x\n- ' lead'\n");
    assert_eq!(value_to_yaml(&Value::str("foo")), "foo\n");
    assert_eq!(value_to_yaml(&Value::list(vec![])), "[]\n");
}

#[test]
fn reading_as_helm_reads() {
    let v = yaml_to_value("a: yes\nb: on\nc: 1\nd: 0777\ne: 1_000\nf: 2024-01-02\ng: '1'\nh: ~\ni: 1.5\n1: x\ntrue: y\nbase: &b {x: 1}\nm:\n  <<: *b\n  y: 2\n")
        .expect("parse");
    let json = crate::sprig::format_value(&v);
    assert_eq!(
        json,
        "map[1:x a:true b:true base:map[x:1] c:1 d:511 e:1000 f:2024-01-02 g:1 h:<nil> i:1.5 m:map[true:2 x:1] true:true]"
    );
    assert!(
        matches!(yaml_to_value("c: 1").expect("p"), Value::Map(m) if matches!(m.borrow().get("c"), Some(Value::Float(_))))
    );
    assert!(yaml_to_value("a: [").is_err());
    assert!(matches!(yaml_to_value(""), Ok(Value::Nil)));
    assert!(yaml_to_value("a: .inf").is_err());
}

/// The direct path a rendered manifest takes (`yaml_to_json`) gives what the template values'
/// path gives (`yaml_to_value` then `to_json`), errors included: numbers of every YAML 1.1 form
/// and size, keys of every scalar type, duplicate keys, anchors and merge keys, nulls, quoting.
#[test]
fn yaml_to_json_is_yaml_to_value_then_to_json() {
    let docs = [
        "a: 1\nb: -2\nc: 0755\nd: 0x1F\ne: 1_000\nf: 1.5\ng: 1e3\nh: 12345678901234567\ni: .inf\n",
        "big: 18446744073709551615\nneg: -9007199254740993\nwhole: 3.0\nfrac: 0.1\n",
        "1: int key\n1.5: float key\ntrue: bool key\nyes: y\n~: null key\n",
        "k: one\nk: two\nlist: [1, 'x', \"y\", null, ~, true, off]\n",
        "base: &b {x: 1, y: [a, b]}\nuse: *b\nmerged:\n  <<: *b\n  x: 2\n",
        "s: |\n  line\n  two\nq: 'it''s'\nempty: ''\nts: 2024-01-02\n",
        "",
        "---\n",
        "- a\n- b: c\n",
        "nan: .nan\n",
        "? [1, 2]\n: seq key\n",
        "a: [unclosed\n",
    ];
    for doc in docs {
        let direct = super::yaml_to_json(doc);
        let through = super::yaml_to_value(doc).map(|v| v.to_json());
        assert_eq!(direct, through, "document {doc:?}");
    }
}
