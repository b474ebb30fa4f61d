//! Go's reference-time layouts ("Mon Jan 2 15:04:05 MST 2006"): `Time.Format` and `time.Parse`
//! on `jiff`, chunk by chunk as Go's `nextStdChunk` reads them.

use jiff::{Zoned, tz::TimeZone};

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

pub(super) fn weekday_name(z: &Zoned) -> &'static str {
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
            crate::sprig::gofmt::quote(value),
            crate::sprig::gofmt::quote(layout),
            crate::sprig::gofmt::quote(value),
            crate::sprig::gofmt::quote(layout)
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
        return Err(format!(
            "parsing time {}: extra text: {}",
            crate::sprig::gofmt::quote(value),
            crate::sprig::gofmt::quote(v)
        ));
    }
    if let Some(p) = pm {
        if p && hour < 12 {
            hour += 12;
        } else if !p && hour == 12 {
            hour = 0;
        }
    }
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", crate::sprig::gofmt::quote(value));
    let date = jiff::civil::Date::new(year as i16, month as i8, day as i8)
        .map_err(|_| out_of_range(if (1..=12).contains(&month) { "day" } else { "month" }))?;
    let dt = date.at(hour as i8, min as i8, sec as i8, nanos);
    let tz = match offset {
        Some(o) => jiff::tz::Offset::from_seconds(o).map(TimeZone::fixed).map_err(|e| e.to_string())?,
        None => local.clone(),
    };
    dt.to_zoned(tz).map_err(|e| e.to_string())
}
