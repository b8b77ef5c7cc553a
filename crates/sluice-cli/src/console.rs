//! Lines for standard error and standard output that never panic.
//!
//! `eprintln!` and `println!` panic when the write fails, and once the reader of a
//! pipe is gone (`sluice export … --stats 2>&1 | head -1`) every write fails with
//! EPIPE. What sluice prints there (errors, `--stats`, notices, the proxy's report)
//! is of no use to a reader that has left, so [`err_line!`], [`err_text!`] and
//! [`out_line!`] drop a failed write; the exit code still tells how the command
//! ended. The crate denies clippy's `print_stderr` and `print_stdout` so that no
//! panicking print comes back.

use std::fmt;
use std::io::Write;

/// Writes a line to standard error, ignoring failure: `err_line!("sluice: {error}")`.
macro_rules! err_line {
    ($($argument:tt)*) => {
        $crate::console::write_stderr(format_args!($($argument)*), true)
    };
}

/// Writes to standard error without adding a line break, ignoring failure.
macro_rules! err_text {
    ($($argument:tt)*) => {
        $crate::console::write_stderr(format_args!($($argument)*), false)
    };
}

/// Writes a line to standard output, ignoring failure.
macro_rules! out_line {
    ($($argument:tt)*) => {
        $crate::console::write_stdout(format_args!($($argument)*))
    };
}

pub(crate) use {err_line, err_text, out_line};

/// The text with an optional line break, formatted first so it goes out in one write.
fn text(arguments: fmt::Arguments<'_>, newline: bool) -> String {
    let mut text = arguments.to_string();
    if newline {
        text.push('\n');
    }
    text
}

/// Writes to standard error; a closed or failing stream is ignored (see the module docs).
pub fn write_stderr(arguments: fmt::Arguments<'_>, newline: bool) {
    let _ = std::io::stderr().write_all(text(arguments, newline).as_bytes());
}

/// Writes a line to standard output; a closed or failing stream is ignored.
pub fn write_stdout(arguments: fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text(arguments, true).as_bytes())
        .and_then(|()| stdout.flush());
}
