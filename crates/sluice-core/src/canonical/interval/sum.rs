//! The lenient reader's running total: the fields of an interval added up as
//! the grammar's reference reader adds them (`pg_itm_in`), years apart from
//! months until the end, each field checked for overflow as it grows, and
//! fractions of a field cascading into the smaller ones (`AdjustFract*`) with
//! the same `double` arithmetic.

use super::parts::Interval;
use crate::canonical::reading::{FormError, MICROS_PER_DAY};

/// What the lenient reader's steps give: a fault is [`FormError::Syntax`]
/// (not the grammar), [`FormError::FieldRange`] (a field beyond its range)
/// or, once the fields are summed, [`FormError::Overflow`].
pub(super) type Parsed<T> = Result<T, FormError>;

/// The fields summed so far.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Sum {
    pub(super) micros: i64,
    pub(super) days: i32,
    pub(super) months: i32,
    pub(super) years: i32,
}

/// `total + value × scale`, refused when any step leaves `i32` (the width of
/// the day, month and year fields).
fn scaled_add(total: i32, value: i64, scale: i32) -> Parsed<i32> {
    i32::try_from(value)
        .ok()
        .and_then(|value| value.checked_mul(scale))
        .and_then(|scaled| total.checked_add(scaled))
        .ok_or(FormError::FieldRange)
}

impl Sum {
    /// `frac * scale` microseconds, rounded to the nearest (an exact half
    /// toward zero, as the reference reader's comparison with 0.5 does).
    pub(super) fn add_fraction_micros(&mut self, frac: f64, scale: i64) -> Parsed<()> {
        if frac == 0.0 {
            return Ok(());
        }
        let scaled = frac * scale as f64;
        let mut micros = scaled as i64;
        let rest = scaled - micros as f64;
        if rest > 0.5 {
            micros += 1;
        } else if rest < -0.5 {
            micros -= 1;
        }
        self.micros = self
            .micros
            .checked_add(micros)
            .ok_or(FormError::FieldRange)?;
        Ok(())
    }

    /// `frac * scale` days: whole days, the rest as microseconds of a day.
    pub(super) fn add_fraction_days(&mut self, frac: f64, scale: i32) -> Parsed<()> {
        if frac == 0.0 {
            return Ok(());
        }
        let scaled = frac * f64::from(scale);
        let days = scaled as i32;
        self.days = self.days.checked_add(days).ok_or(FormError::FieldRange)?;
        self.add_fraction_micros(scaled - f64::from(days), MICROS_PER_DAY)
    }

    /// `frac * scale` years as whole months, rounded half to even (`rint`);
    /// the rest of a month is dropped, as the reference reader drops it.
    pub(super) fn add_fraction_years(&mut self, frac: f64, scale: i32) -> Parsed<()> {
        let months = (frac * f64::from(scale) * 12.0).round_ties_even() as i32;
        self.months = self
            .months
            .checked_add(months)
            .ok_or(FormError::FieldRange)?;
        Ok(())
    }

    pub(super) fn add_micros(&mut self, value: i64, frac: f64, scale: i64) -> Parsed<()> {
        self.micros = value
            .checked_mul(scale)
            .and_then(|micros| self.micros.checked_add(micros))
            .ok_or(FormError::FieldRange)?;
        self.add_fraction_micros(frac, scale)
    }

    pub(super) fn add_days(&mut self, value: i64, scale: i32) -> Parsed<()> {
        self.days = scaled_add(self.days, value, scale)?;
        Ok(())
    }

    pub(super) fn add_months(&mut self, value: i64) -> Parsed<()> {
        self.months = scaled_add(self.months, value, 1)?;
        Ok(())
    }

    pub(super) fn add_years(&mut self, value: i64, scale: i32) -> Parsed<()> {
        self.years = scaled_add(self.years, value, scale)?;
        Ok(())
    }

    /// `ago`: every field negated.
    pub(super) fn negate(&mut self) -> Parsed<()> {
        let overflow = || FormError::FieldRange;
        self.micros = self.micros.checked_neg().ok_or_else(overflow)?;
        self.days = self.days.checked_neg().ok_or_else(overflow)?;
        self.months = self.months.checked_neg().ok_or_else(overflow)?;
        self.years = self.years.checked_neg().ok_or_else(overflow)?;
        Ok(())
    }

    /// The interval (`itmin2interval`): years and months together must fit
    /// an `i32` of months, else [`FormError::Overflow`]. The two values that
    /// newer readers take for `±infinity` are refused too: an older one
    /// would store them as finite.
    pub(super) fn finish(self) -> Parsed<Interval> {
        let months = i64::from(self.years) * 12 + i64::from(self.months);
        let months = i32::try_from(months).map_err(|_| FormError::Overflow)?;
        let interval = Interval {
            months,
            days: self.days,
            microseconds: self.micros,
        };
        let infinite = [(i64::MAX, i32::MAX), (i64::MIN, i32::MIN)]
            .contains(&(interval.microseconds, interval.days))
            && interval.days == interval.months;
        if infinite {
            return Err(FormError::Overflow);
        }
        Ok(interval)
    }
}
