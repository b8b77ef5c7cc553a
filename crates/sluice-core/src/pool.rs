//! [`SessionPool`]: the gateway's pool of database sessions, the same for
//! every database crate: a `deadpool` pool whose slots hold a connection and
//! the settings it was last given.
//!
//! A session that runs a query is taken out of its slot for the query's
//! duration and put back only when the result was read to the end; a query
//! that ends any other way (client gone, error, shutdown) leaves the slot
//! empty, so the pool discards it and connects afresh next time rather than
//! reusing a session in an unknown state. Before reuse, an idle session is
//! checked without a round trip ([`Connector::check_idle`]), which catches
//! sessions a database restart has ended. A slot remembers the settings its
//! connection has, so a request sends a `SET` only when it needs others.

use std::future::Future;
use std::time::Duration;

use deadpool::managed::{self, Object, PoolError, RecycleError, TimeoutType};

use crate::connect::PoolOptions;
use crate::database::{StartError, Usage};
use crate::{Error, ErrorKind};

/// What a database crate gives the pool: how to open a session and how to
/// tell, without a round trip, that an idle one is still alive.
pub trait Connector: Send + Sync + 'static {
    /// A logged-in session.
    type Connection: Send + 'static;
    /// The session settings a request may need (a statement timeout,
    /// read-only), remembered per slot.
    type Settings: Copy + Send + Sync + 'static;

    /// Opens a session.
    fn connect(&self) -> impl Future<Output = Result<Self::Connection, Error>> + Send;

    /// An error if the idle `connection` is unusable (the server closed it).
    fn check_idle(connection: &mut Self::Connection) -> Result<(), Error>;
}

/// One pool slot: its session (`None` while a query owns it, and for good if
/// the query did not end cleanly) and the settings that session has (`None`
/// when unknown: a new session, or a `SET` that failed).
pub struct Slot<K: Connector> {
    /// The session.
    pub connection: Option<K::Connection>,
    /// Its settings.
    pub settings: Option<K::Settings>,
}

/// A slot taken out of the pool; dropped, it goes back (or, empty, is discarded).
pub type Taken<K> = Object<Manager<K>>;

/// The pool's manager (creating and checking slots).
pub struct Manager<K: Connector> {
    connector: K,
}

impl<K: Connector> managed::Manager for Manager<K> {
    type Type = Slot<K>;
    type Error = Error;

    async fn create(&self) -> Result<Slot<K>, Error> {
        Ok(Slot {
            // Boxed: a connect future (TLS handshake, login) is kilobytes,
            // and unboxed it would be part of every checkout's future, which
            // the gateway moves onto the heap for each request, though a
            // pooled session is usually there already.
            connection: Some(Box::pin(self.connector.connect()).await?),
            settings: None,
        })
    }

    async fn recycle(
        &self,
        slot: &mut Slot<K>,
        _: &managed::Metrics,
    ) -> managed::RecycleResult<Error> {
        match slot.connection.as_mut() {
            None => Err(RecycleError::message(
                "the session's last query did not end cleanly",
            )),
            Some(connection) => K::check_idle(connection).map_err(RecycleError::Backend),
        }
    }
}

/// The gateway's pool of one database's sessions.
pub struct SessionPool<K: Connector> {
    pool: managed::Pool<Manager<K>>,
}

impl<K: Connector> SessionPool<K> {
    /// An empty pool of `options.size` sessions; sessions are made on first
    /// use (within `connect_timeout`), so a database that is down at start
    /// only makes requests fail until it is back.
    pub fn new(connector: K, options: PoolOptions, connect_timeout: Duration) -> SessionPool<K> {
        let pool = managed::Pool::builder(Manager { connector })
            .max_size(options.size)
            .wait_timeout(Some(options.wait))
            .create_timeout(Some(connect_timeout))
            .recycle_timeout(Some(Duration::from_secs(1)))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .expect("a runtime and a size are set");
        SessionPool { pool }
    }

    /// Takes a session out of the pool, waiting up to the pool's wait: its
    /// slot (to give it back to) and the session.
    pub async fn checkout(&self) -> Result<(Taken<K>, K::Connection), StartError> {
        let mut slot = self.pool.get().await.map_err(|error| match error {
            PoolError::Timeout(TimeoutType::Wait) => StartError::Busy,
            PoolError::Timeout(_) => StartError::Unavailable(Error::new(
                ErrorKind::Connect,
                "timed out connecting to the database",
            )),
            PoolError::Backend(error) => StartError::classify(error),
            other => StartError::Unavailable(Error::new(ErrorKind::Connect, other.to_string())),
        })?;
        let Some(connection) = slot.connection.take() else {
            return Err(StartError::Unavailable(Error::new(
                ErrorKind::Closed,
                "the pool handed out an empty session",
            )));
        };
        Ok((slot, connection))
    }

    /// The pool's state now.
    pub fn usage(&self) -> Usage {
        let status = self.pool.status();
        Usage {
            in_use: status.size.saturating_sub(status.available),
            size: status.max_size,
            waiting: status.waiting,
        }
    }
}
