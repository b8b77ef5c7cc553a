//! `sluice`: stream SQL results out of databases in constant memory, with the
//! round trips counted. This binary is a thin shell over the library crates: it
//! parses arguments, wires a source to an encoder and an output, and turns errors
//! into one clear line and an exit code.
// A print that panics on a closed pipe must not come back: see `console`.
#![deny(clippy::print_stdout, clippy::print_stderr)]
// The doc comments of the argument structs are clap's help texts, read in a
// terminal (`[default: …]`, `cut[:TRIGGER]`), not links for rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

mod about;
mod call;
mod cli;
mod console;
mod copy;
mod cpus;
// Public, as it was inline here: the exit codes are the binary's interface,
// `MEANINGS` read only by the book's table (`reference`, a test).
pub mod exit;
mod export;
mod import;
mod interrupt;
mod lab;
mod machine;
mod output;
mod parts;
mod position;
mod proxy;
#[cfg(test)]
mod reference;
mod report;
mod serve;
mod vocabulary;
mod wait;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command};
use crate::console::err_line;

fn main() -> ExitCode {
    let arguments = vocabulary::modernise(std::env::args_os().collect());
    let code = match Cli::parse_from(arguments).command {
        // The commands about the binary itself need no runtime.
        Command::Version(arguments) => about::version(&arguments),
        Command::Completions(arguments) => about::completions(&arguments, Cli::command()),
        Command::Man(arguments) => about::man(&arguments, Cli::command()),
        command => run(command),
    };
    ExitCode::from(code)
}

/// Runs a command that works on databases, in a runtime sized for it.
fn run(command: Command) -> u8 {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(command.worker_threads())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            err_line!("sluice: could not start the async runtime: {error}");
            return exit::IO;
        }
    };
    let code = runtime.block_on(async {
        match command {
            Command::Export(arguments) => export::run(arguments).await,
            Command::Import(arguments) => import::run(arguments).await,
            Command::Copy(arguments) => copy::run(arguments).await,
            Command::Call(arguments) => call::run(arguments).await,
            Command::Proxy(arguments) => proxy::run(arguments).await,
            Command::Serve(arguments) => serve::run(arguments).await,
            Command::Lab(arguments) => lab::run(arguments).await,
            Command::Version(arguments) => about::version(&arguments),
            Command::Completions(arguments) => about::completions(&arguments, Cli::command()),
            Command::Man(arguments) => about::man(&arguments, Cli::command()),
        }
    });
    // Do not wait for a cancel request or progress task still in flight.
    runtime.shutdown_background();
    code
}
