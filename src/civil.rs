//! Dates of the proleptic Gregorian calendar as day counts since 1970-01-01, and back, and Unix
//! seconds as RFC 3339: what every date the gateway reads or writes (lifecycle dates, limit
//! windows, signatures, log lines, the APIs' times) is computed with. A module of its own, importing nothing, so that the lowest layers (the
//! logger among them) can use it.

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, in eras of 400 years).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day count (the inverse of [`days_from_civil`]).
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Unix time `secs` as RFC 3339 in UTC to the second (`2026-12-04T20:19:01Z`: as `env_logger` stamps
/// its lines, and the management API and the usage answer write times), digit by digit into `out`.
pub(crate) fn push_rfc3339_seconds(out: &mut Vec<u8>, secs: u64) {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let two = |n: u64| [b'0' + (n / 10 % 10) as u8, b'0' + (n % 10) as u8];
    let y = y.clamp(0, 9999) as u64;
    out.extend_from_slice(&two(y / 100));
    out.extend_from_slice(&two(y % 100));
    out.push(b'-');
    out.extend_from_slice(&two(m as u64));
    out.push(b'-');
    out.extend_from_slice(&two(d as u64));
    out.push(b'T');
    out.extend_from_slice(&two(rem / 3600));
    out.push(b':');
    out.extend_from_slice(&two(rem % 3600 / 60));
    out.push(b':');
    out.extend_from_slice(&two(rem % 60));
    out.push(b'Z');
}

/// [`push_rfc3339_seconds`] as a `String`.
pub(crate) fn rfc3339_seconds(secs: u64) -> String {
    let mut out = Vec::with_capacity(20);
    push_rfc3339_seconds(&mut out, secs);
    // Only ASCII digits and separators went in.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_rfc3339_utc() {
        let stamp = |secs| {
            let mut out = Vec::new();
            push_rfc3339_seconds(&mut out, secs);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(stamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(stamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(stamp(1_796_411_941), "2026-12-04T19:19:01Z");
    }
}
