//! Table tests of the template engine against Go's documented behaviour
//! (text/template's own tests and doc, and `helm template` where noted).

use super::exec::{ExecLimits, ExecOptions, MissingKey, TemplateErrorKind, execute, execute_with};
use super::func::{Func, FuncMap, Param, Signature, TextError};
use super::parse::Templates;
use super::value::{FuncError, Value};

/// Small functions for the tests (the real library lives in `sprig`).
pub(crate) fn funcs() -> FuncMap {
    let mut m = FuncMap::new();
    m.insert(
        "upper",
        Func::new(Signature::fixed(&[Param::String]), |_, a| {
            Ok(Value::from(a[0].as_str().unwrap_or("").to_uppercase()))
        }),
    );
    m.insert(
        "addi",
        Func::new(Signature::fixed(&[Param::Int, Param::Int]), |_, a| match (&a[0], &a[1]) {
            (Value::Int(x), Value::Int(y)) => Ok(Value::Int(x + y)),
            _ => Err(FuncError::msg("bad")),
        }),
    );
    m.insert(
        "half",
        Func::new(Signature::fixed(&[Param::Float64]), |_, a| match &a[0] {
            Value::Float(x) => Ok(Value::Float(x / 2.0)),
            _ => Err(FuncError::msg("bad")),
        }),
    );
    m.insert(
        "int64",
        Func::new(Signature::fixed(&[Param::Int]), |_, a| {
            Ok(Value::Int64(match a[0] {
                Value::Int(i) => i,
                _ => 0,
            }))
        }),
    );
    m.insert("list", Func::new(Signature::variadic(&[], Param::Any), |_, a| Ok(Value::list(a.to_vec()))));
    m.insert(
        "joinw",
        Func::new(Signature::variadic(&[Param::String], Param::String), |_, a| {
            let sep = a[0].as_str().unwrap_or("");
            Ok(Value::from(a[1..].iter().map(|v| v.as_str().unwrap_or("")).collect::<Vec<_>>().join(sep)))
        }),
    );
    m.insert(
        "fail",
        Func::new(Signature::fixed(&[Param::String]), |_, a| {
            Err(FuncError::Fail(a[0].as_str().unwrap_or("").to_string()))
        }),
    );
    m.insert("oops", Func::new(Signature::fixed(&[]), |_, _| Err(FuncError::msg("it broke"))));
    m.insert("nilf", Func::new(Signature::fixed(&[]), |_, _| Ok(Value::Nil)));
    m.insert("typeOf", Func::new(Signature::fixed(&[Param::Any]), |_, a| Ok(Value::from(a[0].type_name()))));
    m.insert(
        "set",
        Func::new(Signature::fixed(&[Param::Map, Param::String, Param::Any]), |_, a| {
            if let (Value::Map(m), Some(k)) = (&a[0], a[1].as_str()) {
                m.borrow_mut().insert(k.to_string(), a[2].clone());
            }
            Ok(a[0].clone())
        }),
    );
    m.insert(
        "include",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            h.execute_template(a[0].as_str().unwrap_or(""), &a[1]).map(Value::from)
        }),
    );
    // Bound as Helm binds `tpl` (its wording and `<no value>` rule), to test the
    // engine's nested parse-and-execute through a realistic caller.
    m.insert(
        "tpl",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            let text = a[0].as_str().unwrap_or("");
            match h.execute_text(text, &a[1]) {
                Ok(s) => Ok(Value::from(s.replace("<no value>", ""))),
                Err(TextError::Parse(m)) => Err(FuncError::Message(format!("cannot parse template {text:?}: {m}"))),
                Err(TextError::Exec(FuncError::Message(m))) => {
                    Err(FuncError::Message(format!("error during tpl function execution for {text:?}: {m}")))
                }
                Err(TextError::Exec(FuncError::Fail(m))) => {
                    Err(FuncError::Fail(format!("error during tpl function execution for {text:?}: {m}")))
                }
                Err(TextError::Exec(e)) => Err(e),
            }
        }),
    );
    m.insert(
        "tick",
        Func::new(Signature::fixed(&[]), |h, _| {
            let n = h.state().downcast_mut::<i64>().ok_or_else(|| FuncError::msg("no counter in the state"))?;
            *n += 1;
            Ok(Value::Int64(*n))
        }),
    );
    m
}

fn data() -> Value {
    Value::from_json(&serde_json::json!({
        "str": "hello",
        "empty": "",
        "n": 3,
        "big": 1000000,
        "half": 1.5,
        "yes": true,
        "no": false,
        "nothing": null,
        "list": ["a", "b", "c"],
        "nums": [1, 2, 3],
        "emptyList": [],
        "map": {"b": 2, "a": 1, "c": {"d": "deep"}},
        "emptyMap": {},
    }))
}

pub(crate) fn run_opts(text: &str, data: &Value, opts: &ExecOptions) -> Result<String, String> {
    let f = funcs();
    let mut set = Templates::new();
    set.add("t", text, &f).map_err(|e| e.to_string())?;
    execute(&set, "t", data, &f, opts).map_err(|e| e.to_string())
}

pub(crate) fn run(text: &str) -> Result<String, String> {
    run_opts(text, &data(), &ExecOptions::default())
}

fn run_zero(text: &str) -> Result<String, String> {
    run_opts(text, &data(), &ExecOptions { missing_key: MissingKey::Zero, ..ExecOptions::default() })
}

pub(crate) fn ok(cases: &[(&str, &str)]) {
    for (text, want) in cases {
        match run(text) {
            Ok(got) => assert_eq!(&got, want, "template {text:?}"),
            Err(e) => panic!("template {text:?} failed: {e}"),
        }
    }
}

pub(crate) fn err(cases: &[(&str, &str)]) {
    for (text, want) in cases {
        match run(text) {
            Ok(got) => panic!("template {text:?} gave {got:?}, want error {want:?}"),
            Err(e) => assert_eq!(&e, want, "template {text:?}"),
        }
    }
}

#[test]
fn text_and_trim_markers() {
    ok(&[
        ("plain text", "plain text"),
        ("a  {{- 1 -}}  b", "a1b"),
        ("a \n\t{{- 1}} b", "a1 b"),
        ("a {{1 -}}\n\n b", "a 1b"),
        ("{{-3}}", "-3"),
        ("{{- /* comment */ -}}\n x", "x"),
        ("a{{/* multi\nline */}}b", "ab"),
        ("a {{- /* c */}} b", "a b"),
        ("", ""),
        ("{{ \"}}\" }}", "}}"),
    ]);
}

#[test]
fn constants() {
    ok(&[
        ("{{1}} {{-1}} {{+1}} {{0x1F}} {{0o17}} {{017}} {{0b101}} {{1_000}}", "1 -1 1 31 15 15 5 1000"),
        ("{{1.5}} {{1e3}} {{1.0}} {{1e6}} {{.5}} {{0x1p4}}", "1.5 1000 1 1e+06 0.5 16"),
        ("{{'a'}} {{'\\n'}} {{'\\u00e9'}}", "97 10 233"),
        ("{{true}} {{false}}", "true false"),
        (r#"{{"a\tb\x41\u00e9\101"}}"#, "a\tbAéA"),
        ("{{`raw \\n {{ stays`}}", "raw \\n {{ stays"),
        (
            "{{typeOf 1}} {{typeOf 1.5}} {{typeOf 'x'}} {{typeOf \"s\"}} {{typeOf true}} {{typeOf nil}}",
            "int float64 int string bool <nil>",
        ),
    ]);
}

#[test]
fn fields_variables_and_dot() {
    ok(&[
        ("{{.str}} {{.n}} {{.big}} {{.half}}", "hello 3 1e+06 1.5"),
        ("{{.map.c.d}} {{.map}}", "deep map[a:1 b:2 c:map[d:deep]]"),
        ("{{.list}} {{.emptyList}} {{.emptyMap}}", "[a b c] [] map[]"),
        ("{{$x := .str}}{{$x}} {{$.str}}", "hello hello"),
        ("{{$x := 1}}{{$x = 2}}{{$x}}", "2"),
        ("{{$m := .map}}{{$m.c.d}}", "deep"),
        ("{{(.map).c.d}} {{(index .map \"c\").d}}", "deep deep"),
        ("{{with .map}}{{.a}}{{$.str}}{{end}}", "1hello"),
        ("{{.nothing}}", "<no value>"),
        ("{{.missing}}", "<no value>"),
        ("{{.missing.deeper}}", "<no value>"),
        ("{{$x := .missing}}{{$x.deeper}}", "<no value>"),
        (
            "{{.}}",
            "map[big:1e+06 empty: emptyList:[] emptyMap:map[] half:1.5 list:[a b c] map:map[a:1 b:2 c:map[d:deep]] n:3 no:false nothing:<nil> nums:[1 2 3] str:hello yes:true]",
        ),
    ]);
}

#[test]
fn missing_keys_per_option() {
    assert_eq!(run_zero("{{.missing}}").unwrap(), "<no value>");
    assert_eq!(
        run_zero("{{.missing.deeper}}").unwrap_err(),
        "template: t:1:10: executing \"t\" at <.missing.deeper>: nil pointer evaluating interface {}.deeper"
    );
    assert_eq!(
        run("{{.nothing.deeper}}").unwrap_err(),
        "template: t:1:10: executing \"t\" at <.nothing.deeper>: nil pointer evaluating interface {}.deeper"
    );
    let strict = ExecOptions { missing_key: MissingKey::Error, ..ExecOptions::default() };
    assert_eq!(
        run_opts("{{.missing}}", &data(), &strict).unwrap_err(),
        "template: t:1:2: executing \"t\" at <.missing>: map has no entry for key \"missing\""
    );
    assert_eq!(run_opts("{{.str}}", &data(), &strict).unwrap(), "hello");
    // A missing value passed on is nil.
    assert_eq!(run_zero("{{typeOf .missing}} {{print .missing}}").unwrap(), "<nil> <nil>");
}

#[test]
fn field_errors() {
    err(&[
        ("{{.str.x}}", "template: t:1:6: executing \"t\" at <.str.x>: can't evaluate field x in type interface {}"),
        ("{{.list.x}}", "template: t:1:7: executing \"t\" at <.list.x>: can't evaluate field x in type interface {}"),
        (
            "{{$x := \"s\"}}{{$x.y}}",
            "template: t:1:17: executing \"t\" at <$x.y>: can't evaluate field y in type string",
        ),
        (
            "{{with .str}}{{.y}}{{end}}",
            "template: t:1:15: executing \"t\" at <.y>: can't evaluate field y in type string",
        ),
        (
            "{{range $i, $e := .list}}{{$e.x}}{{end}}",
            "template: t:1:29: executing \"t\" at <$e.x>: can't evaluate field x in type interface {}",
        ),
        (
            "{{range .list}}{{.x}}{{end}}",
            "template: t:1:17: executing \"t\" at <.x>: can't evaluate field x in type interface {}",
        ),
        (
            "{{range .list}}{{len .}}{{end}}{{range (list nil)}}{{len .}}{{end}}",
            "template: t:1:53: executing \"t\" at <len .>: error calling len: len of nil pointer",
        ),
        ("{{.map.a 1}}", "template: t:1:6: executing \"t\" at <.map.a>: a is not a method but has arguments"),
        ("{{.str 1}}", "template: t:1:2: executing \"t\" at <.str>: str is not a method but has arguments"),
        ("{{$x := 1}}{{$x 2}}", "template: t:1:13: executing \"t\" at <$x>: can't give argument to non-function $x"),
        ("{{1 2}}", "template: t:1:2: executing \"t\" at <1>: can't give argument to non-function 1"),
    ]);
}

#[test]
fn truthiness_and_if() {
    ok(&[
        ("{{if .yes}}y{{end}}{{if .no}}n{{end}}", "y"),
        ("{{if .empty}}a{{else}}b{{end}}", "b"),
        ("{{if .emptyList}}a{{else if .emptyMap}}b{{else if .n}}c{{else}}d{{end}}", "c"),
        ("{{if 0}}a{{else if 0.0}}b{{else if .nothing}}c{{else if .missing}}d{{else}}e{{end}}", "e"),
        ("{{if .map}}m{{end}}{{if .list}}l{{end}}{{if \"0\"}}s{{end}}", "mls"),
        ("{{if $x := .str}}{{$x}}{{else}}{{$x}}none{{end}}", "hello"),
        ("{{with .missing}}a{{else}}b{{end}}", "b"),
        ("{{with .missing}}a{{else with .str}}{{.}}{{else}}c{{end}}", "hello"),
        ("{{with $x := .map.a}}{{$x}}{{.}}{{end}}", "11"),
        ("{{not .yes}} {{not .empty}} {{not 0}}", "false true true"),
    ]);
}

#[test]
fn variable_scopes() {
    ok(&[
        ("{{$x := 1}}{{if true}}{{$x := 2}}{{$x}}{{end}}{{$x}}", "21"),
        ("{{$x := 1}}{{if true}}{{$x = 2}}{{end}}{{$x}}", "2"),
        ("{{$x := 1}}{{range .list}}{{$x = .}}{{end}}{{$x}}", "c"),
        ("{{$x := 1}}{{with .str}}{{$x := 5}}{{end}}{{$x}}", "1"),
        ("{{define \"d\"}}{{$}}{{end}}{{template \"d\" .str}}", "hello"),
    ]);
    err(&[
        ("{{$y}}", "template: t:1: undefined variable \"$y\""),
        ("{{if true}}{{$x := 1}}{{end}}{{$x}}", "template: t:1: undefined variable \"$x\""),
    ]);
}

#[test]
fn range_forms() {
    ok(&[
        ("{{range .list}}{{.}},{{end}}", "a,b,c,"),
        ("{{range $i, $v := .list}}{{$i}}={{$v}} {{end}}", "0=a 1=b 2=c "),
        ("{{range $v := .list}}{{$v}}{{end}}", "abc"),
        ("{{range $k, $v := .map}}{{$k}}={{$v}};{{end}}", "a=1;b=2;c=map[d:deep];"),
        ("{{range .emptyList}}x{{else}}empty{{end}}", "empty"),
        ("{{range .missing}}x{{else}}none{{end}}", "none"),
        ("{{range .emptyMap}}x{{else}}none{{end}}", "none"),
        ("{{range 3}}{{.}}{{end}}", "012"),
        ("{{range $i := 3}}{{$i}}{{end}}", "012"),
        ("{{range 0}}x{{else}}zero{{end}}", "zero"),
        ("{{range .list}}{{if eq . \"b\"}}{{break}}{{end}}{{.}}{{end}}", "a"),
        ("{{range .list}}{{if eq . \"b\"}}{{continue}}{{end}}{{.}}{{end}}", "ac"),
        ("{{range $i, $v := .list}}{{range $.nums}}{{$v}}{{.}}{{end}}{{end}}", "a1a2a3b1b2b3c1c2c3"),
        ("{{$i := 9}}{{range $i, $v := .list}}{{end}}{{$i}}", "9"),
        ("{{$i := 9}}{{$v := 0}}{{range $i, $v = .list}}{{end}}{{$i}}{{$v}}", "2c"),
    ]);
    err(&[
        ("{{range .half}}{{end}}", "template: t:1:8: executing \"t\" at <.half>: range can't iterate over 1.5"),
        ("{{range .str}}{{end}}", "template: t:1:8: executing \"t\" at <.str>: range can't iterate over hello"),
        ("{{break}}", "template: t:1: {{break}} outside {{range}}"),
        ("{{range .list}}{{else}}{{continue}}{{end}}", "template: t:1: {{continue}} outside {{range}}"),
        (
            "{{range $i, $v := 3}}{{end}}",
            "template: t:1:18: executing \"t\" at <3>: can't use 3 to iterate over more than one variable",
        ),
    ]);
}

#[test]
fn range_snapshots_a_map_it_changes() {
    ok(&[("{{range $k, $v := .map}}{{$_ := set $.map (printf \"%s2\" $k) 0}}{{$k}}{{end}} {{len .map}}", "abc 6")]);
}

#[test]
fn define_template_block() {
    ok(&[
        ("{{define \"x\"}}X{{.}}{{end}}{{template \"x\" 1}}{{template \"x\"}}", "X1X<no value>"),
        ("{{block \"b\" .str}}[{{.}}]{{end}}", "[hello]"),
        ("{{define \"r\"}}{{if gt . 0}}{{.}}{{template \"r\" (addi . -1)}}{{end}}{{end}}{{template \"r\" 3}}", "321"),
        ("{{- define \"x\" }}\nX\n{{- end }}\nA{{ include \"x\" . }}", "\nA\nX"),
    ]);
    err(&[(
        "{{template \"nope\" .}}",
        "template: t:1:11: executing \"t\" at <{{template \"nope\" .}}>: template \"nope\" not defined",
    )]);
}

#[test]
fn definitions_across_files() {
    let f = funcs();
    let mut set = Templates::new();
    set.add("a/_helpers.tpl", "{{define \"h\"}}one{{end}}", &f).unwrap();
    set.add("a/t.yaml", "{{include \"h\" .}}-{{template \"h\"}}", &f).unwrap();
    assert!(set.has("h") && set.has("a/t.yaml") && set.has("a/_helpers.tpl"));
    let opts = ExecOptions::default();
    assert_eq!(execute(&set, "a/t.yaml", &Value::Nil, &f, &opts).unwrap(), "one-one");
    // A later definition replaces an earlier one; an empty one doesn't.
    set.add("a/z.tpl", "{{define \"h\"}}two{{end}}", &f).unwrap();
    set.add("a/zz.tpl", "{{define \"h\"}}{{end}}", &f).unwrap();
    assert_eq!(execute(&set, "a/t.yaml", &Value::Nil, &f, &opts).unwrap(), "two-two");
    // Within one file, two definitions are an error.
    let e = set.add("b.tpl", "{{define \"q\"}}1{{end}}{{define \"q\"}}2{{end}}", &f).unwrap_err();
    assert_eq!(e.to_string(), "template: b.tpl:1: template: multiple definition of template \"q\"");
    let e = execute(&set, "nope", &Value::Nil, &f, &opts).unwrap_err();
    assert_eq!(e.to_string(), "template: nope: no template \"nope\" associated with template \"gotpl\"");
}

#[test]
fn errors_name_the_defining_file_and_executing_template() {
    let f = funcs();
    let mut set = Templates::new();
    set.add("c/templates/_helpers.tpl", "\n{{define \"h\"}}\n  {{ .x.y }}{{end}}", &f).unwrap();
    set.add("c/templates/cm.yaml", "a: {{ include \"h\" .Values }}", &f).unwrap();
    let data = Value::from_json(&serde_json::json!({"Values": {"x": null}}));
    let e = execute(&set, "c/templates/cm.yaml", &data, &f, &ExecOptions::default()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "template: c/templates/cm.yaml:1:6: executing \"c/templates/cm.yaml\" at <include \"h\" .Values>: \
         error calling include: template: c/templates/_helpers.tpl:3:7: executing \"h\" at <.x.y>: \
         nil pointer evaluating interface {}.y"
    );
    assert_eq!((e.line, e.column, e.kind), (1, 6, TemplateErrorKind::Exec));
}

#[test]
fn pipelines_and_parens() {
    ok(&[
        ("{{.str | upper}}", "HELLO"),
        ("{{\"a\" | printf \"%s-%s\" \"b\"}}", "b-a"),
        ("{{addi 1 2 | addi 1 | addi 10}}", "14"),
        ("{{(addi 1 2) | addi 3}}", "6"),
        ("{{printf \"%d\" (addi 1 (addi 2 3))}}", "6"),
        ("{{$x := addi 1 2 | addi 3}}{{$x}}", "6"),
        ("{{.missing | typeOf}}", "<nil>"),
        ("{{nilf}}", "<no value>"),
        ("{{nilf | typeOf}}", "<nil>"),
    ]);
    err(&[
        ("{{.str | 1}}", "template: t:1: non executable command in pipeline stage 2"),
        (
            "{{1 | upper}}",
            "template: t:1:6: executing \"t\" at <upper>: wrong type for value; expected string; got int",
        ),
    ]);
}

#[test]
fn argument_conversion_as_go_reflection() {
    ok(&[
        ("{{addi 1 2}} {{addi 'a' 0}} {{addi 2.0 1}}", "3 97 3"),
        ("{{half 3}} {{half 1.5}} {{half .half}}", "1.5 0.75 0.75"),
        ("{{joinw \",\" \"a\" \"b\" \"c\"}} [{{joinw \",\"}}]", "a,b,c []"),
        ("{{list}} {{list 1 \"a\" nil 2.5}}", "[] [1 a <nil> 2.5]"),
        ("{{typeOf (int64 3)}}", "int64"),
    ]);
    err(&[
        ("{{addi .n 1}}", "template: t:1:7: executing \"t\" at <.n>: wrong type for value; expected int; got float64"),
        (
            "{{addi (int64 1) 1}}",
            "template: t:1:8: executing \"t\" at <(int64 1)>: wrong type for value; expected int; got int64",
        ),
        ("{{addi \"1\" 1}}", "template: t:1:7: executing \"t\" at <\"1\">: expected integer; found \"1\""),
        ("{{addi 1.5 1}}", "template: t:1:7: executing \"t\" at <1.5>: expected integer; found 1.5"),
        ("{{upper 1}}", "template: t:1:8: executing \"t\" at <1>: expected string; found 1"),
        ("{{upper nil}}", "template: t:1:8: executing \"t\" at <nil>: cannot assign nil to string"),
        ("{{upper .missing}}", "template: t:1:8: executing \"t\" at <.missing>: invalid value; expected string"),
        ("{{addi 1}}", "template: t:1:2: executing \"t\" at <addi>: wrong number of args for addi: want 2 got 1"),
        (
            "{{joinw}}",
            "template: t:1:2: executing \"t\" at <joinw>: wrong number of args for joinw: want at least 1 got 0",
        ),
        ("{{joinw \",\" 1}}", "template: t:1:12: executing \"t\" at <1>: expected string; found 1"),
        ("{{nope 1}}", "template: t:1: function \"nope\" not defined"),
    ]);
}

#[test]
fn function_errors_stop_execution() {
    err(&[
        ("a{{oops}}b", "template: t:1:3: executing \"t\" at <oops>: error calling oops: it broke"),
        ("{{fail \"no way\"}}", "template: t:1:2: executing \"t\" at <fail \"no way\">: error calling fail: no way"),
    ]);
    let f = funcs();
    let mut set = Templates::new();
    set.add("t", "{{fail \"msg\"}}", &f).unwrap();
    let e = execute(&set, "t", &Value::Nil, &f, &ExecOptions::default()).unwrap_err();
    assert_eq!((e.kind, e.detail.as_str()), (TemplateErrorKind::Fail, "msg"));
    // Inside include and tpl: the chain in the message, the author's text in detail.
    set.add("u", "{{define \"f\"}}{{fail \"deep\"}}{{end}}{{tpl \"{{include \\\"f\\\" .}}\" .}}", &f).unwrap();
    let e = execute(&set, "u", &Value::Nil, &f, &ExecOptions::default()).unwrap_err();
    assert_eq!((e.kind, e.detail.as_str(), e.line, e.column), (TemplateErrorKind::Fail, "deep", 1, 38));
    assert!(e.to_string().ends_with("error calling fail: deep"), "{e}");
}

#[test]
fn parse_errors_as_go_words_them() {
    err(&[
        ("{{if .x}}a", "template: t:1: unexpected EOF"),
        ("a\n{{end}}", "template: t:2: unexpected {{end}}"),
        ("{{.x", "template: t:1: unclosed action"),
        ("{{\"abc}}", "template: t:1: unterminated quoted string"),
        ("{{/* x }}", "template: t:1: unclosed comment"),
        ("{{/* x */ .}}", "template: t:1: comment ends before closing delimiter"),
        ("{{(1}}", "template: t:1: unclosed left paren"),
        ("{{1)}}", "template: t:1: unexpected right paren"),
        ("{{}}", "template: t:1: missing value for command"),
        ("{{if}}{{end}}", "template: t:1: missing value for if"),
        ("{{range $a, $b, $c := .}}{{end}}", "template: t:1: too many declarations in range"),
        ("{{3x}}", "template: t:1: bad number syntax: \"3x\""),
        ("{{.a.}}", "template: t:1: unexpected <.> in operand"),
        ("{{.a!}}", "template: t:1: bad character U+0021 '!'"),
        ("{{1.a}}", "template: t:1: bad number syntax: \"1.a\""),
        ("{{\"x\".a}}", "template: t:1: unexpected . after term \"\\\"x\\\"\""),
        ("{{define \"a\"}}x", "template: t:1: unexpected EOF"),
        ("{{template .x}}", "template: t:1: unexpected \".x\" in template clause"),
        ("{{else}}", "template: t:1: unexpected {{else}}"),
        ("{{with .}}{{else}}{{else}}{{end}}", "template: t:1: expected end; found {{else}}"),
        ("{{99999999999999999999}}", "template: t:1: integer overflow: \"99999999999999999999\""),
        ("{{ nil }}", "template: t:1:3: executing \"t\" at <nil>: nil is not a command"),
        ("line1\nline2 {{ .x | 1 }}", "template: t:2: non executable command in pipeline stage 2"),
    ]);
}

#[test]
fn include_tpl_and_host() {
    ok(&[
        ("{{define \"h\"}}[{{.}}]{{end}}{{include \"h\" .str | upper}}", "[HELLO]"),
        ("{{tpl \"{{ .str }}-{{ .missing }}\" .}}", "hello-"),
        ("{{tpl \"{{define \\\"z\\\"}}Z{{end}}{{include \\\"z\\\" .}}\" .}}", "Z"),
    ]);
    err(&[
        (
            "{{include \"nope\" .}}",
            "template: t:1:2: executing \"t\" at <include \"nope\" .>: error calling include: template: no template \"nope\" associated with template \"gotpl\"",
        ),
        (
            "{{tpl \"{{ nope }}\" .}}",
            "template: t:1:2: executing \"t\" at <tpl \"{{ nope }}\" .>: error calling tpl: cannot parse template \"{{ nope }}\": template: gotpl:1: function \"nope\" not defined",
        ),
        (
            "{{tpl \"{{ .str.x }}\" .}}",
            "template: t:1:2: executing \"t\" at <tpl \"{{ .str.x }}\" .>: error calling tpl: error during tpl function execution for \"{{ .str.x }}\": template: gotpl:1:7: executing \"gotpl\" at <.str.x>: can't evaluate field x in type interface {}",
        ),
    ]);
    // A template defined by tpl is not visible afterwards.
    assert!(run("{{tpl \"{{define \\\"z\\\"}}Z{{end}}\" .}}{{include \"z\" .}}").is_err());
}

#[test]
fn functions_reach_the_callers_state_also_inside_nested_templates() {
    let f = funcs();
    let mut set = Templates::new();
    set.add("t", "{{define \"x\"}}{{tick}}{{end}}{{tick}} {{include \"x\" .}} {{tpl \"{{tick}}\" .}}", &f).unwrap();
    let mut counter = 10_i64;
    let out = execute_with(&set, "t", &Value::Nil, &f, &ExecOptions::default(), &mut counter).unwrap();
    assert_eq!((out.as_str(), counter), ("11 12 13", 13));
    // Without a state of the expected type the function says so; the engine does not care.
    let e = execute(&set, "t", &Value::Nil, &f, &ExecOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no counter in the state"), "{e}");
}

#[test]
fn limits_stop_runaway_templates() {
    let small = |limits| ExecOptions { limits, ..ExecOptions::default() };
    let e = run_opts(
        "{{range 1000000}}x{{end}}",
        &Value::Nil,
        &small(ExecLimits { max_steps: 1000, ..ExecLimits::default() }),
    );
    assert!(e.unwrap_err().contains("step limit exceeded"));
    let e = run_opts(
        "{{range 100000}}xxxxxxxxxx{{end}}",
        &Value::Nil,
        &small(ExecLimits { max_output_bytes: 10_000, ..ExecLimits::default() }),
    );
    assert!(e.unwrap_err().contains("output limit exceeded"));
    let e = run_opts(
        "{{define \"r\"}}{{template \"r\" .}}{{end}}{{template \"r\" .}}",
        &Value::Nil,
        &small(ExecLimits { max_depth: 20, ..ExecLimits::default() }),
    );
    assert!(e.unwrap_err().contains("exceeded maximum template depth (20)"));
    let e = run_opts(
        "{{define \"r\"}}{{include \"r\" .}}{{end}}{{include \"r\" .}}",
        &Value::Nil,
        &small(ExecLimits { max_depth: 20, ..ExecLimits::default() }),
    );
    assert!(e.unwrap_err().contains("exceeded maximum template depth (20)"));
}
