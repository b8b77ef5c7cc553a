//! # sluice-flight
//!
//! Arrow Flight beside `sluice serve`'s HTTP gateway (`[flight] listen`), so
//! that distributed engines (Spark, DuckDB, Beam, ADBC) pull one named query in
//! parallel parts that together are **one consistent read**.
//!
//! - [`descriptor`]: what a `FlightDescriptor` asks for (a named query, its
//!   parameters, the number of parts);
//! - [`plan`](mod@plan): `GetFlightInfo` — the schema, and one endpoint per
//!   part, split in one exported snapshot where the query is configured to
//!   split; [`plans`]: the snapshots held while a plan lives (its parts read as often as asked);
//! - [`ticket`]: signed tickets any replica sharing the key can redeem;
//!   [`prepared`]: Flight SQL's prepared statements, as signed handles;
//! - [`part`]: `DoGet` — one part streamed by the gateway's Arrow engine;
//!   [`ipc`]: the Arrow IPC stream cut into Flight messages;
//! - [`service`]: the gRPC service over the gateway's state, tokens and
//!   permissions; [`serve`]: the listener and its shutdown; [`listener`]:
//!   its connections, over the gateway's TLS when it serves HTTPS.
#![warn(missing_docs)]

pub mod descriptor;
pub mod ipc;
pub mod listener;
pub mod part;
pub mod plan;
pub mod plans;
pub mod prepared;
pub mod service;
pub mod status;
pub mod ticket;

use std::future::Future;
use std::time::Duration;

use arrow_flight::flight_service_server::FlightServiceServer;
use sluice_gateway::config::FlightConfig;
use sluice_gateway::{cap_for, ConnectionSlots, Live, ServerTls, Timeouts};
use tokio::net::TcpListener;

pub use plans::Plans;
pub use service::Service;

/// The largest message a client may send (descriptors and tickets are small;
/// this bounds what an unauthenticated caller can make the server buffer).
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// How often an HTTP/2 ping checks a connection's peer, and how long its
/// answer may take before the connection is closed.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// Serves Flight for `live` on `listener` (over `tls` when given: the HTTP
/// gateway's certificate) until `shutdown` resolves; then stops
/// accepting calls and releases every held snapshot. Parts in flight end by the
/// gateway's own shutdown deadline (its state's shutdown token). Connections
/// are timed and capped as HTTP's are ([`listener`]).
pub async fn serve(
    live: Live,
    flight: FlightConfig,
    listener: TcpListener,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let plans = Plans::default();
    let tracker = live.state().tracker();
    let accepting = {
        let state = live.state();
        let config = state.config();
        listener::Accepting {
            tls,
            timeouts: Timeouts::of(config),
            slots: ConnectionSlots::new(cap_for(config), "flight"),
        }
    };
    let expiry = tokio::spawn(expire_plans(plans.clone(), tracker.clone()));
    let service = FlightServiceServer::new(Service::new(live, flight, plans.clone()))
        .max_decoding_message_size(MAX_REQUEST_BYTES);
    let served = tonic::transport::Server::builder()
        // A client gone without a word (a dead peer, a dropped NAT entry) is
        // found by pings even while its call is quiet.
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .layer(listener::TrackCalls)
        .add_service(service)
        .serve_with_incoming_shutdown(listener::incoming(listener, accepting), shutdown)
        .await;
    expiry.abort();
    plans.release_all(&tracker);
    served
}

/// Releases the plans whose time is over, every second, and tells the
/// metrics how many are held.
async fn expire_plans(plans: Plans, tracker: tokio_util::task::TaskTracker) {
    let mut interval = tokio::time::interval(Duration::from_secs(1));
    loop {
        interval.tick().await;
        plans.expire(&tracker);
        let (held, oldest) = plans.live();
        sluice_gateway::metrics::flight_plans(held, oldest);
    }
}
