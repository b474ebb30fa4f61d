//! Table tests of the engine's objects (Go structs and map types with methods, as Helm's
//! `.Files` and `.Release`), of the template set's sharing across threads, and of its depth
//! limits. Split from `tests.rs`, whose helpers they use.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::exec::{ExecOptions, execute};
use super::parse::Templates;
use super::tests::{funcs, run, run_opts};
use super::value::{FuncError, Object, Value};

struct Files;

impl Object for Files {
    fn type_name(&self) -> &str {
        "files.Files"
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
        match method {
            "Get" => {
                Some(Ok(Value::from(format!("content of {}", args.first().and_then(Value::as_str).unwrap_or("")))))
            }
            "Fail" => Some(Err(FuncError::msg("no file"))),
            _ => None,
        }
    }
    fn go_string(&self) -> String {
        "map[]".into()
    }
}

/// A Go map type with methods (as Helm's `files.Files`).
struct FileMap;

impl Object for FileMap {
    fn type_name(&self) -> &str {
        "files.Files"
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn go_string(&self) -> String {
        "map[a.txt:[120] b.txt:[]]".into()
    }
    fn elements(&self) -> Option<Value> {
        let mut m = BTreeMap::new();
        m.insert("b.txt".to_string(), Value::Bytes(Rc::from(&b""[..])));
        m.insert("a.txt".to_string(), Value::Bytes(Rc::from(&b"x"[..])));
        Some(Value::map(m))
    }
}

struct Release;

impl Object for Release {
    fn type_name(&self) -> &str {
        "*release.Info"
    }
    fn field(&self, name: &str) -> Option<Value> {
        match name {
            "Name" => Some(Value::from("rel")),
            "Nil" => Some(Value::Nil),
            _ => None,
        }
    }
    fn go_string(&self) -> String {
        "{rel}".into()
    }
}

#[test]
fn objects_fields_and_methods() {
    let mut m = BTreeMap::new();
    m.insert("Files".to_string(), Value::Object(Rc::new(Files)));
    m.insert("Release".to_string(), Value::Object(Rc::new(Release)));
    let d = Value::map(m);
    let r = |t: &str| run_opts(t, &d, &ExecOptions::default());
    assert_eq!(
        r("{{.Release.Name}} {{.Files.Get \"a.txt\"}} {{\"b\" | .Files.Get}} {{.Release}}").unwrap(),
        "rel content of a.txt content of b {rel}"
    );
    assert_eq!(
        r("{{.Release.Nope}}").unwrap_err(),
        "template: t:1:10: executing \"t\" at <.Release.Nope>: can't evaluate field Nope in type *release.Info"
    );
    assert_eq!(
        r("{{.Files.Fail}}").unwrap_err(),
        "template: t:1:8: executing \"t\" at <.Files.Fail>: error calling Fail: no file"
    );
    assert_eq!(
        r("{{.Release.Name 1}}").unwrap_err(),
        "template: t:1:10: executing \"t\" at <.Release.Name>: Name has arguments but cannot be invoked as function"
    );
    assert_eq!(r("{{if .Release}}y{{end}}").unwrap(), "y");
    // A map type with methods ranges, indexes and has a length like its map.
    let mut m = BTreeMap::new();
    m.insert("Files".to_string(), Value::Object(Rc::new(FileMap)));
    let d = Value::map(m);
    let r = |t: &str| run_opts(t, &d, &ExecOptions::default());
    assert_eq!(
        r("{{range $p, $b := .Files}}{{$p}}={{printf \"%s\" $b}};{{end}} {{len .Files}} {{index .Files \"a.txt\"}}")
            .unwrap(),
        "a.txt=x;b.txt=; 2 [120]"
    );
    assert_eq!(r("{{if .Files}}y{{end}}{{with .Files}}w{{end}}").unwrap(), "yw");
}

/// A struct whose `String()` is on its pointer (Helm's `KubeVersion`).
struct Version;

impl Object for Version {
    fn type_name(&self) -> &str {
        "common.KubeVersion"
    }
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }
    fn go_string(&self) -> String {
        "{v1.2.3-x v1.2.3}".into()
    }
    fn addressable_string(&self) -> Option<String> {
        Some("v1.2.3".into())
    }
}

/// An action ending in a field, variable or dot holding it prints its `String()`, as Go does
/// for an addressable value; a function's argument or result is a copy and prints its fields.
#[test]
fn a_pointer_stringer_prints_where_go_can_address_the_value() {
    let d = Value::map(BTreeMap::from([("V".to_string(), Value::Object(Rc::new(Version)))]));
    let r = |t: &str| run_opts(t, &d, &ExecOptions::default()).unwrap();
    assert_eq!(
        r("{{ .V }}|{{ (.V) }}|{{ $v := .V }}{{ $v }}|{{ with .V }}{{ . }}{{ end }}"),
        "v1.2.3|v1.2.3|v1.2.3|v1.2.3"
    );
    assert_eq!(
        r("{{ print .V }}|{{ printf \"%v\" .V }}|{{ .V | print }}"),
        "{v1.2.3-x v1.2.3}|{v1.2.3-x v1.2.3}|{v1.2.3-x v1.2.3}"
    );
}

#[test]
fn templates_are_send_sync_and_cheap_to_clone() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Templates>();
}

#[test]
fn default_depth_limit_fits_a_test_thread_stack() {
    // include → tpl → template recursion to the default limit must fail
    // cleanly, not overflow a 2 MiB thread stack.
    for text in [
        "{{define \"r\"}}{{include \"r\" .}}{{end}}{{include \"r\" .}}",
        "{{define \"r\"}}{{template \"r\" .}}{{end}}{{template \"r\" .}}",
        "{{define \"r\"}}{{if true}}{{range list 1}}{{with .}}{{tpl \"{{include \\\"r\\\" .}}\" .}}{{end}}{{end}}{{end}}{{end}}{{include \"r\" .}}",
    ] {
        let e = run(text).unwrap_err();
        assert!(
            e.contains("exceeded maximum template depth")
                || e.contains("rendering template has a nested reference name: r: unable to execute template"),
            "{e}"
        );
    }
}

#[test]
fn deep_nesting_in_one_template_does_not_overflow() {
    let n = 3000;
    let text = format!("{}1{}", "{{if true}}".repeat(n), "{{end}}".repeat(n));
    assert_eq!(run(&text).unwrap(), "1");
    let text = format!("{{{{{}1{}}}}}", "(".repeat(n), ")".repeat(n));
    assert_eq!(run(&text).unwrap(), "1");
}

/// Not a benchmark (debug build, no timing assert): prints how long a
/// Cilium-sized set takes, to spot pathological slowness.
#[test]
#[ignore]
fn large_set_timing() {
    let f = funcs();
    let mut set = Templates::new();
    let mut helpers = String::new();
    for i in 0..100 {
        helpers.push_str(&format!(
            "{{{{- define \"h{i}\" -}}}}\n{{{{- if .Values.map }}}}{{{{ include \"leaf\" . }}}}-{i}{{{{ else }}}}x{{{{ end }}}}\n{{{{- end }}}}\n"
        ));
    }
    helpers.push_str("{{- define \"leaf\" -}}{{ .Values.str | upper }}{{- end }}");
    set.add("c/templates/_helpers.tpl", &helpers, &f).unwrap();
    let mut body = String::new();
    for i in 0..30 {
        body.push_str(&format!("key{i}: {{{{ include \"h{}\" . }}}}\n  {{{{- range $k, $v := .Values.map }}}}\n  {{{{ $k }}}}: {{{{ $v }}}}{{{{ end }}}}\n", i % 100));
    }
    for t in 0..300 {
        set.add(&format!("c/templates/t{t}.yaml"), &body, &f).unwrap();
    }
    let data = Value::from_json(&serde_json::json!({"Values": {"str": "hello", "map": {"a": 1, "b": "x"}}}));
    let start = std::time::Instant::now();
    let mut total = 0;
    for t in 0..300 {
        total += execute(&set, &format!("c/templates/t{t}.yaml"), &data, &f, &ExecOptions::default()).unwrap().len();
    }
    println!("300 templates, 18000 includes: {:?}, {total} bytes", start.elapsed());
}
