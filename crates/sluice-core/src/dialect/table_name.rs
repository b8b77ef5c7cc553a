//! Table names as users give them (`--table`, Python's `table=`, a
//! configuration's `table` key): the one grammar sluice reads them by, with
//! each database's rules carried by its [`Dialect`].
//!
//! A name is dot-separated parts (`table`, `schema.table`; on PostgreSQL also
//! `database.schema.table`), each either quoted as the database quotes
//! identifiers (`"Big ""Deal"""` on PostgreSQL and SQLite, `` `we``ird` `` on
//! MariaDB and MySQL), holding any characters but NUL, or unquoted: letters
//! of any alphabet, digits, `_` and `$`, read in lower case where the database
//! folds them (PostgreSQL). Nothing else is a name: no spaces outside quotes
//! (around the dots neither), no empty parts, no parentheses, operators or
//! comments. A name reaches SQL only as its parts, each quoted again
//! ([`TableName`]'s `Display`), so text that is no name (a subquery, a
//! `union`) is refused before any SQL runs rather than pasted into a
//! statement.

use std::fmt;

use super::Dialect;
use crate::Error;

/// A table's name read by a [`Dialect`]'s grammar ([`Dialect::table_name`]):
/// its parts unquoted, outermost first. Displayed, it is the name as SQL of
/// its database reads it, each part quoted (`"shop"."Orders"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    parts: Vec<String>,
    dialect: Dialect,
}

impl TableName {
    /// Its parts, unquoted, outermost first (`["shop", "orders"]`).
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// The table's own name: the last part.
    pub fn table(&self) -> &str {
        self.parts.last().expect("a name has one part at least")
    }

    /// The schema (on MariaDB and MySQL, the database) the name qualifies the
    /// table with, if any: the part before the last.
    pub fn schema(&self) -> Option<&str> {
        let before = self.parts.len().checked_sub(2)?;
        Some(&self.parts[before])
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, part) in self.parts.iter().enumerate() {
            if index > 0 {
                f.write_str(".")?;
            }
            f.write_str(&self.dialect.quote_identifier(part))?;
        }
        Ok(())
    }
}

impl Dialect {
    /// `text` read as a table's name by this database's rules (the module's
    /// grammar); whitespace around the whole is ignored. Text that is no
    /// table name is an [`crate::ErrorKind::Config`] error.
    ///
    /// ```
    /// use sluice_core::connect::{Dialect, Family};
    /// let postgres = Dialect::new("PostgreSQL", Family::new("PostgreSQL"))
    ///     .folding_unquoted_names()
    ///     .with_table_name_parts(3);
    /// let name = postgres.table_name(r#"Shop."Big ""Deal""""#).unwrap();
    /// assert_eq!(name.parts(), ["shop", r#"Big "Deal""#]);
    /// assert_eq!(name.to_string(), r#""shop"."Big ""Deal""""#);
    /// assert!(postgres.table_name("t union all select 1").is_err());
    /// ```
    pub fn table_name(self, text: &str) -> Result<TableName, Error> {
        let refused = || {
            Error::config(format!(
                "{text:?} is not a table name (table or schema.table)"
            ))
        };
        let mut parts = Vec::new();
        let mut rest = text.trim();
        loop {
            let (part, after) = self.name_part(rest).ok_or_else(refused)?;
            parts.push(part);
            match after.strip_prefix('.') {
                Some(next) => rest = next,
                None if after.is_empty() => break,
                None => return Err(refused()),
            }
        }
        if parts.len() > self.table_name_parts {
            return Err(refused());
        }
        Ok(TableName {
            parts,
            dialect: self,
        })
    }

    /// The name part `text` begins with, unquoted, and the text after it;
    /// `None` when `text` begins with no part.
    fn name_part(self, text: &str) -> Option<(String, &str)> {
        let quote = self.identifier_quote;
        let Some(quoted) = text.strip_prefix(quote) else {
            let end = text
                .find(|character: char| {
                    !(character.is_alphanumeric() || character == '_' || character == '$')
                })
                .unwrap_or(text.len());
            let part = match self.folds_unquoted_names {
                // As PostgreSQL folds: ASCII letters only, whatever the encoding.
                true => text[..end].to_ascii_lowercase(),
                false => text[..end].to_owned(),
            };
            return (end > 0).then_some((part, &text[end..]));
        };
        let mut part = String::new();
        let mut characters = quoted.char_indices().peekable();
        while let Some((index, character)) = characters.next() {
            match character {
                // A quote written twice is one quote of the name.
                _ if character == quote
                    && characters.peek().map(|&(_, next)| next) == Some(quote) =>
                {
                    characters.next();
                    part.push(quote);
                }
                _ if character == quote => {
                    let after = &quoted[index + quote.len_utf8()..];
                    return (!part.is_empty()).then_some((part, after));
                }
                // No database takes it in a name; PostgreSQL's protocol would
                // end the statement there.
                '\0' => return None,
                _ => part.push(character),
            }
        }
        // The quote is never closed.
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::Family;
    use super::*;
    use crate::ErrorKind;

    const POSTGRESQL: Dialect = Dialect::new("PostgreSQL", Family::new("PostgreSQL"))
        .folding_unquoted_names()
        .with_table_name_parts(3);
    const MARIADB: Dialect =
        Dialect::new("MariaDB", Family::new("MariaDB and MySQL")).with_identifier_quote('`');
    const SQLITE: Dialect = Dialect::new("SQLite", Family::new("SQLite"));

    /// The parts `text` names, and how SQL gets it back.
    fn read(dialect: Dialect, text: &str) -> (Vec<String>, String) {
        let name = dialect
            .table_name(text)
            .unwrap_or_else(|error| panic!("{text:?}: {error}"));
        (name.parts().to_vec(), name.to_string())
    }

    fn parts(names: &[&str]) -> Vec<String> {
        names.iter().map(|&name| name.to_owned()).collect()
    }

    #[test]
    fn postgresql_folds_unquoted_parts_and_keeps_quoted_ones() {
        assert_eq!(
            read(POSTGRESQL, "Orders"),
            (parts(&["orders"]), r#""orders""#.into())
        );
        assert_eq!(
            read(POSTGRESQL, r#"Shop."Big ""Deal""""#),
            (
                parts(&["shop", r#"Big "Deal""#]),
                r#""shop"."Big ""Deal""""#.into()
            )
        );
        assert_eq!(
            read(POSTGRESQL, r#"  MyDb.Public."MixedCase"  "#),
            (
                parts(&["mydb", "public", "MixedCase"]),
                r#""mydb"."public"."MixedCase""#.into()
            )
        );
        // Only ASCII letters fold, as PostgreSQL folds them.
        assert_eq!(read(POSTGRESQL, "CAFÉ").0, parts(&["cafÉ"]));
    }

    #[test]
    fn mariadb_and_sqlite_keep_unquoted_parts_as_written() {
        assert_eq!(
            read(MARIADB, "Shop.Orders"),
            (parts(&["Shop", "Orders"]), "`Shop`.`Orders`".into())
        );
        assert_eq!(
            read(MARIADB, "`my.db`.`we``ird`"),
            (parts(&["my.db", "we`ird"]), "`my.db`.`we``ird`".into())
        );
        assert_eq!(
            read(SQLITE, r#"main."Odd""Name""#),
            (
                parts(&["main", r#"Odd"Name"#]),
                r#""main"."Odd""Name""#.into()
            )
        );
        assert_eq!(read(SQLITE, "Orders").0, parts(&["Orders"]));
    }

    #[test]
    fn unicode_names_are_names_quoted_or_not() {
        assert_eq!(
            read(POSTGRESQL, "café"),
            (parts(&["café"]), r#""café""#.into())
        );
        assert_eq!(
            read(POSTGRESQL, r#""Straße"."ünï""#),
            (parts(&["Straße", "ünï"]), r#""Straße"."ünï""#.into())
        );
        assert_eq!(
            read(MARIADB, "`Straße`.ünï"),
            (parts(&["Straße", "ünï"]), "`Straße`.`ünï`".into())
        );
        assert_eq!(
            read(SQLITE, "\"a b\".t_1$"),
            (parts(&["a b", "t_1$"]), "\"a b\".\"t_1$\"".into())
        );
    }

    #[test]
    fn the_schema_is_the_part_before_the_table() {
        let name = MARIADB.table_name("shop.orders").unwrap();
        assert_eq!((name.schema(), name.table()), (Some("shop"), "orders"));
        let name = POSTGRESQL.table_name("db.shop.orders").unwrap();
        assert_eq!((name.schema(), name.table()), (Some("shop"), "orders"));
        let name = SQLITE.table_name("orders").unwrap();
        assert_eq!((name.schema(), name.table()), (None, "orders"));
    }

    #[test]
    fn text_that_is_no_table_name_is_refused() {
        let refused = [
            "",
            "  ",
            "t union all select id::int, secret from ev",
            "(select * from t) s",
            "t -- x",
            "t--x",
            "t/*x*/",
            "t;drop table t",
            "t; drop table t",
            "a..b",
            ".a",
            "a.",
            "a . b",
            "a. b",
            "a b",
            "t where 1=1",
            "\"unclosed",
            "\"a\"\"",
            "\"\"",
            "\"a\"b",
            "a\"b\"",
            "\"a\".",
            "a\0b",
            "\"a\0b\"",
            "t'",
            "t)",
            "a.b.c.d",
        ];
        for dialect in [POSTGRESQL, MARIADB, SQLITE] {
            for text in refused {
                let error = dialect.table_name(text).unwrap_err();
                assert_eq!(error.kind(), ErrorKind::Config, "{text:?}");
                assert_eq!(
                    error.to_string(),
                    format!("{text:?} is not a table name (table or schema.table)")
                );
            }
        }
    }

    #[test]
    fn each_database_takes_its_own_quotes_and_number_of_parts() {
        // Three parts on PostgreSQL only.
        assert!(POSTGRESQL.table_name("a.b.c").is_ok());
        assert!(MARIADB.table_name("a.b.c").is_err());
        assert!(SQLITE.table_name("a.b.c").is_err());
        // Another database's quotes are no quotes.
        assert!(MARIADB.table_name("\"t\"").is_err());
        assert!(POSTGRESQL.table_name("`t`").is_err());
        assert!(SQLITE.table_name("[t]").is_err());
        // Inside quotes anything goes, and comes out quoted again.
        assert_eq!(
            read(POSTGRESQL, r#""t"" union all select 1 --""#),
            (
                parts(&[r#"t" union all select 1 --"#]),
                r#""t"" union all select 1 --""#.into()
            )
        );
        assert_eq!(
            read(MARIADB, "`t`` union select 1; -- `"),
            (
                parts(&["t` union select 1; -- "]),
                "`t`` union select 1; -- `".into()
            )
        );
    }
}
