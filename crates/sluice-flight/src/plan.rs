//! `GetFlightInfo`: a named query turned into a plan — its Arrow schema and one
//! endpoint per part, each with a signed ticket.
//!
//! A query configured to split (`split_by`, or a `table` query on a database
//! that splits reads) with more than one part asked for is planned by a
//! coordinating session of its own ([`sluice_core::split`]): it exports a
//! snapshot and cuts the read into parts that together return exactly the
//! rows one read would have returned at that moment. Any other query is one
//! part, the query itself.

use std::time::{Duration, SystemTime};

use arrow_flight::{FlightDescriptor, FlightEndpoint, FlightInfo, IpcMessage};
use arrow_schema::Schema;
use bytes::Bytes;
use sluice_core::connect::Session;
use sluice_core::database::{Access, Param, RunningQuery};
use sluice_core::split::{SplitRead, SplitRequest, SplitSource};
use sluice_core::{Meter, Transfer, TransferError};
use sluice_formats::{untyped_param, Format};
use sluice_gateway::config::{FlightConfig, QueryConfig, QuerySplit, SqlConfig, MAX_PARTITIONS};
use sluice_gateway::{AppState, GatewayError, Reading};

use crate::descriptor::PlanRequest;
use crate::ipc::encapsulated_schema;
use crate::plans::{Claim, Plans};
use crate::ticket::{plan_number, unix_seconds, Part, Ticket, TicketKey};

/// What a statement runs on and how: a named query's, or ad-hoc SQL's.
pub struct Runs<'a> {
    /// The configured database.
    pub database: &'a str,
    /// The statement.
    pub sql: &'a str,
    /// Its parameters.
    pub params: Vec<Param>,
    /// Its statement timeout.
    pub statement_timeout: Option<Duration>,
    /// How it runs.
    pub access: Access<'a>,
    /// `lob = "inline"`.
    pub inline_large_objects: bool,
}

impl<'a> Runs<'a> {
    /// A named query with its bound parameters, read-only.
    pub fn named(query: &'a QueryConfig, params: Vec<Param>) -> Runs<'a> {
        Runs {
            database: &query.database,
            sql: &query.sql,
            params,
            statement_timeout: query.limits.statement_timeout,
            access: Access::Named { read_only: true },
            inline_large_objects: query.inline_large_objects,
        }
    }

    /// Ad-hoc SQL, fenced as `POST /sql` fences it, its parameters bound as
    /// `POST /sql` binds JSON values (each as what JSON says it is).
    pub fn statement(
        statement: &'a str,
        params: &[serde_json::Value],
        sql: &'a SqlConfig,
    ) -> Runs<'a> {
        Runs {
            database: &sql.database,
            sql: statement,
            params: params.iter().cloned().map(untyped_param).collect(),
            statement_timeout: sql.limits.statement_timeout,
            access: Access::AdHoc {
                role: sql.role.as_deref(),
            },
            inline_large_objects: false,
        }
    }

    /// Starts the statement, its values read for Arrow; a database error is
    /// worded as the HTTP gateway words it for the same statement.
    pub async fn start(self, state: &AppState) -> Result<Box<dyn RunningQuery>, GatewayError> {
        let ad_hoc = matches!(self.access, Access::AdHoc { .. });
        let reading = Reading {
            format: Format::Arrow,
            inline_large_objects: self.inline_large_objects,
        };
        state
            .database(self.database)?
            .start(
                self.sql,
                self.params,
                self.statement_timeout,
                self.access,
                reading,
            )
            .await
            .map_err(|error| GatewayError::from_start(error, ad_hoc))
    }
}

/// What planning needs besides the request.
pub struct Planner<'a> {
    /// The state the request came in on.
    pub state: &'a AppState,
    /// `[flight]`.
    pub flight: &'a FlightConfig,
    /// Where held snapshots go.
    pub plans: &'a Plans,
    /// Signs the tickets.
    pub key: &'a TicketKey,
}

impl Planner<'_> {
    /// The plan of `request` for `query`, whose parameters are `params`,
    /// asked for by the token named `owner`.
    pub async fn plan(
        &self,
        descriptor: FlightDescriptor,
        request: &PlanRequest,
        query: &QueryConfig,
        params: Vec<Param>,
        owner: Option<&str>,
    ) -> Result<FlightInfo, GatewayError> {
        let schema = self
            .named_schema(query, params.clone(), &request.columns)
            .await?;
        let dialect = self.state.database(&query.database)?.kind().dialect();
        let parts = request
            .partitions
            .unwrap_or(self.flight.partitions)
            .min(MAX_PARTITIONS);
        let plan = plan_number();
        let expires = unix_seconds(SystemTime::now() + self.flight.plan_timeout);
        let ticket = |index: usize, part: Option<Part>| Ticket {
            query: query.name.clone(),
            params: request.params.clone(),
            // A split part's own statement reads only the columns already.
            columns: if part.is_some() {
                Vec::new()
            } else {
                request.columns.clone()
            },
            part,
            statement: None,
            statement_params: Vec::new(),
            plan,
            index,
            expires,
        };
        let tickets: Vec<Ticket> = match (&query.split, parts > 1) {
            (Some(split), true) => {
                let config = self.state.config();
                let planners = config.planners(&query.database);
                let claim = Claim {
                    owner,
                    database: &query.database,
                    per_token: self.flight.max_plans_per_token,
                    per_database: config.databases[&query.database].pool_size,
                    planners: &planners,
                };
                let place = self
                    .plans
                    .reserve(plan, &claim, SPLIT_TIMEOUT, &self.state.tracker())
                    .map_err(|refused| GatewayError::TooManyRequests {
                        message: refused.to_string(),
                        retry_after: refused.retry_seconds(),
                    })?;
                let (coordinator, read) = self.split(query, split, &params, parts).await?;
                let read = read.narrowed(&request.columns, dialect);
                let count = read.parts.len();
                place.hold(
                    coordinator,
                    count,
                    self.flight.plan_timeout,
                    self.unread_limit(),
                );
                read.parts
                    .into_iter()
                    .enumerate()
                    .map(|(index, part)| {
                        let part = Part {
                            sql: part.sql,
                            params: part.params,
                            snapshot: read.snapshot.clone(),
                        };
                        ticket(index, Some(part))
                    })
                    .collect()
            }
            _ => vec![ticket(0, None)],
        };
        Ok(self.info(descriptor, schema, &tickets))
    }

    /// How long a plan with parts never read may go unread: reads are seen
    /// only where they happen, so not when `locations` sends the parts to
    /// other replicas (there the plan lives until its timeout or release).
    fn unread_limit(&self) -> Option<Duration> {
        self.flight
            .locations
            .is_empty()
            .then_some(self.flight.unread_plan_timeout)
    }

    /// The plan as Flight describes it: the schema and an endpoint per ticket.
    fn info(&self, descriptor: FlightDescriptor, schema: Bytes, tickets: &[Ticket]) -> FlightInfo {
        FlightInfo {
            schema,
            flight_descriptor: Some(descriptor),
            endpoint: tickets.iter().map(|ticket| self.endpoint(ticket)).collect(),
            total_records: -1,
            total_bytes: -1,
            ordered: false,
            app_metadata: Bytes::new(),
        }
    }

    /// The endpoint of one ticket: on the replica its position names, in turn.
    fn endpoint(&self, ticket: &Ticket) -> FlightEndpoint {
        let endpoint =
            FlightEndpoint::new().with_ticket(arrow_flight::Ticket::new(self.key.sign(ticket)));
        match self.flight.locations.as_slice() {
            [] => endpoint,
            locations => endpoint.with_location(&locations[ticket.index % locations.len()]),
        }
    }

    /// The plan of ad-hoc SQL (Flight SQL's `CommandStatementQuery`, or a
    /// prepared statement with its bound `params`, where `[sql]` allows): one
    /// endpoint, the statement itself, run as `POST /sql` runs it.
    pub async fn plan_statement(
        &self,
        descriptor: FlightDescriptor,
        statement: &str,
        params: Vec<serde_json::Value>,
        sql: &SqlConfig,
    ) -> Result<FlightInfo, GatewayError> {
        let schema = self
            .schema(Runs::statement(statement, &params, sql))
            .await?;
        let ticket = Ticket {
            query: String::new(),
            params: Vec::new(),
            part: None,
            columns: Vec::new(),
            statement: Some(statement.to_owned()),
            statement_params: params,
            plan: plan_number(),
            index: 0,
            expires: unix_seconds(SystemTime::now() + self.flight.plan_timeout),
        };
        Ok(self.info(descriptor, schema, &[ticket]))
    }

    /// The Arrow schema of a named query read for `columns` of its result
    /// (all when empty). Each column asked for must be one of the query's: a
    /// name it lacks is the client's error, naming the ones it has.
    pub async fn named_schema(
        &self,
        query: &QueryConfig,
        params: Vec<Param>,
        columns: &[String],
    ) -> Result<Bytes, GatewayError> {
        let whole = self.schema(Runs::named(query, params.clone())).await?;
        if columns.is_empty() {
            return Ok(whole);
        }
        let names: Vec<String> = Schema::try_from(IpcMessage(whole))
            .map_err(|error| GatewayError::Internal(format!("reading the schema: {error}")))?
            .fields()
            .iter()
            .map(|field| field.name().clone())
            .collect();
        if let Some(missing) = columns.iter().find(|column| !names.contains(column)) {
            return Err(GatewayError::parameter(
                "columns",
                format!(
                    "query {:?} has no column {missing:?}; its columns are {}",
                    query.name,
                    names.join(", ")
                ),
            ));
        }
        let dialect = self.state.database(&query.database)?.kind().dialect();
        let sql = dialect.projection(&query.sql, columns);
        self.schema(Runs {
            sql: &sql,
            ..Runs::named(query, params)
        })
        .await
    }

    /// The Arrow schema `DoGet` will send: the statement run for no rows and
    /// encoded by the same encoder.
    pub async fn schema(&self, runs: Runs<'_>) -> Result<Bytes, GatewayError> {
        // The user's text starts right after the wrapper's first line, so the
        // database's error positions count from it once moved back; it ends a
        // line of its own, so a last line that is a `--` comment is closed.
        let sql = format!(
            "{SCHEMA_WRAPPER}{}\n) as sluice_schema limit 0",
            runs.sql.trim_end().trim_end_matches(';')
        );
        let ad_hoc = matches!(runs.access, Access::AdHoc { .. });
        let source = Runs { sql: &sql, ..runs }
            .start(self.state)
            .await
            .map_err(unwrapped)?;
        let mut transfer = Transfer::new(source, crate::part::encoder(self.flight));
        let mut stream = Vec::new();
        // The statement runs here for the first time: its errors (a write in
        // a read-only session, a bad column) are the database's, told as
        // they would be while streaming.
        while transfer
            .fill(&mut stream)
            .await
            .map_err(|error| match error {
                TransferError::Source(error) => GatewayError::from_query(
                    error.unwrapped_position(SCHEMA_WRAPPER.len() as u32),
                    ad_hoc,
                ),
                other => GatewayError::Internal(format!("reading the schema: {other}")),
            })?
        {}
        transfer.into_source().complete();
        encapsulated_schema(&stream)
            .map_err(|error| GatewayError::Internal(format!("encoding the schema: {}", error.0)))
    }

    /// Opens the coordinating session and splits the read on it.
    async fn split(
        &self,
        query: &QueryConfig,
        split: &QuerySplit,
        params: &[Param],
        parts: usize,
    ) -> Result<(Box<dyn Session>, SplitRead), GatewayError> {
        let config = &self.state.config().databases[&query.database];
        let mut coordinator = config
            .target
            .connect(&Meter::new())
            .await
            .map_err(|error| GatewayError::from_query(error, false))?;
        let spell = coordinator.param_spelling();
        let (source, split_by) = match split {
            QuerySplit::Storage { table } => (SplitSource::Table(table.clone()), None),
            QuerySplit::Column(column) => (
                SplitSource::Query {
                    sql: query.sql.clone(),
                    params: params.iter().map(spell).collect(),
                },
                Some(column.clone()),
            ),
        };
        let request = SplitRequest {
            source,
            parts,
            split_by,
        };
        let planned = tokio::time::timeout(SPLIT_TIMEOUT, coordinator.split_read(&request)).await;
        match planned {
            Ok(Ok(read)) => Ok((coordinator, read)),
            Ok(Err(error)) => {
                tokio::spawn(coordinator.close());
                Err(GatewayError::from_query(error, false))
            }
            Err(_) => Err(GatewayError::Timeout(format!(
                "planning the parts took longer than {} s",
                SPLIT_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// What the schema's read puts before the user's statement.
const SCHEMA_WRAPPER: &str = "select * from (";

/// A database's error met starting the schema's read, its position counted
/// from the user's statement.
fn unwrapped(error: GatewayError) -> GatewayError {
    match error {
        GatewayError::Database { error, ad_hoc } => GatewayError::Database {
            error: error.unwrapped_position(SCHEMA_WRAPPER.len() as u32),
            ad_hoc,
        },
        other => other,
    }
}

/// The longest a split may take to plan (it reads the table's size, or the
/// least and greatest value of a column).
const SPLIT_TIMEOUT: Duration = Duration::from_secs(60);
