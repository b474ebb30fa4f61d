//! Go `text/template` semantics, case by case. Expected outputs are what Go
//! (and so `helm template`) prints for the same template and data.

use std::collections::BTreeMap;

use super::*;

fn test_funcs() -> FuncMap {
    let mut f = FuncMap::new();
    f.insert(
        "upper",
        Func::new(Signature::fixed(&[Param::String]), |_, a| {
            Ok(Value::str(a[0].as_str().unwrap_or_default().to_uppercase()))
        }),
    );
    f.insert(
        "add",
        Func::new(Signature::variadic(&[], Param::Any), |_, a| {
            let mut sum = 0i64;
            for v in a {
                sum += match v {
                    Value::Int(i) | Value::Int64(i) => *i,
                    Value::Float(x) => *x as i64,
                    _ => return Err(FuncError::msg("not a number")),
                };
            }
            Ok(Value::Int64(sum))
        }),
    );
    f.insert(
        "include",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            h.execute_template(a[0].as_str().unwrap_or_default(), &a[1]).map(Value::str)
        }),
    );
    f.insert(
        "tpl",
        Func::new(Signature::fixed(&[Param::String, Param::Any]), |h, a| {
            h.execute_text(a[0].as_str().unwrap_or_default(), &a[1]).map(Value::str).map_err(|e| match e {
                TextError::Parse(m) => FuncError::Message(m),
                TextError::Exec(e) => e,
            })
        }),
    );
    f.insert(
        "fail",
        Func::new(Signature::fixed(&[Param::String]), |_, a| {
            Err(FuncError::Fail(a[0].as_str().unwrap_or_default().to_string()))
        }),
    );
    f.insert("intArg", Func::new(Signature::fixed(&[Param::Int]), |_, a| Ok(a[0].clone())));
    f.insert("list", Func::new(Signature::variadic(&[], Param::Any), |_, a| Ok(Value::list(a.to_vec()))));
    f.insert("typeOf", Func::new(Signature::fixed(&[Param::Any]), |_, a| Ok(Value::str(a[0].type_name()))));
    f
}

fn data() -> Value {
    let json = serde_json::json!({
        "Values": {
            "name": "web",
            "port": 80,
            "ratio": 1.5,
            "big": 1000000,
            "enabled": true,
            "off": false,
            "empty": "",
            "nothing": null,
            "list": ["a", "b", "c"],
            "nums": [1, 2, 3],
            "map": {"z": 1, "a": 2, "m": 3},
            "nested": {"deep": {"x": "y"}},
            "nulls": [null],
        }
    });
    Value::from_json(&json)
}

fn run_with(text: &str, data: &Value, missing: MissingKey) -> Result<String, TemplateError> {
    let funcs = test_funcs();
    let mut set = Templates::new();
    set.add("t.yaml", text, &funcs)?;
    let opts = ExecOptions { missing_key: missing, ..ExecOptions::default() };
    execute(&set, "t.yaml", data, &funcs, &opts)
}

fn run(text: &str) -> String {
    match run_with(text, &data(), MissingKey::Zero) {
        Ok(s) => s,
        Err(e) => panic!("{text:?} failed: {e}"),
    }
}

fn fails(text: &str) -> TemplateError {
    match run_with(text, &data(), MissingKey::Zero) {
        Ok(s) => panic!("{text:?} rendered {s:?}"),
        Err(e) => e,
    }
}

#[test]
fn text_and_simple_values() {
    assert_eq!(run("hello {{ .Values.name }}!"), "hello web!");
    assert_eq!(run("{{ .Values.port }} {{ .Values.ratio }} {{ .Values.big }}"), "80 1.5 1e+06");
    assert_eq!(run("{{ .Values.enabled }} {{ .Values.list }} {{ .Values.map }}"), "true [a b c] map[a:2 m:3 z:1]");
    assert_eq!(run("{{ 3 }} {{ 1.5 }} {{ \"s\" }} {{ `r\\n` }} {{ true }} {{ 'a' }}"), "3 1.5 s r\\n true 97");
}

#[test]
fn trimming_and_comments() {
    assert_eq!(run("a\n  {{- .Values.name }}  \nb"), "aweb  \nb");
    assert_eq!(run("a  {{ .Values.name -}}\n\n  b"), "a  webb");
    assert_eq!(run("a {{/* comment */}} b"), "a  b");
    assert_eq!(run("a\n{{- /* comment */ -}}\nb"), "ab");
}

#[test]
fn missing_keys_follow_the_missingkey_option() {
    // Printed as <no value> (Helm strips it afterwards).
    assert_eq!(run("[{{ .Values.nope }}]"), "[<no value>]");
    assert_eq!(run_with("[{{ .Values.nope.deeper }}]", &data(), MissingKey::Default).expect("default"), "[<no value>]");
    // With missingkey=zero (Helm), a field of a missing value fails.
    let e = fails("{{ .Values.nope.deeper }}");
    assert_eq!(e.detail, "nil pointer evaluating interface {}.deeper");
    // Go reports a field chain at its second field, and names the whole node.
    assert_eq!((e.line, e.column), (1, 10));
    let e = fails("y: {{ upper .Values.nope }}");
    assert_eq!(e.column, 19);
    let e = fails("y: {{ eq .Values.port 80 }}");
    assert_eq!(e.column, 6);
    // An explicit null fails in both modes.
    assert!(run_with("{{ .Values.nothing.x }}", &data(), MissingKey::Default).is_err());
    let e = run_with("{{ .Values.nope }}", &data(), MissingKey::Error).expect_err("strict");
    assert_eq!(e.detail, "map has no entry for key \"nope\"");
    // A variable holding a missing value is invalid: its fields are too.
    assert_eq!(run("{{ $x := .Values.nope }}[{{ $x.y }}]"), "[<no value>]");
}

#[test]
fn field_of_a_non_map_is_an_error() {
    assert_ends(&fails("{{ .Values.name.x }}"), "can't evaluate field x in type interface {}");
    assert_ends(&fails("{{ .Values.name \"arg\" }}"), "name is not a method but has arguments");
}

#[test]
fn if_else_if_with_and_truthiness() {
    assert_eq!(run("{{ if .Values.enabled }}on{{ else }}off{{ end }}"), "on");
    assert_eq!(run("{{ if .Values.off }}1{{ else if .Values.empty }}2{{ else if .Values.list }}3{{ end }}"), "3");
    assert_eq!(run("{{ if .Values.nope }}1{{ else }}2{{ end }}"), "2");
    assert_eq!(run("{{ if 0 }}1{{ else }}2{{ end }}{{ if 0.0 }}1{{ else }}2{{ end }}"), "22");
    assert_eq!(run("{{ with .Values.nested.deep }}{{ .x }}{{ end }}"), "y");
    assert_eq!(run("{{ with .Values.empty }}x{{ else with .Values.name }}{{ . }}{{ end }}"), "web");
    assert_eq!(run("{{ with .Values.nope }}x{{ else }}none{{ end }}"), "none");
}

#[test]
fn range_over_lists_maps_and_integers() {
    assert_eq!(run("{{ range .Values.list }}{{ . }},{{ end }}"), "a,b,c,");
    assert_eq!(run("{{ range $i, $v := .Values.list }}{{ $i }}={{ $v }} {{ end }}"), "0=a 1=b 2=c ");
    assert_eq!(run("{{ range $k, $v := .Values.map }}{{ $k }}{{ $v }}{{ end }}"), "a2m3z1");
    assert_eq!(run("{{ range $v := .Values.map }}{{ $v }}{{ end }}"), "231");
    assert_eq!(run("{{ range 3 }}{{ . }}{{ end }}"), "012");
    assert_eq!(run("{{ range .Values.nope }}x{{ else }}empty{{ end }}"), "empty");
    assert_eq!(run("{{ range .Values.list }}{{ if eq . \"b\" }}{{ continue }}{{ end }}{{ . }}{{ end }}"), "ac");
    assert_eq!(run("{{ range .Values.list }}{{ if eq . \"b\" }}{{ break }}{{ end }}{{ . }}{{ end }}"), "a");
    // A nil element is a nil interface: its fields can't be read.
    assert!(run_with("{{ range .Values.nulls }}{{ .x }}{{ end }}", &data(), MissingKey::Zero).is_err());
    assert_ends(&fails("{{ range .Values.name }}{{ end }}"), "range can't iterate over web");
}

#[test]
fn variables_and_scopes() {
    assert_eq!(run("{{ $x := 1 }}{{ if true }}{{ $x = 2 }}{{ end }}{{ $x }}"), "2");
    assert_eq!(run("{{ $x := 1 }}{{ if true }}{{ $x := 2 }}{{ $x }}{{ end }}{{ $x }}"), "21");
    assert_eq!(run("{{ range .Values.list }}{{ $.Values.name }}{{ end }}"), "webwebweb");
    assert_eq!(run("{{ with .Values.nested }}{{ $.Values.port }}{{ end }}"), "80");
}

#[test]
fn define_template_block_include_and_tpl() {
    assert_eq!(run("{{ define \"x\" }}[{{ . }}]{{ end }}{{ template \"x\" .Values.name }}"), "[web]");
    assert_eq!(run("{{ block \"b\" .Values.port }}<{{ . }}>{{ end }}"), "<80>");
    assert_eq!(run("{{ define \"x\" }}{{ .name }}{{ end }}{{ include \"x\" .Values | upper }}"), "WEB");
    assert_eq!(run("{{ tpl \"{{ .Values.name }}-{{ .Values.port }}\" . }}"), "web-80");
    // A template sees only its own data and `$`.
    assert_eq!(run("{{ define \"x\" }}{{ $ }}{{ end }}{{ $y := 1 }}{{ template \"x\" 5 }}"), "5");
    let e = fails("{{ template \"nope\" }}");
    assert_ends(&e, "template \"nope\" not defined");
}

#[test]
fn errors_inside_includes_name_the_innermost_template() {
    let funcs = test_funcs();
    let mut set = Templates::new();
    set.add("c/templates/_helpers.tpl", "{{ define \"h\" }}\n{{ .a.b }}{{ end }}", &funcs).expect("parses");
    set.add("c/templates/cm.yaml", "x: 1\ny: {{ include \"h\" .Values }}", &funcs).expect("parses");
    let opts = ExecOptions { missing_key: MissingKey::Zero, ..ExecOptions::default() };
    let e = execute(&set, "c/templates/cm.yaml", &data(), &funcs, &opts).expect_err("fails");
    // Go's message names the including template; the origin is the innermost.
    assert_eq!((e.template.as_str(), e.line), ("c/templates/cm.yaml", 2));
    assert_eq!(e.innermost(), ("c/templates/_helpers.tpl", 2, "nil pointer evaluating interface {}.b"));
}

#[test]
fn recursion_is_limited() {
    let e = fails("{{ define \"r\" }}{{ template \"r\" . }}{{ end }}{{ template \"r\" . }}");
    assert_eq!(e.kind, TemplateErrorKind::Limit);
    let e = fails("{{ define \"r\" }}{{ include \"r\" . }}{{ end }}{{ include \"r\" . }}");
    assert_eq!(e.kind, TemplateErrorKind::Limit);
    // The engine's own depth limit (Helm's include limit, with Helm's words, is the helm crate's).
    assert!(e.to_string().ends_with("exceeded maximum template depth (1100)"), "{e}");
}

#[test]
fn work_and_output_are_limited() {
    let funcs = test_funcs();
    let mut set = Templates::new();
    set.add("t", "{{ range 100000000 }}x{{ end }}", &funcs).expect("parses");
    let opts =
        ExecOptions { limits: ExecLimits { max_steps: 10_000, ..ExecLimits::default() }, ..ExecOptions::default() };
    let e = execute(&set, "t", &Value::Nil, &funcs, &opts).expect_err("limited");
    assert_eq!(e.kind, TemplateErrorKind::Limit);
    let opts = ExecOptions {
        limits: ExecLimits { max_output_bytes: 1000, ..ExecLimits::default() },
        ..ExecOptions::default()
    };
    let e = execute(&set, "t", &Value::Nil, &funcs, &opts).expect_err("limited");
    assert!(e.detail.contains("output limit exceeded"), "{}", e.detail);
}

#[test]
fn eq_and_comparisons_follow_go_type_rules() {
    assert_eq!(run("{{ eq .Values.name \"web\" }} {{ eq 1 2 1 }} {{ ne 1 2 }}"), "true true true");
    assert_eq!(run("{{ eq .Values.port 80.0 }}"), "true");
    // Values are float64, a constant 80 is an int.
    assert_ends(
        &fails("{{ eq .Values.port 80 }}"),
        "error calling eq: incompatible types for comparison: float64 and int",
    );
    assert_eq!(run("{{ eq .Values.nope \"x\" }}"), "false");
    assert_eq!(run("{{ lt 1 2 }} {{ le 2 2 }} {{ gt \"b\" \"a\" }} {{ ge 1.5 2.5 }}"), "true true true false");
    assert!(fails("{{ lt true false }}").message.contains("invalid type for comparison"));
}

#[test]
fn and_or_short_circuit_and_return_the_deciding_value() {
    assert_eq!(run("{{ and 1 0 2 }} {{ and 1 2 }} {{ or 0 \"\" \"x\" }} {{ or 0 \"\" }}"), "0 2 x ");
    // The second argument would fail if evaluated.
    assert_eq!(run("{{ or .Values.name .Values.nope.deeper }}"), "web");
    assert_eq!(run("{{ and .Values.nope .Values.nope.deeper }}"), "<no value>");
    assert_eq!(run("{{ not .Values.empty }} {{ not 1 }}"), "true false");
}

#[test]
fn index_slice_len() {
    assert_eq!(
        run("{{ index .Values.list 1 }} {{ index .Values \"nested\" \"deep\" \"x\" }} {{ index .Values.map \"q\" }}"),
        "b y <no value>"
    );
    assert_ends(&fails("{{ index .Values.list 5 }}"), "error calling index: index out of range: 5");
    assert_eq!(
        run("{{ slice .Values.list 1 }} {{ slice .Values.name 1 2 }} {{ len .Values.list }} {{ len .Values.name }}"),
        "[b c] e 3 3"
    );
    assert_ends(
        &fails("{{ index .Values.list 1.0 }}"),
        "error calling index: cannot index slice/array with type float64",
    );
}

#[test]
fn print_functions() {
    assert_eq!(
        run("{{ print 1 2 \"a\" \"b\" 3 }}|{{ println 1 \"a\" }}|{{ printf \"%s-%d-%v\" \"x\" 3 .Values.port }}"),
        "1 2ab3|1 a\n|x-3-80"
    );
    assert_eq!(run("{{ printf \"%d\" .Values.port }}"), "%!d(float64=80)");
    assert_eq!(
        run("{{ html \"<a href='x'>\" }} {{ urlquery \"a b&c\" }} {{ js \"it's\" }}"),
        "&lt;a href=&#39;x&#39;&gt; a+b%26c it\\'s"
    );
}

#[test]
fn pipelines_pass_the_last_value_as_the_last_argument() {
    assert_eq!(run("{{ .Values.name | upper }}"), "WEB");
    assert_eq!(run("{{ 1 | add 2 | add 3 }}"), "6");
    assert_eq!(run("{{ (add 1 2) }} {{ add (add 1 2) 3 }}"), "3 6");
    assert_eq!(run("{{ (.Values.nested).deep.x }}"), "y");
}

#[test]
fn arguments_are_converted_as_go_does() {
    assert_eq!(run("{{ intArg 3 }}"), "3");
    assert_ends(&fails("{{ intArg 1.5 }}"), "expected integer; found 1.5");
    assert_ends(&fails("{{ intArg .Values.port }}"), "wrong type for value; expected int; got float64");
    assert_ends(&fails("{{ upper 3 }}"), "expected string; found 3");
    assert_ends(&fails("{{ upper .Values.nope }}"), "wrong type for value; expected string; got interface {}");
    assert_ends(&fails("{{ upper \"a\" \"b\" }}"), "wrong number of args for upper: want 1 got 2");
    // An untyped constant to interface{}: int, or float64 with a fraction.
    assert_eq!(
        run("{{ typeOf 1 }} {{ typeOf 1.0 }} {{ typeOf .Values.port }} {{ typeOf nil }}"),
        "int float64 float64 <nil>"
    );
}

#[test]
fn fail_keeps_the_authors_message() {
    let e = fails("line1\n{{ fail \"no way\" }}");
    assert_eq!(e.kind, TemplateErrorKind::Fail);
    assert_eq!(e.detail, "no way");
    assert_eq!(e.line, 2);
}

#[test]
fn parse_errors_name_template_and_line() {
    let e = run_with("ok\n{{ nope }}", &data(), MissingKey::Zero).expect_err("fails");
    assert_eq!(e.kind, TemplateErrorKind::Parse);
    assert_eq!(e.line, 2);
    assert_eq!(e.to_string(), "template: t.yaml:2: function \"nope\" not defined");
}

#[test]
fn an_empty_define_does_not_replace_a_non_empty_one() {
    let funcs = test_funcs();
    let mut set = Templates::new();
    set.add("a", "{{ define \"x\" }}full{{ end }}", &funcs).expect("parses");
    set.add("b", "{{ define \"x\" }}  {{ end }}", &funcs).expect("parses");
    set.add("c", "{{ template \"x\" }}", &funcs).expect("parses");
    assert_eq!(execute(&set, "c", &Value::Nil, &funcs, &ExecOptions::default()).expect("runs"), "full");
    set.add("d", "{{ define \"x\" }}new{{ end }}", &funcs).expect("parses");
    assert_eq!(execute(&set, "c", &Value::Nil, &funcs, &ExecOptions::default()).expect("runs"), "new");
}

#[test]
fn objects_expose_fields_and_methods() {
    struct Files;
    impl Object for Files {
        fn type_name(&self) -> &str {
            "engine.files"
        }
        fn field(&self, _: &str) -> Option<Value> {
            None
        }
        fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
            (method == "Get")
                .then(|| Ok(Value::str(format!("content of {}", args.first().and_then(Value::as_str).unwrap_or("?")))))
        }
        fn go_string(&self) -> String {
            "files".into()
        }
    }
    let d = Value::map(BTreeMap::from([("Files".to_string(), Value::Object(std::rc::Rc::new(Files)))]));
    assert_eq!(
        run_with("{{ .Files.Get \"a.txt\" }}|{{ \"b\" | .Files.Get }}", &d, MissingKey::Zero).expect("runs"),
        "content of a.txt|content of b"
    );
    assert!(run_with("{{ .Files.Nope }}", &d, MissingKey::Zero).is_err());
}

fn assert_ends(e: &TemplateError, want: &str) {
    assert!(e.to_string().ends_with(want), "{e} does not end with {want:?}");
}
