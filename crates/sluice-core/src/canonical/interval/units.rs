//! The lenient reader's units: the words a number may be followed by
//! (`years`, `mons`, `hrs`, `microseconds`…, any case, compared on their
//! first ten letters), what adding a number in each unit does to the
//! [`Sum`], and the mask of fields a text has set, so no field is set twice.

use super::sum::{Parsed, Sum};
use crate::canonical::reading::{
    MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_MINUTE, MICROS_PER_SECOND,
};

/// The fixed month length that fractions of months are counted in.
const DAYS_PER_MONTH: i32 = 30;

/// The units a number can be in (`deltatktbl`'s `UNITS` the reference reader
/// adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Microsecond,
    Millisecond,
    Second,
    Minute,
    Hour,
    Day,
    Week,
    Month,
    Year,
    Decade,
    Century,
    Millennium,
}

/// Which fields a text has set, to refuse one set twice (the reference reader's
/// `fmask`): a time sets hours, minutes and all the seconds' units.
pub(super) type Mask = u16;

impl Unit {
    fn mask(self) -> Mask {
        1 << self as u16
    }

    /// Adds `value` and its fraction `frac` (of the same sign) in this unit.
    pub(super) fn add(self, value: i64, frac: f64, sum: &mut Sum) -> Parsed<Mask> {
        match self {
            Unit::Microsecond => sum.add_micros(value, frac, 1)?,
            Unit::Millisecond => sum.add_micros(value, frac, 1000)?,
            Unit::Second => {
                sum.add_micros(value, frac, MICROS_PER_SECOND)?;
                // Fractional seconds are milli- and microseconds too.
                if frac != 0.0 {
                    return Ok(ALL_SECONDS);
                }
            }
            Unit::Minute => sum.add_micros(value, frac, MICROS_PER_MINUTE)?,
            Unit::Hour => sum.add_micros(value, frac, MICROS_PER_HOUR)?,
            Unit::Day => {
                sum.add_days(value, 1)?;
                sum.add_fraction_micros(frac, MICROS_PER_DAY)?;
            }
            Unit::Week => {
                sum.add_days(value, 7)?;
                sum.add_fraction_days(frac, 7)?;
            }
            Unit::Month => {
                sum.add_months(value)?;
                sum.add_fraction_days(frac, DAYS_PER_MONTH)?;
            }
            Unit::Year | Unit::Decade | Unit::Century | Unit::Millennium => {
                let scale = self.years();
                sum.add_years(value, scale)?;
                sum.add_fraction_years(frac, scale)?;
            }
        }
        Ok(self.mask())
    }

    fn years(self) -> i32 {
        match self {
            Unit::Decade => 10,
            Unit::Century => 100,
            Unit::Millennium => 1000,
            _ => 1,
        }
    }
}

const ALL_SECONDS: Mask =
    (1 << Unit::Second as u16) | (1 << Unit::Millisecond as u16) | (1 << Unit::Microsecond as u16);
pub(super) const TIME_FIELDS: Mask =
    ALL_SECONDS | (1 << Unit::Minute as u16) | (1 << Unit::Hour as u16);

/// What a word means in an interval.
pub(super) enum Word {
    Unit(Unit),
    Ago,
}

/// The grammar's unit words (`deltatktbl`), lower case. The reference reader
/// compares only the first ten letters (`TOKMAXLEN`), so `microseconds` is
/// `microsecon`.
const WORDS: &[(&str, Unit)] = &[
    ("c", Unit::Century),
    ("cent", Unit::Century),
    ("centuries", Unit::Century),
    ("century", Unit::Century),
    ("d", Unit::Day),
    ("day", Unit::Day),
    ("days", Unit::Day),
    ("dec", Unit::Decade),
    ("decade", Unit::Decade),
    ("decades", Unit::Decade),
    ("decs", Unit::Decade),
    ("h", Unit::Hour),
    ("hour", Unit::Hour),
    ("hours", Unit::Hour),
    ("hr", Unit::Hour),
    ("hrs", Unit::Hour),
    ("m", Unit::Minute),
    ("microsecon", Unit::Microsecond),
    ("mil", Unit::Millennium),
    ("millennia", Unit::Millennium),
    ("millennium", Unit::Millennium),
    ("millisecon", Unit::Millisecond),
    ("mils", Unit::Millennium),
    ("min", Unit::Minute),
    ("mins", Unit::Minute),
    ("minute", Unit::Minute),
    ("minutes", Unit::Minute),
    ("mon", Unit::Month),
    ("mons", Unit::Month),
    ("month", Unit::Month),
    ("months", Unit::Month),
    ("ms", Unit::Millisecond),
    ("msec", Unit::Millisecond),
    ("msecond", Unit::Millisecond),
    ("mseconds", Unit::Millisecond),
    ("msecs", Unit::Millisecond),
    ("s", Unit::Second),
    ("sec", Unit::Second),
    ("second", Unit::Second),
    ("seconds", Unit::Second),
    ("secs", Unit::Second),
    ("us", Unit::Microsecond),
    ("usec", Unit::Microsecond),
    ("usecond", Unit::Microsecond),
    ("useconds", Unit::Microsecond),
    ("usecs", Unit::Microsecond),
    ("w", Unit::Week),
    ("week", Unit::Week),
    ("weeks", Unit::Week),
    ("y", Unit::Year),
    ("year", Unit::Year),
    ("years", Unit::Year),
    ("yr", Unit::Year),
    ("yrs", Unit::Year),
];

/// The longest word the reference reader compares (`TOKMAXLEN`).
const WORD_LETTERS: usize = 10;

pub(super) fn word(letters: &[u8]) -> Option<Word> {
    if letters.eq_ignore_ascii_case(b"ago") {
        return Some(Word::Ago);
    }
    // A longer word matches a ten-letter entry on its first ten letters.
    let key = &letters[..letters.len().min(WORD_LETTERS)];
    WORDS
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(key))
        .filter(|(name, _)| letters.len() <= WORD_LETTERS || name.len() == WORD_LETTERS)
        .map(|&(_, unit)| Word::Unit(unit))
}
