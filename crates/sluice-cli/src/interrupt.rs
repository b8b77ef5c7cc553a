//! Ctrl-C and SIGTERM: cancel the running statements on their servers, say so
//! once, exit 130 (Ctrl-C) or 143 (SIGTERM).
//!
//! Every command that runs statements (`export`, `import`, `copy`, `call`)
//! installs the handler before connecting, so a signal at any moment ends
//! the process with the documented code. Once a statement runs, the handler
//! first asks each armed database to cancel it (a `copy` arms both sides): the
//! server stops at once instead of when it next finds the socket closed. The export path usually sees the server's "canceling
//! statement" error before the handler is done; [`Interrupt::happened`] lets it tell
//! that apart from a real failure and end the same way. Before exiting, the handler
//! runs the cleanup registered with [`Interrupt::on_interrupt`] (an export removes
//! its incomplete output file), since `exit` runs no destructors.
//!
//! Work that a dying process cannot leave to the server to undo (a table a
//! `copy` created and committed, so that other sessions could load it) runs
//! as a [`Unit`]: while one is open, the handler cancels the statements but
//! does not exit; the command sees them fail, undoes the unit itself and
//! exits with the signal's code. A second signal exits at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sluice_core::connect::Canceller;
use sluice_core::{Error, ErrorKind};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

use crate::console::err_line;
use crate::exit;

/// Work to do before exiting on a signal; returns a note for the "interrupted" line.
type Cleanup = Box<dyn FnOnce() -> Option<String> + Send>;

/// A signal that stops a command.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: a service manager or `kill`.
    Terminate,
}

impl Stop {
    fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => exit::INTERRUPTED,
            Stop::Terminate => exit::TERMINATED,
        }
    }

    /// The first word of the line saying so.
    fn word(self) -> &'static str {
        match self {
            Stop::Interrupt => "interrupted",
            Stop::Terminate => "terminated",
        }
    }
}

/// What the handler and the command agree on, under one lock so that a
/// signal and a unit beginning or ending cannot cross.
#[derive(Default)]
struct State {
    /// The signal that stopped the command's work, once one has.
    stop: Option<Stop>,
    /// Units open ([`Unit`]); while one is, the command, not the handler, exits.
    units: usize,
    /// What an open unit leaves behind when a second signal exits at once.
    abandoned: &'static str,
    /// The open unit is being committed or undone: a signal now stops nothing.
    ending: bool,
    /// Whether a signal was left unheeded (it came while a unit was ending):
    /// a further one exits at once.
    unheeded: bool,
    /// The handler exits the process itself (no unit was open at the signal).
    handler_exits: bool,
}

struct Shared {
    state: Mutex<State>,
    reported: AtomicBool,
    cancellers: Mutex<Vec<Arc<dyn Canceller>>>,
    cleanup: Mutex<Option<Cleanup>>,
    /// True once the handler has cancelled the armed statements: a unit is
    /// undone only after that, so that no cancel reaches the undoing.
    cancelled: watch::Sender<bool>,
    /// What the "interrupted" line says became of the work.
    outcome: &'static str,
}

/// The installed Ctrl-C and SIGTERM handler.
#[derive(Clone)]
pub struct Interrupt {
    shared: Arc<Shared>,
}

impl Interrupt {
    /// Starts listening for Ctrl-C and SIGTERM; the line it prints says "the
    /// query was cancelled".
    pub fn install() -> Interrupt {
        Interrupt::install_saying("the query was cancelled")
    }

    /// Starts listening for Ctrl-C and SIGTERM; the line it prints says
    /// `outcome` after "interrupted; " (or "terminated; ").
    pub fn install_saying(outcome: &'static str) -> Interrupt {
        let interrupt = Interrupt {
            shared: Arc::new(Shared {
                state: Mutex::default(),
                reported: AtomicBool::new(false),
                cancellers: Mutex::default(),
                cleanup: Mutex::default(),
                cancelled: watch::Sender::new(false),
                outcome,
            }),
        };
        // Register now, not when the task first runs, so no early signal is missed.
        let (Ok(mut interrupts), Ok(mut terminations)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return interrupt;
        };
        let handler = interrupt.clone();
        tokio::spawn(async move {
            loop {
                let stop = tokio::select! {
                    Some(()) = interrupts.recv() => Stop::Interrupt,
                    Some(()) = terminations.recv() => Stop::Terminate,
                    else => return,
                };
                handler.stop(stop).await;
            }
        });
        interrupt
    }

    /// From now on a signal also cancels the statement `canceller` stops.
    pub fn arm(&self, canceller: Arc<dyn Canceller>) {
        self.shared
            .cancellers
            .lock()
            .expect("interrupt state")
            .push(canceller);
    }

    /// On a signal, runs `cleanup` before exiting and adds the note it returns to the
    /// "interrupted" line.
    pub fn on_interrupt(&self, cleanup: impl FnOnce() -> Option<String> + Send + 'static) {
        *self.shared.cleanup.lock().expect("interrupt state") = Some(Box::new(cleanup));
    }

    /// True once a signal has stopped the command's work.
    pub fn happened(&self) -> bool {
        self.state().stop.is_some()
    }

    /// The exit code of the signal that stopped the work (130 for Ctrl-C,
    /// 143 for SIGTERM).
    pub fn exit_code(&self) -> u8 {
        self.state().stop.map_or(exit::INTERRUPTED, Stop::exit_code)
    }

    /// Lets the handler finish cancelling (it exits the process, unless a
    /// [`Unit`] was open and the command exits), says so, and returns the
    /// error to end with.
    pub async fn wait_for_cancel(&self) -> Error {
        if self.state().handler_exits {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        self.report();
        cancelled()
    }

    /// Opens a unit of work that the command ends itself, even when a signal
    /// stops it ([`Unit`]); `abandoned` says what is left should a second
    /// signal exit before the unit is undone. Fails (cancelled) once a signal
    /// has come: the handler is exiting then, and nothing must begin.
    pub fn begin_unit(&self, abandoned: &'static str) -> Result<Unit, Error> {
        let mut state = self.state();
        if state.stop.is_some() {
            return Err(cancelled());
        }
        state.units += 1;
        state.abandoned = abandoned;
        Ok(Unit {
            interrupt: self.clone(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What a signal does: cancel and exit, or, while a unit is open, cancel
    /// and leave ending to the command; a second signal exits at once.
    async fn stop(&self, stop: Stop) {
        enum Then {
            Exit,
            LeaveToCommand { cancel: bool },
            ExitAbandoning(&'static str),
        }
        let then = {
            let mut state = self.state();
            let again = state.stop.is_some() || state.unheeded;
            match (state.units, state.ending) {
                (0, _) => {
                    state.stop.get_or_insert(stop);
                    state.handler_exits = true;
                    Then::Exit
                }
                _ if again => {
                    state.stop.get_or_insert(stop);
                    Then::ExitAbandoning(state.abandoned)
                }
                // Committing or undoing: let it finish, stop nothing.
                (_, true) => {
                    state.unheeded = true;
                    Then::LeaveToCommand { cancel: false }
                }
                (_, false) => {
                    state.stop = Some(stop);
                    Then::LeaveToCommand { cancel: true }
                }
            }
        };
        match then {
            Then::Exit => {
                self.cancel_query().await;
                self.report();
                std::process::exit(i32::from(stop.exit_code()));
            }
            Then::LeaveToCommand { cancel } => {
                if cancel {
                    self.cancel_query().await;
                }
                self.shared.cancelled.send_replace(true);
            }
            Then::ExitAbandoning(abandoned) => {
                err_line!(
                    "sluice: {} again: exiting at once; {abandoned}",
                    stop.word()
                );
                std::process::exit(i32::from(stop.exit_code()));
            }
        }
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
            let word = self.state().stop.unwrap_or(Stop::Interrupt).word();
            let cleanup = self.shared.cleanup.lock().expect("interrupt state").take();
            let note = cleanup
                .and_then(|cleanup| cleanup())
                .map(|note| format!("; {note}"))
                .unwrap_or_default();
            err_line!("sluice: {word}; {}{note}", self.shared.outcome);
        }
    }
}

/// Work the command must end itself, committed or undone, whatever stops it
/// (`sluice copy`'s target side, from creating the table to the commit):
/// while a unit is open a signal cancels the running statements, which then
/// fail, and leaves the undoing and the exit to the command.
pub struct Unit {
    interrupt: Interrupt,
}

impl Unit {
    /// Whether a signal has stopped the work: begin nothing more.
    pub fn stopped(&self) -> bool {
        self.interrupt.happened()
    }

    /// Starts ending the unit and says whether to commit it: when the work
    /// `succeeded` and no signal stopped it. From then on a signal stops
    /// nothing (a second one still exits at once). When a signal did stop the
    /// work, first waits until the handler has sent its cancels, so that none
    /// reaches the statements that undo it.
    pub async fn end(&self, succeeded: bool) -> bool {
        let stopped = {
            let mut state = self.interrupt.state();
            state.ending = true;
            state.stop.is_some()
        };
        if stopped {
            let mut cancelled = self.interrupt.shared.cancelled.subscribe();
            let _ = cancelled.wait_for(|done| *done).await;
        }
        succeeded && !stopped
    }
}

impl Drop for Unit {
    fn drop(&mut self) {
        let mut state = self.interrupt.state();
        state.units -= 1;
        state.ending = false;
    }
}

/// The error of work a signal stopped.
pub fn cancelled() -> Error {
    Error::new(ErrorKind::Cancelled, "interrupted")
}
