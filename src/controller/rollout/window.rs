//! Maintenance windows: weekly, in a time zone; moves start only while one is open. Pure.

use std::time::Duration;

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::api::MaintenanceWindow;

/// Whether a window is open at `now`, or when the next one opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowState {
    Open,
    /// Closed; opens at this time (`None`: no window opens within a week, e.g. an invalid spec).
    ClosedUntil(Option<Timestamp>),
}

/// One window, parsed.
struct Parsed {
    days: Vec<Weekday>,
    start: Time,
    duration: Duration,
    tz: TimeZone,
}

fn parse(w: &MaintenanceWindow) -> Result<Parsed, String> {
    let days = w
        .days
        .iter()
        .map(|d| match d.as_str() {
            "Mon" => Ok(Weekday::Monday),
            "Tue" => Ok(Weekday::Tuesday),
            "Wed" => Ok(Weekday::Wednesday),
            "Thu" => Ok(Weekday::Thursday),
            "Fri" => Ok(Weekday::Friday),
            "Sat" => Ok(Weekday::Saturday),
            "Sun" => Ok(Weekday::Sunday),
            other => Err(format!("day {other:?} is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let start: Time = w.start.parse().map_err(|e| format!("start {:?} is not HH:MM: {e}", w.start))?;
    let duration = humantime::parse_duration(&w.duration).map_err(|e| format!("duration {:?}: {e}", w.duration))?;
    let tz = match w.time_zone.as_deref() {
        None | Some("") | Some("UTC") => TimeZone::UTC,
        Some(name) => TimeZone::get(name).map_err(|e| format!("time zone {name:?}: {e}"))?,
    };
    Ok(Parsed { days, start, duration, tz })
}

/// Checks every window's spec; the first error says which and why.
pub fn validate(windows: &[MaintenanceWindow]) -> Result<(), String> {
    for (i, w) in windows.iter().enumerate() {
        parse(w).map_err(|e| format!("maintenanceWindows[{i}]: {e}"))?;
    }
    Ok(())
}

/// Whether a window is open at `now`. No windows: always open. Invalid windows never open.
pub fn state(windows: &[MaintenanceWindow], now: Timestamp) -> WindowState {
    if windows.is_empty() {
        return WindowState::Open;
    }
    let mut next: Option<Timestamp> = None;
    for parsed in windows.iter().filter_map(|w| parse(w).ok()) {
        let today = now.to_zoned(parsed.tz.clone()).date();
        // Yesterday's window may still be open; look a week ahead for the next opening.
        for offset in -1i64..=7 {
            let Ok(date) = today.checked_add(offset.days()) else { continue };
            if !parsed.days.is_empty() && !parsed.days.contains(&date.weekday()) {
                continue;
            }
            let Ok(start) = date.to_datetime(parsed.start).to_zoned(parsed.tz.clone()) else { continue };
            let start = start.timestamp();
            let Ok(end) = start.checked_add(parsed.duration) else { continue };
            if start <= now && now < end {
                return WindowState::Open;
            }
            if start > now && next.is_none_or(|n| start < n) {
                next = Some(start);
            }
        }
    }
    WindowState::ClosedUntil(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(days: &[&str], start: &str, duration: &str, tz: Option<&str>) -> MaintenanceWindow {
        MaintenanceWindow {
            days: days.iter().map(|d| d.to_string()).collect(),
            start: start.into(),
            duration: duration.into(),
            time_zone: tz.map(str::to_owned),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn no_windows_is_always_open() {
        assert_eq!(state(&[], at("2026-11-24T12:00:00Z")), WindowState::Open);
    }

    #[test]
    fn a_weekend_night_window_in_berlin() {
        // Sat/Sun 02:00-06:00 Europe/Berlin (UTC+1 in November).
        let w = [window(&["Sat", "Sun"], "02:00", "4h", Some("Europe/Berlin"))];
        // Tuesday: closed until Saturday 01:00 UTC.
        assert_eq!(state(&w, at("2026-11-24T12:00:00Z")), WindowState::ClosedUntil(Some(at("2026-11-28T01:00:00Z"))));
        assert_eq!(state(&w, at("2026-11-28T01:00:00Z")), WindowState::Open);
        assert_eq!(state(&w, at("2026-11-29T04:59:59Z")), WindowState::Open);
        // Sunday 05:00 UTC: closed until next Saturday.
        assert_eq!(state(&w, at("2026-11-29T05:00:00Z")), WindowState::ClosedUntil(Some(at("2026-12-05T01:00:00Z"))));
    }

    #[test]
    fn a_window_open_across_midnight_counts_from_the_day_before() {
        let w = [window(&["Mon"], "23:00", "3h", None)];
        // 2026-11-24 is a Tuesday: Monday's window is open until 02:00.
        assert_eq!(state(&w, at("2026-11-24T01:30:00Z")), WindowState::Open);
        assert!(matches!(state(&w, at("2026-11-24T02:00:00Z")), WindowState::ClosedUntil(Some(_))));
    }

    #[test]
    fn invalid_windows_never_open_and_are_reported() {
        let w = [window(&["Someday"], "02:00", "1h", None)];
        assert_eq!(state(&w, at("2026-11-24T12:00:00Z")), WindowState::ClosedUntil(None));
        assert!(validate(&w).unwrap_err().contains("Someday"));
        assert!(validate(&[window(&[], "25:00", "1h", None)]).is_err());
        assert!(validate(&[window(&[], "02:00", "1h", Some("Mars/Olympus"))]).unwrap_err().contains("Mars/Olympus"));
        assert_eq!(validate(&[window(&[], "02:00", "1h", Some("Europe/Berlin"))]), Ok(()));
    }
}
