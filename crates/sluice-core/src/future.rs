//! [`BoxFuture`]: the boxed, sendable future the object-safe traits return
//! (a database's, a session's, a source's), in a module of its own because
//! every one of them names it.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future, as the object-safe traits return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
