//! The Flight service: `GetFlightInfo` and `GetSchema` plan a named query,
//! `DoGet` reads one part (again, as often as asked, while the plan lives),
//! `DoAction` ends a plan early (`CancelFlightInfo`, `release`); Flight SQL's
//! ad-hoc statements and prepared statements ([`crate::prepared`]: created
//! and closed by `DoAction`, bound by `DoPut`) run as `POST /sql`; the rest of
//! Flight's calls are refused as unimplemented. Each call takes the configuration current when it arrives
//! (a SIGHUP reload applies to the next call), the same bearer tokens as HTTP
//! (`authorization: Bearer …` in the call's metadata) and the same
//! permissions: a token that may run a named query may plan it and read its
//! parts.

use std::pin::Pin;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::{
    Action, ActionType, CancelFlightInfoRequest, CancelFlightInfoResult, CancelStatus, Criteria,
    Empty, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest, HandshakeResponse, PollInfo,
    PutResult, SchemaResult, Ticket as WireTicket,
};
use futures_util::Stream;
use prost::Message as _;
use sluice_core::database::{Access, Param};
use sluice_gateway::config::{FlightConfig, Limits, QueryConfig, SqlConfig};
use sluice_gateway::{AppState, Credential, GatewayError, Live, RequestContext};

use crate::status::to_status;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::descriptor::{plan_request, read_descriptor, Any, Asked, PlanRequest};
use crate::part::{logged, PartStream, FLIGHT};
use crate::plan::{Planner, Runs};
use crate::plans::Plans;
use crate::prepared::{
    bound_values, BindResult, CloseRequest, CreateRequest, CreateResult, Prepared,
};
use crate::ticket::{Refused, Ticket, TicketKey};

/// The actions `DoAction` takes, as `ListActions` describes them.
const ACTIONS: [(&str, &str); 4] = [
    (
        "CancelFlightInfo",
        "Ends a plan early (body: a CancelFlightInfoRequest with the plan's FlightInfo): its \
         snapshot is released and its tickets no longer read",
    ),
    (
        "release",
        "Ends the plan of a ticket early (body: any ticket of the plan): its snapshot is released",
    ),
    (
        "CreatePreparedStatement",
        "Flight SQL: prepares ad-hoc SQL (ActionCreatePreparedStatementRequest); bind one row \
         of parameters with DoPut, run it with GetFlightInfo",
    ),
    (
        "ClosePreparedStatement",
        "Flight SQL: closes a prepared statement (nothing is held on the server)",
    ),
];

/// A part's query, started, and the limits it streams under.
type Started = (Box<dyn sluice_core::database::RunningQuery>, Limits);

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Arrow Flight over the gateway's state.
pub struct Service {
    live: Live,
    flight: FlightConfig,
    plans: Plans,
    key: TicketKey,
}

impl Service {
    /// The service for `live`'s configuration, whose `[flight]` is `flight`
    /// (bound at start: a reload does not change it).
    pub fn new(live: Live, flight: FlightConfig, plans: Plans) -> Service {
        let key = match &flight.ticket_secret {
            Some(secret) => TicketKey::shared(secret),
            None => TicketKey::random(),
        };
        Service {
            live,
            flight,
            plans,
            key,
        }
    }

    /// The named query a request may run, with its parameters bound; the
    /// context records the token.
    fn admit<'a>(
        state: &'a AppState,
        metadata: &tonic::metadata::MetadataMap,
        name: &str,
        pairs: &[(String, String)],
        context: &mut RequestContext,
    ) -> Result<(&'a QueryConfig, Vec<Param>), GatewayError> {
        let query = state.admit_query(credential(metadata), name, context)?;
        let params = query.signature.bind_pairs(
            pairs
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
            |_| false,
        )?;
        Ok((query, params))
    }

    async fn flight_info(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        descriptor: FlightDescriptor,
    ) -> Result<FlightInfo, Status> {
        let request = match read_descriptor(&descriptor).map_err(Status::invalid_argument)? {
            Asked::Query(request) => request,
            Asked::Statement(statement) => {
                return self
                    .statement_info(metadata, descriptor, &statement, Vec::new())
                    .await
            }
            Asked::Prepared(handle) => {
                let prepared = Prepared::open(&self.key, &handle).map_err(unknown_handle)?;
                return self
                    .statement_info(metadata, descriptor, &prepared.statement, prepared.values)
                    .await;
            }
        };
        let state = self.live.state();
        let mut context = self.context(&state, "flight_info", &request.query);
        let planned = async {
            let (query, params) = Service::admit(
                &state,
                metadata,
                &request.query,
                &request.params,
                &mut context,
            )?;
            self.planner(&state)
                .plan(
                    descriptor,
                    &request,
                    query,
                    params,
                    context.token.as_deref(),
                )
                .await
        }
        .await;
        let endpoints = planned
            .as_ref()
            .map_or(0, |info| info.endpoint.len() as u64);
        finish(&context, planned.map_err(to_status), endpoints)
    }

    /// The plan of ad-hoc SQL with its bound `values`: allowed as `POST /sql`
    /// is (`[sql]`, a token with scope `sql`).
    async fn statement_info(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        descriptor: FlightDescriptor,
        statement: &str,
        values: Vec<serde_json::Value>,
    ) -> Result<FlightInfo, Status> {
        let state = self.live.state();
        let mut context = self.sql_context(&state);
        let planned = async {
            let sql = Service::admit_statement(&state, metadata, &mut context)?;
            self.planner(&state)
                .plan_statement(descriptor, statement, values, sql)
                .await
        }
        .await;
        finish(&context, planned.map_err(to_status), 1)
    }

    /// `[sql]`, if this request may run ad-hoc SQL.
    fn admit_statement<'a>(
        state: &'a AppState,
        metadata: &tonic::metadata::MetadataMap,
        context: &mut RequestContext,
    ) -> Result<&'a SqlConfig, GatewayError> {
        state
            .admit_sql(credential(metadata), context)?
            .ok_or_else(|| {
                GatewayError::NotFound("ad-hoc SQL is not enabled on this server ([sql])".into())
            })
    }

    async fn schema(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        descriptor: FlightDescriptor,
    ) -> Result<SchemaResult, Status> {
        let request: PlanRequest = plan_request(&descriptor).map_err(Status::invalid_argument)?;
        let state = self.live.state();
        let mut context = self.context(&state, "flight_schema", &request.query);
        let schema = async {
            let (query, params) = Service::admit(
                &state,
                metadata,
                &request.query,
                &request.params,
                &mut context,
            )?;
            self.planner(&state)
                .named_schema(query, params, &request.columns)
                .await
        }
        .await;
        finish(
            &context,
            schema
                .map(|schema| SchemaResult { schema })
                .map_err(to_status),
            0,
        )
    }

    /// `DoAction`: `CancelFlightInfo` (Flight's own: the plan's `FlightInfo`)
    /// or `release` (a ticket of the plan) ends a plan early and releases its
    /// snapshot. Only the token that made the plan may; a plan no longer
    /// held is no error (the action is idempotent).
    async fn action(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        action: &Action,
    ) -> Result<arrow_flight::Result, Status> {
        let tickets = match action.r#type.as_str() {
            "CreatePreparedStatement" => return self.create_prepared(metadata, &action.body),
            "ClosePreparedStatement" => return self.close_prepared(metadata, &action.body),
            "CancelFlightInfo" => {
                let request =
                    CancelFlightInfoRequest::decode(action.body.clone()).map_err(|error| {
                        Status::invalid_argument(format!(
                            "CancelFlightInfo's body is no CancelFlightInfoRequest: {error}"
                        ))
                    })?;
                let info = request.info.unwrap_or_default();
                info.endpoint
                    .into_iter()
                    .filter_map(|endpoint| endpoint.ticket.map(|ticket| ticket.ticket))
                    .collect()
            }
            "release" => vec![action.body.clone()],
            // UNIMPLEMENTED, not INVALID_ARGUMENT: clients try actions they
            // can do without (ADBC's Flight SQL driver asks for
            // CreatePreparedStatement, then runs the statement unprepared).
            other => {
                return Err(Status::unimplemented(format!(
                    "unknown action {other:?}: this server knows CancelFlightInfo, release, \
                     CreatePreparedStatement and ClosePreparedStatement (ListActions)"
                )))
            }
        };
        let state = self.live.state();
        let mut released = false;
        for wire in tickets {
            released |= self.release(&state, metadata, &wire)?;
        }
        let body = match action.r#type.as_str() {
            "CancelFlightInfo" => {
                let status = if released {
                    CancelStatus::Cancelled
                } else {
                    CancelStatus::NotCancellable
                };
                CancelFlightInfoResult::new(status).encode_to_vec().into()
            }
            _ => bytes::Bytes::from_static(if released { b"released" } else { b"not held" }),
        };
        Ok(arrow_flight::Result { body })
    }

    /// `CreatePreparedStatement`: a handle of the statement, for a token that
    /// may run ad-hoc SQL. The statement is checked when it is run, as
    /// `POST /sql`'s are.
    fn create_prepared(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        body: &[u8],
    ) -> Result<arrow_flight::Result, Status> {
        self.admitted_sql_call(metadata, || {
            let request: CreateRequest = unpack(body, "ActionCreatePreparedStatementRequest")?;
            if request.transaction_id.is_some() {
                return Err(Status::invalid_argument(
                    "transactions are not served: each statement runs in its own read-only one",
                ));
            }
            let prepared = Prepared {
                statement: request.query,
                values: Vec::new(),
            };
            let result = CreateResult {
                prepared_statement_handle: prepared.handle(&self.key),
                dataset_schema: bytes::Bytes::new(),
                parameter_schema: bytes::Bytes::new(),
            };
            let any = Any::pack("ActionCreatePreparedStatementResult", &result);
            Ok(arrow_flight::Result {
                body: any.encode_to_vec().into(),
            })
        })
    }

    /// `ClosePreparedStatement`: nothing is held, but the handle must be one
    /// this server made.
    fn close_prepared(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        body: &[u8],
    ) -> Result<arrow_flight::Result, Status> {
        self.admitted_sql_call(metadata, || {
            let request: CloseRequest = unpack(body, "ActionClosePreparedStatementRequest")?;
            Prepared::open(&self.key, &request.prepared_statement_handle)
                .map_err(unknown_handle)?;
            Ok(arrow_flight::Result {
                body: bytes::Bytes::new(),
            })
        })
    }

    /// A Flight SQL call that reaches no database: `answer` runs once the
    /// token is admitted as ad-hoc SQL, and the call is logged.
    fn admitted_sql_call<T>(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        answer: impl FnOnce() -> Result<T, Status>,
    ) -> Result<T, Status> {
        let state = self.live.state();
        let mut context = self.sql_context(&state);
        let answered = Service::admit_statement(&state, metadata, &mut context)
            .map_err(to_status)
            .and_then(|_| answer());
        finish(&context, answered, 0)
    }

    /// `DoPut` of a prepared statement's parameters: one row of them, answered
    /// with the handle that carries their values.
    async fn bind(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        mut stream: Streaming<FlightData>,
    ) -> Result<PutResult, Status> {
        let state = self.live.state();
        let mut context = self.sql_context(&state);
        let bound = async {
            Service::admit_statement(&state, metadata, &mut context).map_err(to_status)?;
            let first = stream
                .message()
                .await?
                .ok_or_else(|| Status::invalid_argument("DoPut sent no message"))?;
            let descriptor = first.flight_descriptor.clone().unwrap_or_default();
            let handle = match read_descriptor(&descriptor) {
                Ok(Asked::Prepared(handle)) => handle,
                _ => {
                    return Err(Status::unimplemented(
                        "DoPut binds the parameters of a Flight SQL prepared statement \
                         (CommandPreparedStatementQuery); load tables through POST /tables",
                    ))
                }
            };
            let mut prepared = Prepared::open(&self.key, &handle).map_err(unknown_handle)?;
            let batches = parameter_batches(first, stream).await?;
            prepared.values = bound_values(&batches).map_err(Status::invalid_argument)?;
            let result = BindResult {
                prepared_statement_handle: Some(prepared.handle(&self.key)),
            };
            Ok(PutResult {
                app_metadata: result.encode_to_vec().into(),
            })
        }
        .await;
        finish(&context, bound, 0)
    }

    /// The log entry of a Flight SQL call.
    fn sql_context(&self, state: &AppState) -> RequestContext {
        RequestContext::new(FLIGHT, "flight_sql", "", true, state.shutdown_token())
    }

    /// Releases the plan of one ticket for the asking token: true when it
    /// was held.
    fn release(
        &self,
        state: &AppState,
        metadata: &tonic::metadata::MetadataMap,
        wire: &[u8],
    ) -> Result<bool, Status> {
        let ticket = self.key.open(wire).map_err(refused)?;
        let mut context = self.context(state, "flight_release", &ticket.query);
        let admitted = match &ticket.statement {
            Some(_) => Service::admit_statement(state, metadata, &mut context).map(drop),
            None => state
                .admit_query(credential(metadata), &ticket.query, &mut context)
                .map(drop),
        };
        let released = admitted.map_err(to_status).and_then(|()| {
            self.plans
                .release(ticket.plan, context.token.as_deref(), &state.tracker())
                .map_err(|_| Status::permission_denied("the plan was made by another token"))
        });
        finish(&context, released, 0)
    }

    async fn part(
        &self,
        metadata: &tonic::metadata::MetadataMap,
        wire: &[u8],
    ) -> Result<crate::part::Messages, Status> {
        let ticket = self.key.open(wire).map_err(refused)?;
        let state = self.live.state();
        let mut context = match ticket.statement {
            Some(_) => self.sql_context(&state),
            None => self.context(&state, "flight", &ticket.query),
        };
        // Counted as being read from before its start, so that the plan is
        // not released for going unread while the part joins its snapshot.
        let mut reading = ticket
            .part
            .as_ref()
            .map(|_| self.plans.reading(ticket.plan));
        let started = match &ticket.statement {
            Some(statement) => {
                let values = &ticket.statement_params;
                self.start_statement(&state, metadata, statement, values, &mut context)
                    .await
            }
            None => {
                self.start_part(&state, metadata, &ticket, &mut context)
                    .await
            }
        };
        let (source, limits) = match started {
            Ok(started) => started,
            Err(status) => return finish(&context, Err(status), 0),
        };
        if let Some(reading) = &mut reading {
            reading.read(ticket.index);
        }
        let part = PartStream {
            source,
            encoder: crate::part::encoder(&self.flight),
            limits: limits.transfer(),
            timing: state.config().timing(&limits),
            context,
            shutdown: state.shutdown_token(),
            tracker: state.tracker(),
            reading,
        };
        Ok(part.start(&state.tracker()))
    }

    /// Starts a statement's ticket, as `POST /sql` runs it.
    async fn start_statement(
        &self,
        state: &AppState,
        metadata: &tonic::metadata::MetadataMap,
        statement: &str,
        values: &[serde_json::Value],
        context: &mut RequestContext,
    ) -> Result<Started, Status> {
        let sql = Service::admit_statement(state, metadata, context).map_err(to_status)?;
        let source = Runs::statement(statement, values, sql)
            .start(state)
            .await
            .map_err(to_status)?;
        Ok((source, sql.limits.clone()))
    }

    /// Starts the ticket's part: in the plan's snapshot when it has one.
    async fn start_part(
        &self,
        state: &AppState,
        metadata: &tonic::metadata::MetadataMap,
        ticket: &Ticket,
        context: &mut RequestContext,
    ) -> Result<Started, Status> {
        let (query, params) =
            Service::admit(state, metadata, &ticket.query, &ticket.params, context)
                .map_err(to_status)?;
        let whole_projected;
        let runs = match &ticket.part {
            None if ticket.columns.is_empty() => Runs::named(query, params),
            None => {
                let dialect = state
                    .database(&query.database)
                    .map_err(to_status)?
                    .kind()
                    .dialect();
                whole_projected = dialect.projection(&query.sql, &ticket.columns);
                Runs {
                    sql: &whole_projected,
                    ..Runs::named(query, params)
                }
            }
            // The part's own statement and values, spelled for the database
            // when the plan was made, in the plan's snapshot.
            Some(part) => Runs {
                sql: &part.sql,
                params: part
                    .params
                    .iter()
                    .map(|value| value.clone().map_or(Param::Null, Param::Text))
                    .collect(),
                access: Access::InSnapshot {
                    snapshot: &part.snapshot,
                },
                ..Runs::named(query, Vec::new())
            },
        };
        match runs.start(state).await {
            Ok(source) => Ok((source, query.limits.clone())),
            Err(error) => Err(start_failed(error, ticket.part.is_some())),
        }
    }

    fn planner<'a>(&'a self, state: &'a AppState) -> Planner<'a> {
        Planner {
            state,
            flight: &self.flight,
            plans: &self.plans,
            key: &self.key,
        }
    }

    fn context(&self, state: &AppState, route: &'static str, query: &str) -> RequestContext {
        RequestContext::new(FLIGHT, route, query, false, state.shutdown_token())
    }
}

/// The bearer token a call presents in its `authorization` metadata.
fn credential(metadata: &tonic::metadata::MetadataMap) -> Credential<'_> {
    Credential::from_authorization(
        metadata
            .get("authorization")
            .and_then(|value| value.to_str().ok()),
    )
}

/// Logs a call that ended without a stream, and passes its result on.
fn finish<T>(context: &RequestContext, result: Result<T, Status>, rows: u64) -> Result<T, Status> {
    match &result {
        Ok(_) => context.finish(logged(tonic::Code::Ok), "complete", rows, 0, 0, None),
        Err(status) => context.finish(
            logged(status.code()),
            "rejected",
            0,
            0,
            0,
            Some(status.message()),
        ),
    }
    result
}

/// A part that did not start. A part whose snapshot is gone is the client's
/// to fix by planning again; it is told so rather than given the database's
/// words.
fn start_failed(error: GatewayError, in_snapshot: bool) -> Status {
    if let (GatewayError::Database { error, .. }, true) = (&error, in_snapshot) {
        let cause = error.as_db_error().map(|db| db.cause);
        if cause == Some(sluice_core::DbCause::SnapshotGone) {
            return Status::failed_precondition(
                "the plan's snapshot is no longer held (the plan was released, timed out, went \
                 unread for [flight] unread_plan_timeout, or gave its place to a newer plan after \
                 every part had been read): ask for a new plan with GetFlightInfo",
            );
        }
    }
    to_status(error)
}

/// A ticket this server will not redeem.
fn refused(refused: Refused) -> Status {
    match refused {
        Refused::Unknown => Status::not_found(
            "unknown ticket: it was not made by this server (or a replica sharing its \
             ticket_secret), or it was altered",
        ),
        Refused::Expired { ago } => Status::failed_precondition(format!(
            "the ticket expired {} ago: ask for a new plan with GetFlightInfo",
            humantime::format_duration(ago)
        )),
    }
}

/// A Flight SQL message `name` in its `Any`, from an action's body.
fn unpack<M: prost::Message + Default>(body: &[u8], name: &str) -> Result<M, Status> {
    let any = Any::decode(body)
        .ok()
        .filter(|any| any.name() == name)
        .ok_or_else(|| Status::invalid_argument(format!("the action's body is no {name}")))?;
    M::decode(any.value)
        .map_err(|error| Status::invalid_argument(format!("a malformed {name}: {error}")))
}

/// A prepared statement's handle this server will not read.
fn unknown_handle(_: Refused) -> Status {
    Status::not_found(
        "unknown prepared statement: its handle was not made by this server (or a replica \
         sharing its ticket_secret), or it was altered",
    )
}

/// The record batches of a `DoPut` whose first message was `first`.
async fn parameter_batches(
    first: FlightData,
    rest: Streaming<FlightData>,
) -> Result<Vec<arrow_array::RecordBatch>, Status> {
    use futures_util::{StreamExt, TryStreamExt};
    let messages = futures_util::stream::once(async { Ok(first) })
        .chain(rest)
        .map_err(|status| arrow_flight::error::FlightError::Tonic(Box::new(status)));
    arrow_flight::decode::FlightRecordBatchStream::new_from_flight_data(messages)
        .try_collect()
        .await
        .map_err(|error| {
            Status::invalid_argument(format!("the parameters could not be read: {error}"))
        })
}

#[tonic::async_trait]
impl FlightService for Service {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = ReceiverStream<Result<FlightData, Status>>;
    type DoPutStream = BoxStream<PutResult>;
    type DoExchangeStream = BoxStream<FlightData>;
    type DoActionStream = BoxStream<arrow_flight::Result>;
    type ListActionsStream = BoxStream<ActionType>;

    async fn get_flight_info(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let (metadata, _, descriptor) = request.into_parts();
        self.flight_info(&metadata, descriptor)
            .await
            .map(Response::new)
    }

    async fn get_schema(
        &self,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        let (metadata, _, descriptor) = request.into_parts();
        self.schema(&metadata, descriptor).await.map(Response::new)
    }

    async fn do_get(
        &self,
        request: Request<WireTicket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        let (metadata, _, ticket) = request.into_parts();
        let messages = self.part(&metadata, &ticket.ticket).await?;
        Ok(Response::new(ReceiverStream::new(messages)))
    }

    async fn handshake(
        &self,
        _request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented(
            "no handshake: send `authorization: Bearer <token>` with each call",
        ))
    }

    async fn list_flights(
        &self,
        _request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented(
            "the named queries are listed in the HTTP gateway's /openapi.json",
        ))
    }

    async fn poll_flight_info(
        &self,
        _request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented(
            "plans are made at once: use GetFlightInfo",
        ))
    }

    async fn do_put(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        let (metadata, _, stream) = request.into_parts();
        let result = self.bind(&metadata, stream).await?;
        Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(
            result,
        )]))))
    }

    async fn do_exchange(
        &self,
        _request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        Err(Status::unimplemented(
            "sluice's Flight service has no exchanges",
        ))
    }

    async fn do_action(
        &self,
        request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        let (metadata, _, action) = request.into_parts();
        let result = self.action(&metadata, &action).await?;
        Ok(Response::new(Box::pin(futures_util::stream::iter([Ok(
            result,
        )]))))
    }

    async fn list_actions(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        let actions = ACTIONS.map(|(kind, description)| {
            Ok(ActionType {
                r#type: kind.into(),
                description: description.into(),
            })
        });
        Ok(Response::new(Box::pin(futures_util::stream::iter(actions))))
    }
}
