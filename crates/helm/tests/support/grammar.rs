//! The grammar of `helm_random`: values (a YAML document and the paths it holds, with the kind
//! of value at each) and template bodies over them, generated from a seeded random source.

use std::fmt::Write as _;

use rand::Rng;
use rand::rngs::StdRng;

pub struct Values {
    pub yaml: String,
    /// Paths under `.Values` with the kind of value there.
    pub paths: Vec<(String, Kind)>,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    Any,
    Str,
    Num,
    Bool,
    List,
    Map,
    Null,
}

const WORDS: &[&str] = &[
    "alpha",
    "Beta",
    "gamma delta",
    "",
    "yes",
    "on",
    "007",
    "1e3",
    "0x1F",
    "~",
    "true",
    "a-b_c",
    "x.y",
    "  pad  ",
    "ünï",
    "<&>",
    "%d",
    "{{",
    "null",
    "3.0",
    "-",
    "CamelCase",
];

fn scalar(rng: &mut StdRng) -> (String, Kind) {
    match rng.random_range(0..10) {
        0..=3 => {
            let w = WORDS[rng.random_range(0..WORDS.len())];
            if rng.random_bool(0.7) { (format!("{w:?}"), Kind::Str) } else { (safe_plain(w), Kind::Str) }
        }
        4..=5 => {
            let n: i64 = rng.random_range(-5..2000);
            (n.to_string(), Kind::Num)
        }
        6 => {
            let v = [0.5, 1.25, -3.75, 1e6, 123456789.0, 0.1, 2.0][rng.random_range(0..7)];
            (format!("{v:?}"), Kind::Num)
        }
        7 => (["true", "false"][rng.random_range(0..2)].to_string(), Kind::Bool),
        8 => (["yes", "no", "on", "off", "y", "n"][rng.random_range(0..6)].to_string(), Kind::Bool),
        _ => (["1000000", "0755", "1e3", "0x10", "-0"][rng.random_range(0..5)].to_string(), Kind::Num),
    }
}

/// A plain scalar helm reads as the same word, or the word quoted.
fn safe_plain(w: &str) -> String {
    if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        w.to_string()
    } else {
        format!("{w:?}")
    }
}

pub fn gen_values(rng: &mut StdRng) -> Values {
    let mut yaml = String::new();
    let mut paths = Vec::new();
    for k in 0..8 {
        let key = format!("k{k}");
        match rng.random_range(0..5) {
            0 | 1 => {
                let (s, kind) = scalar(rng);
                let _ = writeln!(yaml, "{key}: {s}");
                paths.push((key, kind));
            }
            2 => {
                let n = rng.random_range(0..5);
                let _ = writeln!(yaml, "{key}:{}", if n == 0 { " []" } else { "" });
                for _ in 0..n {
                    let (s, _) = scalar(rng);
                    let _ = writeln!(yaml, "  - {s}");
                }
                paths.push((key, Kind::List));
            }
            _ => {
                let n = rng.random_range(0..5);
                let _ = writeln!(yaml, "{key}:{}", if n == 0 { " {}" } else { "" });
                paths.push((key.clone(), Kind::Map));
                for j in 0..n {
                    let sub = ["a", "b", "Zed", "n1", "y", "on"][j];
                    if rng.random_bool(0.15) {
                        let _ = writeln!(yaml, "  {sub}: null");
                        paths.push((format!("{key}.{sub}"), Kind::Null));
                    } else if rng.random_bool(0.2) {
                        let _ = writeln!(yaml, "  {sub}: [1, two, 3.5]");
                        paths.push((format!("{key}.{sub}"), Kind::List));
                    } else {
                        let (s, kind) = scalar(rng);
                        let _ = writeln!(yaml, "  {sub}: {s}");
                        // YAML 1.1 reads `y` and `on` as booleans: no field path to them.
                        if !matches!(sub, "y" | "on") {
                            paths.push((format!("{key}.{sub}"), kind));
                        }
                    }
                }
            }
        }
    }
    Values { yaml, paths }
}

struct Gen<'a> {
    rng: &'a mut StdRng,
    values: &'a Values,
    /// Variables in scope with the kind of their value.
    vars: Vec<(String, Kind)>,
    depth: usize,
    /// Inside `range` or `with`: `.` is not the root, so paths start at `$`.
    rebound: bool,
}

pub fn gen_body(rng: &mut StdRng, values: &Values) -> String {
    let mut g = Gen { rng, values, vars: Vec::new(), depth: 0, rebound: false };
    let n = g.rng.random_range(1..4);
    (0..n).map(|_| g.stmt()).collect()
}

/// An expression and the kind of its value (`Any` when it depends on the values).
type Expr = (String, Kind);

impl Gen<'_> {
    fn pick<'s>(&mut self, xs: &[&'s str]) -> &'s str {
        xs[self.rng.random_range(0..xs.len())]
    }

    fn open(&mut self) -> &'static str {
        if self.rng.random_bool(0.2) { "{{- " } else { "{{ " }
    }

    fn close(&mut self) -> &'static str {
        if self.rng.random_bool(0.2) { " -}}" } else { " }}" }
    }

    fn text(&mut self) -> String {
        self.pick(&["x", " ", "\n", "a b", "-", ":", "\n  ", ""]).to_string()
    }

    fn stmt(&mut self) -> String {
        if self.depth > 2 {
            return format!("{}{}{}", self.open(), self.pipeline().0, self.close());
        }
        self.depth += 1;
        let (o, c) = (self.open(), self.close());
        let s = match self.rng.random_range(0..12) {
            0..=4 => format!("{o}{}{c}{}", self.pipeline().0, self.text()),
            5 => {
                let cond = self.pipeline().0;
                let (a, b) = (self.nested(), self.nested());
                format!("{o}if {cond}{c}{a}{{{{ else }}}}{b}{{{{ end }}}}")
            }
            6 => {
                let (cond, kind) = self.pipeline();
                let was = self.rebound;
                self.rebound = true;
                let n = self.vars.len();
                self.vars.push(("$w".to_string(), kind));
                let a = format!("{{{{ $w := . }}}}{}", self.nested());
                self.vars.truncate(n);
                self.rebound = was;
                let b = self.nested();
                format!("{o}with {cond}{c}{a}{{{{ else }}}}{b}{{{{ end }}}}")
            }
            7 | 8 => {
                let (coll, kind) = self.collection();
                let (i, v) = (format!("$i{}", self.depth), format!("$v{}", self.depth));
                let was = self.rebound;
                self.rebound = true;
                let n = self.vars.len();
                let key_kind = if kind == Kind::Map { Kind::Str } else { Kind::Num };
                self.vars.push((v.clone(), Kind::Any));
                if kind != Kind::Num {
                    self.vars.push((i.clone(), key_kind));
                }
                let body = self.nested();
                let first = if kind == Kind::Map { "\"a\"" } else { "1" };
                let ctl = match if kind == Kind::Num { 9 } else { self.rng.random_range(0..6) } {
                    0 => format!("{{{{ if eq {i} {first} }}}}{{{{ break }}}}{{{{ end }}}}"),
                    1 => format!("{{{{ if eq {i} {first} }}}}{{{{ continue }}}}{{{{ end }}}}"),
                    _ => String::new(),
                };
                self.vars.truncate(n);
                self.rebound = was;
                // An integer ranges with one variable only.
                let vars = if kind == Kind::Num { v } else { format!("{i}, {v}") };
                format!("{o}range {vars} := {coll}{c}{ctl}[{body}]{{{{ else }}}}none{{{{ end }}}}")
            }
            9 => {
                let var = format!("$x{}", self.vars.len());
                let (e, kind) = self.pipeline();
                let s = format!("{o}{var} := {e}{c}");
                self.vars.push((var, kind));
                let rest = self.stmt();
                format!("{s}{rest}")
            }
            10 => format!(
                "{}{}",
                self.pick(&["{{/* comment */}}", "{{- /* comment */ -}}", "{{- /* c */}}"]),
                self.text()
            ),
            _ => format!("{}{}{}", self.text(), self.text(), self.text()),
        };
        self.depth -= 1;
        s
    }

    /// A statement in a nested scope: its variables end with it.
    fn nested(&mut self) -> String {
        let n = self.vars.len();
        let s = self.stmt();
        self.vars.truncate(n);
        s
    }

    fn root(&self) -> &'static str {
        if self.rebound { "$.Values." } else { ".Values." }
    }

    /// A values path of one of `kinds` (any kind when empty).
    fn path_of(&mut self, kinds: &[Kind]) -> Option<Expr> {
        let matching: Vec<&(String, Kind)> =
            self.values.paths.iter().filter(|(_, k)| kinds.is_empty() || kinds.contains(k)).collect();
        if matching.is_empty() {
            return None;
        }
        let (p, k) = matching[self.rng.random_range(0..matching.len())].clone();
        Some((format!("{}{p}", self.root()), k))
    }

    fn var_of(&mut self, kinds: &[Kind]) -> Option<Expr> {
        let matching: Vec<Expr> =
            self.vars.iter().filter(|(_, k)| kinds.is_empty() || kinds.contains(k)).cloned().collect();
        (!matching.is_empty()).then(|| matching[self.rng.random_range(0..matching.len())].clone())
    }

    fn collection(&mut self) -> Expr {
        match self.rng.random_range(0..6) {
            0 => (format!("{}", self.rng.random_range(0..4)), Kind::Num),
            1 => ("(list 1 \"b\" 2.5)".to_string(), Kind::List),
            2 => ("(dict \"z\" 1 \"a\" \"two\")".to_string(), Kind::Map),
            _ => self.path_of(&[Kind::List, Kind::Map]).unwrap_or(("(list)".to_string(), Kind::List)),
        }
    }

    fn literal(&mut self, kind: Kind) -> Expr {
        match kind {
            Kind::Num => (self.pick(&["1.5", "0.1", "1e3", "-2.0", "3.0", "100.0"]).to_string(), Kind::Num),
            Kind::Bool => (self.pick(&["true", "false"]).to_string(), Kind::Bool),
            Kind::Null => ("nil".to_string(), Kind::Null),
            Kind::List => ("(list \"a\" 1.5 (list))".to_string(), Kind::List),
            Kind::Map => ("(dict \"a\" \"x\")".to_string(), Kind::Map),
            _ => (format!("{:?}", self.pick(WORDS)), Kind::Str),
        }
    }

    /// An operand of one of `kinds` (any when empty): a path, a variable, a literal or a call.
    fn operand(&mut self, kinds: &[Kind]) -> Expr {
        let want = |k: Kind| kinds.is_empty() || kinds.contains(&k);
        match self.rng.random_range(0..10) {
            0..=3 => {
                if let Some(e) = self.path_of(kinds) {
                    return e;
                }
            }
            4 | 5 => {
                if let Some(e) = self.var_of(kinds) {
                    return e;
                }
            }
            6 | 7 if self.depth < 3 => {
                self.depth += 1;
                let (e, k) = self.pipeline();
                self.depth -= 1;
                if want(k) {
                    return (format!("({e})"), k);
                }
            }
            _ => {}
        }
        let kind = if kinds.is_empty() {
            [Kind::Str, Kind::Num, Kind::Bool, Kind::Null, Kind::List, Kind::Map][self.rng.random_range(0..6)]
        } else {
            kinds[self.rng.random_range(0..kinds.len())]
        };
        self.literal(kind)
    }

    fn pipeline(&mut self) -> Expr {
        let (mut p, mut kind) = if self.rng.random_bool(0.4) { self.operand(&[]) } else { self.call() };
        if p == "nil" {
            // `nil` is not a command on its own.
            p = "print nil".to_string();
            kind = Kind::Str;
        }
        for _ in 0..self.rng.random_range(0..3) {
            let (stage, out) = self.stage(kind);
            p = format!("{p} | {stage}");
            kind = out;
        }
        (p, kind)
    }

    /// A function called with all its arguments, typed so that most calls succeed
    /// (some deliberately do not: errors are compared too).
    fn call(&mut self) -> Expr {
        use Kind::*;
        let any = self.operand(&[]).0;
        let any2 = self.operand(&[]).0;
        let s = |g: &mut Self| g.operand(&[Str]).0;
        let n = |g: &mut Self| g.operand(&[Num]).0;
        match self.rng.random_range(0..34) {
            0 => (
                format!("printf \"%v-%s-%d-%q-%5.2f-%x\" {any} {any2} {} {} {} {}", n(self), s(self), n(self), s(self)),
                Str,
            ),
            1 => (format!("print {any} {any2}"), Str),
            2 => {
                let (a, k) = self.operand(&[Str, Num, Bool]);
                let b = self.operand(&[k]).0;
                (format!("eq {a} {b}"), Bool)
            }
            3 => (format!("ne {} {}", s(self), s(self)), Bool),
            4 => (format!("and {any} {any2}"), Any),
            5 => (format!("or {any} {any2}"), Any),
            6 => (format!("not {any}"), Bool),
            7 => (format!("default {any} {any2}"), Any),
            8 => (format!("coalesce {any} {any2} \"z\""), Any),
            9 => (format!("ternary {any} {any2} {}", self.operand(&[Bool]).0), Any),
            10 => (format!("list {any} {any2}"), List),
            11 => (format!("dict \"k\" {any} \"j\" {any2}"), Map),
            12 => (format!("len {}", self.operand(&[Str, List, Map]).0), Num),
            13 => (format!("index {} 0", self.operand(&[List]).0), Any),
            14 => (format!("add {} 1", n(self)), Num),
            15 => (format!("max {} {}", n(self), n(self)), Num),
            16 => (format!("empty {any}"), Bool),
            17 => {
                let (a, k) = self.operand(&[Str, Num]);
                let b = self.operand(&[k]).0;
                (format!("lt {a} {b}"), Bool)
            }
            18 => (format!("hasKey {} \"a\"", self.operand(&[Map]).0), Bool),
            19 => (format!("keys {} | sortAlpha", self.operand(&[Map]).0), List),
            20 => (format!("join \",\" {}", self.operand(&[List]).0), Str),
            21 => (format!("contains \"a\" {}", s(self)), Bool),
            22 => (format!("toString {any}"), Str),
            23 => (format!("int {}", self.operand(&[Num, Str]).0), Num),
            24 => (format!("float64 {}", self.operand(&[Num, Str]).0), Num),
            25 => (format!("typeOf {any}"), Str),
            26 => (format!("kindOf {any}"), Str),
            27 => (format!("replace \"a\" \"b\" (toString {any})"), Str),
            28 => (format!("trunc 3 (toString {any})"), Str),
            29 => (format!("dig \"a\" \"dflt\" {}", self.operand(&[Map]).0), Any),
            30 => (format!("mulf {} 1.5", n(self)), Num),
            31 => (format!("div {} 3", n(self)), Num),
            32 => (format!("toYaml {any}"), Str),
            _ => (format!("toJson {any}"), Str),
        }
    }

    /// A function taking the piped value as its last argument, chosen by the piped kind.
    fn stage(&mut self, kind: Kind) -> (String, Kind) {
        use Kind::*;
        const ANY: &[(&str, Kind)] = &[
            ("quote", Str),
            ("squote", Str),
            ("toString", Str),
            ("toJson", Str),
            ("toYaml", Str),
            ("toPrettyJson", Str),
            ("default \"d\"", Any),
            ("printf \"<%v>\"", Str),
            ("print", Str),
            ("kindOf", Str),
            ("typeOf", Str),
            ("empty", Bool),
            ("not", Bool),
            ("urlquery", Str),
            ("html", Str),
            ("js", Str),
            ("toStrings", List),
        ];
        const STR: &[(&str, Kind)] = &[
            ("upper", Str),
            ("lower", Str),
            ("title", Str),
            ("trim", Str),
            ("b64enc", Str),
            ("sha256sum", Str),
            ("len", Num),
            ("trunc 4", Str),
            ("indent 2", Str),
            ("nindent 2", Str),
            ("repeat 2", Str),
            ("replace \" \" \"_\"", Str),
            ("splitList \",\"", List),
            ("fromYaml", Map),
            ("snakecase", Str),
            ("camelcase", Str),
            ("wrap 3", Str),
            ("abbrev 5", Str),
        ];
        const LIST: &[(&str, Kind)] = &[
            ("first", Any),
            ("last", Any),
            ("uniq", List),
            ("compact", List),
            ("len", Num),
            ("has \"a\"", Bool),
            ("join \"+\"", Str),
            ("sortAlpha", List),
            ("reverse", List),
        ];
        const MAP: &[(&str, Kind)] =
            &[("len", Num), ("keys | sortAlpha", List), ("values | toStrings | sortAlpha", List)];
        const NUM: &[(&str, Kind)] = &[("add1", Num), ("int", Num), ("floor", Num), ("ceil", Num)];
        let typed: &[(&str, Kind)] = match kind {
            Str => STR,
            List => LIST,
            Map => MAP,
            Num => NUM,
            _ => ANY,
        };
        let table = if self.rng.random_bool(0.5) { typed } else { ANY };
        let (s, k) = table[self.rng.random_range(0..table.len())];
        (s.to_string(), k)
    }
}
