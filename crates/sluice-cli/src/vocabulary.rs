//! The words the commands share, said once: `--db`, `copy --from` and
//! `copy --to` (their help from the drivers, so it lists every database built
//! in), the help of `--query` (placeholders per database, from the drivers
//! too), the reader of a flag whose values are a [`Word`] (its spellings,
//! checked and listed by clap), and the spellings that were renamed so every
//! command says one idea one way — each old spelling still works, with a
//! one-line note naming the new one.
//!
//! | idea | spelling | renamed from |
//! |---|---|---|
//! | the statement | `--query` | `call --sql` |
//! | values of one statement's parameters | `--param VALUE` (repeated) | |
//! | a file of parameter sets | `--params-file FILE` | `call --params` |
//! | where results go | `--output`/`-o` | `lab --out`, `proxy --report` |
//! | rows per INSERT statement | `import --insert-rows` | `import --batch-size`, `import --batch-rows` |
//! | rows per Arrow record batch | `export --batch-rows` | |

use std::ffi::OsString;
use std::sync::LazyLock;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use sluice_core::word::Word;

use crate::console::err_line;

/// An old spelling of a flag, and the one that replaced it.
pub struct Renamed {
    /// The subcommand whose flag it is.
    pub command: &'static str,
    /// The old spelling, with its dashes.
    pub old: &'static str,
    /// The new one.
    pub new: &'static str,
}

/// Every renamed flag.
pub const RENAMED: &[Renamed] = &[
    Renamed {
        command: "call",
        old: "--sql",
        new: "--query",
    },
    Renamed {
        command: "call",
        old: "--params",
        new: "--params-file",
    },
    // Both name the rows of one INSERT, which `export --batch-rows` (rows
    // per Arrow record batch) is not.
    Renamed {
        command: "import",
        old: "--batch-size",
        new: "--insert-rows",
    },
    Renamed {
        command: "import",
        old: "--batch-rows",
        new: "--insert-rows",
    },
    Renamed {
        command: "lab",
        old: "--out",
        new: "--output",
    },
    Renamed {
        command: "proxy",
        old: "--report",
        new: "--output",
    },
];

/// The command line with old spellings replaced by new ones, each replacement
/// said once on standard error (a parser alias would accept them silently,
/// and scripts would never learn).
pub fn modernise(arguments: Vec<OsString>) -> Vec<OsString> {
    let Some(command) = arguments
        .get(1)
        .and_then(|word| word.to_str())
        .map(str::to_owned)
    else {
        return arguments;
    };
    let mut noted = Vec::new();
    let mut modern = Vec::with_capacity(arguments.len());
    for (index, argument) in arguments.into_iter().enumerate() {
        let renamed = (index > 1)
            .then(|| argument.to_str().and_then(|text| rename(&command, text)))
            .flatten();
        match renamed {
            Some((new_text, rule)) => {
                if !noted.contains(&rule.old) {
                    noted.push(rule.old);
                    err_line!(
                        "sluice: {command} {} is now {}; the old spelling still works for now",
                        rule.old,
                        rule.new
                    );
                }
                modern.push(OsString::from(new_text));
            }
            None => modern.push(argument),
        }
    }
    modern
}

/// `text` (`--old` or `--old=value`) in its new spelling, with the rule.
fn rename(command: &str, text: &str) -> Option<(String, &'static Renamed)> {
    RENAMED
        .iter()
        .filter(|rule| rule.command == command)
        .find_map(|rule| {
            let rest = text.strip_prefix(rule.old)?;
            (rest.is_empty() || rest.starts_with('='))
                .then(|| (format!("{}{rest}", rule.new), rule))
        })
}

/// The value parser of a flag taking a [`Word`]: clap checks the value
/// against the type's spellings and lists them in `--help`; the type's
/// `FromStr` reads it.
pub fn word<T: Word>() -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(T::SPELLINGS.iter().copied()).map(|spelling| {
        spelling
            .parse::<T>()
            .unwrap_or_else(|reason| panic!("{spelling:?} is listed but not read: {reason}"))
    })
}

/// `lead`, then each database sluice reads (`writes`: writes to) with its
/// URL forms.
fn databases_help(lead: &str, writes: bool) -> String {
    format!("{lead}: {}", sluice_drivers::all().url_help(writes))
}

static READ_HELP: LazyLock<String> =
    LazyLock::new(|| databases_help("The database to read", false));

static WRITE_HELP: LazyLock<String> =
    LazyLock::new(|| databases_help("The database to write to", true));

static FROM_HELP: LazyLock<String> = LazyLock::new(|| databases_help("The source database", false));

static TO_HELP: LazyLock<String> = LazyLock::new(|| databases_help("The target database", true));

static QUERY_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "The SQL to run; parameters ({}) are bound from --param values in order",
        sluice_drivers::all().placeholder_help(false)
    )
});

static STATEMENT_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "The statement to run for each parameter set; parameters: {}",
        sluice_drivers::all().placeholder_help(true)
    )
});

/// `call --query`'s help: the placeholders of every database.
pub fn statement_help() -> &'static str {
    &STATEMENT_HELP
}

/// `--query`'s help: the placeholders of every database.
pub fn query_help() -> &'static str {
    &QUERY_HELP
}

/// `copy --from`'s help: every database sluice reads.
pub fn from_help() -> &'static str {
    &FROM_HELP
}

/// `copy --to`'s help: every database sluice writes to.
pub fn to_help() -> &'static str {
    &TO_HELP
}

/// `--db` of the commands that read (export).
#[derive(Args)]
pub struct ReadDatabase {
    #[arg(long = "db", value_name = "URL", env = "SLUICE_DB", hide_env_values = true, help = &**READ_HELP)]
    pub url: String,
}

/// `--db` of the commands that write (import, call).
#[derive(Args)]
pub struct WriteDatabase {
    #[arg(long = "db", value_name = "URL", env = "SLUICE_DB", hide_env_values = true, help = &**WRITE_HELP)]
    pub url: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<OsString> {
        line.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn old_spellings_become_new_ones_in_their_own_command_only() {
        let modern = modernise(words("sluice call --sql=select --params f.ndjson --db x"));
        assert_eq!(
            modern,
            words("sluice call --query=select --params-file f.ndjson --db x")
        );
        // The same word in another command, or as a value, is left alone.
        let export = words("sluice export --query --sql --db x");
        assert_eq!(modernise(export.clone()), export);
        let unrelated = words("sluice call --params-file p --sqlx 1");
        assert_eq!(modernise(unrelated.clone()), unrelated);
    }

    #[test]
    fn import_rows_per_insert_are_insert_rows_and_export_keeps_batch_rows() {
        for old in ["--batch-rows=5", "--batch-size=5"] {
            let line = format!("sluice import --method insert {old}");
            assert_eq!(
                modernise(words(&line)),
                words("sluice import --method insert --insert-rows=5")
            );
        }
        // Rows per Arrow record batch: the same spelling, another idea.
        let export = words("sluice export --format arrow --batch-rows 5");
        assert_eq!(modernise(export.clone()), export);
    }

    /// The command line `line` as clap reads it.
    fn parse(line: &str) -> Result<crate::Cli, clap::Error> {
        use clap::Parser;
        crate::Cli::try_parse_from(line.split(' '))
    }

    #[test]
    fn a_word_flag_takes_its_types_spellings_and_lists_them() {
        use clap::CommandFactory;
        use sluice_core::connect::LargeObjects;
        use sluice_core::load::{Method, OnConflict, OnError};
        let command = crate::Cli::command();
        let spellings = |subcommand: &str, flag: &str| -> Vec<String> {
            let subcommand = command.find_subcommand(subcommand).unwrap();
            let argument = subcommand
                .get_arguments()
                .find(|argument| argument.get_long() == Some(flag))
                .unwrap();
            let values = argument.get_possible_values();
            values
                .iter()
                .map(|value| value.get_name().to_owned())
                .collect()
        };
        assert_eq!(spellings("import", "on-error"), OnError::SPELLINGS);
        assert_eq!(spellings("import", "on-conflict"), OnConflict::SPELLINGS);
        assert_eq!(spellings("copy", "on-conflict"), OnConflict::SPELLINGS);
        assert_eq!(spellings("import", "method"), Method::SPELLINGS);
        assert_eq!(spellings("export", "lob"), LargeObjects::SPELLINGS);
        let refused = parse("sluice export --db x --query q --lob blob")
            .err()
            .unwrap();
        assert_eq!(refused.kind(), clap::error::ErrorKind::InvalidValue);
        assert!(refused.to_string().contains("oid, inline"), "{refused}");
        assert!(parse("sluice export --db x --query q --lob inline").is_ok());
    }

    #[test]
    fn copy_names_every_database_it_reads_and_writes() {
        assert!(FROM_HELP.contains("PostgreSQL") && FROM_HELP.contains("sqlite:///"));
        assert!(TO_HELP.contains("mariadb://") && !TO_HELP.contains("SQLite"));
    }

    #[test]
    fn the_help_names_every_database_and_its_placeholders() {
        assert!(READ_HELP.contains("SQLite") && READ_HELP.contains("mariadb://"));
        assert!(WRITE_HELP.contains("MariaDB") && !WRITE_HELP.contains("SQLite"));
        assert!(QUERY_HELP.contains("$1") && QUERY_HELP.contains("on MariaDB and SQLite"));
        assert!(STATEMENT_HELP.contains("on MariaDB") && !STATEMENT_HELP.contains("SQLite"));
    }
}
