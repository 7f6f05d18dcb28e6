//! Durations the way Go writes and reads them (`1.5s`, `300ms`, `1m30s`), so `--timeout` takes
//! what bbolt users type and `bench` prints what bbolt's bench prints.

use std::time::Duration;

/// Formats `d` like Go's `time.Duration.String`: `0s`, `850ns`, `1.234µs`, `5.5ms`, `2.000001s`,
/// `1m30s`, `2h0m0.5s`.
pub fn go_string(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", fraction(nanos, 1_000, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", fraction(nanos, 1_000_000, 6));
    }
    let total_secs = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let (hours, minutes, secs) = (total_secs / 3600, total_secs / 60 % 60, total_secs % 60);
    let seconds = fraction(secs * 1_000_000_000 + sub, 1_000_000_000, 9);
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}s")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}s")
    } else {
        format!("{seconds}s")
    }
}

/// `value / unit` with up to `digits` decimals, trailing zeros (and a bare point) dropped.
fn fraction(value: u128, unit: u128, digits: usize) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let text = format!("{whole}.{frac:0digits$}");
    text.trim_end_matches('0').to_owned()
}

/// Parses a Go duration: a sequence of decimal numbers, each with a unit (`ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`), such as `300ms` or `1m30s`. A bare `0` is zero.
pub fn parse(text: &str) -> Result<Duration, String> {
    let invalid = || format!("invalid duration {text:?} (examples: 500ms, 2s, 1m30s)");
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err(invalid());
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        rest = &rest[unit_len..];
        total += number * scale;
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_go() {
        let check = |nanos: u64, expected: &str| {
            assert_eq!(go_string(Duration::from_nanos(nanos)), expected, "{nanos}");
        };
        check(0, "0s");
        check(1, "1ns");
        check(999, "999ns");
        check(1_000, "1µs");
        check(1_500, "1.5µs");
        check(3_456, "3.456µs");
        check(1_000_000, "1ms");
        check(3_456_789, "3.456789ms");
        check(1_000_000_000, "1s");
        check(2_000_000_001, "2.000000001s");
        check(90_000_000_000, "1m30s");
        check(3_600_000_000_000, "1h0m0s");
        check(7_384_500_000_000, "2h3m4.5s");
    }

    #[test]
    fn parses_go_durations() {
        let check = |text: &str, millis: u64| {
            assert_eq!(
                parse(text).unwrap(),
                Duration::from_millis(millis),
                "{text}"
            );
        };
        check("0", 0);
        check("0s", 0);
        check("1s", 1000);
        check("1.5s", 1500);
        check("300ms", 300);
        check("1m30s", 90_000);
        check("1h", 3_600_000);
        assert_eq!(parse("250us").unwrap(), Duration::from_micros(250));
        for bad in ["", "5", "1x", "s", "-1s", "1..2s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
