//! Ctrl-C: cancel the running statements on their servers, say so once, exit 130.
//!
//! Every command that runs statements (`export`, `import`, `copy`, `call`)
//! installs the handler before connecting, so an interrupt at any moment ends
//! the process with the documented code. Once a statement runs, the handler
//! first asks each armed database to cancel it (a `copy` arms both sides): the
//! server stops at once instead of when it next finds the socket closed. The export path usually sees the server's "canceling
//! statement" error before the handler is done; [`Interrupt::happened`] lets it tell
//! that apart from a real failure and end the same way. Before exiting, the handler
//! runs the cleanup registered with [`Interrupt::on_interrupt`] (an export removes
//! its incomplete output file), since `exit` runs no destructors.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_core::connect::Canceller;
use sluice_core::{Error, ErrorKind};

use crate::console::err_line;
use crate::exit;

/// Work to do before exiting on Ctrl-C; returns a note for the "interrupted" line.
type Cleanup = Box<dyn FnOnce() -> Option<String> + Send>;

#[derive(Default)]
struct Shared {
    happened: AtomicBool,
    reported: AtomicBool,
    cancellers: Mutex<Vec<Arc<dyn Canceller>>>,
    cleanup: Mutex<Option<Cleanup>>,
    /// What the "interrupted" line says became of the work.
    outcome: &'static str,
}

/// The installed Ctrl-C handler.
#[derive(Clone)]
pub struct Interrupt {
    shared: Arc<Shared>,
}

impl Interrupt {
    /// Starts listening for Ctrl-C; the line it prints says "the query was
    /// cancelled".
    pub fn install() -> Interrupt {
        Interrupt::install_saying("the query was cancelled")
    }

    /// Starts listening for Ctrl-C; the line it prints says `outcome` after
    /// "interrupted; ".
    pub fn install_saying(outcome: &'static str) -> Interrupt {
        let interrupt = Interrupt {
            shared: Arc::new(Shared {
                outcome,
                ..Shared::default()
            }),
        };
        let handler = interrupt.clone();
        // Register now, not when the task first runs, so no early Ctrl-C is missed.
        let Ok(mut signals) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        else {
            return interrupt;
        };
        tokio::spawn(async move {
            if signals.recv().await.is_some() {
                handler.shared.happened.store(true, Ordering::SeqCst);
                handler.cancel_query().await;
                handler.report();
                std::process::exit(i32::from(exit::INTERRUPTED));
            }
        });
        interrupt
    }

    /// From now on an interrupt also cancels the statement `canceller` stops.
    pub fn arm(&self, canceller: Arc<dyn Canceller>) {
        self.shared
            .cancellers
            .lock()
            .expect("interrupt state")
            .push(canceller);
    }

    /// On Ctrl-C, runs `cleanup` before exiting and adds the note it returns to the
    /// "interrupted" line.
    pub fn on_interrupt(&self, cleanup: impl FnOnce() -> Option<String> + Send + 'static) {
        *self.shared.cleanup.lock().expect("interrupt state") = Some(Box::new(cleanup));
    }

    /// True once Ctrl-C was pressed.
    pub fn happened(&self) -> bool {
        self.shared.happened.load(Ordering::SeqCst)
    }

    /// Lets the handler finish cancelling (it exits the process), and returns the
    /// error to end with should it not.
    pub async fn wait_for_cancel(&self) -> Error {
        tokio::time::sleep(Duration::from_secs(3)).await;
        self.report();
        Error::new(ErrorKind::Cancelled, "interrupted")
    }

    async fn cancel_query(&self) {
        let cancellers = self
            .shared
            .cancellers
            .lock()
            .expect("interrupt state")
            .clone();
        let cancels = cancellers.iter().map(|canceller| canceller.cancel());
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            futures_util::future::join_all(cancels),
        )
        .await;
    }

    fn report(&self) {
        if !self.shared.reported.swap(true, Ordering::SeqCst) {
            let cleanup = self.shared.cleanup.lock().expect("interrupt state").take();
            let note = cleanup
                .and_then(|cleanup| cleanup())
                .map(|note| format!("; {note}"))
                .unwrap_or_default();
            err_line!("sluice: interrupted; {}{note}", self.shared.outcome);
        }
    }
}
