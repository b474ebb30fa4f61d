//! Table tests of the engine's builtins (`and`, `or`, comparisons, `len`, `index`, `slice`,
//! `print`, `printf`, `println`) against Go's documented behaviour. Split from `tests.rs`,
//! whose helpers they use.

use super::tests::{err, ok};

#[test]
fn and_or_short_circuit() {
    ok(&[
        ("{{and 1 0 2}} {{and 1 2}} {{and .empty (oops)}}", "0 2 "),
        ("{{or 0 \"\" 3}} {{or 0 \"\"}} {{or .str (oops)}}", "3  hello"),
        ("{{.str | and 1}} {{0 | or \"\"}}", "hello 0"),
        ("{{and .missing 1 | typeOf}}", "<nil>"),
    ]);
    err(&[(
        "{{and}}",
        "template: t:1:2: executing \"t\" at <and>: wrong number of args for and: want at least 1 got 0",
    )]);
}

#[test]
fn comparisons() {
    ok(&[
        (
            "{{eq 1 1}} {{eq 1 2}} {{eq \"a\" \"a\"}} {{eq .str \"x\" \"hello\"}} {{eq .n 3.0}}",
            "true false true true true",
        ),
        ("{{eq .missing nil}} {{eq nil nil}} {{eq .str nil}} {{eq (int64 1) 1}}", "true true false true"),
        ("{{ne 1 2}} {{ne \"a\" \"a\"}} {{eq true true}}", "true false true"),
        ("{{lt 1 2}} {{le 2 2}} {{gt \"b\" \"a\"}} {{ge 1.5 2.5}} {{lt .n 4.0}}", "true true true false true"),
    ]);
    err(&[
        (
            "{{eq .n 3}}",
            "template: t:1:2: executing \"t\" at <eq .n 3>: error calling eq: incompatible types for comparison: float64 and int",
        ),
        (
            "{{eq 1 \"1\"}}",
            "template: t:1:2: executing \"t\" at <eq 1 \"1\">: error calling eq: incompatible types for comparison: int and string",
        ),
        (
            "{{lt 1 1.5}}",
            "template: t:1:2: executing \"t\" at <lt 1 1.5>: error calling lt: incompatible types for comparison: int and float64",
        ),
        (
            "{{lt true false}}",
            "template: t:1:2: executing \"t\" at <lt true false>: error calling lt: invalid type for comparison",
        ),
        (
            "{{lt nil 1}}",
            "template: t:1:2: executing \"t\" at <lt nil 1>: error calling lt: invalid type for comparison",
        ),
        (
            "{{eq .list .list}}",
            "template: t:1:2: executing \"t\" at <eq .list .list>: error calling eq: non-comparable type [a b c]: []interface {}",
        ),
        ("{{eq 1}}", "template: t:1:2: executing \"t\" at <eq 1>: error calling eq: missing argument for comparison"),
        ("{{lt 1}}", "template: t:1:2: executing \"t\" at <lt>: wrong number of args for lt: want 2 got 1"),
    ]);
}

#[test]
fn len_index_slice() {
    ok(&[
        ("{{len .str}} {{len .list}} {{len .map}} {{len .emptyMap}} {{len \"é\"}}", "5 3 3 0 2"),
        ("{{index .list 1}} {{index .map \"a\"}} {{index .map \"c\" \"d\"}} {{index .str 0}}", "b 1 deep 104"),
        ("{{index .map \"zz\"}} {{index .list}}", "<no value> [a b c]"),
        ("{{slice .list 1}} {{slice .list 1 2}} {{slice .str 1 3}} {{slice .list}}", "[b c] [b] el [a b c]"),
        ("{{index (list (list 1 2) (list 3)) 0 1}}", "2"),
    ]);
    err(&[
        ("{{len 3}}", "template: t:1:2: executing \"t\" at <len 3>: error calling len: len of type int"),
        (
            "{{len .missing}}",
            "template: t:1:2: executing \"t\" at <len .missing>: error calling len: reflect: call of reflect.Value.Type on zero Value",
        ),
        (
            "{{len .nothing}}",
            "template: t:1:2: executing \"t\" at <len .nothing>: error calling len: len of nil pointer",
        ),
        (
            "{{$v := .missing}}{{len $v}}",
            "template: t:1:20: executing \"t\" at <len $v>: error calling len: reflect: call of reflect.Value.Type on zero Value",
        ),
        (
            "{{index .missing \"a\"}}",
            "template: t:1:2: executing \"t\" at <index .missing \"a\">: error calling index: index of untyped nil",
        ),
        (
            "{{index .map \"zz\" \"y\"}}",
            "template: t:1:2: executing \"t\" at <index .map \"zz\" \"y\">: error calling index: index of nil pointer",
        ),
        (
            "{{index .list 5}}",
            "template: t:1:2: executing \"t\" at <index .list 5>: error calling index: index out of range: 5",
        ),
        (
            "{{index .list 3}}",
            "template: t:1:2: executing \"t\" at <index .list 3>: error calling index: reflect: slice index out of range",
        ),
        (
            "{{index .list \"a\"}}",
            "template: t:1:2: executing \"t\" at <index .list \"a\">: error calling index: cannot index slice/array with type string",
        ),
        (
            "{{index .list .n}}",
            "template: t:1:2: executing \"t\" at <index .list .n>: error calling index: cannot index slice/array with type float64",
        ),
        (
            "{{index .map 1}}",
            "template: t:1:2: executing \"t\" at <index .map 1>: error calling index: value has type int; should be string",
        ),
        (
            "{{index 1 1}}",
            "template: t:1:2: executing \"t\" at <index 1 1>: error calling index: can't index item of type int",
        ),
        (
            "{{slice .list 2 1}}",
            "template: t:1:2: executing \"t\" at <slice .list 2 1>: error calling slice: invalid slice index: 2 > 1",
        ),
        (
            "{{slice .str 1 2 3}}",
            "template: t:1:2: executing \"t\" at <slice .str 1 2 3>: error calling slice: cannot 3-index slice a string",
        ),
    ]);
}

#[test]
fn print_functions() {
    ok(&[
        ("{{print 1 2 \"a\" \"b\" 3}}", "1 2ab3"),
        ("{{println 1 \"a\"}}", "1 a\n"),
        ("{{printf \"%v|%5.1f|%q|%x\" .list .half .str 255}}", "[a b c]|  1.5|\"hello\"|ff"),
        ("{{printf \"%d\" .n}}", "%!d(float64=3)"),
        ("{{printf \"%s %s\" \"a\"}}", "a %!s(MISSING)"),
        ("{{printf \"%s\" \"a\" 1}}", "a%!(EXTRA int=1)"),
        ("{{print .missing}} {{print nil}}", "<nil> <nil>"),
        ("{{printf \"%v\" .map}}", "map[a:1 b:2 c:map[d:deep]]"),
        ("{{printf \"%5v|%-4v|\" .list 1.5}}", "[    a     b     c]|1.5 |"),
        ("{{.half | printf \"%v %s\"}}", "1.5 %!s(MISSING)"),
        ("{{print 1.0 2 \"x\" nil .map}}", "1 2x<nil> map[a:1 b:2 c:map[d:deep]]"),
        ("{{1e-7}} {{1e20}} {{1e21}} {{12345678.0}} {{0.1}} {{-0.0}}", "1e-07 1e+20 1e+21 1.2345678e+07 0.1 -0"),
        ("{{html \"<a href='x'>&\\\"\"}}", "&lt;a href=&#39;x&#39;&gt;&amp;&#34;"),
        ("{{js \"it's <b> = \\\"x\\\"\\n\"}}", "it\\'s \\u003Cb\\u003E \\u003D \\\"x\\\"\\u000A"),
        ("{{urlquery \"a b&c=d/é\"}}", "a+b%26c%3Dd%2F%C3%A9"),
        ("{{html 1 2}}", "1 2"),
        (
            "{{urlquery nil}}|{{.missing | html}}|{{js nil 1}}|{{html \"a\" nil}}",
            "%3Cno+value%3E|&lt;no value&gt;|\\u003Cno value\\u003E1|a&lt;no value&gt;",
        ),
        ("{{js \"\u{2028}\u{e9}\t\"}}", "\\u2028é\\u0009"),
    ]);
    err(&[
        (
            "{{call .str 1}}",
            "template: t:1:2: executing \"t\" at <call .str 1>: error calling call: non-function .str of type string",
        ),
        ("{{call .missing}}", "template: t:1:2: executing \"t\" at <call .missing>: error calling call: call of nil"),
    ]);
}
