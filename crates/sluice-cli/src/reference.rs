//! The command reference of the book (`docs/src/commands.md`),
//! generated from the one clap definition of the commands: every command's
//! `--help`; and the table of exit codes in `docs/src/errors.md`, from
//! [`crate::exit::MEANINGS`]. Tests fail when the checked-in pages are stale
//! (`SLUICE_BLESS=1 cargo test -p sluice-cli --bin sluice reference` writes
//! them anew), and when a `sluice …` command line in README.md or the book
//! does not parse — an example with a flag that no longer exists cannot ship.

use clap::CommandFactory;

/// The version as the page shows it: without the commit and date, so the
/// page changes only when the commands do.
const VERSION_FOR_DOCS: &str = env!("CARGO_PKG_VERSION");

/// The page: each visible command's full help, `sluice` first.
pub fn commands_page() -> String {
    let mut page = String::from(
        "# Command reference\n\n\
         Every command's `--help`, generated from the code (`crates/sluice-cli/src/reference.rs`;\n\
         a test fails when this page is stale). The [guides](introduction.md) say how to use them.\n",
    );
    page.push_str(
        "\nRenamed flags: the old spelling still works, with a one-line note on standard error.\n\n\
         | command | old | new |\n|---|---|---|\n",
    );
    for rule in crate::vocabulary::RENAMED {
        page.push_str(&format!(
            "| `sluice {}` | `{}` | `{}` |\n",
            rule.command, rule.old, rule.new
        ));
    }
    let mut root = crate::cli::Cli::command().version(VERSION_FOR_DOCS);
    page.push_str(&section("sluice", &mut root));
    for sub in root.get_subcommands_mut().filter(|sub| !sub.is_hide_set()) {
        let name = format!("sluice {}", sub.get_name());
        page.push_str(&section(&name, sub));
    }
    page
}

/// The lines that open and close the generated table in `errors.md`.
const EXIT_CODES_BEGIN: &str =
    "<!-- exit codes: made from exit::MEANINGS (crates/sluice-cli/src/exit.rs) -->";
const EXIT_CODES_END: &str = "<!-- end of exit codes -->";

/// The table of exit codes, between its markers.
pub fn exit_codes_table() -> String {
    let mut table = format!("{EXIT_CODES_BEGIN}\n| exit code | meaning |\n|---|---|\n");
    for (code, meaning) in crate::exit::MEANINGS {
        // A pipe inside a table cell ends the cell unless escaped.
        table.push_str(&format!("| {code} | {} |\n", meaning.replace('|', "\\|")));
    }
    table.push_str(EXIT_CODES_END);
    table
}

/// `page` with the exit-code table between its markers replaced by
/// [`exit_codes_table`]; `None` when the markers are missing.
pub fn with_exit_codes(page: &str) -> Option<String> {
    let start = page.find(EXIT_CODES_BEGIN)?;
    let end = page[start..].find(EXIT_CODES_END)? + start + EXIT_CODES_END.len();
    Some(format!(
        "{}{}{}",
        &page[..start],
        exit_codes_table(),
        &page[end..]
    ))
}

fn section(name: &str, command: &mut clap::Command) -> String {
    let help = command.render_long_help().to_string();
    let help: Vec<&str> = help.lines().map(str::trim_end).collect();
    format!(
        "\n## `{name}`\n\n```text\n{}\n```\n",
        help.join("\n").trim_end()
    )
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use clap::Parser;

    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn the_command_reference_is_current() {
        let path = root().join("docs/src/commands.md");
        let page = commands_page();
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            current == page,
            "{} is stale: run SLUICE_BLESS=1 cargo test -p sluice-cli --bin sluice reference",
            path.display()
        );
    }

    #[test]
    fn the_exit_code_table_is_current() {
        let path = root().join("docs/src/errors.md");
        let read = || std::fs::read_to_string(&path).unwrap();
        let page = with_exit_codes(&read()).expect("errors.md has the exit-code markers");
        if std::env::var_os("SLUICE_BLESS").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let current = read();
        assert!(
            current == page,
            "{}'s exit codes are stale: run SLUICE_BLESS=1 cargo test -p sluice-cli --bin sluice reference",
            path.display()
        );
    }

    /// The Markdown files whose examples are checked.
    fn documents() -> Vec<PathBuf> {
        let mut files = vec![root().join("README.md")];
        let mut pending = vec![root().join("docs")];
        while let Some(directory) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&directory) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    pending.push(path);
                } else if path.extension().is_some_and(|extension| extension == "md") {
                    files.push(path);
                }
            }
        }
        files.sort();
        files
    }

    #[test]
    fn every_sluice_command_line_in_the_readme_and_the_book_parses() {
        let mut failures = Vec::new();
        let mut checked = 0;
        for file in documents() {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line, command) in command_lines(&text) {
                checked += 1;
                if let Err(error) = crate::cli::Cli::try_parse_from(&command) {
                    use clap::error::ErrorKind;
                    if matches!(
                        error.kind(),
                        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
                    ) {
                        continue;
                    }
                    // Examples may take the database from SLUICE_DB.
                    let only_db_missing = error.kind() == ErrorKind::MissingRequiredArgument
                        && error
                            .to_string()
                            .lines()
                            .filter(|line| line.starts_with("  --"))
                            .all(|line| line.trim() == "--db <URL>");
                    if only_db_missing {
                        continue;
                    }
                    let first = error.to_string().lines().next().unwrap_or("").to_owned();
                    failures.push(format!(
                        "{}:{line}: {}: {first}",
                        file.display(),
                        command.join(" ")
                    ));
                }
            }
        }
        assert!(checked > 10, "only {checked} command lines found");
        assert!(
            failures.is_empty(),
            "examples that do not parse:\n{}",
            failures.join("\n")
        );
    }

    /// The `sluice …` command lines of the fenced code blocks of `text`, with
    /// their line numbers, split into words (continuations joined; a pipe,
    /// redirection or `&` ends the command).
    fn command_lines(text: &str) -> Vec<(usize, Vec<String>)> {
        let mut found = Vec::new();
        let mut in_code = false;
        let mut pending: Option<(usize, String)> = None;
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.starts_with("```") {
                in_code = !in_code;
                pending = None;
                continue;
            }
            if !in_code {
                continue;
            }
            let (number, mut joined) = match pending.take() {
                Some((number, so_far)) => (number, so_far + " " + line),
                None => match sluice_command(line) {
                    Some(command) => (index + 1, command.to_owned()),
                    None => continue,
                },
            };
            if joined.ends_with('\\') {
                joined.pop();
                pending = Some((number, joined));
                continue;
            }
            if let Some(words) = shell_words(&joined) {
                found.push((number, words));
            }
        }
        found
    }

    /// The command line if `line` runs sluice (`sluice …`, `$ sluice …`,
    /// `target/release/sluice …`). A synopsis (`[--flag]`, `(a | b)`, `…`) or
    /// a line of output (`sluice serve: listening…`) is no command to run.
    fn sluice_command(line: &str) -> Option<&str> {
        let line = line.strip_prefix("$ ").unwrap_or(line);
        let synopsis = ["…", "[--", "(--", "]..."];
        if synopsis.iter().any(|mark| line.contains(mark)) {
            return None;
        }
        if line
            .split_whitespace()
            .nth(1)
            .is_some_and(|word| word.ends_with(':'))
        {
            return None;
        }
        for prefix in [
            "target/release/sluice ",
            "./target/release/sluice ",
            "sluice ",
        ] {
            if let Some(rest) = line.strip_prefix(prefix) {
                let start = line.len() - rest.len() - "sluice ".len();
                return Some(&line[start..]);
            }
        }
        None
    }

    /// Shell words up to a pipe, redirection or `&`; `None` for lines that
    /// substitute commands (`$(…)`), which cannot be checked here.
    fn shell_words(line: &str) -> Option<Vec<String>> {
        if line.contains("$(") || line.contains('`') {
            return None;
        }
        let mut words = Vec::new();
        let mut word = String::new();
        let mut in_word = false;
        let mut characters = line.chars().peekable();
        while let Some(character) = characters.next() {
            match character {
                '\'' | '"' => {
                    in_word = true;
                    for quoted in characters.by_ref() {
                        if quoted == character {
                            break;
                        }
                        word.push(quoted);
                    }
                }
                ' ' | '\t' => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                        in_word = false;
                    }
                }
                ';' | '|' => break,
                '>' | '<' | '&' | '#' if !in_word => break,
                '2' if !in_word && characters.peek() == Some(&'>') => break,
                other => {
                    in_word = true;
                    word.push(other);
                }
            }
        }
        if in_word {
            words.push(word);
        }
        // The binary's path as the program name.
        if let Some(first) = words.first_mut() {
            *first = "sluice".into();
        }
        Some(words)
    }

    #[test]
    fn command_lines_are_found_joined_and_cut() {
        let text = "text\n```sh\n$ sluice export --db x \\\n  --query 'select 1' | head\nls\ntarget/release/sluice serve --demo &\nsluice serve [--threads N]\nsluice serve: listening\n```\nsluice outside\n";
        let lines = command_lines(text);
        assert_eq!(
            lines,
            [
                (
                    3,
                    vec!["sluice", "export", "--db", "x", "--query", "select 1"]
                        .into_iter()
                        .map(String::from)
                        .collect::<Vec<_>>()
                ),
                (
                    6,
                    vec!["sluice", "serve", "--demo"]
                        .into_iter()
                        .map(String::from)
                        .collect()
                ),
            ]
        );
    }
}
