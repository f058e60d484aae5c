//! `--since`: a point in time given as an RFC 3339 UTC time
//! (`2026-12-01T10:00:00Z`, fractions and `+hh:mm` offsets allowed) or as
//! an age (`90s`, `15m`, `1h`, `2d`, `500ms`), checked by clap's parser so
//! a bad value is a usage error (exit 2).

use std::time::Duration;

/// A `--since` value, resolved to milliseconds since the Unix epoch when
/// the command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Since {
    /// This time.
    At(u64),
    /// This long before now.
    Ago(Duration),
}

impl Since {
    /// The time this stands for, with the clock reading `now_ms`.
    pub(crate) fn at(self, now_ms: u64) -> u64 {
        match self {
            Since::At(ms) => ms,
            Since::Ago(age) => {
                now_ms.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
            }
        }
    }
}

/// Reads a `--since` value.
pub(crate) fn parse_since(text: &str) -> Result<Since, String> {
    let t = text.trim();
    if let Some(age) = parse_age(t) {
        return age.map(Since::Ago);
    }
    parse_rfc3339(t).map(Since::At).ok_or_else(|| {
        format!(
            "{text:?} is neither a time like 2026-12-01T10:00:00Z nor an age like 1h, 15m, 90s, 2d"
        )
    })
}

/// `None` when `t` does not look like an age at all.
fn parse_age(t: &str) -> Option<Result<Duration, String>> {
    let digits = t.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    let (n, unit) = t.split_at(digits);
    let ms_per = match unit {
        "ms" => 1u64,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    Some(
        n.parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(ms_per))
            .map(Duration::from_millis)
            .ok_or_else(|| format!("{t:?} is too long an age")),
    )
}

/// Milliseconds since the epoch of `YYYY-MM-DDTHH:MM:SS[.f+](Z|±hh:mm)`.
fn parse_rfc3339(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = t.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &t[19..];
    let mut millis = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(frac.len());
        if digits == 0 {
            return None;
        }
        let first3 = format!("{:0<3}", &frac[..digits.min(3)]);
        millis = first3.parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = &rest[1..];
            if r.len() != 5 || r.as_bytes()[2] != b':' {
                return None;
            }
            let (h, m): (i64, i64) = (r[..2].parse().ok()?, r[3..].parse().ok()?);
            if h > 23 || m > 59 {
                return None;
            }
            sign * (h * 60 + m)
        }
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_min * 60;
    u64::try_from(secs.checked_mul(1_000)?.checked_add(millis)?).ok()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian
/// calendar (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_ages() {
        let table = [
            ("1970-01-01T00:00:00Z", Since::At(0)),
            ("2026-12-01T10:00:00Z", Since::At(1_796_119_200_000)),
            ("2026-12-01T10:00:00.25Z", Since::At(1_796_119_200_250)),
            ("2026-12-01T12:00:00+02:00", Since::At(1_796_119_200_000)),
            ("2024-02-29T00:00:00Z", Since::At(1_709_164_800_000)),
            ("1h", Since::Ago(Duration::from_secs(3_600))),
            ("15m", Since::Ago(Duration::from_secs(900))),
            ("90s", Since::Ago(Duration::from_secs(90))),
            ("2d", Since::Ago(Duration::from_secs(172_800))),
            ("500ms", Since::Ago(Duration::from_millis(500))),
        ];
        for (text, want) in table {
            assert_eq!(parse_since(text), Ok(want), "{text}");
        }
        assert_eq!(Since::Ago(Duration::from_secs(1)).at(5_000), 4_000);
        assert_eq!(Since::Ago(Duration::from_secs(10)).at(5_000), 0);
    }

    #[test]
    fn bad_values_are_refused() {
        for bad in [
            "",
            "h",
            "1y",
            "-1h",
            "2026-13-01T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2026-12-01T10:00:00",
            "2026-12-01",
            "2026-12-01T10:00:00+2",
            "99999999999999999999d",
        ] {
            assert!(parse_since(bad).is_err(), "{bad:?}");
        }
    }
}
