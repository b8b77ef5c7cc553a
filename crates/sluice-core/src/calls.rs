//! The vocabulary of running one statement for many parameter sets (`sluice
//! call`, `POST /batch`): how calls group into transactions, where parameter
//! sets come from, what each call did, and the counts at the end. Running them
//! (pipelined, where the database allows) belongs to each database crate
//! ([`crate::connect::Session::prepare_calls`]).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use crate::future::BoxFuture;
use crate::{Batch, DbError, Error};

/// How the calls are grouped into transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transaction {
    /// All or nothing (default).
    #[default]
    Single,
    /// Each parameter set on its own.
    Each,
}

/// One parameter set, with the input line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSet {
    /// 1-based input line.
    pub line: u64,
    /// Text values for `$1`, `$2`, …; `None` is NULL. `Err` holds why the line
    /// could not be read as a parameter set: it fails that call (and, in single
    /// mode, the transaction) in its place in the order.
    pub values: Result<Vec<Option<String>>, String>,
}

/// Where parameter sets come from.
pub trait ParamSource: Send {
    /// The next set, or `None` at the end of the input.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>>;
}

/// What one call did.
#[derive(Debug)]
pub enum CallOutcome<'a> {
    /// It ran; `rows` holds what it returned (over [`crate::connect::Calls::schema`]) and
    /// `affected` the count from its command tag (rows inserted, updated, …).
    Done {
        /// Returned rows.
        rows: &'a Batch,
        /// Rows affected, when the command reports it.
        affected: Option<u64>,
    },
    /// The database refused it.
    Failed(&'a DbError),
    /// Its input line was not a valid parameter set.
    Invalid(&'a str),
    /// It was not run, or was rolled back, because another call of the same
    /// transaction failed.
    RolledBack,
}

/// Counts of a finished pipeline. `succeeded + failed == calls`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineSummary {
    /// Parameter sets read.
    pub calls: u64,
    /// Calls that ran and were committed.
    pub succeeded: u64,
    /// Calls that failed or were rolled back.
    pub failed: u64,
}

type Next<'s, S> =
    Pin<Box<dyn Future<Output = (Result<Option<ParamSet>, Error>, &'s mut S)> + Send + 's>>;

/// A [`ParamSource`] whose `next()` can be polled without waiting and resumed
/// later, for pipelines that read input only while nothing is in flight or
/// when it is ready: the future under way owns the source until it
/// completes, so a line read halfway is never dropped.
pub struct Feed<'s, S: ?Sized> {
    source: Option<&'s mut S>,
    next: Option<Next<'s, S>>,
}

impl<'s, S: ParamSource + ?Sized> Feed<'s, S> {
    /// A feed of `source`'s sets.
    pub fn new(source: &'s mut S) -> Feed<'s, S> {
        Feed {
            source: Some(source),
            next: None,
        }
    }

    /// The next set: waits for it with `wait`, otherwise only takes it if
    /// ready (`None`: not yet).
    pub async fn next(&mut self, wait: bool) -> Option<Result<Option<ParamSet>, Error>> {
        if self.next.is_none() {
            let source = self
                .source
                .take()
                .expect("the source is home when no read is under way");
            self.next = Some(Box::pin(async move {
                let result = source.next().await;
                (result, source)
            }));
        }
        let future = self.next.as_mut().expect("a read under way");
        let (result, source) = if wait {
            future.await
        } else {
            match std::future::poll_fn(|context| Poll::Ready(future.as_mut().poll(context))).await {
                Poll::Ready(done) => done,
                Poll::Pending => return None,
            }
        };
        self.next = None;
        self.source = Some(source);
        Some(result)
    }
}
