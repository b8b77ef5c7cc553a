//! Serving the app on a listener: the loopback rule, graceful shutdown and its deadline.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpListener;

use crate::app::{app, AppState};

/// The address to bind: `requested`, except that without tokens only loopback is
/// allowed (an open gateway to a database must not be reachable from the network).
/// The second value is the warning to print when the address was changed.
pub fn effective_listen(requested: SocketAddr, auth_enabled: bool) -> (SocketAddr, Option<String>) {
    if auth_enabled || requested.ip().is_loopback() {
        return (requested, None);
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

/// Serves `state` on `listener` until `shutdown` resolves; then stops accepting,
/// lets in-flight streams finish for up to `grace`, aborts those still running
/// (their queries are cancelled), and waits briefly for the cancel requests.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (signalled, mut signal) = tokio::sync::watch::channel(false);
    let server = axum::serve(listener, app(state.clone())).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!(
            grace_seconds = grace.as_secs_f64(),
            "shutting down: no new connections, in-flight streams may finish"
        );
        let _ = signalled.send(true);
    });
    let mut server = std::pin::pin!(std::future::IntoFuture::into_future(server));
    let deadline = async move {
        if signal.wait_for(|signalled| *signalled).await.is_ok() {
            tokio::time::sleep(grace).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        result = &mut server => result?,
        () = deadline => {
            tracing::warn!("shutdown grace period over: aborting the streams still running");
            state.shutdown_token().cancel();
            // Aborted streams end their connections promptly; do not hang on one
            // whose client stopped reading.
            let _ = tokio::time::timeout(Duration::from_secs(2), &mut server).await;
        }
    }
    let tracker = state.tracker();
    tracker.close();
    let _ = tokio::time::timeout(Duration::from_secs(3), tracker.wait()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_tokens_only_loopback_is_served() {
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        let (address, warning) = effective_listen(any, false);
        assert_eq!(address, "127.0.0.1:9000".parse().unwrap());
        assert!(warning.unwrap().contains("localhost only"));
        assert_eq!(effective_listen(any, true), (any, None));
        let local: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(effective_listen(local, false), (local, None));
    }
}
