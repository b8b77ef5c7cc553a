//! What the server says about refused rows, tied to input lines: the
//! warnings a `LOAD DATA` leaves (`LOCAL` turns every error into one, see
//! the `import` module docs) read with `SHOW WARNINGS` and made the import's
//! error ([`check_warnings`]), the row a message names ("at row N") and its
//! column.

use sluice_core::{DbError, Error, RowError};

use super::plan::Plan;
use crate::connection::Connection;

/// After a load: the warnings that are not the options' expected effect
/// become an error, tied to its row by `line_of` when the server names one.
pub(super) async fn check_warnings(
    connection: &mut Connection,
    plan: &Plan,
    warnings: u16,
    line_of: impl Fn(u64) -> Option<u64>,
) -> Result<(), Error> {
    if warnings == 0 {
        return Ok(());
    }
    let shown = connection.simple_query("SHOW WARNINGS").await?;
    let mut refused: Vec<(u32, String, Option<u64>)> = Vec::new();
    for row in &shown.rows {
        let field = |index: usize| {
            row.get(index)
                .and_then(Option::as_ref)
                .map(|value| String::from_utf8_lossy(value).into_owned())
                .unwrap_or_default()
        };
        let (level, code, message) = (field(0), field(1).parse().unwrap_or(0), field(2));
        if level.eq_ignore_ascii_case("note") || plan.expected_warning(code) {
            continue;
        }
        let row_number = at_row(&message);
        refused.push((code, message, row_number));
    }
    let Some((code, message, row)) = refused.first().cloned() else {
        return Ok(());
    };
    let rows: Vec<String> = refused
        .iter()
        .filter_map(|(_, _, row)| row.map(|row| row.to_string()))
        .collect();
    let error = Error::db(DbError {
        severity: "ERROR".into(),
        code: sqlstate_of(code).into(),
        vendor_code: Some(code),
        message,
        // The rows of every refused value, for skip mode to reject them all.
        detail: (!rows.is_empty()).then(|| rows.join(",")),
        ..DbError::default()
    });
    Err(match row.and_then(&line_of) {
        Some(line) => {
            let reason = reason_of(&error, line);
            error.at_row(reason)
        }
        None => error,
    })
}

/// The row number of a warning's "… at row N".
pub(super) fn at_row(message: &str) -> Option<u64> {
    let (_, after) = message.rsplit_once(" at row ")?;
    after.trim().parse().ok()
}

/// The SQLSTATE the server gives the error a warning stands for.
fn sqlstate_of(code: u32) -> &'static str {
    match code {
        1048 | 1062 | 1263 | 1451 | 1452 | 4025 => "23000",
        1264 => "22003",
        1265 | 1406 => "22001",
        1292 | 1366 | 1367 => "22007",
        _ => "HY000",
    }
}

/// The server's message about one row, tied to its input line: without the
/// statement's "at row N" (the line says where), with the column it names.
pub(super) fn reason_of(error: &Error, line: u64) -> RowError {
    let message = error
        .as_db_error()
        .map_or_else(|| error.to_string(), |db| db.message.clone());
    let column = column_in(&message);
    let message = match message.rsplit_once(" at row ") {
        Some((before, after)) if after.trim().parse::<u64>().is_ok() => before.to_owned(),
        _ => message,
    };
    RowError::new(line, column, message)
}

/// The column a message names: "… for column `db`.`t`.`amount` …" or
/// "… column 'amount' …".
fn column_in(message: &str) -> Option<String> {
    let start = message.to_ascii_lowercase().find("column ")? + "column ".len();
    let after = &message[start..];
    if after.starts_with('`') {
        let quoted = after
            .split(|character: char| character.is_whitespace())
            .next()?;
        let last = quoted.rsplit("`.`").next()?;
        return Some(last.trim_matches('`').replace("``", "`"));
    }
    let rest = after.strip_prefix('\'')?;
    Some(rest.split('\'').next()?.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_their_column() {
        assert_eq!(
            column_in("Incorrect decimal value: 'abc' for column `test`.`imp`.`amount` at row 7")
                .as_deref(),
            Some("amount")
        );
        assert_eq!(
            column_in("Column 'name' cannot be null").as_deref(),
            Some("name")
        );
        assert_eq!(column_in("Duplicate entry '2' for key 'PRIMARY'"), None);
        let error = Error::db(DbError {
            message: "Incorrect decimal value: 'abc' for column `d`.`t`.`amount` at row 7".into(),
            ..DbError::default()
        });
        assert_eq!(
            reason_of(&error, 12).to_string(),
            "line 12, column amount: Incorrect decimal value: 'abc' for column `d`.`t`.`amount`"
        );
    }

    #[test]
    fn warnings_name_their_row() {
        assert_eq!(
            at_row("Incorrect integer value: 'x' for column `d`.`t`.`id` at row 777777"),
            Some(777_777)
        );
        assert_eq!(at_row("Duplicate entry '1' for key 'PRIMARY'"), None);
    }
}
