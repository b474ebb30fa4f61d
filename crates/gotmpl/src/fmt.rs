//! Go's `fmt` for template values: `Sprint`, `Sprintln`, `Sprintf` and `%v`
//! as `text/template` prints a value, with Go's verbs, flags and error forms
//! (`%!d(float64=1)`, `%!v(MISSING)`, `%!(EXTRA string=x)`).

use std::fmt::Write as _;

use super::value::Value;

/// `fmt.Sprint`: operands joined, a space between two operands when neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    let mut prev_string = false;
    for (i, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::String(_));
        if i > 0 && !is_string && !prev_string {
            out.push(' ');
        }
        write_value(&mut out, arg);
        prev_string = is_string;
    }
    out
}

/// `fmt.Sprintln`: operands joined by spaces, a newline at the end.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_value(&mut out, arg);
    }
    out.push('\n');
    out
}

/// `%v` of a value, as `fmt.Sprint(v)` prints it.
pub fn format_value(v: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, v);
    out
}

/// Appends `%v` of a value to `out`.
pub fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::String(s) => out.push_str(s),
        Value::Int(i) | Value::Int64(i) => {
            let _ = write!(out, "{i}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        _ => {
            let mut p = Printer { out, flags: Flags::default() };
            p.print_value(v, 'v', 0);
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Flags {
    plus: bool,
    minus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

struct Printer<'a> {
    out: &'a mut String,
    flags: Flags,
}

/// `fmt.Sprintf` with Go's verbs and flags.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let bytes = format.as_bytes();
    let mut i = 0;
    let mut argn = 0usize;
    let mut reordered = false;
    while i < bytes.len() {
        // Copy literal text up to the next '%'.
        let start = i;
        while i < bytes.len() && bytes[i] != b'%' {
            i += 1;
        }
        out.push_str(&format[start..i]);
        if i >= bytes.len() {
            break;
        }
        i += 1; // '%'
        let mut flags = Flags::default();
        // Flags.
        while i < bytes.len() {
            match bytes[i] {
                b'#' => flags.sharp = true,
                b'0' => flags.zero = !flags.minus,
                b'+' => flags.plus = true,
                b'-' => {
                    flags.minus = true;
                    flags.zero = false;
                }
                b' ' => flags.space = true,
                _ => break,
            }
            i += 1;
        }
        // Argument index, width.
        let mut good_arg = true;
        if let Some((n, ni, ok)) = arg_index(bytes, i, args.len()) {
            i = ni;
            reordered = true;
            if ok {
                argn = n;
            } else {
                good_arg = false;
            }
        }
        if i < bytes.len() && bytes[i] == b'*' {
            i += 1;
            match args.get(argn) {
                Some(Value::Int(n)) | Some(Value::Int64(n)) if n.unsigned_abs() <= MAX_WIDTH => {
                    let n = *n;
                    if n < 0 {
                        flags.minus = true;
                        flags.zero = false;
                    }
                    flags.width = Some(n.unsigned_abs() as usize);
                }
                _ => out.push_str("%!(BADWIDTH)"),
            }
            argn += 1;
        } else {
            let (n, ni) = parse_num(bytes, i);
            if ni > i {
                flags.width = Some(n);
                i = ni;
            }
        }
        // Precision.
        if i < bytes.len() && bytes[i] == b'.' {
            i += 1;
            if let Some((n, ni, ok)) = arg_index(bytes, i, args.len()) {
                i = ni;
                reordered = true;
                if ok {
                    argn = n;
                } else {
                    good_arg = false;
                }
            }
            if i < bytes.len() && bytes[i] == b'*' {
                i += 1;
                match args.get(argn) {
                    Some(Value::Int(n)) | Some(Value::Int64(n)) if *n >= 0 && n.unsigned_abs() <= MAX_WIDTH => {
                        flags.prec = Some(*n as usize)
                    }
                    Some(Value::Int(n)) | Some(Value::Int64(n)) if n.unsigned_abs() > MAX_WIDTH => {
                        out.push_str("%!(BADPREC)")
                    }
                    Some(Value::Int(_)) | Some(Value::Int64(_)) => flags.prec = None,
                    _ => out.push_str("%!(BADPREC)"),
                }
                argn += 1;
            } else {
                let (n, ni) = parse_num(bytes, i);
                flags.prec = Some(n);
                i = ni;
            }
        }
        if let Some((n, ni, ok)) = arg_index(bytes, i, args.len()) {
            i = ni;
            reordered = true;
            if ok {
                argn = n;
            } else {
                good_arg = false;
            }
        }
        if i >= bytes.len() {
            out.push_str("%!(NOVERB)");
            break;
        }
        let verb = match format[i..].chars().next() {
            Some(c) => c,
            None => break,
        };
        i += verb.len_utf8();
        if verb == '%' {
            out.push('%');
            continue;
        }
        if !good_arg {
            let _ = write!(out, "%!{verb}(BADINDEX)");
            continue;
        }
        match args.get(argn) {
            None => {
                let _ = write!(out, "%!{verb}(MISSING)");
            }
            Some(arg) => {
                argn += 1;
                let mut flags = flags;
                if verb == 'v' {
                    // %+v is struct-field syntax, not a sign.
                    flags.plus = false;
                }
                let mut p = Printer { out: &mut out, flags };
                p.print_arg(arg, verb);
            }
        }
    }
    if !reordered && argn < args.len() {
        out.push_str("%!(EXTRA ");
        for (k, arg) in args[argn..].iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            if arg.is_nil() {
                out.push_str("<nil>");
            } else {
                out.push_str(&arg.type_name());
                out.push('=');
                write_value(&mut out, arg);
            }
        }
        out.push(')');
    }
    out
}

/// How deep `%v` prints nested lists and maps.
const MAX_PRINT_DEPTH: usize = 1000;

/// Go's `tooLarge`: widths and precisions past a million are refused.
const MAX_WIDTH: u64 = 1_000_000;

fn parse_num(bytes: &[u8], mut i: usize) -> (usize, usize) {
    let mut n = 0usize;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        n = n.saturating_mul(10).saturating_add((bytes[i] - b'0') as usize);
        if n > 1_000_000 {
            n = 1_000_000;
        }
        i += 1;
    }
    (n, i)
}

/// `[n]` at `i`: (zero-based index, position after, valid).
fn arg_index(bytes: &[u8], i: usize, nargs: usize) -> Option<(usize, usize, bool)> {
    if i >= bytes.len() || bytes[i] != b'[' {
        return None;
    }
    let mut j = i + 1;
    while j < bytes.len() && bytes[j] != b']' {
        j += 1;
    }
    if j >= bytes.len() {
        return Some((0, i + 1, false));
    }
    let (n, ni) = parse_num(bytes, i + 1);
    if ni != j || n == 0 || n > nargs {
        return Some((0, j + 1, false));
    }
    Some((n - 1, j + 1, true))
}

impl Printer<'_> {
    fn pad(&mut self, s: &str) {
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

    fn bad_verb(&mut self, v: &Value, verb: char) {
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
    fn print_arg(&mut self, v: &Value, verb: char) {
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

    fn print_value(&mut self, v: &Value, verb: char, depth: usize) {
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

    fn fmt_string(&mut self, v: &Value, s: &str, verb: char) {
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

    fn truncate<'s>(&self, s: &'s str) -> &'s str {
        match self.flags.prec {
            Some(p) => match s.char_indices().nth(p) {
                Some((idx, _)) => &s[..idx],
                None => s,
            },
            None => s,
        }
    }

    fn pad_prec(&mut self, s: &str) {
        let t = self.truncate(s);
        self.pad(t);
    }

    fn fmt_bytes(&mut self, b: &[u8], verb: char) {
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

    fn fmt_int(&mut self, v: &Value, i: i64, verb: char) {
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

    fn fmt_float(&mut self, v: &Value, f: f64, verb: char) {
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

/// Decimal digits and the decimal point position of `|f|` (value =
/// 0.DIGITS × 10^dp), shortest round-trip or rounded to `sig` significant digits.
fn float_digits(f: f64, sig: Option<usize>) -> (String, i32) {
    let s = match sig {
        None => format!("{:e}", f.abs()),
        Some(p) => format!("{:.*e}", p.saturating_sub(1), f.abs()),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if digits == "0" {
        return ("0".into(), 1);
    }
    (digits, exp + 1)
}

/// strconv.FormatFloat(f, verb, prec, 64) for e, E, f, F, g, G.
pub(crate) fn format_float(f: f64, verb: char, prec: Option<usize>) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Inf".into() } else { "-Inf".into() };
    }
    let neg = f.is_sign_negative();
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    match verb {
        'x' | 'X' => out.push_str(&hex_float(f.abs(), prec, verb == 'X')),
        'f' | 'F' => {
            let p = prec.unwrap_or(6);
            let _ = write!(out, "{:.*}", p, f.abs());
        }
        'e' | 'E' => {
            let p = prec.unwrap_or(6);
            let s = format!("{:.*e}", p, f.abs());
            out.push_str(&go_exp(&s, verb == 'E'));
        }
        _ => {
            // 'g' / 'G'
            let shortest = prec.is_none();
            let sig = prec.map(|p| p.max(1));
            let (digits, dp) = float_digits(f, sig);
            let nd = digits.len() as i32;
            let mut eprec = match sig {
                None => nd,
                Some(p) => p as i32,
            };
            if eprec > nd && nd >= dp {
                eprec = nd;
            }
            if shortest {
                eprec = 6;
            }
            let exp = dp - 1;
            let upper = verb == 'G';
            if exp < -4 || exp >= eprec {
                // %e with nd-1 digits after the point.
                out.push_str(&digits[..1]);
                if nd > 1 {
                    out.push('.');
                    out.push_str(&digits[1..]);
                }
                out.push(if upper { 'E' } else { 'e' });
                let _ = write!(out, "{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
            } else if dp <= 0 {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-dp) as usize));
                out.push_str(&digits);
            } else if dp >= nd {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', (dp - nd) as usize));
            } else {
                out.push_str(&digits[..dp as usize]);
                out.push('.');
                out.push_str(&digits[dp as usize..]);
            }
        }
    }
    out
}

/// strconv's `%x` of a non-negative float: `0x1.f4p+09` (shortest, or
/// `prec` hex digits rounded half to even).
fn hex_float(a: f64, prec: Option<usize>, upper: bool) -> String {
    const ONE: u64 = 1 << 60;
    let (mut mant, mut exp) = if a == 0.0 {
        (0u64, 0i32)
    } else {
        let bits = a.to_bits();
        let e = ((bits >> 52) & 0x7ff) as i32;
        let m = bits & ((1u64 << 52) - 1);
        let (mut mant, mut exp) = if e == 0 { (m, -1074) } else { (m | (1u64 << 52), e - 1075) };
        while mant < ONE {
            mant <<= 1;
            exp -= 1;
        }
        (mant, exp + 60)
    };
    let mut digits = String::new();
    match prec {
        Some(p) if p < 15 => {
            let shift = 60 - 4 * p as u32;
            let extra = mant & ((1u64 << shift) - 1);
            let half = 1u64 << (shift - 1);
            let mut m = mant >> shift;
            if extra > half || (extra == half && m & 1 == 1) {
                m += 1;
            }
            if m >> (4 * p) >= 2 {
                m >>= 1;
                exp += 1;
            }
            mant = m << shift;
            let frac = mant & (ONE - 1);
            for i in 0..p {
                let d = (frac >> (56 - 4 * i as u32)) & 0xf;
                digits.push(char::from_digit(d as u32, 16).unwrap_or('0'));
            }
        }
        _ => {
            let frac = mant & (ONE - 1);
            for i in 0..15 {
                let d = (frac >> (56 - 4 * i as u32)) & 0xf;
                digits.push(char::from_digit(d as u32, 16).unwrap_or('0'));
            }
            match prec {
                None => {
                    while digits.ends_with('0') {
                        digits.pop();
                    }
                }
                Some(p) => digits.extend(std::iter::repeat_n('0', p - 15)),
            }
        }
    }
    let lead = if mant >= ONE { '1' } else { '0' };
    let mut out = format!("0x{lead}");
    if !digits.is_empty() {
        out.push('.');
        out.push_str(&digits);
    }
    let _ = write!(out, "p{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    if upper { out.to_uppercase() } else { out }
}

/// Rust's `1.5e6` → Go's `1.5e+06`.
fn go_exp(s: &str, upper: bool) -> String {
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    format!("{mant}{}{}{:02}", if upper { 'E' } else { 'e' }, if exp < 0 { '-' } else { '+' }, exp.abs())
}

fn can_backquote(s: &str) -> bool {
    s.chars().all(|c| c != '`' && c != '\u{FEFF}' && (c == '\t' || !c.is_control()))
}

/// strconv.Quote (or QuoteToASCII with `ascii`).
pub fn quote(s: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        push_escaped(&mut out, c, '"', ascii);
    }
    out.push('"');
    out
}

fn quote_rune(c: char, ascii: bool) -> String {
    let mut out = String::from("'");
    push_escaped(&mut out, c, '\'', ascii);
    out.push('\'');
    out
}

fn push_escaped(out: &mut String, c: char, q: char, ascii: bool) {
    if c == q || c == '\\' {
        out.push('\\');
        out.push(c);
        return;
    }
    if ascii {
        if (c as u32) < 0x80 && is_print(c) {
            out.push(c);
            return;
        }
    } else if is_print(c) {
        out.push(c);
        return;
    }
    match c {
        '\u{7}' => out.push_str("\\a"),
        '\u{8}' => out.push_str("\\b"),
        '\u{c}' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{b}' => out.push_str("\\v"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// Go's `strconv.IsPrint`: letters, marks, numbers, punctuation and symbols
/// (Unicode categories L, M, N, P, S) and the ASCII space. Every quoting
/// (`%q`, `quote`, error messages) goes through this one table.
pub fn is_print(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    if (c as u32) < 0x80 {
        return (' '..='~').contains(&c);
    }
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::Surrogate
            | G::PrivateUse
            | G::Unassigned
            | G::SpaceSeparator
            | G::LineSeparator
            | G::ParagraphSeparator
    )
}
