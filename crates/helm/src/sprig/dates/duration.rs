//! Go `time.Duration` as Go prints it (`1h2m3.5s`, `Round`) and parses it (`ParseDuration`).

use jiff::SignedDuration;

pub(super) fn round_duration(d: SignedDuration, m: i128) -> SignedDuration {
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

pub(super) fn duration_round(d: SignedDuration) -> String {
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
    let err = || format!("time: invalid duration {}", crate::sprig::gofmt::quote(orig));
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
            "" => return Err(format!("time: missing unit in duration {}", crate::sprig::gofmt::quote(orig))),
            u => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    crate::sprig::gofmt::quote(u),
                    crate::sprig::gofmt::quote(orig)
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
