//! `[flight]`: Arrow Flight beside HTTP (served by the `sluice-flight` crate):
//! where it listens, how plans are cut into parts and how long they last, the
//! replicas the parts are spread over, and the secret that signs tickets.

use std::net::SocketAddr;
use std::time::Duration;

use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};

/// The default `[flight] partitions`.
pub const DEFAULT_PARTITIONS: usize = 4;

/// The most parts a plan may have: far beyond any useful parallelism, low
/// enough that a request cannot open thousands of sessions.
pub const MAX_PARTITIONS: usize = 256;

/// The default `[flight] plan_timeout`.
pub const DEFAULT_PLAN_TIMEOUT: Duration = Duration::from_secs(600);

/// The default `[flight] unread_plan_timeout`: a job's tasks start reading
/// within seconds of its plan, and a cold executor or a short stage ahead of
/// them within a minute; a plan left unread longer holds its place (and a
/// snapshot VACUUM waits on) for no one.
pub const DEFAULT_UNREAD_PLAN_TIMEOUT: Duration = Duration::from_secs(60);

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
    /// How long a plan with parts never read may go with none of its parts
    /// being read before its snapshot is released.
    pub unread_plan_timeout: Duration,
    /// How many split plans (each holding a snapshot) one token may hold at
    /// once; without tokens, all clients together.
    pub max_plans_per_token: usize,
    /// The replicas whose addresses endpoints name, in turn (empty: the
    /// client's own connection, as Flight's empty location list means).
    pub locations: Vec<String>,
    /// Signs tickets so every replica can trust them; `None`: a random key
    /// per process (only this process redeems its tickets).
    pub ticket_secret: Option<Vec<u8>>,
    /// The scale of `Decimal128(38, scale)` for decimals whose type declares
    /// none (`sum`, `avg`); `None`: their exact text.
    pub numeric_scale: Option<i8>,
}

impl std::fmt::Debug for FlightConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightConfig")
            .field("listen", &self.listen)
            .field("partitions", &self.partitions)
            .field("plan_timeout", &self.plan_timeout)
            .field("unread_plan_timeout", &self.unread_plan_timeout)
            .field("max_plans_per_token", &self.max_plans_per_token)
            .field("locations", &self.locations)
            .field("ticket_secret", &self.ticket_secret.as_ref().map(|_| "…"))
            .field("numeric_scale", &self.numeric_scale)
            .finish()
    }
}

/// `[flight]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "flight",
    heading: "[flight]",
    about: "Arrow Flight beside HTTP. See [More than one machine](flight.md). A database's plans \
            share its `pool_size` places: a token holding some of them takes another only while a \
            place stays free for each other token that may plan there and holds none, so no token \
            (nor any set of fewer tokens than may plan there) takes them all ([Who may hold how \
            many](flight.md#arrow-flight)).",
    keys: &[
        Key {
            name: "listen",
            ty: Type::Address,
            default: KeyDefault::Required,
            meaning: "The Flight address (gRPC).",
            example: Some("\"127.0.0.1:8815\""),
            old_names: &[],
        },
        Key {
            name: "partitions",
            ty: Type::Count(MAX_PARTITIONS),
            default: KeyDefault::Count(DEFAULT_PARTITIONS),
            meaning: "Parts per plan unless the request asks.",
            example: Some("4"),
            old_names: &[],
        },
        Key {
            name: "plan_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_PLAN_TIMEOUT),
            meaning: "A plan's snapshot and tickets last this long at most.",
            example: Some("\"10m\""),
            old_names: &[],
        },
        Key {
            name: "unread_plan_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_UNREAD_PLAN_TIMEOUT),
            meaning: "A plan with parts not yet read is released after this long with none of its parts being read (counted from the plan, or its last read's end), so an unread plan holds its place and snapshot briefly; not with `locations` (reads on other replicas are not seen). As long as `plan_timeout`: never.",
            example: Some("\"1m\""),
            old_names: &[],
        },
        Key {
            name: "max_plans_per_token",
            ty: Type::Count(MAX_PARTITIONS),
            default: KeyDefault::Count(DEFAULT_MAX_PLANS_PER_TOKEN),
            meaning: "Split plans one token may hold open at once (parts not all started).",
            example: Some("8"),
            old_names: &[],
        },
        Key {
            name: "locations",
            ty: Type::TextList,
            default: KeyDefault::Absent("none: the client's own connection"),
            meaning: "Replicas the parts are spread over (`grpc://…`; `grpc+tls://` with `[server] tls_cert`).",
            example: Some("[\"grpc://10.0.0.1:8815\", \"grpc://10.0.0.2:8815\"]"),
            old_names: &[],
        },
        Key {
            name: "ticket_secret",
            ty: Type::EnvText,
            default: KeyDefault::Absent("a random key per process"),
            meaning: "Signs tickets; at least 32 bytes; replicas share it (needed with `locations`).",
            example: Some("\"${SLUICE_FLIGHT_SECRET}\""),
            old_names: &[],
        },
        Key {
            name: "numeric_scale",
            ty: Type::Scale,
            default: KeyDefault::Absent("exact text (`Utf8`, field metadata `sluice.text: numeric`)"),
            meaning: "Decimals without a declared scale (`sum`, `avg`, literals) as `Decimal128(38, numeric_scale)`; a value that would need rounding fails its stream, naming row and column.",
            example: Some("2"),
            old_names: &[],
        },
    ],
};

/// Reads `[flight]`.
pub(super) fn flight_section(entries: &Entries<'_>) -> Result<FlightConfig, ConfigError> {
    let listen = entries
        .address("listen")?
        .ok_or_else(|| entries.table_error("listen is required"))?;
    let count = |name| -> Result<usize, ConfigError> {
        Ok(entries.count(name)?.unwrap_or_default() as usize)
    };
    let locations = locations(entries)?;
    Ok(FlightConfig {
        listen,
        partitions: count("partitions")?,
        plan_timeout: entries.duration("plan_timeout")?.unwrap_or_default(),
        unread_plan_timeout: entries.duration("unread_plan_timeout")?.unwrap_or_default(),
        max_plans_per_token: count("max_plans_per_token")?,
        ticket_secret: ticket_secret(entries, !locations.is_empty())?,
        numeric_scale: entries.scale("numeric_scale")?,
        locations,
    })
}

/// `locations`: gRPC URLs.
fn locations(entries: &Entries<'_>) -> Result<Vec<String>, ConfigError> {
    let mut locations = Vec::new();
    for (index, location) in entries.list("locations")?.into_iter().enumerate() {
        let text = location.value.trim();
        let schemes = ["grpc://", "grpc+tcp://", "grpc+tls://"];
        if !schemes.iter().any(|scheme| text.starts_with(scheme)) {
            return Err(entries.error(
                &format!("locations[{index}]"),
                location.span,
                format!("{text:?} is not a location such as \"grpc://10.0.0.1:8815\""),
            ));
        }
        locations.push(text.to_owned());
    }
    Ok(locations)
}

/// `ticket_secret`: needed when `replicas` must trust each other's tickets.
fn ticket_secret(entries: &Entries<'_>, replicas: bool) -> Result<Option<Vec<u8>>, ConfigError> {
    match entries.text("ticket_secret")? {
        Some(secret) if secret.value.len() < MIN_SECRET_BYTES => Err(entries.error(
            "ticket_secret",
            secret.span,
            format!("must be at least {MIN_SECRET_BYTES} bytes (e.g. `openssl rand -hex 32`)"),
        )),
        Some(secret) => Ok(Some(secret.value.into_bytes())),
        None if replicas => Err(entries.error(
            "ticket_secret",
            entries.span(),
            "locations spread the parts over several replicas, which must share a ticket_secret to trust each other's tickets",
        )),
        None => Ok(None),
    }
}
