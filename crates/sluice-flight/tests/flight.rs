//! Arrow Flight against a real PostgreSQL, through arrow-rs's own Flight
//! client: a plan's parts together equal one read in its snapshot while
//! writes run, never overlap, may be read again until the plan is released
//! and redeemed on another replica; tickets that
//! are unknown or expired are clear errors; a client that leaves mid-part
//! cancels that part's query; tokens and permissions are HTTP's.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;
use arrow_flight::{FlightClient, FlightDescriptor, FlightEndpoint, FlightInfo};
use futures_util::TryStreamExt;
use sluice_gateway::{AppState, Config, Live, ServerTls, TlsFiles};
use sluice_testkit::TestDb;
use tokio_util::sync::CancellationToken;
use tonic::Code;

const SECRET: &str = "a-shared-ticket-secret-of-32-bytes-or-more";

/// A Flight server in this process, stopped on drop.
struct Server {
    address: SocketAddr,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn quoted(text: &str) -> String {
    format!("{:?}", text)
}

/// The configuration: the test database, `rest`, and `[flight]` with `flight`.
fn config(db_url: &str, rest: &str, flight: &str) -> Config {
    let text = format!(
        "[databases.main]\nurl = {}\npool_size = 8\n{rest}\n[flight]\nlisten = \"127.0.0.1:0\"\n{flight}\n",
        quoted(db_url)
    );
    Config::parse(&text, "test.toml").unwrap_or_else(|error| panic!("{error}\n{text}"))
}

async fn start(config: Config) -> Server {
    start_with(config, None).await
}

async fn start_with(config: Config, tls: Option<ServerTls>) -> Server {
    let flight = config.flight.clone().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let live = Live::new(AppState::new(config));
    tokio::spawn(sluice_flight::serve(
        live,
        flight,
        listener,
        tls,
        stop.clone().cancelled_owned(),
    ));
    Server { address, stop }
}

async fn client(address: SocketAddr, token: Option<&str>) -> FlightClient {
    let channel = tonic::transport::Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = FlightClient::new(channel);
    if let Some(token) = token {
        client
            .add_header("authorization", &format!("Bearer {token}"))
            .unwrap();
    }
    client
}

fn command(json: &str) -> FlightDescriptor {
    FlightDescriptor::new_cmd(json.to_owned())
}

/// Every batch of one endpoint.
async fn read(client: &mut FlightClient, endpoint: &FlightEndpoint) -> Vec<RecordBatch> {
    let ticket = endpoint.ticket.clone().unwrap();
    client
        .do_get(ticket)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// The `(id, v)` pairs of every endpoint, each read by its own client at the
/// same time.
async fn read_all(address: SocketAddr, info: &FlightInfo) -> Vec<Vec<(i64, i64)>> {
    let reads = info.endpoint.iter().cloned().map(|endpoint| {
        tokio::spawn(async move {
            let mut client = client(address, None).await;
            pairs(&read(&mut client, &endpoint).await)
        })
    });
    let mut parts = Vec::new();
    for read in reads {
        parts.push(read.await.unwrap());
    }
    parts
}

fn pairs(batches: &[RecordBatch]) -> Vec<(i64, i64)> {
    let mut pairs = Vec::new();
    for batch in batches {
        let ids = batch.column(0).as_primitive::<Int64Type>();
        let values = batch.column(1).as_primitive::<Int64Type>();
        pairs.extend(
            ids.values()
                .iter()
                .copied()
                .zip(values.values().iter().copied()),
        );
    }
    pairs
}

/// The table's `(id, v)` pairs now, in id order.
fn table_now(db: &TestDb) -> Vec<(i64, i64)> {
    db.query_text("select id, v from items order by id")
        .lines()
        .map(|line| {
            let (id, v) = line.split_once('|').unwrap();
            (id.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

/// Checks that `parts` do not overlap and together are `expected`.
fn assert_union(parts: Vec<Vec<(i64, i64)>>, expected: &[(i64, i64)]) {
    let total: usize = parts.iter().map(Vec::len).sum();
    let mut union: Vec<(i64, i64)> = parts.into_iter().flatten().collect();
    union.sort();
    let ids: BTreeSet<i64> = union.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), total, "parts overlap");
    assert_eq!(union.len(), expected.len());
    assert!(union == expected, "the parts differ from the snapshot");
}

fn items(db: &TestDb, rows: u32) {
    db.execute(&format!(
        "create table items (id int8 primary key, v int8 not null, pad text);
         insert into items select g, g * 10, repeat('x', 100) from generate_series(1, {rows}) g;
         analyze items;"
    ));
}

const TABLE_QUERY: &str = "[queries.items]\ntable = \"items\"\n";

#[tokio::test]
async fn the_parts_of_a_table_plan_are_one_read_in_its_snapshot_while_writes_run() {
    let db = TestDb::new();
    items(&db, 40_000);
    let server = start(config(db.url(), TABLE_QUERY, "partitions = 4")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(command(r#"{"query": "items"}"#))
        .await
        .unwrap();
    assert_eq!(info.endpoint.len(), 4);
    let schema = info.clone().try_decode_schema().unwrap();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "v", "pad"]);
    let snapshot = table_now(&db);
    // Writes committed after the plan: none may show in any part.
    db.execute(
        "update items set v = -v where id % 7 = 0;
         delete from items where id % 11 = 0;
         insert into items select g, 1, 'new' from generate_series(40001, 45000) g;",
    );
    // And writes running while the parts are read.
    let writer = {
        let url = db.url().to_owned();
        let db_schema = db.schema().to_owned();
        std::thread::spawn(move || writes_for(&url, &db_schema, Duration::from_secs(2)))
    };
    let parts = read_all(server.address, &info).await;
    writer.join().unwrap();
    assert!(parts.iter().all(|part| !part.is_empty()), "an empty part");
    assert_union(parts, &snapshot);
}

/// Updates the table in many small transactions for `duration`.
fn writes_for(url: &str, schema: &str, duration: Duration) {
    let started = Instant::now();
    let mut round = 0;
    while started.elapsed() < duration {
        round += 1;
        let sql = format!(
            "set search_path = {schema}; update items set v = v + 1 where id % 13 = {};",
            round % 13
        );
        let status = std::process::Command::new(sluice_testkit::psql_path())
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-c", &sql])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[tokio::test]
async fn a_query_split_by_a_column_keeps_its_parameters() {
    let db = TestDb::new();
    items(&db, 10_000);
    let queries = "[queries.above]\nsql = \"select id, v from items where v >= $1\"\n\
                   params = [{ name = \"min\", type = \"bigint\", required = true }]\n\
                   split_by = \"id\"\n";
    let server = start(config(db.url(), queries, "partitions = 2")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(command(
            r#"{"query": "above", "params": {"min": 25000}, "partitions": 3}"#,
        ))
        .await
        .unwrap();
    assert_eq!(info.endpoint.len(), 3);
    let expected: Vec<(i64, i64)> = table_now(&db)
        .into_iter()
        .filter(|(_, v)| *v >= 25_000)
        .collect();
    assert_union(read_all(server.address, &info).await, &expected);
}

#[tokio::test]
async fn a_query_without_a_split_is_one_part_and_one_part_is_asked_for_by_path() {
    let db = TestDb::new();
    items(&db, 1_000);
    let queries =
        format!("{TABLE_QUERY}[queries.small]\nsql = \"select id, v from items where id <= 10\"\n");
    let server = start(config(db.url(), &queries, "")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(FlightDescriptor::new_path(vec!["small".into()]))
        .await
        .unwrap();
    assert_eq!(info.endpoint.len(), 1);
    let rows = pairs(&read(&mut client, &info.endpoint[0]).await);
    assert_eq!(rows.len(), 10);
    let one = client
        .get_flight_info(command(r#"{"query": "items", "partitions": 1}"#))
        .await
        .unwrap();
    assert_eq!(one.endpoint.len(), 1);
    assert_eq!(
        pairs(&read(&mut client, &one.endpoint[0]).await).len(),
        1_000
    );
}

#[tokio::test]
async fn columns_asked_for_are_the_only_ones_read_in_their_order() {
    let db = TestDb::new();
    items(&db, 20_000);
    // A name that must be quoted to be read as itself.
    db.execute(r#"alter table items add column "Odd ""v""" int8 default 7"#);
    // A query whose last line is a comment: what sluice wraps around it must
    // not end inside that comment.
    let queries =
        format!("{TABLE_QUERY}[queries.commented]\nsql = \"select v, id from items -- all\"\n");
    let server = start(config(db.url(), &queries, "")).await;
    let mut client = client(server.address, None).await;
    let asked = r#"{"query": "items", "partitions": 3, "columns": ["v", "id"]}"#;
    let info = client.get_flight_info(command(asked)).await.unwrap();
    assert_eq!(info.endpoint.len(), 3);
    let names = |schema: &arrow_schema::Schema| -> Vec<String> {
        schema.fields().iter().map(|f| f.name().clone()).collect()
    };
    assert_eq!(
        names(&info.clone().try_decode_schema().unwrap()),
        ["v", "id"]
    );
    let schema = client.get_schema(command(asked)).await.unwrap();
    assert_eq!(names(&schema), ["v", "id"]);
    let parts: Vec<Vec<(i64, i64)>> = read_all(server.address, &info)
        .await
        .into_iter()
        .map(|part| part.into_iter().map(|(v, id)| (id, v)).collect())
        .collect();
    assert_union(parts, &table_now(&db));

    // One part, the query whole: its ticket carries the columns, every read.
    let whole = client
        .get_flight_info(command(
            r#"{"query": "items", "partitions": 1, "columns": ["Odd \"v\"", "id"]}"#,
        ))
        .await
        .unwrap();
    assert_eq!(whole.endpoint.len(), 1);
    for _ in 0..2 {
        let batches = read(&mut client, &whole.endpoint[0]).await;
        assert_eq!(names(&batches[0].schema()), [r#"Odd "v""#, "id"]);
        let rows = pairs(&batches);
        assert_eq!(rows.len(), 20_000);
        assert!(rows.iter().all(|(odd, _)| *odd == 7));
    }

    let commented = client
        .get_flight_info(command(r#"{"query": "commented", "columns": ["id"]}"#))
        .await
        .unwrap();
    let batches = read(&mut client, &commented.endpoint[0]).await;
    assert_eq!(names(&batches[0].schema()), ["id"]);
    assert_eq!(
        batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
        20_000
    );

    let status = tonic_status(
        client
            .get_flight_info(command(r#"{"query": "items", "columns": ["id", "nope"]}"#))
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status
            .message()
            .contains(r#"query "items" has no column "nope"; its columns are id, v, pad, Odd "v""#),
        "{status:?}"
    );
}

#[tokio::test]
async fn unknown_altered_and_expired_tickets_are_clear_errors() {
    let db = TestDb::new();
    items(&db, 1_000);
    let server = start(config(db.url(), TABLE_QUERY, "plan_timeout = \"1s\"")).await;
    let mut client = client(server.address, None).await;
    let error = client
        .do_get(arrow_flight::Ticket::new("made up"))
        .await
        .err()
        .unwrap();
    let status = tonic_status(error);
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("unknown ticket"), "{status:?}");
    let info = client
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    let mut altered = info.endpoint[0].ticket.clone().unwrap().ticket.to_vec();
    altered[2] ^= 1;
    let status = tonic_status(
        client
            .do_get(arrow_flight::Ticket::new(altered))
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::NotFound);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let status = tonic_status(
        client
            .do_get(info.endpoint[1].ticket.clone().unwrap())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("expired"), "{status:?}");
}

#[tokio::test]
async fn a_plan_s_parts_read_again_give_its_snapshot_s_rows_until_it_is_released() {
    let db = TestDb::new();
    items(&db, 2_000);
    let server = start(config(db.url(), TABLE_QUERY, "")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    let snapshot = table_now(&db);
    let first = read_all(server.address, &info).await;
    // The table changes; a second action, or a retried task, reads the
    // plan's parts again (part 0 twice at once) and sees the same rows.
    db.execute("update items set v = -v where id % 3 = 0; delete from items where id > 1500;");
    let second = read_all(server.address, &info).await;
    assert_eq!(first, second);
    let again = pairs(&read(&mut client, &info.endpoint[0]).await);
    assert_eq!(again, first[0]);
    assert_union(second, &snapshot);
    // Released by Flight's own CancelFlightInfo, the plan reads no more.
    let cancelled = client
        .cancel_flight_info(arrow_flight::CancelFlightInfoRequest::new(info.clone()))
        .await
        .unwrap();
    assert_eq!(
        cancelled.status,
        arrow_flight::CancelStatus::Cancelled as i32
    );
    let status = tonic_status(
        client
            .do_get(info.endpoint[1].ticket.clone().unwrap())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("new plan"), "{status:?}");
    // Releasing twice is no error: the plan is simply no longer held.
    let again = client
        .cancel_flight_info(arrow_flight::CancelFlightInfoRequest::new(info))
        .await
        .unwrap();
    assert_eq!(
        again.status,
        arrow_flight::CancelStatus::NotCancellable as i32
    );
}

#[tokio::test]
async fn two_replicas_serve_the_parts_of_one_plan() {
    let db = TestDb::new();
    items(&db, 20_000);
    // Each replica is told the locations of both, and shares the secret.
    let a = start_replica(&db).await;
    let b = start_replica(&db).await;
    let locations = format!(
        "locations = [\"grpc://{}\", \"grpc://{}\"]\nticket_secret = \"{SECRET}\"\n",
        a.address, b.address
    );
    // The plan is made on a replica whose [flight] names both.
    let planner = start(config(
        db.url(),
        TABLE_QUERY,
        &format!("partitions = 4\n{locations}"),
    ))
    .await;
    let mut client = client(planner.address, None).await;
    let info = client
        .get_flight_info(command(r#"{"query": "items"}"#))
        .await
        .unwrap();
    let snapshot = table_now(&db);
    db.execute("update items set v = 0 where id % 2 = 0");
    let mut parts = Vec::new();
    for (index, endpoint) in info.endpoint.iter().enumerate() {
        let location = &endpoint.location[0].uri;
        let replica = [&a, &b][index % 2];
        assert_eq!(location, &format!("grpc://{}", replica.address));
        let mut replica_client = self::client(replica.address, None).await;
        parts.push(pairs(&read(&mut replica_client, endpoint).await));
    }
    assert_union(parts, &snapshot);
}

/// A replica sharing the secret (its own locations do not matter for redeeming).
async fn start_replica(db: &TestDb) -> Server {
    start(config(
        db.url(),
        TABLE_QUERY,
        &format!("ticket_secret = \"{SECRET}\""),
    ))
    .await
}

#[tokio::test]
async fn a_client_that_leaves_mid_part_cancels_its_query() {
    let db = TestDb::new();
    let application = format!("sluice_flight_{}", std::process::id());
    let url = format!("{}&application_name={application}", db.url());
    let queries = "[queries.nap]\nsql = \"select g::int8 as id, g::int8 as v from generate_series(1, 300000) g \
                   where g < 100000 or pg_sleep(0.01) is not null\"\n";
    let server = start(config(&url, queries, "")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(command(r#"{"query": "nap"}"#))
        .await
        .unwrap();
    let running = format!(
        "select count(*) from pg_stat_activity where application_name = '{application}' \
         and state = 'active' and query like '%pg_sleep%'"
    );
    {
        let mut stream = client
            .do_get(info.endpoint[0].ticket.clone().unwrap())
            .await
            .unwrap();
        let first = stream.try_next().await.unwrap().unwrap();
        assert!(first.num_rows() > 0);
        assert_eq!(db.query_text(&running), "1");
    }
    drop(client);
    let started = Instant::now();
    while db.query_text(&running) != "0" {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the part's query still runs after its client left"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = sluice_gateway::metrics::handle().render();
    assert!(
        metrics.contains("route=\"flight\"") && metrics.contains("outcome=\"client_gone\""),
        "{metrics}"
    );
}

#[tokio::test]
async fn tokens_and_permissions_are_the_gateways() {
    let db = TestDb::new();
    items(&db, 100);
    let rest = format!(
        "{TABLE_QUERY}[queries.other]\nsql = \"select 1::int8 as id, 1::int8 as v\"\n\
         [[tokens]]\nname = \"reader\"\ntoken = \"reader-token-0123456789\"\nqueries = [\"items\"]\n"
    );
    let server = start(config(db.url(), &rest, "")).await;
    let mut anonymous = client(server.address, None).await;
    let status = tonic_status(
        anonymous
            .get_flight_info(command(r#"{"query": "items"}"#))
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let mut reader = client(server.address, Some("reader-token-0123456789")).await;
    let status = tonic_status(
        reader
            .get_flight_info(command(r#"{"query": "other"}"#))
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let info = reader
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    // A ticket is no token: redeeming it still needs one.
    let status = tonic_status(
        anonymous
            .do_get(info.endpoint[0].ticket.clone().unwrap())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let mut rows = 0;
    for endpoint in &info.endpoint {
        rows += pairs(&read(&mut reader, endpoint).await).len();
    }
    assert_eq!(rows, 100);
}

fn tonic_status(error: arrow_flight::error::FlightError) -> tonic::Status {
    match error {
        arrow_flight::error::FlightError::Tonic(status) => *status,
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

#[tokio::test]
async fn with_https_configured_flight_speaks_tls_with_the_same_certificate() {
    let db = TestDb::new();
    items(&db, 500);
    let certificates = sluice_testkit::TestCertificates::generate(&["localhost"]);
    let files = certificates.server();
    let tls = ServerTls::load(&TlsFiles {
        certificate: files.certificate.clone(),
        key: files.key.clone(),
    })
    .unwrap();
    let server = start_with(config(db.url(), TABLE_QUERY, ""), Some(tls)).await;
    let ca = std::fs::read(certificates.ca()).unwrap();
    let tls_config = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca))
        .domain_name("localhost");
    let channel = tonic::transport::Channel::from_shared(format!("https://{}", server.address))
        .unwrap()
        .tls_config(tls_config)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = FlightClient::new(channel);
    let info = client
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    let mut rows = 0;
    for endpoint in &info.endpoint {
        rows += pairs(&read(&mut client, endpoint).await).len();
    }
    assert_eq!(rows, 500);
    // A client speaking plain gRPC to it gets nowhere.
    let plain = tonic::transport::Channel::from_shared(format!("http://{}", server.address))
        .unwrap()
        .connect()
        .await;
    if let Ok(channel) = plain {
        let mut client = FlightClient::new(channel);
        assert!(client
            .get_flight_info(command(r#"{"query": "items"}"#))
            .await
            .is_err());
    }
}

/// Flight SQL's `CommandStatementQuery` as ADBC's driver sends it.
fn statement_query(sql: &str) -> FlightDescriptor {
    use prost::Message;
    #[derive(Clone, PartialEq, prost::Message)]
    struct Statement {
        #[prost(string, tag = "1")]
        query: String,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    struct Any {
        #[prost(string, tag = "1")]
        type_url: String,
        #[prost(bytes = "vec", tag = "2")]
        value: Vec<u8>,
    }
    let any = Any {
        type_url: "type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery".into(),
        value: Statement { query: sql.into() }.encode_to_vec(),
    };
    FlightDescriptor::new_cmd(any.encode_to_vec())
}

/// A server over 100 `items` whose `[sql]` runs as a login that may only
/// read them, with the token `analyst-token-0123456789` of scope `sql`, `rest`
/// and `[flight]` with `flight`.
async fn ad_hoc_server(db: &TestDb, rest: &str, flight: &str) -> Server {
    items(db, 100);
    let role = db.create_role("flight_reader");
    db.execute(&format!("grant select on items to {}", role.name));
    let rest = format!(
        "[databases.adhoc]\nurl = {}\n[sql]\ndatabase = \"adhoc\"\n\
         [[tokens]]\nname = \"analyst\"\ntoken = \"analyst-token-0123456789\"\nqueries = [\"*\"]\nscopes = [\"sql\"]\n{rest}",
        quoted(&role.url)
    );
    start(config(db.url(), &rest, flight)).await
}

#[tokio::test]
async fn flight_sql_statements_run_as_post_sql_does() {
    let db = TestDb::new();
    let rest = "[queries.items]\ndatabase = \"main\"\ntable = \"items\"\n\
         [[tokens]]\nname = \"reader\"\ntoken = \"reader-token-0123456789\"\nqueries = [\"*\"]\n";
    let server = ad_hoc_server(&db, rest, "").await;
    let mut analyst = client(server.address, Some("analyst-token-0123456789")).await;
    let info = analyst
        .get_flight_info(statement_query("select id, v from items where id <= 7"))
        .await
        .unwrap();
    assert_eq!(info.endpoint.len(), 1);
    let rows = pairs(&read(&mut analyst, &info.endpoint[0]).await);
    assert_eq!(rows.len(), 7);
    // Read-only, as POST /sql.
    let info = analyst
        .get_flight_info(statement_query(
            "select * from (values (1::int8, 2::int8)) v(id, v)",
        ))
        .await
        .unwrap();
    assert_eq!(
        pairs(&read(&mut analyst, &info.endpoint[0]).await),
        [(1, 2)]
    );
    let refused = analyst
        .get_flight_info(statement_query("select id, v from items for update"))
        .await
        .err()
        .unwrap();
    let status = tonic_status(refused);
    assert!(status.message().contains("read-only"), "{status:?}");
    // A data error met while streaming is the client's (INVALID_ARGUMENT,
    // 400 over HTTP), not the server's (INTERNAL).
    let status = failed_stream(
        &mut analyst,
        "select id, 1 / (id - 50) as v from items order by id",
    )
    .await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("division by zero"), "{status:?}");
    // Only tokens with scope "sql".
    let mut reader = client(server.address, Some("reader-token-0123456789")).await;
    let status = tonic_status(
        reader
            .get_flight_info(statement_query("select 1"))
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
}

#[tokio::test]
async fn one_token_cannot_take_every_plan_nor_a_database_more_than_its_pool() {
    let db = TestDb::new();
    items(&db, 1_000);
    let tokens = token_entry("a", "items") + &token_entry("b", "items");
    let text = format!(
        "[databases.main]\nurl = {}\npool_size = 3\n{TABLE_QUERY}{tokens}\
         [flight]\nlisten = \"127.0.0.1:0\"\npartitions = 2\nmax_plans_per_token = 2\n",
        quoted(db.url())
    );
    let server = start(Config::parse(&text, "test.toml").unwrap()).await;
    let mut a = client(server.address, Some("a-token-0123456789")).await;
    let mut b = client(server.address, Some("b-token-0123456789")).await;
    let plan = || command(r#"{"query": "items"}"#);
    let first = a.get_flight_info(plan()).await.unwrap();
    a.get_flight_info(plan()).await.unwrap();
    let status = tonic_status(a.get_flight_info(plan()).await.err().unwrap());
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("max_plans_per_token"),
        "{status:?}"
    );
    // Another token still plans, up to the database's pool_size in all.
    b.get_flight_info(plan()).await.unwrap();
    let status = tonic_status(b.get_flight_info(plan()).await.err().unwrap());
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("pool_size"), "{status:?}");
    // Only the token that made a plan may release it.
    let action =
        arrow_flight::Action::new("release", first.endpoint[0].ticket.clone().unwrap().ticket);
    let status = tonic_status(b.do_action(action).await.err().unwrap());
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    // A plan whose parts have all been read (and may be read again) gives
    // way to a new plan when its cap is reached.
    for endpoint in &first.endpoint {
        read(&mut a, endpoint).await;
    }
    read(&mut a, &first.endpoint[0]).await;
    b.get_flight_info(plan()).await.unwrap();
    let status = tonic_status(
        a.do_get(first.endpoint[0].ticket.clone().unwrap())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
}

/// A `[[tokens]]` entry named `name`, whose token is `{name}-token-0123456789`,
/// that may run the named query `query`.
fn token_entry(name: &str, query: &str) -> String {
    format!(
        "[[tokens]]\nname = \"{name}\"\ntoken = \"{name}-token-0123456789\"\nqueries = [\"{query}\"]\n"
    )
}

#[tokio::test]
async fn a_token_holding_all_the_plans_it_may_leaves_the_other_tokens_a_place() {
    let db = TestDb::new();
    items(&db, 1_000);
    // As reported: the defaults (max_plans_per_token 8, pool_size 8), and a
    // token c that may run only one split query.
    let rest = format!(
        "{TABLE_QUERY}[queries.ev_sub]\nsql = \"select id, v from items\"\nsplit_by = \"id\"\n{}{}",
        token_entry("a", "items"),
        token_entry("c", "ev_sub")
    );
    let server = start(config(db.url(), &rest, "partitions = 2")).await;
    let mut c = client(server.address, Some("c-token-0123456789")).await;
    let mut held = 0;
    let refused = loop {
        match c.get_flight_info(command(r#"{"query": "ev_sub"}"#)).await {
            Ok(_) => held += 1,
            Err(error) => break tonic_status(error),
        }
    };
    // c holds all but the place kept for a, and reads none of them.
    assert_eq!(held, 7);
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("leaves a place to each of them")
            && refused.message().contains("retry in"),
        "{refused:?}"
    );
    let mut a = client(server.address, Some("a-token-0123456789")).await;
    let info = a
        .get_flight_info(command(r#"{"query": "items"}"#))
        .await
        .unwrap();
    let mut rows = 0;
    for endpoint in &info.endpoint {
        rows += pairs(&read(&mut a, endpoint).await).len();
    }
    assert_eq!(rows, 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_never_read_is_released_after_unread_plan_timeout() {
    let db = TestDb::new();
    items(&db, 1_000);
    let application = format!("sluice_unread_{}", std::process::id());
    let url = format!("{}&application_name={application}", db.url());
    let server = start(config(&url, TABLE_QUERY, "unread_plan_timeout = \"3s\"")).await;
    let mut client = client(server.address, None).await;
    let info = client
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    // The plan's coordinator: the one session idle in its transaction.
    let coordinators = format!(
        "select count(*) from pg_stat_activity where application_name = '{application}' \
         and state = 'idle in transaction'"
    );
    assert_eq!(db.query_text(&coordinators), "1");
    sluice_testkit::wait_until(
        "the unread plan's snapshot to be released",
        Duration::from_secs(30),
        || db.query_text(&coordinators) == "0",
    );
    let status = tonic_status(
        client
            .do_get(info.endpoint[0].ticket.clone().unwrap())
            .await
            .err()
            .unwrap(),
    );
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(
        status.message().contains("unread_plan_timeout"),
        "{status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_being_read_or_read_to_its_end_is_not_released_for_going_unread() {
    let db = TestDb::new();
    // Enough rows that a part cannot be sent ahead into the connection's
    // buffers: its stream waits for its client.
    items(&db, 300_000);
    let server = start(config(
        db.url(),
        TABLE_QUERY,
        "unread_plan_timeout = \"1s\"",
    ))
    .await;
    let mut slow = client(server.address, None).await;
    let info = slow
        .get_flight_info(command(r#"{"query": "items", "partitions": 2}"#))
        .await
        .unwrap();
    let snapshot = table_now(&db);
    db.execute("delete from items where id % 2 = 0");
    // Part 0 is read slowly: its first batch, then nothing for three times
    // the limit, while part 1 waits for a reader (a task queued behind it).
    let mut stream = slow
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    let first = stream.try_next().await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut other = client(server.address, None).await;
    let second = pairs(&read(&mut other, &info.endpoint[1]).await);
    let mut part = vec![first];
    part.extend(stream.try_collect::<Vec<_>>().await.unwrap());
    let first = pairs(&part);
    // Read to its end, the plan stays for a second action, however long after.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut again = pairs(&read(&mut other, &info.endpoint[0]).await);
    again.sort();
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(again, sorted);
    assert_union(vec![first, second], &snapshot);
}

#[tokio::test]
async fn numeric_scale_gives_undeclared_decimals_a_scale_and_refuses_rounding() {
    let db = TestDb::new();
    let server = ad_hoc_server(&db, "", "numeric_scale = 2").await;
    let mut analyst = client(server.address, Some("analyst-token-0123456789")).await;
    let info = analyst
        .get_flight_info(statement_query(
            "select sum(v::numeric / 4) as total from items",
        ))
        .await
        .unwrap();
    let batches = read(&mut analyst, &info.endpoint[0]).await;
    let total = batches[0].column(0);
    assert_eq!(
        total.data_type(),
        &arrow_schema::DataType::Decimal128(38, 2)
    );
    let expected = db.query_text("select sum(v::numeric / 4)::numeric(38, 2) from items");
    let decimals = total
        .as_any()
        .downcast_ref::<arrow_array::Decimal128Array>()
        .unwrap();
    assert_eq!(decimals.value_as_string(0), expected.trim());
    // A value with more digits than the scale is an error, not a rounded value.
    let status = failed_stream(&mut analyst, "select 1.005::numeric as x").await;
    assert!(
        status.message().contains("would need rounding"),
        "{status:?}"
    );
}

/// The status that ends the stream of ad-hoc `sql`, planned and read to its
/// failure.
async fn failed_stream(client: &mut FlightClient, sql: &str) -> tonic::Status {
    let info = client.get_flight_info(statement_query(sql)).await.unwrap();
    let ticket = info.endpoint[0].ticket.clone().unwrap();
    let failed: Result<Vec<_>, _> = match client.do_get(ticket).await {
        Ok(stream) => stream.try_collect().await,
        Err(error) => Err(error),
    };
    tonic_status(failed.expect_err("the stream fails"))
}
