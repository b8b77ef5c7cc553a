//! Serving the app on a listener: the loopback rule, the accept loop, graceful
//! shutdown and its deadline. Each connection is served by [`crate::connection`],
//! over TLS when the server has a certificate ([`crate::tls`]).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::accepting::{cap_for, AcceptBackoff, ConnectionSlots};
use crate::connection::{serve_connection, Timeouts};
use crate::reload::LiveApp;
use crate::tls::ServerTls;

/// The address to bind: `requested`, except that without tokens only loopback is
/// allowed (an open gateway to a database must not be reachable from the network).
/// The second value is the warning to print: the address was changed, or tokens
/// will cross the network in clear text (`https` false).
pub fn effective_listen(
    requested: SocketAddr,
    auth_enabled: bool,
    https: bool,
) -> (SocketAddr, Option<String>) {
    if requested.ip().is_loopback() || (auth_enabled && https) {
        return (requested, None);
    }
    if auth_enabled {
        // Served as asked (TLS is often terminated by a proxy in front), but
        // said loudly: the tokens cross the network readable.
        return (
            requested,
            Some(format!(
                "WARNING: serving {requested} over plain HTTP: bearer tokens travel in clear text; \
                 give [server] tls_cert and tls_key, or terminate TLS in front of sluice serve \
                 (a reverse proxy or load balancer)"
            )),
        );
    }
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), requested.port());
    (
        local,
        Some(format!(
            "no [[tokens]] configured: listening on {local} (localhost only) instead of {requested}; \
             configure tokens to serve other hosts"
        )),
    )
}

/// Connections the kernel queues for `accept` before it refuses more: a burst
/// of clients (a load balancer's pool opening at once) must not be dropped
/// (tokio's `bind` listens with 128).
pub const LISTEN_BACKLOG: u32 = 1024;

/// A listener on `address` with `LISTEN_BACKLOG`.
pub fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = match address {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // As std's and tokio's own bind do: a restarted server can take its port
    // back while old connections linger in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `app` (an [`crate::AppState`], or a [`LiveApp`] whose configuration
/// may be replaced meanwhile) on `listener` (HTTPS with `tls`) until `shutdown` resolves;
/// then stops accepting,
/// closes idle connections, lets in-flight streams finish for up to `grace`,
/// aborts those still running (their queries are cancelled), and waits briefly
/// for the cancel requests. Connections are timed by the configuration's
/// `header_read_timeout` and `keep_alive_timeout` ([`Timeouts`](crate::Timeouts)).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tokens_only_loopback_is_served() {
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        for https in [false, true] {
            let (address, warning) = effective_listen(any, false, https);
            assert_eq!(address, "127.0.0.1:9000".parse().unwrap());
            assert!(warning.unwrap().contains("localhost only"));
        }
        let (address, warning) = effective_listen(any, true, false);
        assert_eq!(address, any);
        assert!(warning
            .unwrap()
            .contains("bearer tokens travel in clear text"));
        // Over HTTPS the tokens are safe: no warning.
        assert_eq!(effective_listen(any, true, true), (any, None));
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(effective_listen(local, false, false), (local, None));
    }
}
