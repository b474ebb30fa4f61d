//! Sprig's dates (date.go) on `jiff`: Go's layout strings ("2006-01-02"),
//! durations as Go prints and parses them, and `time.Time` values as an
//! [`Object`] ([`GoTime`]). "Local" is the zone of the render's "now".

mod duration;
mod layout;

use crate::env::HostExt as _;
use std::rc::Rc;

use jiff::{SignedDuration, Timestamp, Zoned, tz::TimeZone};

use super::{reg, s};
use gotmpl::func::{FuncMap, Host, Param};
use gotmpl::value::{FuncError, Object, Value};

use Param::{Any, String as Str};

use duration::{duration_round, round_duration};
pub use duration::{format_duration, parse_duration};
use layout::weekday_name;
pub use layout::{format_go, parse_go};

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
