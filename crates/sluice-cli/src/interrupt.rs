//! Ctrl-C: cancel the running query on the server, say so once, exit 130.
//!
//! The handler is installed before connecting so an interrupt at any moment ends
//! the process with the documented code. Once a query runs, the handler first asks
//! the database to cancel it. The export path usually sees the server's "canceling
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
    canceller: Mutex<Option<Arc<dyn Canceller>>>,
    cleanup: Mutex<Option<Cleanup>>,
}

/// The installed Ctrl-C handler.
#[derive(Clone)]
pub struct Interrupt {
    shared: Arc<Shared>,
}

impl Interrupt {
    /// Starts listening for Ctrl-C.
    pub fn install() -> Interrupt {
        let interrupt = Interrupt {
            shared: Arc::new(Shared::default()),
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

    /// From now on an interrupt cancels the statement `canceller` stops.
    pub fn arm(&self, canceller: Arc<dyn Canceller>) {
        *self.shared.canceller.lock().expect("interrupt state") = Some(canceller);
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
        let canceller = self
            .shared
            .canceller
            .lock()
            .expect("interrupt state")
            .clone();
        if let Some(canceller) = canceller {
            let _ = tokio::time::timeout(Duration::from_secs(2), canceller.cancel()).await;
        }
    }

    fn report(&self) {
        if !self.shared.reported.swap(true, Ordering::SeqCst) {
            let cleanup = self.shared.cleanup.lock().expect("interrupt state").take();
            let note = cleanup
                .and_then(|cleanup| cleanup())
                .map(|note| format!("; {note}"))
                .unwrap_or_default();
            err_line!("sluice: interrupted; the query was cancelled{note}");
        }
    }
}
