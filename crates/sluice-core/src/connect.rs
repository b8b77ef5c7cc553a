//! Opening a database named by a URL, without naming its crate.
//!
//! Each database crate offers a [`Driver`]: it recognises its URLs and turns one
//! into a [`Target`], which connects a [`Session`] (for the CLI's one-shot
//! commands) or builds the pooled [`Database`] the HTTP gateway serves. A front
//! end holds a [`Drivers`] registry filled once, where the binary starts; from
//! then on nothing above the database crates asks which database it is talking
//! to. A database that cannot do something (SQLite cannot load a table through
//! sluice) says so with [`ErrorKind::Unsupported`] rather than being special-cased
//! by its callers.
//!
//! What a database is, as far as sluice decides anything by it, is a
//! [`Dialect`] its driver gives: a name for people, and the family of
//! databases that spell types and DDL alike. Callers decide with its methods
//! (does this target take the source's native values, its type names?), never
//! by comparing names.
//!
//! A table's name, wherever a user gives one, is read by the dialect's one
//! grammar ([`Dialect::table_name`], in [`TableName`]'s module) and goes into
//! SQL only quoted, part by part.
//!
//! The traits are object-safe for the same reason as [`crate::database`]'s: one
//! registry holds drivers of several kinds, and their futures are boxed.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::calls::{CallOutcome, ParamSource, PipelineSummary, Transaction};
use crate::database::{BoxFuture, Database, Param, Query};
use crate::load::{ImportOptions, ImportSummary, RejectSink, RowFeed, TableInfo, TableSetup};
use crate::source::DynSource;
use crate::split::{SplitRead, SplitRequest};
use crate::{BatchSource, Error, ErrorKind, Meter, RowError, Schema};

mod table_name;

pub use table_name::TableName;

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

/// One kind of database: recognises its connection strings and parses them.
pub trait Driver: Send + Sync {
    /// The database it opens, as help texts name it (a driver of several
    /// dialects names its first: `MariaDB` for MariaDB and MySQL).
    fn dialect(&self) -> Dialect;

    /// The database's name for people ("PostgreSQL"): its dialect's.
    fn product(&self) -> &'static str {
        self.dialect().name()
    }

    /// How its URLs begin, for messages listing what is accepted
    /// (`["postgres://", "postgresql://"]`).
    fn url_forms(&self) -> &'static [&'static str];

    /// How a statement names its parameters, for help texts (`$1, $2, …`).
    fn placeholders(&self) -> &'static str;

    /// Whether sluice writes to databases of this kind (imports, copies,
    /// calls); false for the read-only ones.
    fn takes_writes(&self) -> bool {
        true
    }

    /// Whether `target` names a database of this kind (by its URL scheme, or
    /// another form the driver documents, such as libpq's `key=value` strings).
    fn recognizes(&self, target: &str) -> bool;

    /// Parses `target`, filling what it leaves out from the driver's own
    /// environment defaults. A malformed target is an [`ErrorKind::Config`] error.
    fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error>;
}

/// The drivers a front end knows, in the order they are asked.
#[derive(Default)]
pub struct Drivers {
    drivers: Vec<Box<dyn Driver>>,
}

impl Drivers {
    /// An empty registry.
    pub fn new() -> Drivers {
        Drivers::default()
    }

    /// The registry with `driver` added after those it has.
    pub fn with(mut self, driver: impl Driver + 'static) -> Drivers {
        self.drivers.push(Box::new(driver));
        self
    }

    /// Parses `target` with the first driver that recognises it.
    pub fn open(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
        match self.drivers.iter().find(|driver| driver.recognizes(target)) {
            Some(driver) => driver.target(target),
            None => Err(Error::config(format!(
                "not a database URL sluice knows: expected {}",
                self.url_forms().join(", ")
            ))),
        }
    }

    /// What a `--db` takes, for help texts: each product with its URL forms
    /// (`writes`: only the databases sluice writes to).
    pub fn url_help(&self, writes: bool) -> String {
        let products: Vec<String> = self
            .drivers
            .iter()
            .filter(|driver| driver.takes_writes() || !writes)
            .map(|driver| format!("{} ({})", driver.product(), driver.url_forms().join(", ")))
            .collect();
        products.join("; ")
    }

    /// How each product's statements name parameters, for help texts, products
    /// that agree named together: `$1, $2, … on PostgreSQL; ? on MariaDB and
    /// SQLite` (`writes`: only the databases sluice writes to).
    pub fn placeholder_help(&self, writes: bool) -> String {
        let mut spellings: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        let drivers = self
            .drivers
            .iter()
            .filter(|driver| driver.takes_writes() || !writes);
        for driver in drivers {
            match spellings
                .iter_mut()
                .find(|(spelling, _)| *spelling == driver.placeholders())
            {
                Some((_, products)) => products.push(driver.product()),
                None => spellings.push((driver.placeholders(), vec![driver.product()])),
            }
        }
        spellings
            .iter()
            .map(|(spelling, products)| format!("{spelling} on {}", products.join(" and ")))
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The database products of the registered drivers, in order.
    pub fn products(&self) -> Vec<&'static str> {
        self.drivers.iter().map(|driver| driver.product()).collect()
    }

    /// Every URL form the registered drivers accept, for messages.
    pub fn url_forms(&self) -> Vec<&'static str> {
        self.drivers
            .iter()
            .flat_map(|driver| driver.url_forms().iter().copied())
            .collect()
    }
}

impl fmt::Debug for Drivers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let products: Vec<_> = self.drivers.iter().map(|driver| driver.product()).collect();
        f.debug_struct("Drivers")
            .field("products", &products)
            .finish()
    }
}

/// How a gateway's pool of sessions behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// Most sessions open at once.
    pub size: usize,
    /// How long a request waits for a free session before it is refused as busy.
    pub wait: Duration,
}

/// One parsed connection target: a database somewhere, with credentials.
pub trait Target: Send + Sync + fmt::Debug {
    /// The database this target names, as far as its URL says (MariaDB's
    /// greeting may say otherwise: a [`Session`]'s is the server's own).
    fn dialect(&self) -> Dialect;

    /// The database's name for people ("PostgreSQL"): its dialect's.
    fn product(&self) -> &'static str {
        self.dialect().name()
    }

    /// Opens a session, counting its round trips on `meter`.
    fn connect<'a>(&'a self, meter: &'a Meter) -> BoxFuture<'a, Result<Box<dyn Session>, Error>>;

    /// A pool of sessions for the HTTP gateway; nothing connects until first use.
    fn gateway(&self, options: PoolOptions) -> Arc<dyn Database>;

    /// True for a database sluice only reads from (its gateway refuses writes,
    /// its sessions refuse loads), so configurations that would write to it
    /// can be refused before anything runs. Default: false.
    fn read_only(&self) -> bool {
        false
    }

    /// True for a database with large objects that a query can read in the
    /// place of their references ([`ExportOptions::inline_large_objects`]), so
    /// configurations that ask for it elsewhere are refused before anything
    /// runs. Default: false.
    fn has_large_objects(&self) -> bool {
        false
    }

    /// True for a database whose sessions split a read into parts that share
    /// one snapshot ([`Session::split_read`] and
    /// [`crate::database::Access::InSnapshot`]), so configurations that ask
    /// for it elsewhere are refused before anything runs. Default: false.
    fn splits_reads(&self) -> bool {
        false
    }
}

/// Stops the statement a session is running, from another task (Ctrl-C, a
/// reader that went away). Cancelling when nothing runs does nothing.
pub trait Canceller: Send + Sync {
    /// Asks the database to stop the running statement.
    fn cancel(&self) -> BoxFuture<'_, Result<(), Error>>;
}

/// The table, rows and settings of one [`Session::import`].
pub struct ImportRequest<'a> {
    /// The table, as [`Session::describe_table`] (or [`Session::begin_load`]) found it.
    pub table: &'a TableInfo,
    /// The rows of the table's columns: decoded from an input
    /// ([`crate::load::ImportInput`]) or read from another database
    /// ([`crate::load::SourceRows`]); it counts the progress too.
    pub rows: &'a mut dyn RowFeed,
    /// What to do with bad records, conflicts; how rows travel.
    pub options: &'a ImportOptions,
    /// Receives each rejected record when bad records are skipped.
    pub rejects: &'a mut RejectSink<'a>,
}

/// Receives each call's outcome, in input order, as soon as it is known.
pub type CallReport<'a> = dyn FnMut(u64, CallOutcome<'_>) -> Result<(), Error> + Send + 'a;

/// A statement prepared to run for many parameter sets.
pub trait Calls: Send {
    /// The columns each call returns (none for a statement without rows).
    fn schema(&self) -> &Schema;

    /// How many parameters the statement takes.
    fn parameters(&self) -> usize;

    /// Runs the statement for every set `source` gives, grouped into
    /// transactions by `mode`, with at most `window_bytes` of requests
    /// unanswered, reporting each outcome to `report`.
    fn run<'a>(
        self: Box<Self>,
        source: &'a mut dyn ParamSource,
        mode: Transaction,
        window_bytes: usize,
        report: &'a mut CallReport<'_>,
    ) -> BoxFuture<'a, Result<PipelineSummary, Error>>
    where
        Self: 'a;
}

/// One query's result, streamed, owning the session it runs on. A database's
/// [`BatchSource`] becomes one as a [`Query`] whose end is a function that
/// gets the source back, read to its end, and ends its session its own way.
pub trait Export: DynSource {
    /// After the last row: ends the session cleanly.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

impl<S, C> Query<S, C>
where
    S: BatchSource + 'static,
    C: FnOnce(S) -> BoxFuture<'static, ()> + Send + 'static,
{
    /// `source`'s rows as an [`Export`], ended by `close`.
    pub fn export(source: S, close: C) -> Box<dyn Export> {
        Box::new(Query::new(source, close))
    }
}

impl<S, C> Export for Query<S, C>
where
    S: BatchSource,
    C: FnOnce(S) -> BoxFuture<'static, ()> + Send,
{
    fn close(self: Box<Self>) -> BoxFuture<'static, ()> {
        (self.end)(self.source)
    }
}

/// What a query export asks for beyond its SQL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportOptions {
    /// Values for the statement's parameters, as text the database converts to
    /// each parameter's type; `None` is NULL. Default: none.
    pub params: Vec<Option<String>>,
    /// Rows per round trip through a cursor; `None` streams the whole result
    /// from one execute (fewest round trips). Default: `None`.
    pub fetch_size: Option<u32>,
    /// Read large-object references as their contents. Default: false.
    pub inline_large_objects: bool,
    /// Hand over the columns the database can send in a binary form of their
    /// kind ([`crate::value`]'s "Binary values") that way, marked
    /// [`crate::Encoding::Binary`]: for formats that store numbers as numbers.
    /// Default: false, every value in canonical text.
    pub binary_values: bool,
    /// Hand over every column in the database's own binary form of its type
    /// ([`crate::Encoding::Native`]) when all of them have a form another
    /// database of the same product reads alike; otherwise every column as
    /// without this option. For a copy into a table of the same product with
    /// the same column types. Default: false.
    pub native_values: bool,
    /// Read in this snapshot, one that [`Session::split_read`] opened on
    /// another session, so that the parts of a split read see one moment.
    /// Default: `None`, the database's own snapshot for the statement.
    pub snapshot: Option<String>,
}

/// A connection to one database, for one command's work.
///
/// Methods a database cannot honour return [`ErrorKind::Unsupported`]; the
/// defaults do exactly that, so a read-only database implements only
/// [`Session::export`] and [`Session::close`].
pub trait Session: Send {
    /// Round trips made on this session so far.
    fn round_trips(&self) -> u64;

    /// How the connection to the database is encrypted (`TLSv1_3
    /// TLS13_AES_256_GCM_SHA384`); `None` when it is not, or is no network
    /// connection (the default).
    fn encryption(&self) -> Option<String> {
        None
    }

    /// What the server is and which paths this session's work takes, as
    /// `(label, value)` pairs for a command's statistics (`("server",
    /// "MariaDB 10.11.6")`, `("import path", "LOAD DATA LOCAL INFILE")`).
    /// Default: none.
    fn facts(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Things the user should hear about how the work was done (a slower path
    /// taken because the server refused the fast one), each once: the list is
    /// emptied. Default: none.
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// A handle that cancels this session's running statement from elsewhere.
    fn canceller(&self) -> Arc<dyn Canceller>;

    /// Gives the server up once nothing has moved on the connection, either
    /// way, for `timeout` while the session waits on it (`None`, the
    /// default: wait for ever, as a long query may rightly keep its first row
    /// for hours). The work then fails with an [`ErrorKind::Closed`] error
    /// carrying [`crate::Stalled`], and the session is spent. Connecting is
    /// not covered: each database's connection settings bound it. The
    /// default refuses a timeout as [`ErrorKind::Unsupported`].
    fn set_wait_timeout(&mut self, timeout: Option<Duration>) -> Result<(), Error> {
        match timeout {
            None => Ok(()),
            Some(_) => Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "{} sessions cannot give up on a silent server through sluice yet",
                    self.product()
                ),
            )),
        }
    }

    /// Runs `sql` and streams its result; the session goes with it.
    fn export(
        self: Box<Self>,
        sql: String,
        options: ExportOptions,
    ) -> BoxFuture<'static, Result<Box<dyn Export>, Error>>;

    /// Opens a snapshot other sessions can read in and splits the read into
    /// parts for them ([`crate::split`]). The snapshot lasts while this
    /// session does: keep it until every part's export has started.
    fn split_read<'a>(
        &'a mut self,
        request: &'a SplitRequest,
    ) -> BoxFuture<'a, Result<SplitRead, Error>> {
        let _ = request;
        unsupported(self.product(), "reading in parallel parts of one snapshot")
    }

    /// The table's columns, as the catalog describes them; a table that does not
    /// exist is an [`ErrorKind::Config`] error.
    fn describe_table<'a>(&'a mut self, table: &'a str) -> BoxFuture<'a, Result<TableInfo, Error>> {
        let _ = table;
        unsupported(self.product(), "loading tables")
    }

    /// Starts one unit of work on `table` that imports join until
    /// [`Session::end_load`] ends it, so that setting the table up as `setup`
    /// says and loading it succeed or fail together (`sluice copy`). Returns the
    /// table as the catalog then describes it. When it fails, nothing is left
    /// begun. How each database keeps the unit whole where its DDL cannot be
    /// rolled back is its own documentation's to say.
    fn begin_load<'a>(
        &'a mut self,
        table: &'a str,
        setup: &'a TableSetup,
    ) -> BoxFuture<'a, Result<TableInfo, Error>> {
        let _ = (table, setup);
        unsupported(self.product(), "loading tables")
    }

    /// Ends the unit [`Session::begin_load`] started: commits it, or undoes it
    /// (`commit` false) as far as the database can, the table it created included.
    fn end_load(&mut self, commit: bool) -> BoxFuture<'_, Result<(), Error>> {
        let _ = commit;
        unsupported(self.product(), "loading tables")
    }

    /// Loads the request's rows into its table, as one unit: see
    /// [`ImportOptions`] for what is committed when records are bad. Inside a
    /// unit begun by [`Session::begin_load`], the import joins it and leaves
    /// committing to [`Session::end_load`].
    fn import<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<ImportSummary, Error>> {
        let _ = request;
        unsupported(self.product(), "loading tables")
    }

    /// For an import that failed without naming a row (a constraint checked at
    /// the end): reads the input again and finds the first row the table
    /// refuses, changing nothing. `None` when every row is accepted on its own.
    fn locate_refused_row<'a>(
        &'a mut self,
        request: ImportRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<RowError>, Error>> {
        let _ = request;
        Box::pin(async { Ok(None) })
    }

    /// Prepares `sql` to run for many parameter sets.
    fn prepare_calls<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Calls + 'a>, Error>> {
        let _ = sql;
        unsupported(self.product(), "running calls")
    }

    /// How this database wants a typed parameter spelled as text, for calls
    /// (whose parameter sets are text). Default: [`Param::text`].
    fn param_spelling(&self) -> fn(&Param) -> Option<String> {
        Param::text
    }

    /// Ends the session: closes the connection, or gives a pooled session back.
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;

    /// The database the session is connected to, as its server says.
    fn dialect(&self) -> Dialect;

    /// The database's name for people, for messages: its dialect's.
    fn product(&self) -> &'static str {
        self.dialect().name()
    }
}

/// A future failing with "`product` does not support `what`".
fn unsupported<'a, T: Send + 'a>(
    product: &'static str,
    what: &'static str,
) -> BoxFuture<'a, Result<T, Error>> {
    Box::pin(async move {
        Err(Error::new(
            ErrorKind::Unsupported,
            format!("{product} does not support {what} through sluice"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        scheme: &'static str,
    }

    const FAKE: Dialect = Dialect::new("Fake", Family::new("Fake"));

    #[test]
    fn a_projection_quotes_each_column_as_its_database_does() {
        let columns = ["amount".to_owned(), r#"Odd "v""#.to_owned()];
        assert_eq!(
            FAKE.projection("select * from t where ctid < '(10,0)'::tid;\n", &columns),
            "select \"amount\", \"Odd \"\"v\"\"\" from (select * from t where ctid < '(10,0)'::tid\n) \
             as sluice_columns"
        );
        assert_eq!(
            FAKE.with_identifier_quote('`')
                .projection("select a from t", &["a`b".to_owned()]),
            "select `a``b` from (select a from t\n) as sluice_columns"
        );
        assert_eq!(FAKE.projection("select a from t", &[]), "select a from t");
    }

    impl Driver for Fake {
        fn dialect(&self) -> Dialect {
            FAKE
        }
        fn url_forms(&self) -> &'static [&'static str] {
            if self.scheme == "a" {
                &["a://"]
            } else {
                &["b://"]
            }
        }
        fn placeholders(&self) -> &'static str {
            if self.scheme == "a" {
                "$1"
            } else {
                "?"
            }
        }
        fn takes_writes(&self) -> bool {
            self.scheme == "a"
        }
        fn recognizes(&self, target: &str) -> bool {
            target.starts_with(self.scheme)
        }
        fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
            Err(Error::config(format!("{} parsed {target}", self.scheme)))
        }
    }

    #[test]
    fn help_texts_name_each_product_its_urls_and_placeholders() {
        let drivers = Drivers::new()
            .with(Fake { scheme: "a" })
            .with(Fake { scheme: "b" });
        assert_eq!(drivers.url_help(false), "Fake (a://); Fake (b://)");
        assert_eq!(drivers.url_help(true), "Fake (a://)");
        assert_eq!(drivers.placeholder_help(false), "$1 on Fake; ? on Fake");
        assert_eq!(drivers.placeholder_help(true), "$1 on Fake");
    }

    #[test]
    fn a_family_shares_types_but_only_a_dialect_reads_its_native_values() {
        let family = Family::new("MariaDB and MySQL");
        let mariadb = Dialect::new("MariaDB", family);
        let mysql = Dialect::new("MySQL", family);
        let postgresql = Dialect::new("PostgreSQL", Family::new("PostgreSQL"));
        assert!(mariadb.shares_types_with(mysql) && mysql.shares_types_with(mariadb));
        assert!(!postgresql.shares_types_with(mariadb));
        assert!(mariadb.reads_native_values_of(mariadb));
        assert!(!mariadb.reads_native_values_of(mysql));
        assert!(!postgresql.reads_native_values_of(mariadb));
        assert_eq!(mysql.to_string(), "MySQL");
        assert_eq!(mysql.name(), "MySQL");
    }

    #[test]
    fn the_first_driver_that_recognises_a_target_parses_it() {
        let drivers = Drivers::new()
            .with(Fake { scheme: "a" })
            .with(Fake { scheme: "b" });
        let error = drivers.open("b://x").unwrap_err();
        assert_eq!(error.to_string(), "b parsed b://x");
    }

    #[test]
    fn an_unknown_target_lists_the_forms_every_driver_accepts() {
        let drivers = Drivers::new()
            .with(Fake { scheme: "a" })
            .with(Fake { scheme: "b" });
        let error = drivers.open("mysql://x").unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Config);
        assert_eq!(
            error.to_string(),
            "not a database URL sluice knows: expected a://, b://"
        );
    }
}
