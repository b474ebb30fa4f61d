//! Sprig's dates (date.go) on `jiff`: Go's layout strings ("2006-01-02"),
//! durations as Go prints and parses them, and `time.Time` values as an
//! [`Object`] ([`GoTime`]). "Local" is the zone of the render's "now".

use crate::env::HostExt as _;
use std::rc::Rc;

use jiff::{SignedDuration, Timestamp, Zoned, tz::TimeZone};

use super::{reg, s};
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::{FuncError, Object, Value};

use Param::{Any, String as Str};

/// A Go `time.Time`.
#[derive(Debug, Clone)]
pub struct GoTime(pub Zoned);

impl GoTime {
    pub fn value(z: Zoned) -> Value {
        Value::Object(Rc::new(GoTime(z)))
    }
}

impl Object for GoTime {
    fn type_name(&self) -> &str {
        "time.Time"
    }
    fn field(&self, name: &str) -> Option<Value> {
        let z = &self.0;
        Some(match name {
            "Year" => Value::Int(i64::from(z.year())),
            "Month" => Value::Int(i64::from(z.month())),
            "Day" => Value::Int(i64::from(z.day())),
            "Hour" => Value::Int(i64::from(z.hour())),
            "Minute" => Value::Int(i64::from(z.minute())),
            "Second" => Value::Int(i64::from(z.second())),
            "Nanosecond" => Value::Int(i64::from(z.subsec_nanosecond())),
            "Unix" => Value::Int64(z.timestamp().as_second()),
            "UnixMilli" => Value::Int64(z.timestamp().as_millisecond()),
            "UnixNano" => Value::Int64(z.timestamp().as_nanosecond() as i64),
            "YearDay" => Value::Int(i64::from(z.day_of_year())),
            "Weekday" => Value::str(weekday_name(z)),
            "UTC" => GoTime::value(z.with_time_zone(TimeZone::UTC)),
            "Local" => GoTime::value(z.clone()),
            "String" => Value::str(self.go_string()),
            "__int64" => Value::Int64(z.timestamp().as_second()),
            "__tz" => Value::str(z.time_zone().iana_name().unwrap_or("")),
            _ => return None,
        })
    }
    fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
        match method {
            "Format" => Some(Ok(Value::str(format_go(&self.0, &args.first().map(super::strval).unwrap_or_default())))),
            "In" => None,
            _ => None,
        }
    }
    fn go_string(&self) -> String {
        format_go(&self.0, "2006-01-02 15:04:05.999999999 -0700 MST")
    }
    fn to_data(&self) -> Value {
        Value::str(format_go(&self.0, "2006-01-02T15:04:05.999999999Z07:00"))
    }
}

fn as_time(v: &Value) -> Option<Zoned> {
    if let Value::Object(o) = v
        && o.type_name() == "time.Time"
        && let Value::Int64(secs) = o.field("Unix")?
        && let Value::Int(nanos) = o.field("Nanosecond")?
    {
        let named = o.field("__tz").and_then(|v| v.as_str().and_then(|n| TimeZone::get(n).ok()));
        let tz = named.unwrap_or_else(|| parse_offset(&format_go_offset(o)));
        let ts = Timestamp::new(secs, nanos as i32).ok()?;
        return Some(ts.to_zoned(tz));
    }
    None
}

fn format_go_offset(o: &Rc<dyn Object>) -> String {
    o.call("Format", &[Value::str("-07:00")]).and_then(Result::ok).map(|v| super::strval(&v)).unwrap_or_default()
}

fn parse_offset(s: &str) -> TimeZone {
    let sign = if s.starts_with('-') { -1 } else { 1 };
    let body = s.trim_start_matches(['+', '-']);
    let (h, m) = body.split_once(':').unwrap_or((body, "0"));
    let secs = sign * (h.parse::<i32>().unwrap_or(0) * 3600 + m.parse::<i32>().unwrap_or(0) * 60);
    jiff::tz::Offset::from_seconds(secs).map(TimeZone::fixed).unwrap_or(TimeZone::UTC)
}

/// The time a `date`-like function was given: a time, or Unix seconds
/// (Go `int`/`int64`); anything else means "now".
fn time_arg(h: &mut dyn Host, v: &Value, local: &TimeZone) -> Zoned {
    match v {
        Value::Int(i) | Value::Int64(i) => {
            Timestamp::from_second(*i).map(|t| t.to_zoned(local.clone())).unwrap_or_else(|_| h.now())
        }
        other => as_time(other).unwrap_or_else(|| h.now()),
    }
}

fn zone(name: &str, local: &TimeZone) -> TimeZone {
    match name {
        "Local" => local.clone(),
        "UTC" | "" => TimeZone::UTC,
        other => TimeZone::get(other).unwrap_or(TimeZone::UTC),
    }
}

fn date_in_zone(h: &mut dyn Host, layout: &str, date: &Value, zone_name: &str) -> String {
    let local = h.now().time_zone().clone();
    let t = time_arg(h, date, &local);
    format_go(&t.with_time_zone(zone(zone_name, &local)), layout)
}

pub(super) fn register(m: &mut FuncMap) {
    reg(m, "now", &[], |h, _| Ok(GoTime::value(h.now())));
    reg(m, "date", &[Str, Any], |h, a| Ok(date_in_zone(h, &s(&a[0]), &a[1], "Local").into()));
    for name in ["dateInZone", "date_in_zone"] {
        reg(m, name, &[Str, Any, Str], |h, a| Ok(date_in_zone(h, &s(&a[0]), &a[1], &s(&a[2])).into()));
    }
    reg(m, "htmlDate", &[Any], |h, a| Ok(date_in_zone(h, "2006-01-02", &a[0], "Local").into()));
    reg(m, "htmlDateInZone", &[Any, Str], |h, a| Ok(date_in_zone(h, "2006-01-02", &a[0], &s(&a[1])).into()));
    for name in ["dateModify", "date_modify"] {
        reg(m, name, &[Str, Any], |_, a| {
            let t = need_time(&a[1])?;
            Ok(match parse_duration(&s(&a[0])) {
                Ok(d) => GoTime::value(t.checked_add(d).unwrap_or(t)),
                Err(_) => GoTime::value(t),
            })
        });
    }
    for name in ["mustDateModify", "must_date_modify"] {
        reg(m, name, &[Str, Any], |_, a| {
            let t = need_time(&a[1])?;
            let d = parse_duration(&s(&a[0])).map_err(FuncError::msg)?;
            Ok(GoTime::value(t.checked_add(d).unwrap_or(t)))
        });
    }
    reg(m, "ago", &[Any], |h, a| {
        let now = h.now();
        let t = match &a[0] {
            Value::Int(i) | Value::Int64(i) => {
                Timestamp::from_second(*i).map(|t| t.to_zoned(TimeZone::UTC)).unwrap_or(now.clone())
            }
            other => as_time(other).unwrap_or(now.clone()),
        };
        let d = now.timestamp().duration_since(t.timestamp());
        Ok(format_duration(round_duration(d, 1_000_000_000)).into())
    });
    reg(m, "duration", &[Any], |_, a| {
        let n = match &a[0] {
            Value::String(s) => s.parse::<i64>().unwrap_or(0),
            Value::Int64(i) => *i,
            _ => 0,
        };
        Ok(format_duration(SignedDuration::from_secs(n)).into())
    });
    reg(m, "durationRound", &[Any], |h, a| {
        let d = match &a[0] {
            Value::String(s) => parse_duration(s).unwrap_or(SignedDuration::ZERO),
            Value::Int64(i) => SignedDuration::from_nanos(*i),
            other => match as_time(other) {
                Some(t) => h.now().timestamp().duration_since(t.timestamp()),
                None => SignedDuration::ZERO,
            },
        };
        Ok(duration_round(d).into())
    });
    reg(m, "toDate", &[Str, Str], |h, a| {
        let local = h.now().time_zone().clone();
        Ok(GoTime::value(parse_go(&s(&a[0]), &s(&a[1]), &local).unwrap_or_else(|_| zero_time())))
    });
    reg(m, "mustToDate", &[Str, Str], |h, a| {
        let local = h.now().time_zone().clone();
        Ok(GoTime::value(parse_go(&s(&a[0]), &s(&a[1]), &local).map_err(FuncError::msg)?))
    });
    reg(m, "unixEpoch", &[Any], |_, a| Ok(need_time(&a[0])?.timestamp().as_second().to_string().into()));
}

fn need_time(v: &Value) -> Result<Zoned, FuncError> {
    as_time(v).ok_or_else(|| FuncError::msg(format!("wrong type for value; expected time.Time; got {}", v.type_name())))
}

fn zero_time() -> Zoned {
    jiff::civil::date(1, 1, 1)
        .at(0, 0, 0, 0)
        .to_zoned(TimeZone::UTC)
        .unwrap_or_else(|_| Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC))
}

fn round_duration(d: SignedDuration, m: i128) -> SignedDuration {
    let n = d.as_nanos();
    let r = n % m;
    let out = if n < 0 {
        let r = -r;
        if r + r < m { n + r } else { n + r - m }
    } else if r + r < m {
        n - r
    } else {
        n + m - r
    };
    SignedDuration::from_nanos(out as i64)
}

fn duration_round(d: SignedDuration) -> String {
    let u = d.as_nanos().unsigned_abs();
    const SEC: u128 = 1_000_000_000;
    let (year, month, day, hour, minute) =
        (SEC * 3600 * 24 * 365, SEC * 3600 * 24 * 30, SEC * 3600 * 24, SEC * 3600, SEC * 60);
    if u > year {
        format!("{}y", u / year)
    } else if u > month {
        format!("{}mo", u / month)
    } else if u > day {
        format!("{}d", u / day)
    } else if u > hour {
        format!("{}h", u / hour)
    } else if u > minute {
        format!("{}m", u / minute)
    } else if u > SEC {
        format!("{}s", u / SEC)
    } else {
        "0s".into()
    }
}

/// Go's `time.Duration.String`.
pub fn format_duration(d: SignedDuration) -> String {
    let n = d.as_nanos();
    if n == 0 {
        return "0s".into();
    }
    let neg = n < 0;
    let u = n.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    if u < 1_000_000_000 {
        let (unit, div) = if u < 1_000 {
            return format!("{sign}{u}ns");
        } else if u < 1_000_000 {
            ("µs", 1_000u128)
        } else {
            ("ms", 1_000_000u128)
        };
        return format!("{sign}{}{unit}", frac(u, div));
    }
    let secs_total = u / 1_000_000_000;
    let nanos = u % 1_000_000_000;
    let h = secs_total / 3600;
    let m = (secs_total % 3600) / 60;
    let s = secs_total % 60;
    let sec_text = frac(s * 1_000_000_000 + nanos, 1_000_000_000);
    let mut out = String::from(sign);
    if h > 0 {
        out.push_str(&format!("{h}h{m}m"));
    } else if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&sec_text);
    out.push('s');
    out
}

fn frac(v: u128, div: u128) -> String {
    let int = v / div;
    let rem = v % div;
    if rem == 0 {
        return int.to_string();
    }
    let width = div.to_string().len() - 1;
    let f = format!("{rem:0width$}");
    format!("{int}.{}", f.trim_end_matches('0'))
}

/// Go's `time.ParseDuration`.
pub fn parse_duration(s: &str) -> Result<SignedDuration, String> {
    let orig = s;
    let err = || format!("time: invalid duration {}", super::gofmt::quote(orig));
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if rest.is_empty() {
        return Err(err());
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let num = &rest[..num_end];
        if num.is_empty() || num == "." {
            return Err(err());
        }
        let v: f64 = num.parse().map_err(|_| err())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit = &rest[..unit_end];
        rest = &rest[unit_end..];
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("time: missing unit in duration {}", super::gofmt::quote(orig))),
            u => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    super::gofmt::quote(u),
                    super::gofmt::quote(orig)
                ));
            }
        };
        total += v * scale;
    }
    if total > i64::MAX as f64 {
        return Err(err());
    }
    let n = total.round() as i64;
    Ok(SignedDuration::from_nanos(if neg { -n } else { n }))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

fn weekday_name(z: &Zoned) -> &'static str {
    DAYS[z.weekday().to_sunday_zero_offset() as usize]
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Chunk {
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    LongYear,
    Year,
    PM,
    Pm,
    TZ,
    ISO8601TZ,
    ISO8601SecondsTZ,
    ISO8601ShortTZ,
    ISO8601ColonTZ,
    ISO8601ColonSecondsTZ,
    NumTZ,
    NumSecondsTz,
    NumShortTZ,
    NumColonTZ,
    NumColonSecondsTZ,
    /// fractional seconds: digits, trailing zeros trimmed (`.999`)?, separator
    Frac(usize, bool, char),
}

/// Go's `nextStdChunk`: the literal prefix length, the chunk, and its length.
fn next_chunk(l: &str) -> Option<(usize, Chunk, usize)> {
    let b = l.as_bytes();
    let starts = |i: usize, p: &str| l[i..].starts_with(p);
    for i in 0..b.len() {
        if !l.is_char_boundary(i) {
            continue;
        }
        let c = b[i];
        let found = match c {
            b'J' => {
                if starts(i, "January") {
                    Some((Chunk::LongMonth, 7))
                } else if starts(i, "Jan") {
                    Some((Chunk::Month, 3))
                } else {
                    None
                }
            }
            b'M' => {
                if starts(i, "Monday") {
                    Some((Chunk::LongWeekDay, 6))
                } else if starts(i, "Mon") {
                    Some((Chunk::WeekDay, 3))
                } else if starts(i, "MST") {
                    Some((Chunk::TZ, 3))
                } else {
                    None
                }
            }
            b'0' => {
                if i + 1 < b.len() && (b'1'..=b'6').contains(&b[i + 1]) {
                    Some((
                        match b[i + 1] {
                            b'1' => Chunk::ZeroMonth,
                            b'2' => Chunk::ZeroDay,
                            b'3' => Chunk::ZeroHour12,
                            b'4' => Chunk::ZeroMinute,
                            b'5' => Chunk::ZeroSecond,
                            _ => Chunk::Year,
                        },
                        2,
                    ))
                } else if starts(i, "002") {
                    Some((Chunk::ZeroYearDay, 3))
                } else {
                    None
                }
            }
            b'1' => {
                if starts(i, "15") {
                    Some((Chunk::Hour, 2))
                } else {
                    Some((Chunk::NumMonth, 1))
                }
            }
            b'2' => {
                if starts(i, "2006") {
                    Some((Chunk::LongYear, 4))
                } else {
                    Some((Chunk::Day, 1))
                }
            }
            b'_' => {
                if starts(i, "_2006") {
                    // "_" literal followed by a year
                    return Some((i + 1, Chunk::LongYear, 4));
                } else if starts(i, "__2") {
                    Some((Chunk::UnderYearDay, 3))
                } else if starts(i, "_2") {
                    Some((Chunk::UnderDay, 2))
                } else {
                    None
                }
            }
            b'3' => Some((Chunk::Hour12, 1)),
            b'4' => Some((Chunk::Minute, 1)),
            b'5' => Some((Chunk::Second, 1)),
            b'P' if starts(i, "PM") => Some((Chunk::PM, 2)),
            b'p' if starts(i, "pm") => Some((Chunk::Pm, 2)),
            b'-' => {
                if starts(i, "-07:00:00") {
                    Some((Chunk::NumColonSecondsTZ, 9))
                } else if starts(i, "-070000") {
                    Some((Chunk::NumSecondsTz, 7))
                } else if starts(i, "-07:00") {
                    Some((Chunk::NumColonTZ, 6))
                } else if starts(i, "-0700") {
                    Some((Chunk::NumTZ, 5))
                } else if starts(i, "-07") {
                    Some((Chunk::NumShortTZ, 3))
                } else {
                    None
                }
            }
            b'Z' => {
                if starts(i, "Z07:00:00") {
                    Some((Chunk::ISO8601ColonSecondsTZ, 9))
                } else if starts(i, "Z070000") {
                    Some((Chunk::ISO8601SecondsTZ, 7))
                } else if starts(i, "Z07:00") {
                    Some((Chunk::ISO8601ColonTZ, 6))
                } else if starts(i, "Z0700") {
                    Some((Chunk::ISO8601TZ, 5))
                } else if starts(i, "Z07") {
                    Some((Chunk::ISO8601ShortTZ, 3))
                } else {
                    None
                }
            }
            b'.' | b',' => {
                if i + 1 < b.len() && (b[i + 1] == b'0' || b[i + 1] == b'9') {
                    let ch = b[i + 1];
                    let mut j = i + 1;
                    while j < b.len() && b[j] == ch {
                        j += 1;
                    }
                    if !(j < b.len() && b[j].is_ascii_digit()) {
                        Some((Chunk::Frac(j - i - 1, ch == b'9', char::from(c)), j - i))
                    } else {
                        None
                    }
                } else {
                    None
                }
            }
            _ => None,
        };
        if let Some((chunk, len)) = found {
            return Some((i, chunk, len));
        }
    }
    None
}

/// Go's `Time.Format`.
pub fn format_go(z: &Zoned, layout: &str) -> String {
    let mut out = String::new();
    let mut rest = layout;
    let offset = z.offset().seconds();
    while let Some((pre, chunk, len)) = next_chunk(rest) {
        out.push_str(&rest[..pre]);
        let hour = i32::from(z.hour());
        match chunk {
            Chunk::LongMonth => out.push_str(MONTHS[z.month() as usize - 1]),
            Chunk::Month => out.push_str(&MONTHS[z.month() as usize - 1][..3]),
            Chunk::NumMonth => out.push_str(&z.month().to_string()),
            Chunk::ZeroMonth => out.push_str(&format!("{:02}", z.month())),
            Chunk::LongWeekDay => out.push_str(weekday_name(z)),
            Chunk::WeekDay => out.push_str(&weekday_name(z)[..3]),
            Chunk::Day => out.push_str(&z.day().to_string()),
            Chunk::UnderDay => out.push_str(&format!("{:>2}", z.day())),
            Chunk::ZeroDay => out.push_str(&format!("{:02}", z.day())),
            Chunk::UnderYearDay => out.push_str(&format!("{:>3}", z.day_of_year())),
            Chunk::ZeroYearDay => out.push_str(&format!("{:03}", z.day_of_year())),
            Chunk::Hour => out.push_str(&format!("{hour:02}")),
            Chunk::Hour12 | Chunk::ZeroHour12 => {
                let h = if hour % 12 == 0 { 12 } else { hour % 12 };
                out.push_str(&if chunk == Chunk::Hour12 { h.to_string() } else { format!("{h:02}") });
            }
            Chunk::Minute => out.push_str(&z.minute().to_string()),
            Chunk::ZeroMinute => out.push_str(&format!("{:02}", z.minute())),
            Chunk::Second => out.push_str(&z.second().to_string()),
            Chunk::ZeroSecond => out.push_str(&format!("{:02}", z.second())),
            Chunk::LongYear => out.push_str(&format!("{:04}", z.year())),
            Chunk::Year => out.push_str(&format!("{:02}", z.year().rem_euclid(100))),
            Chunk::PM => out.push_str(if hour >= 12 { "PM" } else { "AM" }),
            Chunk::Pm => out.push_str(if hour >= 12 { "pm" } else { "am" }),
            Chunk::TZ => {
                let abbr = z.time_zone().to_offset_info(z.timestamp()).abbreviation().to_string();
                if !abbr.is_empty() && !abbr.starts_with(['+', '-']) {
                    out.push_str(&abbr);
                } else {
                    let (h, m) = (offset / 3600, (offset.abs() % 3600) / 60);
                    out.push_str(&format!("{}{:02}", if offset < 0 { '-' } else { '+' }, h.abs()));
                    if m != 0 {
                        out.push_str(&format!("{m:02}"));
                    }
                }
            }
            Chunk::ISO8601TZ
            | Chunk::ISO8601SecondsTZ
            | Chunk::ISO8601ShortTZ
            | Chunk::ISO8601ColonTZ
            | Chunk::ISO8601ColonSecondsTZ
            | Chunk::NumTZ
            | Chunk::NumSecondsTz
            | Chunk::NumShortTZ
            | Chunk::NumColonTZ
            | Chunk::NumColonSecondsTZ => {
                let iso = matches!(
                    chunk,
                    Chunk::ISO8601TZ
                        | Chunk::ISO8601SecondsTZ
                        | Chunk::ISO8601ShortTZ
                        | Chunk::ISO8601ColonTZ
                        | Chunk::ISO8601ColonSecondsTZ
                );
                if iso && offset == 0 {
                    out.push('Z');
                } else {
                    let a = offset.abs();
                    out.push(if offset < 0 { '-' } else { '+' });
                    out.push_str(&format!("{:02}", a / 3600));
                    let colon = matches!(
                        chunk,
                        Chunk::ISO8601ColonTZ
                            | Chunk::ISO8601ColonSecondsTZ
                            | Chunk::NumColonTZ
                            | Chunk::NumColonSecondsTZ
                    );
                    if !matches!(chunk, Chunk::ISO8601ShortTZ | Chunk::NumShortTZ) {
                        if colon {
                            out.push(':');
                        }
                        out.push_str(&format!("{:02}", (a % 3600) / 60));
                    }
                    if matches!(
                        chunk,
                        Chunk::ISO8601SecondsTZ
                            | Chunk::ISO8601ColonSecondsTZ
                            | Chunk::NumSecondsTz
                            | Chunk::NumColonSecondsTZ
                    ) {
                        if colon {
                            out.push(':');
                        }
                        out.push_str(&format!("{:02}", a % 60));
                    }
                }
            }
            Chunk::Frac(n, trim, sep) => {
                let nanos = format!("{:09}", z.subsec_nanosecond());
                let digits = &nanos[..n.min(9)];
                if trim {
                    let t = digits.trim_end_matches('0');
                    if !t.is_empty() {
                        out.push(sep);
                        out.push_str(t);
                    }
                } else {
                    out.push(sep);
                    out.push_str(digits);
                }
            }
        }
        rest = &rest[pre + len..];
    }
    out.push_str(rest);
    out
}

/// Go's `time.ParseInLocation` for the layouts charts use.
pub fn parse_go(layout: &str, value: &str, local: &TimeZone) -> Result<Zoned, String> {
    let err = || {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            super::gofmt::quote(value),
            super::gofmt::quote(layout),
            super::gofmt::quote(value),
            super::gofmt::quote(layout)
        )
    };
    let (mut year, mut month, mut day, mut hour, mut min, mut sec, mut nanos) =
        (1i32, 1i32, 1i32, 0i32, 0i32, 0i32, 0i32);
    let mut pm: Option<bool> = None;
    let mut offset: Option<i32> = None;
    let mut rest = layout;
    let mut v = value;
    let num = |v: &mut &str, min_d: usize, max_d: usize| -> Option<i32> {
        let n = v.bytes().take(max_d).take_while(u8::is_ascii_digit).count();
        if n < min_d {
            return None;
        }
        let x = v[..n].parse().ok()?;
        *v = &v[n..];
        Some(x)
    };
    while let Some((pre, chunk, len)) = next_chunk(rest) {
        let lit = &rest[..pre];
        v = v.strip_prefix(lit).ok_or_else(err)?;
        match chunk {
            Chunk::LongYear => year = num(&mut v, 4, 4).ok_or_else(err)?,
            Chunk::Year => {
                let y = num(&mut v, 2, 2).ok_or_else(err)?;
                year = if y >= 69 { 1900 + y } else { 2000 + y };
            }
            Chunk::LongMonth | Chunk::Month => {
                let idx = MONTHS
                    .iter()
                    .position(|m| {
                        let name = if chunk == Chunk::Month { &m[..3] } else { m };
                        v.len() >= name.len() && v[..name.len()].eq_ignore_ascii_case(name)
                    })
                    .ok_or_else(err)?;
                let l = if chunk == Chunk::Month { 3 } else { MONTHS[idx].len() };
                v = &v[l..];
                month = idx as i32 + 1;
            }
            Chunk::NumMonth => month = num(&mut v, 1, 2).ok_or_else(err)?,
            Chunk::ZeroMonth => month = num(&mut v, 2, 2).ok_or_else(err)?,
            Chunk::LongWeekDay | Chunk::WeekDay => {
                let idx = DAYS
                    .iter()
                    .position(|d| {
                        let name = if chunk == Chunk::WeekDay { &d[..3] } else { d };
                        v.len() >= name.len() && v[..name.len()].eq_ignore_ascii_case(name)
                    })
                    .ok_or_else(err)?;
                v = &v[if chunk == Chunk::WeekDay { 3 } else { DAYS[idx].len() }..];
            }
            Chunk::Day | Chunk::UnderDay => {
                v = v.trim_start_matches(' ');
                day = num(&mut v, 1, 2).ok_or_else(err)?;
            }
            Chunk::ZeroDay => day = num(&mut v, 2, 2).ok_or_else(err)?,
            Chunk::UnderYearDay | Chunk::ZeroYearDay => {
                v = v.trim_start_matches(' ');
                num(&mut v, 1, 3).ok_or_else(err)?;
            }
            Chunk::Hour => hour = num(&mut v, 1, 2).ok_or_else(err)?,
            Chunk::Hour12 => hour = num(&mut v, 1, 2).ok_or_else(err)?,
            Chunk::ZeroHour12 => hour = num(&mut v, 2, 2).ok_or_else(err)?,
            Chunk::Minute => min = num(&mut v, 1, 2).ok_or_else(err)?,
            Chunk::ZeroMinute => min = num(&mut v, 2, 2).ok_or_else(err)?,
            Chunk::Second | Chunk::ZeroSecond => {
                sec = num(&mut v, if chunk == Chunk::Second { 1 } else { 2 }, 2).ok_or_else(err)?;
                // Go accepts fractional seconds after a seconds field even if the layout has none
                if (v.starts_with('.') || v.starts_with(','))
                    && v[1..].starts_with(|c: char| c.is_ascii_digit())
                    && !matches!(next_chunk(&rest[pre + len..]), Some((0, Chunk::Frac(..), _)))
                {
                    let n = v[1..].bytes().take_while(u8::is_ascii_digit).count();
                    nanos = format!("{:0<9}", &v[1..1 + n.min(9)]).parse().unwrap_or(0);
                    v = &v[1 + n..];
                }
            }
            Chunk::PM | Chunk::Pm => {
                let p = v.get(..2).ok_or_else(err)?.to_ascii_uppercase();
                pm = Some(match p.as_str() {
                    "PM" => true,
                    "AM" => false,
                    _ => return Err(err()),
                });
                v = &v[2..];
            }
            Chunk::TZ => {
                if v.starts_with("UTC") {
                    offset = Some(0);
                    v = &v[3..];
                } else {
                    let n = v.bytes().take_while(u8::is_ascii_uppercase).count();
                    if n < 3 {
                        return Err(err());
                    }
                    v = &v[n..];
                }
            }
            Chunk::Frac(n, trim, _) => {
                if v.starts_with(['.', ',']) {
                    let digits = v[1..].bytes().take_while(u8::is_ascii_digit).count();
                    if !trim && digits != n {
                        return Err(err());
                    }
                    nanos = format!("{:0<9}", &v[1..1 + digits.min(9)]).parse().unwrap_or(0);
                    v = &v[1 + digits..];
                } else if !trim {
                    return Err(err());
                }
            }
            tz => {
                let iso = matches!(
                    tz,
                    Chunk::ISO8601TZ
                        | Chunk::ISO8601SecondsTZ
                        | Chunk::ISO8601ShortTZ
                        | Chunk::ISO8601ColonTZ
                        | Chunk::ISO8601ColonSecondsTZ
                );
                if iso && v.starts_with('Z') {
                    v = &v[1..];
                    offset = Some(0);
                } else {
                    let sign = match v.as_bytes().first() {
                        Some(b'+') => 1,
                        Some(b'-') => -1,
                        _ => return Err(err()),
                    };
                    v = &v[1..];
                    let h = num(&mut v, 2, 2).ok_or_else(err)?;
                    let mut m = 0;
                    let mut s2 = 0;
                    if !matches!(tz, Chunk::ISO8601ShortTZ | Chunk::NumShortTZ) {
                        if v.starts_with(':') {
                            v = &v[1..];
                        }
                        m = num(&mut v, 2, 2).ok_or_else(err)?;
                    }
                    if matches!(
                        tz,
                        Chunk::ISO8601SecondsTZ
                            | Chunk::ISO8601ColonSecondsTZ
                            | Chunk::NumSecondsTz
                            | Chunk::NumColonSecondsTZ
                    ) {
                        if v.starts_with(':') {
                            v = &v[1..];
                        }
                        s2 = num(&mut v, 2, 2).ok_or_else(err)?;
                    }
                    offset = Some(sign * (h * 3600 + m * 60 + s2));
                }
            }
        }
        rest = &rest[pre + len..];
    }
    v = v.strip_prefix(rest).ok_or_else(err)?;
    if !v.is_empty() {
        return Err(format!("parsing time {}: extra text: {}", super::gofmt::quote(value), super::gofmt::quote(v)));
    }
    if let Some(p) = pm {
        if p && hour < 12 {
            hour += 12;
        } else if !p && hour == 12 {
            hour = 0;
        }
    }
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", super::gofmt::quote(value));
    let date = jiff::civil::Date::new(year as i16, month as i8, day as i8)
        .map_err(|_| out_of_range(if (1..=12).contains(&month) { "day" } else { "month" }))?;
    let dt = date.at(hour as i8, min as i8, sec as i8, nanos);
    let tz = match offset {
        Some(o) => jiff::tz::Offset::from_seconds(o).map(TimeZone::fixed).map_err(|e| e.to_string())?,
        None => local.clone(),
    };
    dt.to_zoned(tz).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::testhost::*;
    use super::*;

    fn at(s: &str) -> Zoned {
        s.parse().expect("time")
    }

    #[test]
    fn go_layouts() {
        let z = at("2024-03-05T14:07:09.5+01:00[Europe/Berlin]");
        assert_eq!(format_go(&z, "2006-01-02"), "2024-03-05");
        assert_eq!(format_go(&z, "Mon Jan _2 15:04:05 MST 2006"), "Tue Mar  5 14:07:09 CET 2024");
        assert_eq!(format_go(&z, "2006-01-02T15:04:05Z07:00"), "2024-03-05T14:07:09+01:00");
        assert_eq!(format_go(&z, "3:04PM .000 .999"), "2:07PM .500 .5");
        assert_eq!(format_go(&z.with_time_zone(TimeZone::UTC), "2006-01-02T15:04:05Z07:00"), "2024-03-05T13:07:09Z");
        assert_eq!(GoTime(z.clone()).go_string(), "2024-03-05 14:07:09.5 +0100 CET");
        let p = parse_go("2006-01-02 15:04", "2023-12-31 23:59", &TimeZone::UTC).expect("parse");
        assert_eq!(format_go(&p, "Jan 2 2006 15:04 MST"), "Dec 31 2023 23:59 UTC");
        assert!(parse_go("2006-01-02", "2023-13-01", &TimeZone::UTC).is_err());
    }

    #[test]
    fn durations_as_go() {
        assert_eq!(format_duration(SignedDuration::from_secs(3725)), "1h2m5s");
        assert_eq!(format_duration(SignedDuration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(SignedDuration::from_millis(2)), "2ms");
        assert_eq!(format_duration(SignedDuration::from_secs(-60)), "-1m0s");
        assert_eq!(parse_duration("1h30m").expect("d"), SignedDuration::from_secs(5400));
        assert_eq!(parse_duration("-1.5h").expect("d"), SignedDuration::from_secs(-5400));
        assert!(parse_duration("5").is_err());
        assert_eq!(callv("duration", &[st("95")]), "1m35s");
        assert_eq!(callv("duration", &[Value::Int(95)]), "0s");
        assert_eq!(callv("durationRound", &[st("2h10m5s")]), "2h");
        assert_eq!(callv("durationRound", &[st("400h")]), "16d");
    }

    #[test]
    fn date_functions() {
        assert_eq!(callv("date", &[st("2006-01-02 15:04"), Value::Nil]), "2024-03-05 14:07");
        assert_eq!(callv("htmlDate", &[Value::Int(0)]), "1970-01-01");
        assert_eq!(callv("dateInZone", &[st("15:04 MST"), Value::Int(0), st("UTC")]), "00:00 UTC");
        let now = call("now", &[]).expect("now");
        let later = call("dateModify", &[st("1h30m"), now.clone()]).expect("modify");
        assert_eq!(callv("date", &[st("15:04"), later]), "15:37");
        assert_eq!(callv("dateModify", &[st("bad"), now.clone()]), "2024-03-05 14:07:09.5 +0100 CET");
        assert!(callv("mustDateModify", &[st("bad"), now.clone()]).starts_with("ERR time: invalid duration"));
        assert_eq!(
            callv("unixEpoch", &[call("toDate", &[st("2006-01-02"), st("2020-01-01")]).expect("d")]),
            "1577833200"
        );
        assert_eq!(callv("ago", &[now]), "0s");
        assert_eq!(callv("typeOf", &[call("now", &[]).expect("now")]), "time.Time");
    }
}
