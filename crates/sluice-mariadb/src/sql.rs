//! Spelling names and values into SQL text safely, whatever the session's
//! `sql_mode` (`ANSI_QUOTES`, `NO_BACKSLASH_ESCAPES` change how quotes and
//! backslashes read, so neither is relied on).

/// `name` as a quoted identifier: backticks, inner backticks doubled.
pub(crate) fn identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` as a string literal: a hex literal with the utf8mb4 introducer,
/// which reads the same under every `sql_mode`.
pub(crate) fn literal(text: &str) -> String {
    let mut literal = String::with_capacity(12 + text.len() * 2);
    literal.push_str("_utf8mb4 X'");
    for byte in text.bytes() {
        literal.push_str(&format!("{byte:02x}"));
    }
    literal.push('\'');
    literal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values_are_quoted_whatever_they_hold() {
        assert_eq!(identifier("we`ird"), "`we``ird`");
        assert_eq!(literal("a'\\"), "_utf8mb4 X'61275c'");
    }
}
