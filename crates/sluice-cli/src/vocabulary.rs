//! The words the commands share, said once: `--db` (its help from the
//! drivers, so it lists every database built in), the help of `--query`
//! (placeholders per database, from the drivers too), and the spellings that
//! were renamed so every command says one idea one way — each old spelling
//! still works, with a one-line note naming the new one.
//!
//! | idea | spelling | renamed from |
//! |---|---|---|
//! | the statement | `--query` | `call --sql` |
//! | values of one statement's parameters | `--param VALUE` (repeated) | |
//! | a file of parameter sets | `--params-file FILE` | `call --params` |
//! | where results go | `--output`/`-o` | `lab --out`, `proxy --report` |
//! | rows per batch | `--batch-rows` | `import --batch-size` |

use std::ffi::OsString;
use std::sync::LazyLock;

use clap::Args;

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
    Renamed {
        command: "import",
        old: "--batch-size",
        new: "--batch-rows",
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

static READ_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "The database to read: {}",
        sluice_drivers::all().url_help(false)
    )
});

static WRITE_HELP: LazyLock<String> = LazyLock::new(|| {
    format!(
        "The database to write to: {}",
        sluice_drivers::all().url_help(true)
    )
});

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
    fn the_help_names_every_database_and_its_placeholders() {
        assert!(READ_HELP.contains("SQLite") && READ_HELP.contains("mariadb://"));
        assert!(WRITE_HELP.contains("MariaDB") && !WRITE_HELP.contains("SQLite"));
        assert!(QUERY_HELP.contains("$1") && QUERY_HELP.contains("on MariaDB and SQLite"));
        assert!(STATEMENT_HELP.contains("on MariaDB") && !STATEMENT_HELP.contains("SQLite"));
    }
}
