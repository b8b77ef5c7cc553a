//! `[flight]`: Arrow Flight beside HTTP (served by the `sluice-flight` crate).
//!
//! ```toml
//! [flight]
//! listen = "127.0.0.1:8815"        # serve Arrow Flight (gRPC) here too
//! partitions = 4                   # parts per plan unless the request asks (default 4)
//! plan_timeout = "10m"             # a plan's snapshot and tickets last this long at most (default 10m)
//! max_plans_per_token = 8          # split plans one token may hold at once, parts not all started (default 8)
//! locations = ["grpc://10.0.0.1:8815", "grpc://10.0.0.2:8815"]  # replicas the parts are spread over (default: the client's own); grpc+tls:// with [server] tls_cert
//! ticket_secret = "${SLUICE_FLIGHT_SECRET}"  # signs tickets; replicas share it (needed with locations)
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::ConfigText;
use crate::ConfigError;

/// The default `[flight] partitions`.
pub const DEFAULT_PARTITIONS: usize = 4;

/// The most parts a plan may have: far beyond any useful parallelism, low
/// enough that a request cannot open thousands of sessions.
pub const MAX_PARTITIONS: usize = 256;

/// The default `[flight] plan_timeout`.
pub const DEFAULT_PLAN_TIMEOUT: Duration = Duration::from_secs(600);

/// The default `[flight] max_plans_per_token`: a client planning one job at a
/// time needs one; eight leave room for a few concurrent jobs, and eight tokens
/// (not one) are needed to fill the server's 64 held plans.
pub const DEFAULT_MAX_PLANS_PER_TOKEN: usize = 8;

/// The shortest `ticket_secret`, in bytes: tickets carry SQL, so their
/// signature must not be guessable.
pub const MIN_SECRET_BYTES: usize = 32;

/// `[flight]`, checked.
#[derive(Clone, PartialEq, Eq)]
pub struct FlightConfig {
    /// Where Flight's gRPC listens.
    pub listen: SocketAddr,
    /// Parts per plan unless the request asks for another number.
    pub partitions: usize,
    /// How long a plan's snapshot is held, and its tickets redeemable, at most.
    pub plan_timeout: Duration,
    /// How many split plans (each holding a snapshot) one token may hold at
    /// once; without tokens, all clients together.
    pub max_plans_per_token: usize,
    /// The replicas whose addresses endpoints name, in turn (empty: the
    /// client's own connection, as Flight's empty location list means).
    pub locations: Vec<String>,
    /// Signs tickets so every replica can trust them; `None`: a random key
    /// per process (only this process redeems its tickets).
    pub ticket_secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for FlightConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightConfig")
            .field("listen", &self.listen)
            .field("partitions", &self.partitions)
            .field("plan_timeout", &self.plan_timeout)
            .field("max_plans_per_token", &self.max_plans_per_token)
            .field("locations", &self.locations)
            .field("ticket_secret", &self.ticket_secret.as_ref().map(|_| "…"))
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFlight {
    listen: Spanned<String>,
    partitions: Option<Spanned<i64>>,
    plan_timeout: Option<Spanned<String>>,
    max_plans_per_token: Option<Spanned<i64>>,
    #[serde(default)]
    locations: Vec<Spanned<String>>,
    ticket_secret: Option<Spanned<String>>,
}

pub(super) fn flight_section(
    source: &ConfigText<'_>,
    raw: &Spanned<RawFlight>,
) -> Result<FlightConfig, ConfigError> {
    let flight = raw.get_ref();
    let listen = flight.listen.get_ref().parse::<SocketAddr>().map_err(|_| {
        source.error(
            flight.listen.span(),
            "flight.listen",
            format!(
                "{:?} is not an address such as \"127.0.0.1:8815\"",
                flight.listen.get_ref()
            ),
        )
    })?;
    let partitions = source
        .count(&flight.partitions, "flight.partitions", MAX_PARTITIONS)?
        .unwrap_or(DEFAULT_PARTITIONS);
    let plan_timeout = source.timeout(
        &flight.plan_timeout,
        "flight.plan_timeout",
        DEFAULT_PLAN_TIMEOUT,
    )?;
    let max_plans_per_token = source
        .count(
            &flight.max_plans_per_token,
            "flight.max_plans_per_token",
            MAX_PARTITIONS,
        )?
        .unwrap_or(DEFAULT_MAX_PLANS_PER_TOKEN);
    let mut locations = Vec::new();
    for (index, location) in flight.locations.iter().enumerate() {
        let text = location.get_ref().trim();
        let schemes = ["grpc://", "grpc+tcp://", "grpc+tls://"];
        if !schemes.iter().any(|scheme| text.starts_with(scheme)) {
            return Err(source.error(
                location.span(),
                &format!("flight.locations[{index}]"),
                format!("{text:?} is not a location such as \"grpc://10.0.0.1:8815\""),
            ));
        }
        locations.push(text.to_owned());
    }
    let ticket_secret = match &flight.ticket_secret {
        Some(secret) => {
            let text = source.substitute(secret, "flight.ticket_secret")?;
            if text.len() < MIN_SECRET_BYTES {
                return Err(source.error(
                    secret.span(),
                    "flight.ticket_secret",
                    format!("must be at least {MIN_SECRET_BYTES} bytes (e.g. `openssl rand -hex 32`)"),
                ));
            }
            Some(text.into_bytes())
        }
        None if !locations.is_empty() => {
            return Err(source.error(
                raw.span(),
                "flight.ticket_secret",
                "locations spread the parts over several replicas, which must share a ticket_secret to trust each other's tickets",
            ))
        }
        None => None,
    };
    Ok(FlightConfig {
        listen,
        partitions,
        plan_timeout,
        max_plans_per_token,
        locations,
        ticket_secret,
    })
}
