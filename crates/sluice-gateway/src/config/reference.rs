//! The book's configuration reference (`docs/src/configuration.md`), written
//! from the key definitions the parser reads ([`super::sections::SECTIONS`]): a whole
//! file of example values, then each table's keys with type, default and
//! meaning. A test fails when the checked-in page is stale
//! (`SLUICE_BLESS=1 cargo test -p sluice-gateway --lib config::reference`
//! writes it anew), and another parses the page's whole-file example.

use sluice_core::connect::Drivers;

use super::keys::{default_text, type_name, Key, Section, Type};
use super::sections::SECTIONS;

/// The page's opening: what the file is and the rules every key follows.
const HEADER: &str = "# Configuration file of `sluice serve`

> Generated from the key definitions the parser reads (`crates/sluice-gateway/src/config/`);
> a test fails when this page is stale (`SLUICE_BLESS=1 cargo test -p sluice-gateway --lib
> config::reference` writes it anew).

`sluice serve --config sluice.toml` reads one TOML file: the server's limits and TLS,
the databases, the named queries, the tokens, ad-hoc SQL, writable tables and Arrow
Flight. This page gives a whole file, then each table's keys. How to use them is in
[Serve named queries over HTTP](serve.md).

## Rules

The file is checked completely before the port opens; the first problem is one line
naming the file, the line and the key
(`sluice.toml:12: queries.by_status.params[1].type: unknown type \"tiemstamptz\" …`).
An unknown key is an error too. A key written in an old spelling still works, with a
one-line deprecation note in the log at start and on each reload.
`${NAME}` in the keys whose type says so (database URLs, file paths, tokens, secrets) is
replaced by the environment variable (an unset variable is an error, never an empty
password).

**Durations**, here and in `sluice proxy`/`sluice lab` options, take a unit: `500ms`,
`30s`, `5m`, `1h 30m`, `0.5ms`, `300us`; a bare number other than `0` is refused
(`\"30\"`: give a unit: 30s, 30ms). **Sizes** are an integer number of bytes or a
string with a unit (`\"512KiB\"`, `\"64MiB\"`, `\"2GB\"`).

`SIGHUP` reloads the file ([How the gateway behaves](gateway.md#sighup-reloads-the-configuration));
`listen`, `threads`, the TLS files (re-read on their own), the connection timeouts and
`shutdown_grace` take effect at the next start only.
";

/// The page's end: what is not one key's reference.
const FOOTER: &str = "
## Parameter types

`smallint`, `int`, `bigint`, `numeric`, `real`/`double`, `text`, `bool`, `date`,
`timestamp`, `timestamptz`, `uuid`, `json`. At start, a declared type of another kind
than the one the database infers for the parameter is an error ([Start-up
checks](serve.md#start-up-checks)).
";

/// The page, its database-specific words (URL forms, placeholders) from `drivers`.
pub fn reference_page(drivers: &Drivers) -> String {
    let mut page = String::from(HEADER);
    page.push_str("\n## The whole file\n\nEvery key, with an example value (alternatives such as `token` for `sha256` left out).\n\n```toml\n");
    page.push_str(&example_file());
    page.push_str("```\n");
    for section in SECTIONS {
        page.push_str(&section_text(section, drivers));
    }
    page.push_str(FOOTER);
    page
}

/// A file giving every key that has an example value.
/// A whole configuration file with an example value for every key: the
/// reference page's, and the example the HTTP reference describes.
pub fn example_file() -> String {
    let mut file = String::new();
    for section in SECTIONS.iter().filter(|section| !is_inline(section)) {
        file.push_str(&format!("{}\n", example_heading(section)));
        for key in section.keys {
            if let Some(value) = example_value(key) {
                file.push_str(&format!("{} = {value}\n", key.name));
            }
        }
        file.push('\n');
    }
    file.pop();
    file
}

/// Whether a section's entries are inline tables inside another's key.
fn is_inline(section: &Section) -> bool {
    SECTIONS.iter().any(|other| {
        other
            .keys
            .iter()
            .any(|key| key.ty == Type::Tables(section.path))
    })
}

/// A section's heading in the example, with a name for `NAME`.
fn example_heading(section: &Section) -> String {
    let name = match section.top() {
        "databases" => "main",
        "queries" => "payments_by_status",
        _ => "payment_events",
    };
    section.heading.replace("NAME", name)
}

/// A key's example value; a list of inline tables from their section's examples.
fn example_value(key: &Key) -> Option<String> {
    let Type::Tables(path) = key.ty else {
        return key.example.map(str::to_owned);
    };
    let section = SECTIONS.iter().find(|section| section.path == path)?;
    let pairs: Vec<String> = section
        .keys
        .iter()
        .filter_map(|key| Some(format!("{} = {}", key.name, key.example?)))
        .collect();
    Some(format!("[{{ {} }}]", pairs.join(", ")))
}

/// One section: its heading, what it is for, a table of its keys, old spellings.
fn section_text(section: &Section, drivers: &Drivers) -> String {
    let mut text = format!(
        "\n## `{}`\n\n{}\n\n| key | type | default | meaning |\n|---|---|---|---|\n",
        section.heading, section.about
    );
    for key in section.keys {
        text.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            key.name,
            type_name(key.ty),
            default_text(key.default),
            meaning(key, drivers)
        ));
    }
    for key in section.keys {
        for old in key.old_names {
            text.push_str(&format!(
                "\n`{old}` is the old spelling of `{}`: still read, with a one-line deprecation note.\n",
                key.name
            ));
        }
    }
    text
}

/// A key's meaning, `{drivers}` and `{placeholders}` filled from the drivers.
fn meaning(key: &Key, drivers: &Drivers) -> String {
    key.meaning
        .replace("{drivers}", &drivers.url_help(false))
        .replace("{placeholders}", &drivers.placeholder_help(false))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_configuration_reference_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/configuration.md");
        let page = reference_page(&sluice_drivers::all());
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == page,
            "{} is stale: run SLUICE_BLESS=1 cargo test -p sluice-gateway --lib config::reference",
            path.display()
        );
    }

    #[test]
    fn the_whole_file_example_loads_with_every_key_it_shows() {
        std::env::set_var("APP_DATABASE_URL", "postgres://app@db.internal/app");
        std::env::set_var("SLUICE_FLIGHT_SECRET", "s".repeat(32));
        let file = example_file();
        let config = crate::Config::parse(&file, "example.toml")
            .unwrap_or_else(|error| panic!("{error}\n{file}"));
        assert!(config.deprecations.is_empty());
        let query = &config.queries["payments_by_status"];
        assert_eq!(query.params[0].name, "status");
        assert!(query.inline_large_objects);
        assert!(config.sql.is_some() && config.flight.is_some() && config.tls.is_some());
        assert_eq!(
            config.tables["payment_events"].table,
            "public.payment_events"
        );
    }
}
