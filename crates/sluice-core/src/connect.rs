//! Opening a database named by a URL, without naming its crate.
//!
//! Each database crate offers a [`Driver`]: it recognises its URLs and turns one
//! into a [`Target`], which connects a [`Session`] (for the CLI's one-shot
//! commands) or builds the pooled [`Database`] the HTTP gateway serves. A front
//! end holds a [`Drivers`] registry filled once, where the binary starts; from
//! then on nothing above the database crates asks which database it is talking
//! to. A database that cannot do something (SQLite cannot load a table through
//! sluice) says so with [`ErrorKind::Unsupported`](crate::ErrorKind::Unsupported) rather than being special-cased
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

use crate::database::{BoxFuture, Database};
use crate::{Error, Meter};

pub use crate::dialect::table_name::TableName;
pub use crate::dialect::{Dialect, Family};
pub use crate::session::{
    CallReport, Calls, Canceller, Export, ExportOptions, ImportRequest, LargeObjects, Session,
};

/// One kind of database: recognises its connection strings and parses them.
///
/// The smallest driver: its dialect, how its URLs look, and a [`Target`]
/// for each. A real target connects a [`Session`] and builds the gateway's
/// [`Database`] (see their examples); this one can only be named:
///
/// ```
/// use std::sync::Arc;
///
/// use sluice_core::connect::{Dialect, Driver, Drivers, Family, PoolOptions, Session, Target};
/// use sluice_core::database::{
///     BoxFuture, Database, DeclaredKind, QueryRequest, RunningQuery, StartError, StatementCheck,
///     Usage,
/// };
/// use sluice_core::{Error, ErrorKind, Meter};
///
/// const TOY: Dialect = Dialect::new("Toy", Family::new("Toy"));
///
/// struct ToyDriver;
///
/// impl Driver for ToyDriver {
///     fn dialect(&self) -> Dialect {
///         TOY
///     }
///
///     fn url_forms(&self) -> &'static [&'static str] {
///         &["toy://"]
///     }
///
///     fn placeholders(&self) -> &'static str {
///         "?"
///     }
///
///     fn recognizes(&self, target: &str) -> bool {
///         target.starts_with("toy://")
///     }
///
///     fn target(&self, target: &str) -> Result<Arc<dyn Target>, Error> {
///         match target.strip_prefix("toy://") {
///             Some(name) if !name.is_empty() => Ok(Arc::new(ToyTarget { name: name.to_owned() })),
///             _ => Err(Error::config("a toy URL names its toy: toy://NAME")),
///         }
///     }
/// }
///
/// /// A parsed `toy://` URL.
/// #[derive(Debug)]
/// struct ToyTarget {
///     name: String,
/// }
///
/// impl Target for ToyTarget {
///     fn dialect(&self) -> Dialect {
///         TOY
///     }
///
///     fn connect<'a>(&'a self, _meter: &'a Meter) -> BoxFuture<'a, Result<Box<dyn Session>, Error>> {
///         let refusal = format!("toy {} has nothing to connect to", self.name);
///         Box::pin(async move { Err(Error::new(ErrorKind::Connect, refusal)) })
///     }
///
///     fn gateway(&self, _options: PoolOptions) -> Arc<dyn Database> {
///         Arc::new(ToyGateway { name: self.name.clone() })
///     }
/// }
///
/// /// The gateway's view of a toy: as unreachable as its sessions (a real
/// /// one is a pool of sessions: see [`Database`]'s example).
/// struct ToyGateway {
///     name: String,
/// }
///
/// impl Database for ToyGateway {
///     fn dialect(&self) -> Dialect {
///         TOY
///     }
///
///     fn placeholder(&self, number: usize) -> String {
///         format!("?{number}")
///     }
///
///     fn read_only(&self) -> bool {
///         true
///     }
///
///     fn usage(&self) -> Usage {
///         Usage::default()
///     }
///
///     fn start<'a>(&'a self, _request: QueryRequest<'a>) -> BoxFuture<'a, Result<Box<dyn RunningQuery>, StartError>> {
///         Box::pin(async move { Err(self.unreachable()) })
///     }
///
///     fn check_statement<'a>(
///         &'a self,
///         _sql: &'a str,
///         _declared: &'a [DeclaredKind],
///     ) -> BoxFuture<'a, Result<StatementCheck, StartError>> {
///         Box::pin(async move { Err(self.unreachable()) })
///     }
///
///     fn check_ad_hoc<'a>(&'a self, _role: Option<&'a str>) -> BoxFuture<'a, Result<(), StartError>> {
///         Box::pin(async move { Err(self.unreachable()) })
///     }
/// }
///
/// impl ToyGateway {
///     fn unreachable(&self) -> StartError {
///         let refusal = format!("toy {} has nothing to connect to", self.name);
///         StartError::Unavailable(Error::new(ErrorKind::Connect, refusal))
///     }
/// }
///
/// // A front end opens URLs through its registry, naming no database.
/// let drivers = Drivers::new().with(ToyDriver);
/// assert_eq!(drivers.open("toy://box")?.product(), "Toy");
/// assert_eq!(drivers.open("toy://").unwrap_err().kind(), ErrorKind::Config);
/// assert!(drivers.open("other://box").is_err());
/// # Ok::<(), Error>(())
/// ```
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
    /// environment defaults. A malformed target is an [`ErrorKind::Config`](crate::ErrorKind::Config) error.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

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
