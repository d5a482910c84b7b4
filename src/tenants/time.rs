//! Timestamps as the management API writes and reads them: RFC 3339 in UTC
//! (`2026-12-04T01:28:29Z`); an offset is accepted on input.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::caps::lifecycle::Date;

/// `t` as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds; before 1970 reads as 1970).
pub(crate) fn rfc3339(t: SystemTime) -> String {
    crate::civil::rfc3339_seconds(t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// `t`'s UTC date, `YYYY-MM-DD`.
pub(crate) fn date(t: SystemTime) -> String {
    rfc3339(t)[..10].to_string()
}

/// A `YYYY-MM-DD` date's first second, UTC: a real day (`02-30` is none), read as the lifecycle
/// data's dates are.
pub(crate) fn parse_date(text: &str) -> Option<SystemTime> {
    let secs = u64::try_from(Date::parse(text)?.unix()).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// An RFC 3339 timestamp (`2026-12-04T01:28:29Z`, fractions and `±HH:MM` offsets accepted).
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let (date, rest) = (text.get(..10)?, text.get(10..)?);
    let day = parse_date(date)?;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let two = |s: &str| -> Option<u64> {
        (s.len() == 2 && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (h, mi, s) = (
        two(rest.get(0..2)?)?,
        two(rest.get(3..5)?)?,
        two(rest.get(6..8)?)?,
    );
    if rest.get(2..3)? != ":" || rest.get(5..6)? != ":" || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut tail = rest.get(8..)?;
    if let Some(frac) = tail.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        tail = &frac[digits..];
    }
    let offset: i64 = match tail {
        "Z" | "z" => 0,
        _ => {
            let sign = match tail.get(..1)? {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            if tail.len() != 6 || tail.get(3..4)? != ":" {
                return None;
            }
            let (oh, om) = (two(tail.get(1..3)?)?, two(tail.get(4..6)?)?);
            sign * i64::try_from(oh * 3600 + om * 60).ok()?
        }
    };
    let local = day + Duration::from_secs(h * 3600 + mi * 60 + s);
    if offset >= 0 {
        local.checked_sub(Duration::from_secs(offset.unsigned_abs()))
    } else {
        local.checked_add(Duration::from_secs(offset.unsigned_abs()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_offsets_are_read() {
        let t = parse_rfc3339("2026-12-04T01:28:29Z").unwrap();
        assert_eq!(rfc3339(t), "2026-12-04T01:28:29Z");
        assert_eq!(date(t), "2026-12-04");
        assert_eq!(parse_rfc3339("2026-12-04T02:28:29.5+01:00"), Some(t));
        assert_eq!(
            parse_rfc3339("2026-12-03T23:28:29-02:00"),
            Some(t),
            "west of UTC"
        );
        for bad in [
            "2026-12-04",
            "2026-02-30T00:00:00Z",
            "2026-12-04T24:00:00Z",
            "2026-12-04T01:28:29",
            "tomorrow",
            "2026-12-04T01:28:29+0100",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
        assert_eq!(
            rfc3339(parse_date("2026-12-01").unwrap()),
            "2026-12-01T00:00:00Z"
        );
        assert_eq!(parse_date("2026-13-01"), None);
    }
}
