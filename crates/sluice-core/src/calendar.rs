//! Proleptic Gregorian dates as days since 1970-01-01 and back (Howard
//! Hinnant's algorithms), for the databases and formats that turn one into
//! the other; years are astronomical (1 BC is 0).

/// Days since 1970-01-01 of `year`-`month`-`day` (the date is not checked).
pub fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Days since 1970-01-01 of `year`-`month`-`day`, or `None` when that month
/// or day does not exist (`2024-02-30`, month 13).
pub fn checked_days_from_civil(year: i64, month: i64, day: i64) -> Option<i64> {
    let exists = (1..=12).contains(&month) && (1..=days_in_month(year, month)).contains(&day);
    exists.then(|| days_from_civil(year, month, day))
}

/// The days of `month` (1–12) in `year`, leap years as the Gregorian
/// calendar has them.
pub fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = year.rem_euclid(4) == 0 && (year.rem_euclid(100) != 0 || year.rem_euclid(400) == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Year, month and day of the date `days` after 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_across_eras() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19782), (2024, 2, 29));
        assert_eq!(civil_from_days(-719_528), (0, 1, 1));
        for days in [-1_000_000, -719_528, -1, 0, 59, 60, 19782, 2_000_000] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
            assert_eq!(checked_days_from_civil(year, month, day), Some(days));
        }
        assert_eq!(checked_days_from_civil(2024, 2, 30), None);
        assert_eq!(checked_days_from_civil(2023, 2, 29), None);
        assert_eq!(checked_days_from_civil(2000, 2, 29), Some(11_016));
        assert_eq!(checked_days_from_civil(1900, 2, 29), None);
        assert_eq!(checked_days_from_civil(2024, 13, 1), None);
        assert_eq!(checked_days_from_civil(2024, 4, 0), None);
    }
}
