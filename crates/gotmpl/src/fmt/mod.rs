//! Go's `fmt` for template values: `Sprint`, `Sprintln`, `Sprintf` and `%v`
//! as `text/template` prints a value, with Go's verbs, flags and error forms
//! (`%!d(float64=1)`, `%!v(MISSING)`, `%!(EXTRA string=x)`).

mod print;
mod strconv;

pub(crate) use strconv::format_float;
pub use strconv::{is_print, quote};

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
            match int_from_arg(args, argn) {
                Some(n) => {
                    if n < 0 {
                        flags.minus = true;
                        flags.zero = false;
                    }
                    flags.width = Some(n.unsigned_abs() as usize);
                }
                None => out.push_str("%!(BADWIDTH)"),
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
                // Go refuses a negative precision as it refuses a non-integer one.
                match int_from_arg(args, argn) {
                    Some(n) if n >= 0 => flags.prec = Some(n as usize),
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

/// Go's `intFromArg`: the operand at `argn` as a width or precision, `None` when it is missing,
/// not an integer, or too large (Go's `tooLarge`).
fn int_from_arg(args: &[Value], argn: usize) -> Option<i64> {
    match args.get(argn) {
        Some(Value::Int(n)) | Some(Value::Int64(n)) if n.unsigned_abs() <= MAX_WIDTH => Some(*n),
        _ => None,
    }
}

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
