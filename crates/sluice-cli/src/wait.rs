//! `--timeout`: how long a command waits on a database server that has gone
//! silent, for every command that talks to one (`export`, `import`, `call`,
//! `copy`). Connecting is bounded by the connection settings instead
//! (`connect_timeout`, default 10 s).

use std::time::Duration;

use clap::Args;
use sluice_core::connect::Session;
use sluice_core::{parse_duration, Error, ErrorKind};

/// The `--timeout` flag.
#[derive(Args)]
pub struct WaitArgs {
    /// Give the database server up when nothing has moved on the connection,
    /// either way, for this long while waiting on it (e.g. 30s, 5m): a
    /// stalled network or a hung server then ends the command (exit 3)
    /// instead of hanging it. Default (or 0): wait for ever, since a query may
    /// rightly take hours before its first row; a server that vanished is
    /// still noticed by TCP keepalive within about two minutes. Connecting is
    /// bounded by the URL's connect_timeout (default 10 s) instead.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
}

impl WaitArgs {
    /// The limit asked for, `None` for none.
    fn limit(&self) -> Option<Duration> {
        self.timeout.filter(|limit| !limit.is_zero())
    }

    /// Sets the limit on a freshly connected session.
    pub fn apply(&self, session: &mut dyn Session) -> Result<(), Error> {
        session.set_wait_timeout(self.limit()).map_err(|error| {
            if error.kind() == ErrorKind::Unsupported {
                Error::new(ErrorKind::Unsupported, format!("--timeout: {error}"))
            } else {
                error
            }
        })
    }
}
