//! Whether a statement says `RETURNING`: MariaDB announces no result
//! columns for one until it runs (MDEV-27013), so its calls are refused
//! before any runs.

/// Whether `sql` has the word `RETURNING` outside strings, quoted names and
/// comments (the text of MariaDB's executable comments `/*! … */` counts).
pub(super) fn has_returning(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        let rest = &bytes[index..];
        index += match rest {
            [quote @ (b'\'' | b'"' | b'`'), ..] => quoted_length(rest, *quote),
            [b'#', ..] | [b'-', b'-', b' ' | b'\t' | b'\n' | b'\r', ..] => rest
                .iter()
                .position(|&byte| byte == b'\n')
                .unwrap_or(rest.len()),
            [b'/', b'*', b'!', ..] | [b'/', b'*', b'M', b'!', ..] => 3,
            [b'/', b'*', ..] => rest
                .windows(2)
                .skip(2)
                .position(|pair| pair == b"*/")
                .map_or(rest.len(), |end| end + 4),
            [first, ..] if is_word_byte(*first) => {
                let length = rest.iter().take_while(|&&byte| is_word_byte(byte)).count();
                if rest[..length].eq_ignore_ascii_case(b"returning") {
                    return true;
                }
                length
            }
            _ => 1,
        };
    }
    false
}

/// Bytes of the quoted string or name at the start of `text` (to its end if
/// it is not closed); a backslash escapes the next byte in strings.
fn quoted_length(text: &[u8], quote: u8) -> usize {
    let mut index = 1;
    while index < text.len() {
        match text[index] {
            b'\\' if quote != b'`' => index += 2,
            byte if byte == quote => return index + 1,
            _ => index += 1,
        }
    }
    text.len()
}

fn is_word_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'$' || byte >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returning_is_found_as_a_word_of_the_statement_only() {
        assert!(has_returning("insert into t values (?) returning id"));
        assert!(has_returning("DELETE FROM t WHERE id = ?\nRETURNING *"));
        assert!(has_returning(
            "insert into t values (?) /*! returning id */"
        ));
        assert!(!has_returning("insert into t (returning_id) values (?)"));
        assert!(!has_returning("insert into t values ('returning', ?)"));
        assert!(!has_returning(
            "insert into t values ('it\\'s returning', ?)"
        ));
        assert!(!has_returning(
            "insert into `returning` values (?) -- returning\n"
        ));
        assert!(!has_returning("insert into t values (?) # returning"));
        assert!(!has_returning("insert /* returning */ into t values (?)"));
        assert!(!has_returning("update t set n = ? where id = ?"));
    }
}
