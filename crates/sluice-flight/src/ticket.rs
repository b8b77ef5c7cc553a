//! Tickets: what a `DoGet` needs to read one part of a plan, signed so that
//! any replica sharing the key can trust it without asking the one that made
//! it. A ticket carries the part's SQL, so an unsigned one would let a client
//! run any statement: the signature (HMAC-SHA256) is checked before anything
//! in it is used.
//!
//! The wire form is the ticket as JSON followed by its 32-byte signature. JSON
//! keeps tickets readable in logs and stable across versions; they are small.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The length of a signature (HMAC-SHA256).
const SIGNATURE_BYTES: usize = 32;

/// One part of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ticket {
    /// The named query; its permissions and limits apply to the part.
    pub query: String,
    /// The request's parameters as it gave them, bound again when the part is
    /// read (a part that is the whole query runs with them).
    pub params: Vec<(String, String)>,
    /// The part's own statement when the plan was split; `None`: the query
    /// itself, whole.
    pub part: Option<Part>,
    /// The query's columns a whole-query part reads (a split part's statement
    /// already reads only them); empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// Ad-hoc SQL (Flight SQL), run as `POST /sql` runs it; then `query` is
    /// empty.
    #[serde(default)]
    pub statement: Option<String>,
    /// The ad-hoc SQL's parameters, bound from a prepared statement's
    /// handle: JSON values, bound as `POST /sql` binds its `params`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statement_params: Vec<serde_json::Value>,
    /// The plan this part belongs to (random, so plans never collide across
    /// replicas).
    pub plan: u64,
    /// This part's position in the plan.
    pub index: usize,
    /// Seconds since the Unix epoch after which the ticket is refused.
    pub expires: u64,
}

/// A part of a split read: its own SQL in the plan's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The part's statement.
    pub sql: String,
    /// Its parameters, spelled as the database reads them (`None` is NULL).
    pub params: Vec<Option<String>>,
    /// The exported snapshot every part of the plan reads in.
    pub snapshot: String,
}

/// Why a ticket was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not made by a replica holding this key, or altered since.
    Unknown,
    /// Made by one, but its time is over.
    Expired {
        /// How long ago it expired.
        ago: Duration,
    },
}

/// Signs and checks tickets.
pub struct TicketKey {
    key: hmac::Key,
}

impl TicketKey {
    /// A key from a shared secret, so replicas trust each other's tickets.
    pub fn shared(secret: &[u8]) -> TicketKey {
        TicketKey {
            key: hmac::Key::new(hmac::HMAC_SHA256, secret),
        }
    }

    /// A random key: only this process will accept its tickets.
    pub fn random() -> TicketKey {
        let mut secret = [0u8; 32];
        SystemRandom::new()
            .fill(&mut secret)
            .expect("the operating system's random source failed");
        TicketKey::shared(&secret)
    }

    /// The ticket's wire form.
    pub fn sign(&self, ticket: &Ticket) -> Vec<u8> {
        self.sign_json(ticket)
    }

    /// The ticket in `bytes`, if this key signed it and it has not expired.
    pub fn open(&self, bytes: &[u8]) -> Result<Ticket, Refused> {
        let ticket: Ticket = self.open_json(bytes)?;
        unexpired(ticket.expires)?;
        Ok(ticket)
    }

    /// `value` as JSON followed by its signature: the wire form of tickets and
    /// of Flight SQL's prepared-statement handles.
    pub fn sign_json<T: Serialize>(&self, value: &T) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(value).expect("signed values are always JSON");
        let signature = hmac::sign(&self.key, &bytes);
        bytes.extend_from_slice(signature.as_ref());
        bytes
    }

    /// The value in `bytes`, if this key signed it.
    pub fn open_json<T: DeserializeOwned>(&self, bytes: &[u8]) -> Result<T, Refused> {
        let split = bytes
            .len()
            .checked_sub(SIGNATURE_BYTES)
            .ok_or(Refused::Unknown)?;
        let (payload, signature) = bytes.split_at(split);
        hmac::verify(&self.key, payload, signature).map_err(|_| Refused::Unknown)?;
        serde_json::from_slice(payload).map_err(|_| Refused::Unknown)
    }
}

/// `Ok` until `expires` (seconds since the Unix epoch) has passed.
pub fn unexpired(expires: u64) -> Result<(), Refused> {
    let now = unix_seconds(SystemTime::now());
    if now > expires {
        return Err(Refused::Expired {
            ago: Duration::from_secs(now - expires),
        });
    }
    Ok(())
}

/// Seconds since the Unix epoch (0 before it).
pub fn unix_seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs())
        .unwrap_or(0)
}

/// A random plan number.
pub fn plan_number() -> u64 {
    let mut bytes = [0u8; 8];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random source failed");
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(expires: u64) -> Ticket {
        Ticket {
            columns: Vec::new(),
            query: "payments".into(),
            params: vec![("status".into(), "settled".into())],
            part: Some(Part {
                sql: "select * from t where ctid < '(10,0)'::tid".into(),
                params: vec![None, Some("5".into())],
                snapshot: "00000003-0000001B-1".into(),
            }),
            statement: None,
            statement_params: Vec::new(),
            plan: 7,
            index: 0,
            expires,
        }
    }

    #[test]
    fn a_signed_ticket_opens_with_the_same_key_only() {
        let key = TicketKey::shared(b"0123456789abcdef0123456789abcdef");
        let ticket = sample(unix_seconds(SystemTime::now()) + 60);
        let bytes = key.sign(&ticket);
        assert_eq!(key.open(&bytes), Ok(ticket.clone()));
        let same = TicketKey::shared(b"0123456789abcdef0123456789abcdef");
        assert_eq!(same.open(&bytes), Ok(ticket));
        assert_eq!(TicketKey::random().open(&bytes), Err(Refused::Unknown));
    }

    #[test]
    fn altered_short_and_expired_tickets_are_refused() {
        let key = TicketKey::random();
        let mut bytes = key.sign(&sample(unix_seconds(SystemTime::now()) + 60));
        // Any changed byte of the SQL breaks the signature.
        let position = bytes.windows(4).position(|w| w == b"ctid").unwrap();
        bytes[position] = b'C';
        assert_eq!(key.open(&bytes), Err(Refused::Unknown));
        assert_eq!(key.open(b"short"), Err(Refused::Unknown));
        assert_eq!(key.open(b""), Err(Refused::Unknown));
        let old = key.sign(&sample(unix_seconds(SystemTime::now()) - 5));
        assert!(matches!(key.open(&old), Err(Refused::Expired { ago }) if ago.as_secs() >= 5));
    }
}
