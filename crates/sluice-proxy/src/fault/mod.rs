//! Faults, on purpose: how an application behaves when the network
//! misbehaves, in the spirit of Toxiproxy but aware of the protocol (a
//! connection can be cut just before its K-th `DataRow`, `CopyData` or
//! statement, not only after N bytes).
//!
//! - [`spec`]: the [`Fault`]s and their one spelling (`cut:at-data-row=5`),
//!   for `--fault` and the control API alike;
//! - [`registry`]: the [`FaultList`] in force, changed at run time;
//! - `framing`: where messages start, per direction, for the counting triggers;
//! - `live`: one connection's faults, consulted by its threads on every chunk
//!   (the `connection` module is where they act).
//!
//! `refuse` is answered by the acceptor in the protocol's words (see
//! `refusal`), and the control API (`control`) edits the list over HTTP.

mod framing;
pub(crate) mod live;
pub mod registry;
pub mod spec;

pub use registry::{FaultList, Listed};
pub use spec::{Action, Direction, Fault, Scope, SpecError, Trigger};
