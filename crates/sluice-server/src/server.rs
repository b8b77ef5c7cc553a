//! Serving the app on a listener: the accept loop, graceful shutdown and its
//! deadline (the listener itself, and the loopback rule, are the gateway's:
//! [`sluice_gateway::bind`], [`sluice_gateway::effective_listen`]). Each connection is served by [`crate::connection`],
//! over TLS when the server has a certificate ([`ServerTls`]).

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use sluice_gateway::{cap_for, AcceptBackoff, ConnectionSlots, ServerTls, Timeouts};

use crate::connection::serve_connection;
use crate::reload::LiveApp;

/// Serves `app` (an [`sluice_gateway::AppState`], or a [`LiveApp`] whose configuration
/// may be replaced meanwhile) on `listener` (HTTPS with `tls`) until `shutdown` resolves;
/// then stops accepting,
/// closes idle connections, lets in-flight streams finish for up to `grace`,
/// aborts those still running (their queries are cancelled), and waits briefly
/// for the cancel requests. Connections are timed by the configuration's
/// `header_read_timeout` and `keep_alive_timeout` ([`Timeouts`](sluice_gateway::Timeouts)).
pub async fn serve(
    app: impl Into<LiveApp>,
    listener: TcpListener,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let live = app.into();
    // The shutdown signal and the cancel tasks are shared by every state a
    // reload makes, so the first one's serve for all.
    let state = live.state();
    let mut connections = accept_until(&live, listener, tls, shutdown).await;
    tracing::info!(
        grace_seconds = grace.as_secs_f64(),
        "shutting down: no new connections, in-flight streams may finish"
    );
    if tokio::time::timeout(grace, all_ended(&mut connections))
        .await
        .is_err()
    {
        tracing::warn!("shutdown grace period over: aborting the streams still running");
        state.shutdown_token().cancel();
        // Aborted streams end their connections promptly; do not hang on one
        // whose client stopped reading.
        let _ = tokio::time::timeout(Duration::from_secs(2), all_ended(&mut connections)).await;
        // What is left is dropped; its requests are logged as `shutdown`.
        connections.shutdown().await;
    }
    let tracker = state.tracker();
    tracker.close();
    let _ = tokio::time::timeout(Duration::from_secs(3), tracker.wait()).await;
    Ok(())
}

/// Accepts connections, each served in a task of the returned set, until
/// `shutdown` resolves; then closes the listener and tells every connection to
/// finish the request it is answering and close.
async fn accept_until(
    live: &LiveApp,
    listener: TcpListener,
    tls: Option<ServerTls>,
    shutdown: impl Future<Output = ()>,
) -> JoinSet<()> {
    // Bound at start: a reload does not change them (see crate::reload).
    let (timeouts, slots) = {
        let state = live.state();
        let timeouts = Timeouts::of(state.config());
        (
            timeouts,
            ConnectionSlots::new(cap_for(state.config()), "http"),
        )
    };
    let mut backoff = AcceptBackoff::new("http");
    let draining = CancellationToken::new();
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    backoff.accepted();
                    // A full listener closes the connection at once: the
                    // client learns now, and its descriptor is free again.
                    let Some(slot) = slots.take() else { continue };
                    // Without it the last small write of a response waits for
                    // the client's delayed ACK (Nagle): ~40 ms a response.
                    let _ = stream.set_nodelay(true);
                    let served = serve_connection(
                        stream,
                        tls.clone(),
                        live.clone(),
                        timeouts,
                        draining.clone(),
                    );
                    connections.spawn(async move {
                        served.await;
                        drop(slot);
                    });
                }
                Err(error) => backoff.failed(error).await,
            },
            // Reap finished connections so the set holds only live ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    draining.cancel();
    connections
}

/// Waits for every connection task to end.
async fn all_ended(connections: &mut JoinSet<()>) {
    while connections.join_next().await.is_some() {}
}
