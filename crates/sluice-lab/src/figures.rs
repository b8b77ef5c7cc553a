//! Figures written for people: durations, RTT labels and counts with
//! thousands separators, alike in the terminal, the report and the charts.

use std::time::Duration;

/// A duration in milliseconds for people: `0.04 ms`, `5 ms`, `1.23 s`.
pub fn human_duration(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1e3;
    if ms >= 100_000.0 {
        format!("{:.0} s", ms / 1e3)
    } else if ms >= 10_000.0 {
        format!("{:.1} s", ms / 1e3)
    } else if ms >= 1000.0 {
        let text = format!("{:.2}", ms / 1e3);
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 0.995 || ms == 0.0 {
        let text = format!("{ms:.2}");
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{ms:.3} ms")
    }
}

/// An RTT as a series name: `0 ms RTT`, `5 ms RTT`.
pub fn rtt_label(rtt: Duration) -> String {
    format!("{} RTT", human_duration(rtt))
}

/// A count with thousands separators: `100,000`.
pub fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let head = match digits.len() % 3 {
        0 => 3.min(digits.len()),
        n => n,
    };
    let mut out = digits[..head].to_owned();
    for group in digits.as_bytes()[head..].chunks(3) {
        out.push(',');
        out.extend(group.iter().map(|&b| b as char));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_well() {
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(12), "12");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(human_duration(Duration::ZERO), "0 ms");
        assert_eq!(human_duration(Duration::from_millis(5)), "5 ms");
        assert_eq!(human_duration(Duration::from_micros(1500)), "1.5 ms");
        assert_eq!(human_duration(Duration::from_micros(42)), "0.042 ms");
        assert_eq!(human_duration(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(human_duration(Duration::from_millis(3000)), "3 s");
        assert_eq!(human_duration(Duration::from_millis(53_281)), "53.3 s");
        assert_eq!(rtt_label(Duration::from_millis(1)), "1 ms RTT");
    }
}
