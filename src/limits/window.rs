//! Fixed-window arithmetic: which window a moment falls in, and how long it has left.
//!
//! Windows are fixed, not sliding: the current UTC minute and the current UTC day (days since
//! the Unix epoch, which start at 00:00 UTC). A fixed window is one counter per limit, so
//! checking it is one `GET` and charging it one `INCRBY` inside a single script, and every
//! instance computes the same window from its own clock (instances are expected to run NTP; a
//! clock a second off moves the boundary by a second). The price is the usual one: a caller may
//! spend a window's budget at its end and the next one's at its start.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::auth::limits::Window;

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

    fn seconds(self) -> u64 {
        self.millis / 1000
    }

    /// The number of the window `w` this moment falls in (the same on every instance).
    pub(crate) fn window(self, w: Window) -> u64 {
        self.seconds() / w.seconds()
    }

    /// Whole seconds until the window ends, at least 1 (for `Retry-After` and `t`).
    pub(crate) fn seconds_left(self, w: Window) -> u64 {
        w.seconds() - self.seconds() % w.seconds()
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
    }

    #[test]
    fn day_windows_are_utc_days() {
        let now = at(1_700_000_000);
        assert_eq!(now.window(Window::Day), 19_675);
        // 22:13:20 UTC: 1 h 46 min 40 s to midnight.
        assert_eq!(now.seconds_left(Window::Day), 6_400);
        assert_eq!(at(19_676 * 86_400).window(Window::Day), 19_676);
        assert_eq!(at(19_676 * 86_400 - 1).seconds_left(Window::Day), 1);
    }

    #[test]
    fn milliseconds_do_not_move_windows() {
        let t = UNIX_EPOCH + Duration::from_millis(1_700_000_039_999);
        assert_eq!(Now::at(t).seconds_left(Window::Minute), 1);
        assert_eq!(Now::at(UNIX_EPOCH - Duration::from_secs(5)).millis, 0);
    }
}
