//! The one parser of durations given on the command line (`--timeout`,
//! `--interval`, `--window`): plain seconds (`2`, `0.5`) or humantime
//! (`200ms`, `90s`, `1h30m`). Each flag adds its own bounds.

use std::time::Duration;

/// Parses `s` as seconds or a humantime duration; the error says which
/// forms are accepted.
pub fn parse(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    match t.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is out of range"))
        }
        Ok(_) => Err(format!("{s:?} must be a non-negative number of seconds")),
        Err(_) => humantime::parse_duration(t).map_err(|e| {
            format!("invalid duration {s:?}: {e} (use 200ms, 90s, 2m, 1h30m or seconds)")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse(" 1.5 "), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("200ms"), Ok(Duration::from_millis(200)));
        for bad in ["-1", "NaN", "inf", "1e300", "soon", ""] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
