//! A query whose result is being read ([`RunningQuery`]), and [`Query`]: a
//! database's [`BatchSource`] with how its session ends, so that each
//! database crate writes only what is its own.

use crate::future::BoxFuture;
use crate::source::{Chunk, DynSource};
use crate::{Batch, BatchSource, Error, Schema};

/// A query whose result is being read.
pub trait RunningQuery: DynSource {
    /// Round trips to the database since the query started (0 where none are
    /// made, as for an embedded database).
    fn round_trips(&self) -> u64;

    /// The result was read to the end: the session may be reused.
    fn complete(self: Box<Self>);

    /// The result was not read to the end: the session is discarded. When the
    /// query may still run on the server, the returned future cancels it; the
    /// caller runs it where shutdown can wait for it.
    fn abandon(self: Box<Self>) -> Option<BoxFuture<'static, ()>>;
}

/// How a query of a [`Query`] ends: the part of a running query that is not
/// its rows (the session to give back, the cancel to send).
pub trait QueryEnd<S>: Send {
    /// Round trips since the query started.
    fn round_trips(&self) -> u64;

    /// See [`RunningQuery::complete`]; `source` is the result, read to its end.
    fn complete(self, source: S);

    /// See [`RunningQuery::abandon`]; `source` is the result, not read to its end.
    fn abandon(self, source: S) -> Option<BoxFuture<'static, ()>>;
}

/// A database's [`BatchSource`] with how its session ends: a [`RunningQuery`]
/// when the end is a [`QueryEnd`], an [`Export`](crate::connect::Export) when it
/// is a closing function; so each database crate writes only what is its own.
pub struct Query<S, E> {
    pub(crate) source: S,
    pub(crate) end: E,
}

impl<S, E> Query<S, E> {
    /// The query reading `source`, ended by `end`.
    pub fn new(source: S, end: E) -> Query<S, E> {
        Query { source, end }
    }
}

impl<S: BatchSource, E: Send> DynSource for Query<S, E> {
    fn schema(&self) -> &Schema {
        self.source.schema()
    }

    fn next_batch(&mut self) -> BoxFuture<'_, Result<Option<&Batch>, Error>> {
        Box::pin(self.source.next_batch())
    }

    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Chunk<'_>>, Error>> {
        Box::pin(self.source.next_chunk())
    }
}

impl<S: BatchSource, E: QueryEnd<S>> RunningQuery for Query<S, E> {
    fn round_trips(&self) -> u64 {
        self.end.round_trips()
    }

    fn complete(self: Box<Self>) {
        self.end.complete(self.source);
    }

    fn abandon(self: Box<Self>) -> Option<BoxFuture<'static, ()>> {
        self.end.abandon(self.source)
    }
}
