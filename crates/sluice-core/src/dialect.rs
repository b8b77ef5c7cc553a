//! [`Dialect`]: which database sluice is talking to, as far as sluice decides
//! anything by it: a name for people, the family of databases that spell
//! types and DDL alike, how identifiers are quoted, and how a table's name
//! is read ([`table_name::TableName`]). Each database crate defines its dialects as
//! constants; callers decide with its methods, never by comparing names.

use std::fmt;

pub mod table_name;

/// Which database sluice is talking to: its name for people (`PostgreSQL`,
/// `MySQL`), what it shares with other databases, and how it reads names.
/// Each database crate defines its dialects as constants; nothing outside it
/// builds one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dialect {
    name: &'static str,
    family: Family,
    identifier_quote: char,
    /// Whether an unquoted name is read in lower case (`Orders` is `orders`).
    folds_unquoted_names: bool,
    /// The most dot-separated parts of a table's name (`schema.table`: 2).
    table_name_parts: usize,
}

/// Databases that name column types and spell DDL alike (MariaDB and MySQL),
/// so that one creates a table of another with its declarations unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Family {
    /// For debugging output only: families are told apart by equality.
    name: &'static str,
}

impl Family {
    /// A family named `name` (in debugging output only).
    pub const fn new(name: &'static str) -> Family {
        Family { name }
    }
}

impl Dialect {
    /// The dialect named `name` for people, of `family`, quoting identifiers
    /// as standard SQL does (`"name"`), reading unquoted names as written and
    /// table names of one or two parts (`table`, `schema.table`).
    pub const fn new(name: &'static str, family: Family) -> Dialect {
        Dialect {
            name,
            family,
            identifier_quote: '"',
            folds_unquoted_names: false,
            table_name_parts: 2,
        }
    }

    /// This dialect, quoting identifiers between `quote`s instead (MySQL's
    /// backquote, which it reads whatever its `sql_mode`).
    pub const fn with_identifier_quote(self, quote: char) -> Dialect {
        Dialect {
            identifier_quote: quote,
            ..self
        }
    }

    /// This dialect, reading an unquoted name in lower case, as PostgreSQL
    /// does (ASCII letters only: `Café` is `café`).
    pub const fn folding_unquoted_names(self) -> Dialect {
        Dialect {
            folds_unquoted_names: true,
            ..self
        }
    }

    /// This dialect, taking table names of up to `parts` dot-separated parts
    /// instead of two (PostgreSQL's `database.schema.table`: 3).
    pub const fn with_table_name_parts(self, parts: usize) -> Dialect {
        Dialect {
            table_name_parts: parts,
            ..self
        }
    }

    /// `name` as an identifier this database reads as exactly that name,
    /// whatever its characters or case.
    ///
    /// ```
    /// use sluice_core::connect::{Dialect, Family};
    /// let standard = Dialect::new("PostgreSQL", Family::new("PostgreSQL"));
    /// assert_eq!(standard.quote_identifier(r#"say "hi""#), r#""say ""hi""""#);
    /// let backquoted = standard.with_identifier_quote('`');
    /// assert_eq!(backquoted.quote_identifier("a`b"), "`a``b`");
    /// ```
    pub fn quote_identifier(self, name: &str) -> String {
        let quote = self.identifier_quote;
        let mut quoted = String::with_capacity(name.len() + 2);
        quoted.push(quote);
        for character in name.chars() {
            // A quote inside the name is written twice, in every dialect.
            if character == quote {
                quoted.push(quote);
            }
            quoted.push(character);
        }
        quoted.push(quote);
        quoted
    }

    /// `sql` reading only `columns` of its result, in their order (`sql`
    /// itself when `columns` is empty). The database is given the narrower
    /// statement, rather than the client a narrower stream, because it then
    /// reads only those columns: PostgreSQL and MariaDB fold such an outer
    /// select into the inner one, so a part's storage or key range still
    /// bounds its scan.
    ///
    /// ```
    /// use sluice_core::connect::{Dialect, Family};
    /// let postgres = Dialect::new("PostgreSQL", Family::new("PostgreSQL"));
    /// assert_eq!(
    ///     postgres.projection("select * from t -- every row", &["id".into()]),
    ///     "select \"id\" from (select * from t -- every row\n) as sluice_columns"
    /// );
    /// ```
    pub fn projection(self, sql: &str, columns: &[String]) -> String {
        if columns.is_empty() {
            return sql.to_owned();
        }
        let list: Vec<String> = columns
            .iter()
            .map(|column| self.quote_identifier(column))
            .collect();
        // The statement ends a line of its own: a last line that is a `--`
        // comment must not take the closing parenthesis with it.
        format!(
            "select {} from ({}\n) as sluice_columns",
            list.join(", "),
            sql.trim_end().trim_end_matches(';')
        )
    }

    /// The database's name for people and messages (`PostgreSQL`).
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// Whether `other` names column types and spells DDL as this database
    /// does: a table `other` describes is created here with its declared types,
    /// and a column has "the same type" on both sides when the names agree.
    pub fn shares_types_with(self, other: Dialect) -> bool {
        self.family == other.family
    }

    /// Whether this database takes the values `source` hands over in its own
    /// binary form ([`crate::Encoding::Native`]) unread. A native form is one
    /// product's own (MariaDB's and MySQL's differ where their types do), so
    /// only the same dialect reads it.
    pub fn reads_native_values_of(self, source: Dialect) -> bool {
        self == source
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}
