//! Fixed-window arithmetic: which window a moment falls in, and how long it has left.
//!
//! Windows are fixed, not sliding: the current UTC minute, the current UTC day (days since
//! the Unix epoch, which start at 00:00 UTC) and the current UTC calendar month (months since
//! January 1970, which start on the 1st at 00:00 UTC; money budgets). A fixed window is one counter per limit, so
//! checking it is one `GET` and charging it one `INCRBY` inside a single script, and every
//! instance computes the same window from its own clock (instances are expected to run NTP; a
//! clock a second off moves the boundary by a second). The price is the usual one: a caller may
//! spend a window's budget at its end and the next one's at its start.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::auth::limits::Window;
use crate::caps::lifecycle::{civil_from_days, days_from_civil, Clock};

/// Seconds in a day.
const DAY: u64 = 86_400;

/// A moment, as whole milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Now {
    pub millis: u64,
}

impl Now {
    pub(crate) fn at(t: SystemTime) -> Now {
        // A clock before 1970 is broken; counting it as the epoch keeps windows well-defined.
        let millis = t
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Now { millis }
    }

    pub(crate) fn current() -> Now {
        Now::at(SystemTime::now())
    }

    /// Now by `clock`: the system's time, or the one a test set (whole seconds).
    pub(crate) fn by(clock: &Clock) -> Now {
        match clock {
            Clock::System => Now::current(),
            Clock::Manual(_) => Now {
                millis: u64::try_from(clock.now()).unwrap_or(0).saturating_mul(1000),
            },
        }
    }

    fn seconds(self) -> u64 {
        self.millis / 1000
    }

    /// The number of the window `w` this moment falls in (the same on every instance).
    pub(crate) fn window(self, w: Window) -> u64 {
        match w {
            Window::Minute => self.seconds() / 60,
            Window::Day => self.seconds() / DAY,
            Window::Month => {
                let (y, m) = self.month();
                u64::try_from((y - 1970) * 12 + (m - 1)).unwrap_or(0)
            }
        }
    }

    /// Whole seconds until the window ends, at least 1 (for `Retry-After` and `t`).
    pub(crate) fn seconds_left(self, w: Window) -> u64 {
        let (start, length) = self.bounds(w);
        start + length - self.seconds()
    }

    /// When the window `w` holding this moment ends (Unix seconds): the next one's first second.
    #[cfg_attr(not(feature = "ledger"), allow(dead_code))]
    pub(crate) fn ends(self, w: Window) -> u64 {
        let (start, length) = self.bounds(w);
        start + length
    }

    /// The length of the window `w` this moment falls in, in seconds (a month's is its own: 28
    /// to 31 days), for the `RateLimit-Policy` header's `w`.
    pub(crate) fn length(self, w: Window) -> u64 {
        self.bounds(w).1
    }

    /// The start (Unix seconds) and length of the window `w` holding this moment.
    fn bounds(self, w: Window) -> (u64, u64) {
        let secs = self.seconds();
        match w {
            Window::Minute => (secs - secs % 60, 60),
            Window::Day => (secs - secs % DAY, DAY),
            Window::Month => {
                let (y, m) = self.month();
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                let first =
                    |y: i64, m: i64| u64::try_from(days_from_civil(y, m, 1)).unwrap_or(0) * DAY;
                let start = first(y, m);
                (start, first(ny, nm).saturating_sub(start).max(DAY))
            }
        }
    }

    /// The UTC year and month (1–12) of this moment.
    fn month(self) -> (i64, i64) {
        let days = i64::try_from(self.seconds() / DAY).unwrap_or(i64::MAX / 2);
        let (y, m, _) = civil_from_days(days);
        (y, m)
    }

    /// How long a window's counter must live: past its window's end, with a minute's slack
    /// for clocks that disagree a little.
    pub(crate) fn counter_ttl(self, w: Window) -> u64 {
        self.seconds_left(w) + 60
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::lifecycle::Date;
    use std::time::Duration;

    fn at(secs: u64) -> Now {
        Now::at(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn minute_windows() {
        // 1_700_000_000 is 2023-11-14T22:13:20Z: 20 s into its minute.
        let now = at(1_700_000_000);
        assert_eq!(now.window(Window::Minute), 1_700_000_000 / 60);
        assert_eq!(now.seconds_left(Window::Minute), 40);
        assert_eq!(
            at(1_700_000_039).window(Window::Minute),
            now.window(Window::Minute)
        );
        assert_eq!(
            at(1_700_000_040).window(Window::Minute),
            now.window(Window::Minute) + 1
        );
        // The first second of a window has all of it left, the last one 1 s.
        assert_eq!(at(1_700_000_040).seconds_left(Window::Minute), 60);
        assert_eq!(at(1_700_000_039).seconds_left(Window::Minute), 1);
        assert_eq!(now.counter_ttl(Window::Minute), 100);
        assert_eq!(now.ends(Window::Minute), 1_700_000_040);
    }

    #[test]
    fn day_windows_are_utc_days() {
        let now = at(1_700_000_000);
        assert_eq!(now.window(Window::Day), 19_675);
        // 22:13:20 UTC: 1 h 46 min 40 s to midnight.
        assert_eq!(now.seconds_left(Window::Day), 6_400);
        assert_eq!(now.ends(Window::Day), 19_676 * 86_400);
        assert_eq!(at(19_676 * 86_400).window(Window::Day), 19_676);
        assert_eq!(at(19_676 * 86_400 - 1).seconds_left(Window::Day), 1);
    }

    /// Unix seconds of `YYYY-MM-DD` 00:00 UTC.
    fn day(s: &str) -> u64 {
        Date::parse(s).unwrap().unix() as u64
    }

    #[test]
    fn month_windows_are_utc_calendar_months() {
        // 2026-11-27 04:00 UTC: November 2026 is month 56 × 12 + 10 since January 1970.
        let now = at(day("2026-11-27") + 4 * 3600);
        assert_eq!(now.window(Window::Month), 56 * 12 + 10);
        assert_eq!(now.length(Window::Month), 30 * 86_400);
        assert_eq!(
            now.seconds_left(Window::Month),
            day("2026-12-01") - day("2026-11-27") - 4 * 3600
        );
        // The last second of November is still November; the next is December's first.
        let last = at(day("2026-12-01") - 1);
        assert_eq!(last.window(Window::Month), now.window(Window::Month));
        assert_eq!(last.seconds_left(Window::Month), 1);
        let first = at(day("2026-12-01"));
        assert_eq!(first.window(Window::Month), now.window(Window::Month) + 1);
        assert_eq!(first.seconds_left(Window::Month), 31 * 86_400);
        assert_eq!(now.ends(Window::Month), day("2026-12-01"));
        // December to January moves the year; February has 28 or 29 days.
        assert_eq!(
            at(day("2027-01-01")).window(Window::Month),
            first.window(Window::Month) + 1
        );
        assert_eq!(at(day("2028-02-10")).length(Window::Month), 29 * 86_400);
        assert_eq!(at(day("2027-02-10")).length(Window::Month), 28 * 86_400);
        assert_eq!(at(0).window(Window::Month), 0);
    }

    #[test]
    fn a_manual_clock_moves_the_windows() {
        let clock = Clock::manual(day("2026-11-27") as i64 + 86_399);
        let before = Now::by(&clock);
        assert_eq!(before.seconds_left(Window::Day), 1);
        clock.set(day("2026-11-28") as i64);
        let after = Now::by(&clock);
        assert_eq!(after.window(Window::Day), before.window(Window::Day) + 1);
        assert_eq!(after.window(Window::Month), before.window(Window::Month));
    }

    #[test]
    fn milliseconds_do_not_move_windows() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_039_999);
        assert_eq!(Now::at(t).seconds_left(Window::Minute), 1);
        assert_eq!(Now::at(UNIX_EPOCH - Duration::from_secs(5)).millis, 0);
    }
}
