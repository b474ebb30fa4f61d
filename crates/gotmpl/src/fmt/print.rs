//! Printing one operand under a verb and flags: padding, `%v` of nested
//! values, strings, bytes, integers and floats, and Go's bad-verb forms.

use super::strconv::{can_backquote, quote_rune};
use super::*;

impl Printer<'_> {
    pub(super) fn pad(&mut self, s: &str) {
        let width = self.flags.width.unwrap_or(0);
        let len = s.chars().count();
        if len >= width {
            self.out.push_str(s);
            return;
        }
        let fill = width - len;
        if self.flags.minus {
            self.out.push_str(s);
            self.out.extend(std::iter::repeat_n(' ', fill));
        } else {
            let c = if self.flags.zero { '0' } else { ' ' };
            self.out.extend(std::iter::repeat_n(c, fill));
            self.out.push_str(s);
        }
    }

    pub(super) fn bad_verb(&mut self, v: &Value, verb: char) {
        self.out.push_str("%!");
        self.out.push(verb);
        self.out.push('(');
        if v.is_nil() {
            self.out.push_str("<nil>");
        } else {
            self.out.push_str(&v.type_name());
            self.out.push('=');
            // Go prints the value with %v under the same flags.
            let saved = self.flags;
            self.flags.plus = false;
            self.print_value(v, 'v', 0);
            self.flags = saved;
        }
        self.out.push(')');
    }

    /// A top-level argument.
    pub(super) fn print_arg(&mut self, v: &Value, verb: char) {
        if v.is_nil() {
            match verb {
                'T' | 'v' => self.pad("<nil>"),
                _ => self.bad_verb(v, verb),
            }
            return;
        }
        if verb == 'T' {
            let t = v.type_name();
            self.pad(&t);
            return;
        }
        if verb == 'p' {
            self.bad_verb(v, verb);
            return;
        }
        self.print_value(v, verb, 0);
    }

    pub(super) fn print_value(&mut self, v: &Value, verb: char, depth: usize) {
        // A value that holds itself, or shares parts exponentially, would
        // print forever: stop at a depth and a size no template output
        // reaches (the executor refuses such output anyway).
        if matches!(v, Value::List(_) | Value::Map(_))
            && (depth > MAX_PRINT_DEPTH || self.out.len() > crate::func::DEFAULT_MAX_SIZE)
        {
            self.out.push_str("...");
            return;
        }
        match v {
            Value::Nil => {
                if self.flags.sharp && verb == 'v' {
                    self.out.push_str("interface {}(nil)");
                } else if depth == 0 && verb != 'v' {
                    self.bad_verb(v, verb);
                } else {
                    self.pad("<nil>");
                }
            }
            Value::Bool(b) => match verb {
                't' | 'v' => self.pad(if *b { "true" } else { "false" }),
                _ => self.bad_verb(v, verb),
            },
            Value::Int(i) | Value::Int64(i) => self.fmt_int(v, *i, verb),
            Value::Float(f) => self.fmt_float(v, *f, verb),
            Value::String(s) => self.fmt_string(v, s, verb),
            Value::Bytes(b) => match verb {
                's' | 'q' | 'x' | 'X' => self.fmt_bytes(b, verb),
                _ => {
                    if self.flags.sharp && verb == 'v' {
                        self.out.push_str("[]byte{");
                        for (k, x) in b.iter().enumerate() {
                            if k > 0 {
                                self.out.push_str(", ");
                            }
                            let _ = write!(self.out, "0x{x:x}");
                        }
                        self.out.push('}');
                        return;
                    }
                    self.out.push('[');
                    for (k, x) in b.iter().enumerate() {
                        if k > 0 {
                            self.out.push(' ');
                        }
                        self.fmt_int(&Value::Int(*x as i64), *x as i64, verb);
                    }
                    self.out.push(']');
                }
            },
            Value::List(items) => {
                if self.flags.sharp && verb == 'v' {
                    self.out.push_str("[]interface {}{");
                    for (k, x) in items.iter().enumerate() {
                        if k > 0 {
                            self.out.push_str(", ");
                        }
                        self.print_value(x, verb, depth + 1);
                    }
                    self.out.push('}');
                    return;
                }
                self.out.push('[');
                for (k, x) in items.iter().enumerate() {
                    if k > 0 {
                        self.out.push(' ');
                    }
                    self.print_value(x, verb, depth + 1);
                }
                self.out.push(']');
            }
            Value::Map(m) => {
                let m = m.borrow();
                if self.flags.sharp && verb == 'v' {
                    self.out.push_str("map[string]interface {}{");
                    for (k, (key, x)) in m.iter().enumerate() {
                        if k > 0 {
                            self.out.push_str(", ");
                        }
                        self.out.push_str(&quote(key, false));
                        self.out.push(':');
                        self.print_value(x, verb, depth + 1);
                    }
                    self.out.push('}');
                    return;
                }
                self.out.push_str("map[");
                for (k, (key, x)) in m.iter().enumerate() {
                    if k > 0 {
                        self.out.push(' ');
                    }
                    self.fmt_string(&Value::Nil, key, verb);
                    self.out.push(':');
                    self.print_value(x, verb, depth + 1);
                }
                self.out.push(']');
            }
            Value::Object(o) => {
                let s = o.go_string();
                self.pad(&s);
            }
        }
    }

    pub(super) fn fmt_string(&mut self, v: &Value, s: &str, verb: char) {
        match verb {
            'v' => {
                if self.flags.sharp {
                    let q = quote(s, false);
                    self.pad(&q);
                } else {
                    self.pad_prec(s);
                }
            }
            's' => self.pad_prec(s),
            'q' => {
                let s = self.truncate(s);
                let q = if self.flags.sharp && can_backquote(s) { format!("`{s}`") } else { quote(s, self.flags.plus) };
                self.pad(&q);
            }
            'x' | 'X' => {
                let s = self.truncate(s).to_string();
                self.fmt_bytes(s.as_bytes(), verb)
            }
            _ => {
                if matches!(v, Value::Nil) {
                    // A map key under a verb that strings don't take.
                    self.bad_verb(&Value::str(s), verb)
                } else {
                    self.bad_verb(v, verb)
                }
            }
        }
    }

    pub(super) fn truncate<'s>(&self, s: &'s str) -> &'s str {
        match self.flags.prec {
            Some(p) => match s.char_indices().nth(p) {
                Some((idx, _)) => &s[..idx],
                None => s,
            },
            None => s,
        }
    }

    pub(super) fn pad_prec(&mut self, s: &str) {
        let t = self.truncate(s);
        self.pad(t);
    }

    pub(super) fn fmt_bytes(&mut self, b: &[u8], verb: char) {
        match verb {
            's' => {
                let s = String::from_utf8_lossy(b).into_owned();
                self.pad_prec(&s);
            }
            'q' => {
                let s = String::from_utf8_lossy(b).into_owned();
                self.fmt_string(&Value::Nil, &s, 'q');
            }
            _ => {
                let b = match self.flags.prec {
                    Some(p) if p < b.len() => &b[..p],
                    _ => b,
                };
                let mut s = String::with_capacity(b.len() * 2 + 2);
                for (k, x) in b.iter().enumerate() {
                    if self.flags.space && k > 0 {
                        s.push(' ');
                    }
                    if self.flags.sharp && (k == 0 || self.flags.space) {
                        s.push_str(if verb == 'x' { "0x" } else { "0X" });
                    }
                    if verb == 'x' {
                        let _ = write!(s, "{x:02x}");
                    } else {
                        let _ = write!(s, "{x:02X}");
                    }
                }
                self.pad(&s);
            }
        }
    }

    pub(super) fn fmt_int(&mut self, v: &Value, i: i64, verb: char) {
        let neg = i < 0;
        let u = i.unsigned_abs();
        let digits = match verb {
            'v' | 'd' => u.to_string(),
            'b' => format!("{u:b}"),
            'o' | 'O' => format!("{u:o}"),
            'x' => format!("{u:x}"),
            'X' => format!("{u:X}"),
            'c' => {
                let c = char::from_u32(i as u32).unwrap_or('\u{FFFD}');
                self.pad(&c.to_string());
                return;
            }
            'q' => {
                let c = char::from_u32(i as u32).unwrap_or('\u{FFFD}');
                let q = quote_rune(c, self.flags.plus);
                self.pad(&q);
                return;
            }
            'U' => {
                let mut s = format!("U+{u:04X}");
                if self.flags.sharp
                    && let Some(c) = char::from_u32(i as u32)
                    && !c.is_control()
                {
                    let _ = write!(s, " '{c}'");
                }
                self.pad(&s);
                return;
            }
            _ => {
                self.bad_verb(v, verb);
                return;
            }
        };
        let mut digits = digits;
        if let Some(p) = self.flags.prec {
            if p == 0 && u == 0 {
                digits.clear();
            }
            while digits.len() < p {
                digits.insert(0, '0');
            }
        }
        let mut prefix = String::new();
        if neg {
            prefix.push('-');
        } else if self.flags.plus {
            prefix.push('+');
        } else if self.flags.space {
            prefix.push(' ');
        }
        if self.flags.sharp {
            match verb {
                'b' => prefix.push_str("0b"),
                'o' if !digits.starts_with('0') => prefix.push('0'),
                'x' => prefix.push_str("0x"),
                'X' => prefix.push_str("0X"),
                _ => {}
            }
        }
        if verb == 'O' {
            prefix.push_str("0o");
        }
        let width = self.flags.width.unwrap_or(0);
        if self.flags.zero && !self.flags.minus && self.flags.prec.is_none() {
            let len = prefix.len() + digits.len();
            if len < width {
                let mut s = prefix;
                s.extend(std::iter::repeat_n('0', width - len));
                s.push_str(&digits);
                self.out.push_str(&s);
                return;
            }
        }
        prefix.push_str(&digits);
        let saved = self.flags.zero;
        self.flags.zero = false;
        self.pad(&prefix);
        self.flags.zero = saved;
    }

    pub(super) fn fmt_float(&mut self, v: &Value, f: f64, verb: char) {
        let (verb, prec) = match verb {
            'v' => ('g', None),
            'x' | 'X' => (verb, self.flags.prec),
            'g' | 'G' => (verb, self.flags.prec),
            'e' | 'E' | 'f' | 'F' => (verb, Some(self.flags.prec.unwrap_or(6))),
            _ => {
                self.bad_verb(v, verb);
                return;
            }
        };
        let prec = if verb == 'g' || verb == 'G' { self.flags.prec.or(prec) } else { prec };
        let mut num = format_float(f, verb, prec);
        if self.flags.sharp && !num.contains('.') && f.is_finite() {
            // '#' keeps a decimal point.
            match num.find(['e', 'E']) {
                Some(pos) => num.insert(pos, '.'),
                None => num.push('.'),
            }
        }
        let (sign, body) = if let Some(rest) = num.strip_prefix('-') {
            ("-", rest.to_string())
        } else if self.flags.plus {
            ("+", num)
        } else if self.flags.space {
            (" ", num)
        } else if f.is_infinite() {
            ("+", num)
        } else {
            ("", num)
        };
        if !f.is_finite() {
            let sign = if f.is_nan() && !self.flags.plus && !self.flags.space { "" } else { sign };
            let s = format!("{sign}{body}");
            let saved = self.flags.zero;
            self.flags.zero = false;
            self.pad(&s);
            self.flags.zero = saved;
            return;
        }
        let width = self.flags.width.unwrap_or(0);
        if self.flags.zero && !self.flags.minus {
            let len = sign.len() + body.len();
            if len < width {
                self.out.push_str(sign);
                self.out.extend(std::iter::repeat_n('0', width - len));
                self.out.push_str(&body);
                return;
            }
        }
        let s = format!("{sign}{body}");
        let saved = self.flags.zero;
        self.flags.zero = false;
        self.pad(&s);
        self.flags.zero = saved;
    }
}
