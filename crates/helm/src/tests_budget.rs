//! Hostile charts: each attack of issue 20 against the engine, as a tiny
//! chart. Each must end in an error naming the budget (or, where Helm
//! prints something, the same output), never in an abort of the process.

use std::path::Path;

use super::*;

fn chart(dir: &Path, template: &str, values: &str) -> Chart {
    std::fs::create_dir_all(dir.join("templates")).expect("mkdir");
    std::fs::write(dir.join("Chart.yaml"), "apiVersion: v2\nname: hostile\nversion: 0.1.0\n").expect("write");
    std::fs::write(dir.join("values.yaml"), values).expect("write");
    std::fs::write(dir.join("templates/cm.yaml"), template).expect("write");
    load_chart(dir).expect("loads")
}

fn render_err(template: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = chart(dir.path(), template, "");
    match render_chart(&c, &HelmOptions::new("r", "ns")) {
        Ok(m) => panic!("rendered: {m:?}"),
        Err(e) => e.to_string(),
    }
}

fn render_ok(template: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = chart(dir.path(), template, "");
    let m = render_chart(&c, &HelmOptions::new("r", "ns")).expect("renders");
    m.into_iter().map(|m| m.content.trim_end().to_string()).collect::<Vec<_>>().join("\n---\n")
}

#[test]
fn sizes_are_checked_before_allocating() {
    for (template, budget) in [
        (r#"x: {{ repeat 100000000000 "x" | len }}"#, "repeat"),
        (r#"x: {{ until 2000000000 | len }}"#, "until"),
        (r#"x: {{ untilStep 0 9223372036854775807 1 | len }}"#, "untilStep"),
        (r#"x: {{ seq 2000000000 | len }}"#, "seq"),
        (r#"x: {{ indent 100000000000 "a" | len }}"#, "indent"),
        (r#"x: {{ nindent 100000000 (repeat 1000 "\n") | len }}"#, "nindent"),
        (r#"x: {{ randAlpha 100000000000 | len }}"#, "random string"),
        (r#"x: {{ randBytes 100000000000 | len }}"#, "randBytes"),
        (r#"x: {{ replace "" (repeat 1000000 "y") (repeat 1000000 "x") | len }}"#, "replace"),
        (r#"x: {{ join (repeat 1000000 "x") (until 1000000) | len }}"#, "join"),
    ] {
        let e = render_err(template);
        assert!(e.contains(budget) && e.contains("size limit"), "{template}: {e}");
        assert!(e.contains("templates/cm.yaml:1"), "names file and line: {e}");
    }
}

#[test]
fn a_string_doubled_in_a_loop_stops_at_the_size_limit() {
    let e = render_err(r#"{{ $s := "xx" }}{{ range until 64 }}{{ $s = print $s $s }}{{ end }}x: {{ len $s }}"#);
    assert!(e.contains("size limit"), "{e}");
}

#[test]
fn printf_widths_past_a_million_are_bad_widths_as_in_go() {
    let out = render_ok(r#"x: {{ printf "%*d|%.*f" 100000000000 1 100000000000 1.5 | quote }}"#);
    assert_eq!(out, r#"x: "%!(BADWIDTH)1|%!(BADPREC)1.500000""#);
}

#[test]
fn a_dict_holding_itself_encodes_as_helm_does() {
    // helm v4.2.3 prints "" for toJson, toYaml, toPrettyJson of it and
    // fails mustToJson with Go's cycle error.
    let out = render_ok(
        r#"{{- $d := dict "a" 1 }}{{- $_ := set $d "self" $d }}
json: {{ toJson $d | quote }}
yaml: {{ toYaml $d | quote }}
pretty: {{ toPrettyJson $d | quote }}"#,
    );
    assert_eq!(out, "json: \"\"\nyaml: \"\"\npretty: \"\"");
    let e = render_err(r#"{{- $d := dict "a" 1 }}{{- $_ := set $d "self" $d }}x: {{ mustToJson $d }}"#);
    assert!(e.contains("encountered a cycle"), "{e}");
    // Go loops forever on these (helm hangs); here they are errors.
    let e = render_err(r#"{{- $d := dict "a" 1 }}{{- $_ := set $d "self" $d }}x: {{ deepCopy $d | len }}"#);
    assert!(e.contains("holds itself"), "{e}");
    let e = render_err(r#"{{- $d := dict "a" 1 }}{{- $_ := set $d "self" $d }}x: {{ $d }}"#);
    assert!(e.contains("holds itself"), "{e}");
}

#[test]
fn shared_parts_are_not_cycles() {
    let out = render_ok(r#"{{ $d := dict "a" 1 }}{{ $l := list $d $d }}x: {{ toJson (list $l $l) }}"#);
    assert_eq!(out, r#"x: [[{"a":1},{"a":1}],[{"a":1},{"a":1}]]"#);
}

#[test]
fn an_alias_bomb_in_values_is_refused_as_helm_does() {
    let mut values = String::from("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 10].join(",");
        values.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("templates")).expect("mkdir");
    std::fs::write(dir.path().join("Chart.yaml"), "apiVersion: v2\nname: hostile\nversion: 0.1.0\n").expect("w");
    std::fs::write(dir.path().join("values.yaml"), &values).expect("w");
    let e = load_chart(dir.path()).expect_err("refused").to_string();
    assert!(e.contains("excessive aliasing"), "{e}");
    // fromYaml in a template reads through the same parser.
    let e = render_ok(&format!("x: {{{{ fromYaml {:?} | toJson | quote }}}}", values));
    assert!(e.contains("excessive aliasing"), "{e}");
}

#[test]
fn deep_nesting_in_yaml_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}{}", "[".repeat(200_000), "]".repeat(200_000));
    let out = render_ok(&format!("x: {{{{ fromYaml {:?} | toJson | quote }}}}", format!("a: {deep}")));
    assert!(out.contains("depth") || out.contains("error"), "{out}");
}

#[test]
fn subcharts_nested_45_deep_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut path = dir.path().to_path_buf();
    for level in 0..45 {
        std::fs::create_dir_all(path.join("templates")).expect("mkdir");
        std::fs::write(path.join("Chart.yaml"), format!("apiVersion: v2\nname: c{level}\nversion: 0.1.0\n"))
            .expect("w");
        std::fs::write(path.join("templates/cm.yaml"), "x: 1\n").expect("w");
        path = path.join("charts").join(format!("c{}", level + 1));
    }
    let e = load_chart(dir.path()).expect_err("refused").to_string();
    assert!(e.contains("nested deeper than 16"), "{e}");
}

#[test]
fn the_output_limit_is_the_charts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = chart(dir.path(), r#"x: {{ repeat 600 "x" }}"#, "");
    let mut c2 = c.clone();
    for n in 0..4 {
        let mut t = c.templates[0].clone();
        t.name = format!("templates/cm{n}.yaml");
        c2.templates.push(t);
    }
    let mut opts = HelmOptions::new("r", "ns");
    opts.limits.max_output_bytes = 2000;
    let e = render_chart(&c2, &opts).expect_err("over the chart's limit").to_string();
    assert!(e.contains("output limit exceeded") && e.contains("2000 bytes"), "{e}");
    let one = chart(tempfile::tempdir().expect("tempdir").path(), r#"x: {{ repeat 600 "x" }}"#, "");
    assert!(render_chart(&one, &opts).is_ok());
}

#[test]
fn key_generation_is_charged_to_the_step_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = chart(dir.path(), r#"{{ range until 30 }}k: {{ genPrivateKey "rsa" | len }}{{ end }}"#, "");
    let mut opts = HelmOptions::new("r", "ns");
    opts.limits.max_steps = 20_000_000;
    let started = std::time::Instant::now();
    let e = render_chart(&c, &opts).expect_err("over the step budget").to_string();
    assert!(e.contains("step limit exceeded"), "{e}");
    // Two keys at most were made before the budget ran out; not thirty.
    eprintln!("refused after {:?}", started.elapsed());
    let c = chart(dir.path(), r#"{{ range until 100 }}{{ bcrypt "x" | len }}{{ end }}"#, "");
    opts.limits.max_steps = 5_000_000;
    let e = render_chart(&c, &opts).expect_err("over the step budget").to_string();
    assert!(e.contains("step limit exceeded"), "{e}");
}
