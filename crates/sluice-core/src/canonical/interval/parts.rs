//! [`Interval`]: the one representation both interval readers give, so a
//! caller reads the canonical text and the lenient input into the same value.

/// An interval in its three parts, which do not convert into each other (a
/// month has no fixed number of days, a day no fixed number of hours across
/// a daylight-saving change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Interval {
    /// Months (a year is twelve).
    pub months: i32,
    /// Days.
    pub days: i32,
    /// Clock time in microseconds.
    pub microseconds: i64,
}
