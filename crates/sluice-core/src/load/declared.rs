//! Values a table column's declared type would store changed without an
//! error: digits a `numeric(p,s)` (`DECIMAL(p,s)`) rounds away, and the
//! trailing spaces a `varchar(n)` cuts from a longer string. The databases do
//! both on the way in without a word (PostgreSQL silently, MariaDB with a
//! note), so an import refuses such a row before it is sent, naming its line
//! and column: every value is stored as it is, or the import fails (or,
//! skipping bad rows, rejects it). What the databases refuse themselves (too
//! many digits before the point, other characters past a `varchar(n)`, a
//! `char(n)`'s excess) is left to them.
//!
//! The limits come from the table's description ([`Column::decimal`],
//! [`Column::length`]), which the databases read from their catalogs: no
//! privilege on the table's rows is needed. A value that is not a plain number
//! (`NaN`, a typo) is left to the database's own input, which refuses it or
//! reads it as it documents.

use crate::canonical::trim_blanks;
use crate::value::{DecimalShape, DecimalText, Encoding, Kind};
use crate::{Column, Decoded, Rejected, RowError};

/// Moves to `decoded.rejected` each row from `first` on that holds a value its
/// column (of `columns`, the rows' columns in order) would store changed; the
/// rejected records stay in input order.
pub(crate) fn reject_changed(decoded: &mut Decoded, first: usize, columns: &[Column]) {
    let limited: Vec<usize> = (0..columns.len())
        .filter(|&index| has_limit(&columns[index]))
        .collect();
    if limited.is_empty() {
        return;
    }
    let mut row = first;
    let rejected_before = decoded.rejected.len();
    while row < decoded.batch.num_rows() {
        let values = decoded.batch.row(row);
        let change = limited.iter().find_map(|&index| {
            let column = &columns[index];
            values
                .get(index)
                .and_then(|value| change_of(column, value))
                .map(|reason| (column, reason))
        });
        let Some((column, reason)) = change else {
            row += 1;
            continue;
        };
        let line = decoded.lines.remove(row);
        let record = match row < decoded.records.len() {
            true => decoded.records.remove(row),
            false => Vec::new(),
        };
        decoded.batch.remove_row(row);
        decoded.rejected.push(Rejected {
            error: RowError::new(line, Some(column.name.clone()), reason),
            record,
        });
    }
    if decoded.rejected.len() > rejected_before {
        decoded.rejected.sort_by_key(|rejected| rejected.error.line);
    }
}

/// Whether `column` declares a limit [`change_of`] checks.
fn has_limit(column: &Column) -> bool {
    column.encoding == Encoding::Text
        && match column.kind {
            Kind::Decimal => column.decimal.is_some(),
            Kind::Text => column.length.is_some(),
            _ => false,
        }
}

/// Why `column` would not store `value` (canonical text) as it is, or `None`.
fn change_of(column: &Column, value: &[u8]) -> Option<String> {
    match (&column.kind, column.decimal, column.length) {
        (Kind::Decimal, Some(shape), _) => decimal_change(value, shape, column),
        (Kind::Text, _, Some(length)) => text_change(value, length, column),
        _ => None,
    }
}

/// A value of more characters than a `varchar(n)` holds whose excess is
/// spaces, which the database would cut (other excess it refuses).
fn text_change(value: &[u8], length: u32, column: &Column) -> Option<String> {
    // Characters, not bytes: every byte that does not continue a UTF-8 sequence starts one.
    let mut starts = value
        .iter()
        .enumerate()
        .filter(|(_, &byte)| byte & 0xc0 != 0x80)
        .map(|(at, _)| at);
    let excess = starts.nth(length as usize)?;
    if !value[excess..].iter().all(|&byte| byte == b' ') {
        return None;
    }
    let characters = length as usize + 1 + starts.count();
    Some(format!(
        "the value has {characters} characters, more than the column's type ({}) holds: \
         its trailing spaces would be cut",
        column.type_with_limit(&length.to_string())
    ))
}

/// A number with digits the shape would round away.
fn decimal_change(value: &[u8], shape: DecimalShape, column: &Column) -> Option<String> {
    let number = DecimalText::split(trim_blanks(value))?;
    let scale = i64::from(shape.scale);
    if number.last_place().is_none_or(|place| place <= scale) {
        return None;
    }
    let declared = column.type_with_limit(&format!("{},{scale}", shape.precision));
    let text = String::from_utf8_lossy(value);
    Some(match scale {
        1.. => format!(
            "{text} has more than {scale} digits after the point: \
             the column's type ({declared}) would round it"
        ),
        0 => format!("{text} is not a whole number: the column's type ({declared}) would round it"),
        _ => format!(
            "{text} is not a multiple of 1{}: the column's type ({declared}) would round it",
            "0".repeat(scale.unsigned_abs() as usize)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(precision: u16, scale: i16) -> Column {
        Column::new("amount", Kind::Decimal, "numeric")
            .with_decimal(Some(DecimalShape { precision, scale }))
    }

    fn refused(column: &Column, value: &str) -> Option<String> {
        change_of(column, value.as_bytes())
    }

    #[test]
    fn digits_a_numeric_would_round_are_refused() {
        let column = numeric(5, 2);
        assert_eq!(
            refused(&column, "0.125").as_deref(),
            Some("0.125 has more than 2 digits after the point: the column's type (numeric(5,2)) would round it")
        );
        for rounds in ["1.001", "-0.005", "1e-3", "12.3456e1", " 0.125 "] {
            assert!(refused(&column, rounds).is_some(), "{rounds}");
        }
        for fits in [
            "0.12",
            "0.120000",
            "-999.99",
            "999.990",
            "0",
            "-0.000",
            "1.2e1",
            "5E2",
            "+3",
            "1000e-3",
            "000123.40",
            ".5",
            "5.",
        ] {
            assert_eq!(refused(&column, fits), None, "{fits}");
        }
    }

    #[test]
    fn too_many_digits_before_the_point_are_left_to_the_database() {
        // It refuses them itself (numeric field overflow), which is no silent change.
        assert_eq!(refused(&numeric(5, 2), "1000"), None);
    }

    #[test]
    fn scales_of_zero_and_below_name_what_they_round_to() {
        assert!(refused(&numeric(4, 0), "1.5")
            .unwrap()
            .contains("is not a whole number"));
        let hundreds = numeric(3, -2);
        assert!(refused(&hundreds, "1250")
            .unwrap()
            .contains("is not a multiple of 100"));
        assert_eq!(refused(&hundreds, "12300"), None);
        assert_eq!(refused(&hundreds, "1.23e4"), None);
    }

    #[test]
    fn what_is_no_plain_number_is_left_to_the_database() {
        let column = numeric(5, 2);
        for other in [
            "NaN",
            "Infinity",
            "-Infinity",
            "",
            "-",
            "1.2.3",
            "1e",
            "0x10",
            "1,5",
        ] {
            assert_eq!(refused(&column, other), None, "{other}");
        }
    }

    #[test]
    fn spaces_past_a_declared_length_are_refused_other_excess_left_to_the_database() {
        let column = Column::new("code", Kind::Text, "varchar").with_length(Some(3));
        // Within the length, or past it with more than spaces (the database refuses those).
        for left in ["abc", "äöü", "ab ", "", "abcd", "ab  x", "äöüß "] {
            assert_eq!(refused(&column, left), None, "{left:?}");
        }
        assert_eq!(
            refused(&column, "ab  ").as_deref(),
            Some("the value has 4 characters, more than the column's type (varchar(3)) holds: its trailing spaces would be cut")
        );
        let mariadb = Column::new("code", Kind::Text, "varchar(3)").with_length(Some(3));
        assert!(refused(&mariadb, "äö   ")
            .unwrap()
            .contains("5 characters, more than the column's type (varchar(3))"));
    }

    #[test]
    fn refused_rows_leave_the_batch_and_join_the_rejected_in_line_order() {
        let columns = [Column::new("id", Kind::Integer, "int4"), numeric(5, 2)];
        let mut decoded = Decoded::default();
        decoded.batch.reset(2);
        for (line, amount) in [(1, "0.12"), (2, "0.125"), (4, "1"), (5, "1e-5")] {
            decoded.batch.push_value(line.to_string().as_bytes());
            decoded.batch.push_value(amount.as_bytes());
            decoded.lines.push(line);
        }
        decoded.rejected.push(Rejected {
            error: RowError::new(3, None, "not a record"),
            record: Vec::new(),
        });
        reject_changed(&mut decoded, 0, &columns);
        assert_eq!(decoded.lines, [1, 4]);
        let kept: Vec<_> = decoded
            .batch
            .rows()
            .map(|row| row.get(1).unwrap().to_vec())
            .collect();
        assert_eq!(kept, [b"0.12".to_vec(), b"1".to_vec()]);
        let rejected: Vec<_> = decoded
            .rejected
            .iter()
            .map(|rejected| (rejected.error.line, rejected.error.column.clone()))
            .collect();
        assert_eq!(
            rejected,
            [
                (2, Some("amount".into())),
                (3, None),
                (5, Some("amount".into()))
            ]
        );
    }
}
