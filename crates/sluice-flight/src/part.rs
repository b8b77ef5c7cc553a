//! `DoGet`: one part of a plan streamed as Flight messages.
//!
//! A task per call reads the part through the same engine as the HTTP
//! gateway's `--format arrow` bodies ([`Transfer`] with the Arrow encoder),
//! cuts the stream into messages ([`crate::ipc`]) and hands each to gRPC over
//! a channel of one, so memory stays at a message or two whatever the part's
//! size or the client's speed. The task ends, and the query is cancelled on
//! the database, when the client goes away (the channel closes), takes
//! nothing for `idle_write_timeout`, the part runs past `max_stream_duration`,
//! or the server's shutdown deadline passes. Every call is logged once and
//! counted in `/metrics` (route `flight`), with its rows, bytes and round
//! trips.

use std::time::Duration;

use arrow_flight::FlightData;
use sluice_core::database::RunningQuery;
use sluice_core::{Encoder, Transfer, TransferError};
use sluice_gateway::config::FlightConfig;
use sluice_gateway::{hand_over, Front, NotTaken, RequestContext, Timing};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Code, Status};

use crate::ipc::MessageSplitter;
use crate::plans::Reading;

/// The first capacity of a fill's buffer (the transfer hands out 64 KiB
/// pieces, or a whole record batch's message).
const FILL_BYTES: usize = 96 << 10;

/// Record batches of at most this many bytes of values: arrow-flight's own
/// default message size, small enough that a part holds a few MiB, large
/// enough that per-message costs vanish.
pub const FLIGHT_BATCH_BYTES: usize = 2 << 20;

/// The Arrow encoder a part is written with (`[flight] numeric_scale` gives
/// undeclared decimals their scale).
pub fn encoder(flight: &FlightConfig) -> Box<dyn Encoder> {
    let columnar = sluice_formats::ColumnarOptions {
        batch_bytes: FLIGHT_BATCH_BYTES,
        numeric_scale: flight.numeric_scale,
        ..sluice_formats::ColumnarOptions::default()
    };
    sluice_formats::Format::Arrow.encoder(sluice_formats::OutputOptions {
        columnar,
        ..sluice_formats::OutputOptions::default()
    })
}

/// The messages gRPC sends, or the status that ends the call.
pub type Messages = mpsc::Receiver<Result<FlightData, Status>>;

/// A part being read.
pub struct PartStream {
    /// The query, started.
    pub source: Box<dyn RunningQuery>,
    /// The Arrow encoder.
    pub encoder: Box<dyn Encoder>,
    /// `max_rows` and `max_bytes` of the query.
    pub limits: sluice_core::Limits,
    /// The longest the part may take, and the longest its client may take
    /// nothing.
    pub timing: Timing,
    /// Logs the call at its end.
    pub context: RequestContext,
    /// Cancelled at the server's shutdown deadline.
    pub shutdown: CancellationToken,
    /// Follows the cancel requests of abandoned parts.
    pub tracker: TaskTracker,
    /// A split plan's part: keeps its plan counted as being read until the
    /// stream ends.
    pub reading: Option<Reading>,
}

/// How a part ended.
enum Ending {
    Complete,
    ClientGone,
    Failed {
        outcome: &'static str,
        status: Status,
    },
}

impl PartStream {
    /// Starts the task; gRPC sends what the returned channel yields.
    pub fn start(self, tracker: &TaskTracker) -> Messages {
        let (sender, receiver) = mpsc::channel(1);
        tracker.spawn(self.run(sender));
        receiver
    }

    async fn run(self, sender: mpsc::Sender<Result<FlightData, Status>>) {
        let PartStream {
            source,
            encoder,
            limits,
            timing:
                Timing {
                    max_duration,
                    idle_write_timeout,
                },
            context,
            shutdown,
            tracker,
            // Held to the end of the part, when its plan's read ends.
            reading: _reading,
        } = self;
        let mut transfer = Transfer::new(source, encoder).with_limits(limits);
        let deadline = Instant::now() + max_duration;
        let timing = (deadline, max_duration, idle_write_timeout);
        let ending = tokio::select! {
            biased;
            () = sender.closed() => Ending::ClientGone,
            _ = shutdown.cancelled() => Ending::Failed {
                outcome: "shutdown",
                status: Status::unavailable("the server is shutting down"),
            },
            () = tokio::time::sleep_until(deadline) => too_long(max_duration),
            ending = pump(&mut transfer, &sender, timing, context.ad_hoc) => ending,
        };
        let (rows, bytes) = (transfer.rows(), transfer.bytes());
        let source = transfer.into_source();
        let round_trips = source.round_trips();
        match ending {
            Ending::Complete => {
                source.complete();
                context.finish(logged(Code::Ok), "complete", rows, bytes, round_trips, None);
            }
            Ending::ClientGone => {
                abandon(source, &tracker);
                let message = "the client left before the part ended";
                context.finish(
                    logged(Code::Cancelled),
                    "client_gone",
                    rows,
                    bytes,
                    round_trips,
                    Some(message),
                );
            }
            Ending::Failed { outcome, status } => {
                abandon(source, &tracker);
                let message = status.message().to_owned();
                let code = logged(status.code());
                let _ = sender.try_send(Err(status));
                context.finish(code, outcome, rows, bytes, round_trips, Some(&message));
            }
        }
    }
}

/// Cancels the part's query on the database, in a task the tracker follows.
fn abandon(source: Box<dyn RunningQuery>, tracker: &TaskTracker) {
    if let Some(cancel) = source.abandon() {
        tracker.spawn(cancel);
    }
}

fn too_long(max_duration: Duration) -> Ending {
    Ending::Failed {
        outcome: "timeout",
        status: Status::deadline_exceeded(format!(
            "the part ran longer than its max_stream_duration ({})",
            humanize(max_duration)
        )),
    }
}

/// Reads the part to its end, handing over each message as it is complete.
async fn pump(
    transfer: &mut Transfer<Box<dyn RunningQuery>, Box<dyn Encoder>>,
    sender: &mpsc::Sender<Result<FlightData, Status>>,
    (deadline, max_duration, idle_write_timeout): (Instant, Duration, Duration),
    ad_hoc: bool,
) -> Ending {
    let mut splitter = MessageSplitter::default();
    loop {
        // A buffer per fill: the messages cut from it keep it until gRPC has
        // sent them.
        let mut output = Vec::with_capacity(FILL_BYTES);
        let more = match transfer.fill(&mut output).await {
            Ok(more) => more,
            Err(error) => return transfer_failed(error, ad_hoc),
        };
        splitter.push(output);
        loop {
            let message = match splitter.next_message() {
                Ok(Some(message)) => message,
                Ok(None) => break,
                Err(malformed) => {
                    return Ending::Failed {
                        outcome: "error",
                        status: Status::internal(format!(
                            "the Arrow stream could not be cut into messages: {}",
                            malformed.0
                        )),
                    }
                }
            };
            match hand_over(sender, Ok(message), deadline, idle_write_timeout).await {
                Ok(()) => {}
                Err(NotTaken::ClientGone) => return Ending::ClientGone,
                Err(NotTaken::Idle) => {
                    return Ending::Failed {
                        outcome: "timeout",
                        status: Status::deadline_exceeded(format!(
                            "the client took nothing for its idle_write_timeout ({})",
                            humanize(idle_write_timeout)
                        )),
                    }
                }
                Err(NotTaken::PastDeadline) => return too_long(max_duration),
            }
        }
        if !more {
            return Ending::Complete;
        }
    }
}

/// A part that failed while streaming: a database error (a division by zero
/// met at row 10,000) has the code HTTP gives it (22xxx data errors are
/// `INVALID_ARGUMENT`, a statement timeout `DEADLINE_EXCEEDED`…), limits are
/// `RESOURCE_EXHAUSTED`, an encoder's refusal `INTERNAL`.
fn transfer_failed(error: TransferError, ad_hoc: bool) -> Ending {
    let status = match error {
        TransferError::TooManyRows(_) | TransferError::TooManyBytes(_) => {
            Status::resource_exhausted(error.to_string())
        }
        TransferError::Source(error) => {
            crate::status::to_status(sluice_gateway::GatewayError::from_query(error, ad_hoc))
        }
        // An encoder's refusal, and whatever the engine may yet report.
        other => Status::internal(other.to_string()),
    };
    Ending::Failed {
        outcome: "error",
        status,
    }
}

fn humanize(duration: Duration) -> String {
    humantime::format_duration(duration).to_string()
}

/// The status a call is logged and counted with: its gRPC code (0 `OK`,
/// 1 `CANCELLED`, 3 `INVALID_ARGUMENT`, …), beside HTTP's status codes under
/// the Flight routes.
pub fn logged(code: Code) -> u16 {
    code as u16
}

/// Flight's codes for a call that ended before it answered.
pub const FLIGHT: Front = Front {
    client_gone: Code::Cancelled as u16,
    shutdown: Code::Unavailable as u16,
};
