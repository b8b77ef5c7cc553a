//! What the binary says about itself, all from the one clap definition of the
//! commands: `--version` (with the commit and build date, `build.rs`),
//! `sluice version --json` (adding the databases and formats compiled in),
//! `sluice completions SHELL` (clap_complete) and the hidden `sluice man
//! DIRECTORY` (clap_mangen: one page for `sluice` and one per subcommand),
//! which the Debian package runs at build time.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::Shell;

use crate::console::out_line;
use crate::exit;

/// `sluice --version`: the version, the commit and the build date.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SLUICE_GIT_COMMIT"),
    " ",
    env!("SLUICE_BUILD_DATE"),
    ")"
);

/// `sluice version`.
#[derive(Args)]
pub struct VersionArgs {
    /// Print a JSON object: version, commit, build date, and the databases
    /// and output formats this binary was built with.
    #[arg(long)]
    json: bool,
}

/// `sluice completions`.
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: Shell,
}

/// `sluice man`.
#[derive(Args)]
pub struct ManArgs {
    /// Where to write sluice.1 and sluice-COMMAND.1.
    directory: PathBuf,
}

/// Prints the version, as text or JSON.
pub fn version(arguments: &VersionArgs) -> u8 {
    if !arguments.json {
        out_line!("sluice {VERSION}");
        return 0;
    }
    let formats: Vec<&str> = sluice_formats::Format::ALL
        .iter()
        .map(|format| format.name())
        .collect();
    let report = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": env!("SLUICE_GIT_COMMIT"),
        "build_date": env!("SLUICE_BUILD_DATE"),
        "databases": sluice_drivers::all().products(),
        "formats": formats,
    });
    out_line!("{report}");
    0
}

/// Writes the completion script of `command` (the whole `sluice`) for a
/// shell to standard output.
pub fn completions(arguments: &CompletionsArgs, mut command: clap::Command) -> u8 {
    let mut script = Vec::new();
    clap_complete::generate(arguments.shell, &mut command, "sluice", &mut script);
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&script).and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        Err(_) => exit::IO,
    }
}

/// Writes the man pages of `command` (the whole `sluice`) into a directory.
pub fn man(arguments: &ManArgs, command: clap::Command) -> u8 {
    match write_pages(&arguments.directory, command) {
        Ok(()) => 0,
        Err(error) => {
            crate::console::err_line!(
                "sluice: cannot write man pages in {}: {error}",
                arguments.directory.display()
            );
            exit::IO
        }
    }
}

fn write_pages(directory: &Path, command: clap::Command) -> std::io::Result<()> {
    std::fs::create_dir_all(directory)?;
    let command = command.version(VERSION);
    write_page(directory, "sluice", command.clone())?;
    for sub in command.get_subcommands().filter(|sub| !sub.is_hide_set()) {
        // clap takes `&'static str` names (without its `string` feature);
        // a page generator runs once and exits.
        let name: &'static str = format!("sluice-{}", sub.get_name()).leak();
        let page = sub.clone().name(name).version(VERSION);
        write_page(directory, name, page)?;
    }
    Ok(())
}

fn write_page(directory: &Path, name: &str, command: clap::Command) -> std::io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    std::fs::write(directory.join(format!("{name}.1")), page)
}
