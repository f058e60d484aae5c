//! Durations given on the command line in seconds (`--timeout`,
//! `--deadline`), checked by clap's parser: `Duration::from_secs_f64`
//! panics on a negative, NaN or too large value, so nothing unchecked
//! reaches it, and a bad value is a usage error (exit 2).

use std::time::Duration;

/// The longest `--deadline` accepted: a day.
pub(crate) const MAX_DEADLINE: Duration = Duration::from_secs(86_400);

/// A non-negative number of seconds (fractions allowed) that a `Duration`
/// holds.
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if secs.is_nan() || secs < 0.0 {
        return Err(format!("{text:?} is not a number of seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{text:?} seconds is too long"))
}

/// A deadline: more than zero seconds, at most [`MAX_DEADLINE`].
pub(crate) fn parse_deadline(text: &str) -> Result<Duration, String> {
    let deadline = parse_seconds(text)?;
    if deadline.is_zero() || deadline > MAX_DEADLINE {
        return Err(format!(
            "{text:?} is not a number of seconds above 0 and at most {}",
            MAX_DEADLINE.as_secs()
        ));
    }
    Ok(deadline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_deadlines_are_checked() {
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "NaN", "inf", "1e30", "x", ""] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_deadline("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_deadline("86400"), Ok(MAX_DEADLINE));
        for bad in ["0", "-0", "86400.5", "1e30", "-3", "NaN"] {
            assert!(parse_deadline(bad).is_err(), "{bad}");
        }
    }
}
