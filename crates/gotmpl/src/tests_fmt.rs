//! Go's fmt for values: `%v`, Sprint/Sprintln and Sprintf's verbs and flags.

use std::collections::BTreeMap;

use super::fmt::{format_value, sprint, sprintf, sprintln};
use super::value::Value;

fn i(n: i64) -> Value {
    Value::Int(n)
}
fn f(x: f64) -> Value {
    Value::Float(x)
}
fn s(x: &str) -> Value {
    Value::str(x)
}

#[test]
fn floats_print_as_go() {
    for (v, want) in [
        (1e6, "1e+06"),
        (3.5, "3.5"),
        (1.0, "1"),
        (100000.0, "100000"),
        (123456789.0, "1.23456789e+08"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (1e21, "1e+21"),
        (0.1, "0.1"),
        (f64::INFINITY, "+Inf"),
        (f64::NAN, "NaN"),
    ] {
        assert_eq!(format_value(&f(v)), want, "{v}");
    }
}

#[test]
fn lists_and_maps_print_as_go() {
    let m = Value::map(BTreeMap::from([("b".to_string(), i(2)), ("a".to_string(), s("x"))]));
    assert_eq!(format_value(&m), "map[a:x b:2]");
    let l = Value::list(vec![s("a"), s("b"), Value::Nil, f(1.5), Value::list(vec![])]);
    assert_eq!(format_value(&l), "[a b <nil> 1.5 []]");
    assert_eq!(format_value(&Value::Nil), "<nil>");
    assert_eq!(format_value(&Value::Bytes(b"hi".as_slice().into())), "[104 105]");
}

#[test]
fn sprint_spaces_between_non_strings() {
    assert_eq!(sprint(&[s("a"), s("b")]), "ab");
    assert_eq!(sprint(&[i(1), i(2)]), "1 2");
    assert_eq!(sprint(&[s("a"), i(1), i(2), s("b")]), "a1 2b");
    assert_eq!(sprintln(&[s("a"), s("b"), i(3)]), "a b 3\n");
    assert_eq!(sprint(&[]), "");
}

#[test]
fn sprintf_verbs() {
    let cases: Vec<(&str, Vec<Value>, &str)> = vec![
        ("%d", vec![i(42)], "42"),
        ("%5d|%-5d|%05d", vec![i(42), i(42), i(-42)], "   42|42   |-0042"),
        ("%+d % d", vec![i(5), i(5)], "+5  5"),
        ("%x %X %o %O %b", vec![i(255), i(255), i(8), i(8), i(5)], "ff FF 10 0o10 101"),
        ("%#x %#o", vec![i(255), i(8)], "0xff 010"),
        ("%c %q %U %#U", vec![i(65), i(65), i(0x1F600), i(65)], "A 'A' U+1F600 U+0041 'A'"),
        ("%s|%10s|%-10s|%.2s", vec![s("hello"), s("hi"), s("hi"), s("hello")], "hello|        hi|hi        |he"),
        ("%q", vec![s("a\"b\n")], "\"a\\\"b\\n\""),
        ("%#q", vec![s("ab")], "`ab`"),
        ("%x %X", vec![s("hi"), s("hi")], "6869 6869"),
        ("%v %t", vec![Value::Bool(true), Value::Bool(false)], "true false"),
        ("%e %E", vec![f(1234.5678), f(1234.5678)], "1.234568e+03 1.234568E+03"),
        ("%f %.2f %8.3f %-8.1f|", vec![f(1.23456), f(1.23456), f(1.23456), f(2.0)], "1.234560 1.23    1.235 2.0     |"),
        ("%g %g %.3g %G", vec![f(1e6), f(0.5), f(1.23456), f(1e-7)], "1e+06 0.5 1.23 1E-07"),
        ("%v", vec![f(1e6)], "1e+06"),
        ("%d", vec![f(1.0)], "%!d(float64=1)"),
        ("%s", vec![i(5)], "%!s(int=5)"),
        ("%d", vec![s("x")], "%!d(string=x)"),
        ("%d", vec![Value::Nil], "%!d(<nil>)"),
        ("%v", vec![Value::Nil], "<nil>"),
        ("%s %s", vec![s("a")], "a %!s(MISSING)"),
        ("%s", vec![s("a"), i(1), s("b")], "a%!(EXTRA int=1, string=b)"),
        ("100%%", vec![], "100%"),
        ("%", vec![], "%!(NOVERB)"),
        ("%z", vec![i(1)], "%!z(int=1)"),
        (
            "%x|%X|%.3x|%x|%x|%x",
            vec![f(1000.0), f(1000.0), f(1000.0), f(0.0), f(-1.0), f(0.1)],
            "0x1.f4p+09|0X1.F4P+09|0x1.f40p+09|0x0p+00|-0x1p+00|0x1.999999999999ap-04",
        ),
        (
            "%v-%s-%d-%q-%5.2f-%x",
            vec![Value::Nil, Value::Nil, f(3.0), s("x"), f(3.0), Value::Nil],
            "<nil>-%!s(<nil>)-%!d(float64=3)-\"x\"- 3.00-%!x(<nil>)",
        ),
        ("%x", vec![Value::list(vec![f(1.5)])], "[0x1.8p+00]"),
        ("%5.2f|%5d", vec![i(0), s("x")], "%!f(int=   00)|%!d(string=    x)"),
        ("%[2]s %[1]s", vec![s("a"), s("b")], "b a"),
        ("%*d", vec![i(4), i(7)], "   7"),
        ("%T %T %T", vec![i(1), f(1.0), Value::list(vec![])], "int float64 []interface {}"),
        ("%s", vec![Value::list(vec![s("a"), s("b")])], "[a b]"),
        ("%d", vec![Value::list(vec![i(1), i(2)])], "[1 2]"),
        ("%q", vec![Value::list(vec![s("a"), s("b")])], "[\"a\" \"b\"]"),
        ("%v", vec![Value::Int64(-3)], "-3"),
        ("%6.2f%%", vec![f(99.5)], " 99.50%"),
        ("%+.1e", vec![f(0.0)], "+0.0e+00"),
        ("%x", vec![i(-255)], "-ff"),
        ("%+v %+v %+d", vec![i(5), f(1.5), i(5)], "5 1.5 +5"),
        ("%+q", vec![s("é")], "\"\\u00e9\""),
        ("%5.2v|%08.3f", vec![f(3.14259), f(-3.14259)], "  3.1|-003.143"),
        ("% x|%#x", vec![s("hi"), s("hi")], "68 69|0x6869"),
    ];
    for (format, args, want) in cases {
        assert_eq!(sprintf(format, &args), want, "{format}");
    }
}

#[test]
fn sharp_v_is_go_syntax() {
    let m = Value::map(BTreeMap::from([("a".to_string(), i(1))]));
    assert_eq!(sprintf("%#v", &[m]), "map[string]interface {}{\"a\":1}");
    assert_eq!(sprintf("%#v", &[Value::list(vec![s("x"), Value::Nil])]), "[]interface {}{\"x\", interface {}(nil)}");
    assert_eq!(sprintf("%#v", &[s("q")]), "\"q\"");
}

/// Widths and precisions from operands, as helm v4.2.3 prints them
/// (`printf "%.*d|%*d|%.*d|%*d" -1 5 2.0 3 "x" 4 1000001 5`).
#[test]
fn star_width_and_precision_refuse_as_go() {
    let args = vec![i(-1), i(5), f(2.0), i(3), s("x"), i(4), i(1_000_001), i(5)];
    assert_eq!(sprintf("%.*d|%*d|%.*d|%*d", &args), "%!(BADPREC)5|%!(BADWIDTH)3|%!(BADPREC)4|%!(BADWIDTH)5");
    assert_eq!(sprintf("%-*d|%.*d", &[i(-3), i(1), i(2), i(7)]), "1  |07");
}
