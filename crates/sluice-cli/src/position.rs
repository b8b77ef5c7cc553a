//! Where a database error points in the statement: the server gives the
//! position of a character, which the terminal's caret line (`report`) and
//! the JSON report's `line` and `column` (`machine`) both tell as a line and
//! a column.

/// Line and column (both from 1) of the 1-based character `position` the
/// server points at in `sql`.
pub fn line_and_column(sql: &str, position: u32) -> Option<(usize, usize)> {
    let mut remaining = (position as usize).checked_sub(1)?;
    for (index, line) in sql.split('\n').enumerate() {
        let characters = line.chars().count();
        if remaining <= characters {
            return Some((index + 1, remaining + 1));
        }
        remaining -= characters + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters_not_bytes() {
        assert_eq!(line_and_column("é x", 3), Some((1, 3)));
        assert_eq!(line_and_column("a\nb", 3), Some((2, 1)));
        assert_eq!(line_and_column("a", 0), None);
        assert_eq!(line_and_column("a", 9), None);
    }
}
