//! The gateway over a real MariaDB server, through the real HTTP stack: named
//! queries with typed parameters, health, read-only GETs, statement timeouts,
//! clients that leave, `POST /sql` fenced in, and the start-up checks.

mod common;

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::*;
use sluice_gateway::{AppState, Config};
use sluice_testkit::TestMariaDb;

const QUERIES: &str = r#"
[queries.events]
sql = "select id, kind, at, amount, paid, note from events where kind = ? and at >= ? and id <= ? and paid = ? order by id"
params = [
  { name = "kind", type = "text", required = true },
  { name = "since", type = "timestamptz", default = "2024-01-01T00:00:00Z" },
  { name = "max_id", type = "int", default = 1000000 },
  { name = "paid", type = "bool", default = true },
]

[queries.series]
sql = "select seq as id, concat('row ', seq) as label from seq_1_to_1000000 where seq <= ?"
params = [{ name = "n", type = "int", required = true }]

[queries.one_trip]
sql = "select seq as id from seq_1_to_100000 where seq <= ?"
params = [{ name = "n", type = "int", required = true }]

[queries.sleepy]
sql = "select sleep(?) as slept"
params = [{ name = "seconds", type = "double", required = true }]
statement_timeout = "300ms"

[queries.stall]
sql = "select seq as id, if(seq = 20000, sleep(120), 0) as nap from seq_1_to_30000"
"#;

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";
const ANALYST: &str = "analyst-token-012345678";

/// Configuration text: one MariaDB database at `url` plus `rest`.
fn mariadb_config(url: &str, pool: &str, rest: &str) -> Config {
    let text = format!("[databases.main]\nurl = {}\n{pool}\n{rest}", quoted(url));
    Config::parse(&text, "test.toml").unwrap_or_else(|error| panic!("{error}\n{text}"))
}

/// A test database with 500 events, and the app over it.
fn setup() -> (TestMariaDb, AppState) {
    let db = TestMariaDb::new();
    // TIMESTAMP values are stored as moments: written here in UTC, as the
    // gateway's sessions read them.
    db.execute(
        "SET time_zone = '+00:00';
         create table events (id int primary key, kind varchar(20), at timestamp(6) null,
           amount decimal(10,2), paid boolean, note text);
         insert into events select seq, if(seq % 3 = 0, 'refund', 'sale'),
           timestamp '2024-01-01 00:00:00' + interval seq hour, seq * 1.25, seq % 2 = 0,
           if(seq % 4 = 0, null, concat('note, \"', seq, '\"'))
         from seq_1_to_500;",
    );
    let config = mariadb_config(db.url(), "pool_size = 4", QUERIES);
    (db, AppState::new(config))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `db.url()` logging in as `user` with `password` instead.
fn url_as(db: &TestMariaDb, user: &str, password: &str) -> String {
    let (scheme, rest) = db.url().split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{user}:{password}@{host}/{path}")
}

/// Accounts (logins and roles) a test creates on the shared server, dropped
/// when it ends.
struct Accounts<'a> {
    db: &'a TestMariaDb,
    created: Vec<String>,
}

impl<'a> Accounts<'a> {
    fn new(db: &'a TestMariaDb) -> Accounts<'a> {
        Accounts {
            db,
            created: Vec::new(),
        }
    }

    /// A login named after the test database, with `grants` (`{login}` and
    /// `{db}` replaced); its URL.
    fn login(&mut self, what: &str, grants: &str) -> (String, String) {
        let name = format!("{}_{what}", self.db.name());
        let account = format!("'{name}'@'%'");
        self.created.push(format!("DROP USER IF EXISTS {account}"));
        self.db.execute(&format!(
            "CREATE USER {account} IDENTIFIED BY 'secret'; {}",
            grants
                .replace("{login}", &account)
                .replace("{db}", &format!("`{}`", self.db.name()))
        ));
        (name.clone(), url_as(self.db, &name, "secret"))
    }

    /// A role named after the test database, with `grants` (`{role}` and
    /// `{db}` replaced); its name.
    fn role(&mut self, what: &str, grants: &str) -> String {
        let name = format!("{}_{what}", self.db.name());
        self.created.push(format!("DROP ROLE IF EXISTS `{name}`"));
        self.db.execute(&format!(
            "CREATE ROLE `{name}`; {}",
            grants
                .replace("{role}", &format!("`{name}`"))
                .replace("{db}", &format!("`{}`", self.db.name()))
        ));
        name
    }
}

impl Drop for Accounts<'_> {
    fn drop(&mut self) {
        for statement in self.created.iter().rev() {
            self.db.execute(statement);
        }
    }
}

/// A session of the test's own on the server, to watch the app's statements
/// in `information_schema.PROCESSLIST` (one query each, not a client start).
struct Watcher {
    database: String,
    connection: tokio::sync::Mutex<sluice_mariadb::Connection>,
}

impl Watcher {
    async fn connect(db: &TestMariaDb) -> Watcher {
        let config: sluice_mariadb::Config = db.url().parse().unwrap();
        let connection = sluice_mariadb::Connection::connect(&config, &sluice_core::Meter::new())
            .await
            .unwrap();
        Watcher {
            database: db.name().to_owned(),
            connection: tokio::sync::Mutex::new(connection),
        }
    }

    /// Statements of other sessions in the test's database whose text holds
    /// `fragment`, with their state.
    async fn running(&self, fragment: &str) -> Vec<String> {
        let sql = format!(
            "select coalesce(state, '') from information_schema.PROCESSLIST \
             where db = '{}' and id <> connection_id() and info like '%{fragment}%'",
            self.database
        );
        let result = self
            .connection
            .lock()
            .await
            .simple_query(&sql)
            .await
            .unwrap_or_else(|error| panic!("{error}\n{sql}"));
        result
            .rows
            .into_iter()
            .map(|row| String::from_utf8(row[0].clone().unwrap_or_default()).unwrap())
            .collect()
    }
}

impl Watcher {
    /// Ends the idle sessions of others in the test's database; how many.
    async fn kill_idle(&self) -> usize {
        let sql = format!(
            "select id from information_schema.PROCESSLIST \
             where db = '{}' and id <> connection_id() and command = 'Sleep'",
            self.database
        );
        let mut connection = self.connection.lock().await;
        let idle = connection.simple_query(&sql).await.unwrap().rows;
        for row in &idle {
            let id = String::from_utf8(row[0].clone().unwrap()).unwrap();
            connection
                .simple_query(&format!("KILL CONNECTION {id}"))
                .await
                .unwrap();
        }
        // Let the server's closing reach the app's sockets.
        tokio::time::sleep(Duration::from_millis(100)).await;
        idle.len()
    }
}

/// What the mariadb client says `sql` returns, in UTC.
fn in_utc(db: &TestMariaDb, sql: &str) -> String {
    db.query_text(&format!("SET time_zone = '+00:00'; {sql}"))
}

#[tokio::test]
async fn named_queries_stream_ndjson_and_csv_with_typed_parameters() {
    let (db, state) = setup();
    // 2024-01-10T00:00:00+02:00 is 22:00 UTC the day before: a moment
    // compared with a TIMESTAMP column in the session's UTC.
    let uri = "/queries/events?kind=refund&since=2024-01-10T00:00:00%2B02:00&max_id=300";
    let expected_ids = in_utc(
        &db,
        "select group_concat(id order by id) from events where kind = 'refund' \
         and at >= '2024-01-09 22:00:00' and id <= 300 and paid",
    );
    assert_eq!(expected_ids.split(',').next(), Some("216"), "the data");

    let response = oneshot(&state, get(uri, &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/x-ndjson"
    );
    let ndjson = String::from_utf8(body(response).await.unwrap()).unwrap();
    let rows: Vec<serde_json::Value> = ndjson
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let ids: Vec<String> = rows.iter().map(|row| row["id"].to_string()).collect();
    assert_eq!(ids.join(","), expected_ids);
    // TIMESTAMP as a moment with its offset, DECIMAL with its scale, BOOLEAN
    // as the TINYINT(1) it is.
    assert_eq!(
        ndjson.lines().next().unwrap(),
        "{\"id\":216,\"kind\":\"refund\",\"at\":\"2024-01-10T00:00:00+00:00\",\
         \"amount\":270.00,\"paid\":1,\"note\":null}"
    );
    assert_eq!(rows[1]["note"], "note, \"222\"");

    // false binds as 0, which the boolean (TINYINT) column compares with.
    let response = oneshot(&state, get(&format!("{uri}&paid=false&format=csv"), &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/csv; charset=utf-8"
    );
    let csv = String::from_utf8(body(response).await.unwrap()).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("id,kind,at,amount,paid,note"));
    let unpaid = in_utc(
        &db,
        "select count(*) from events where kind = 'refund' \
         and at >= '2024-01-09 22:00:00' and id <= 300 and not paid",
    );
    assert_eq!(lines.count().to_string(), unpaid);
    assert!(
        csv.contains("\n219,refund,2024-01-10 03:00:00+00,273.75,0,\"note, \"\"219\"\"\"\n"),
        "{csv}"
    );

    // Injection attempts are just values.
    let response = oneshot(&state, get("/queries/events?kind=x'%20or%20'1'='1", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body(response).await.unwrap().is_empty());

    // The session's settings travel with the query: one round trip (metrics
    // are counted per process, so this query runs in this test only).
    let rows = body(oneshot(&state, get("/queries/one_trip?n=1234", &[])).await)
        .await
        .unwrap();
    assert_eq!(rows.iter().filter(|&&byte| byte == b'\n').count(), 1234);
    let line = metric_line(&state, "sluice_db_round_trips_total{query=\"one_trip\"}").await;
    assert!(line.ends_with(" 1"), "{line}");
}

/// Arrow bodies take MariaDB's numbers and moments in their binary forms
/// (no text between the wire and the arrays): the same rows as NDJSON, with
/// TIMESTAMP as microseconds of UTC and each integer at its type's width.
#[tokio::test]
async fn an_arrow_body_holds_the_rows_ndjson_gives() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int16Type, Int32Type, TimestampMicrosecondType};
    use arrow_schema::{DataType, TimeUnit};

    let (db, state) = setup();
    let uri = "/queries/events?kind=refund&since=2024-01-10T00:00:00%2B02:00&max_id=300";
    let response = oneshot(&state, get(&format!("{uri}&format=arrow"), &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = body(response).await.unwrap();
    let reader = arrow_ipc::reader::StreamReader::try_new(&bytes[..], None).unwrap();
    let schema = reader.schema();
    assert_eq!(schema.field(0).data_type(), &DataType::Int32);
    assert_eq!(
        schema.field(2).data_type(),
        &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    );
    assert_eq!(schema.field(4).data_type(), &DataType::Int16);
    let (mut ids, mut moments, mut paid) = (Vec::new(), Vec::new(), Vec::new());
    for batch in reader {
        let batch = batch.unwrap();
        ids.extend(
            batch
                .column(0)
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .copied(),
        );
        let at = batch.column(2).as_primitive::<TimestampMicrosecondType>();
        moments.extend(at.values().iter().copied());
        paid.extend(
            batch
                .column(4)
                .as_primitive::<Int16Type>()
                .values()
                .iter()
                .copied(),
        );
    }
    let expected_ids = in_utc(
        &db,
        "select group_concat(id order by id) from events where kind = 'refund' \
         and at >= '2024-01-09 22:00:00' and id <= 300 and paid",
    );
    let shown: Vec<String> = ids.iter().map(i32::to_string).collect();
    assert_eq!(shown.join(","), expected_ids);
    // Row 216: 2024-01-10T00:00:00Z, as the NDJSON test reads it.
    assert_eq!(moments[0], 1_704_844_800_000_000);
    let expected_moments = in_utc(
        &db,
        "select group_concat(cast(unix_timestamp(at) * 1000000 as signed) order by id) from events \
         where kind = 'refund' and at >= '2024-01-09 22:00:00' and id <= 300 and paid",
    );
    let shown: Vec<String> = moments.iter().map(i64::to_string).collect();
    assert_eq!(shown.join(","), expected_moments);
    assert!(paid.iter().all(|&paid| paid == 1));
}

#[tokio::test]
async fn health_is_ok_and_503_while_the_pool_cannot_connect() {
    let (_db, state) = setup();
    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json(response).await["databases"]["main"], "ok");

    let port = free_port();
    let down = AppState::new(mariadb_config(
        &format!("mariadb://nobody@127.0.0.1:{port}/nothing"),
        "pool_wait = \"1s\"",
        "[queries.quick]\nsql = \"select 1 as one\"\n",
    ));
    let response = oneshot(&down, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let health = json(response).await;
    assert_eq!(health["status"], "unhealthy");
    assert_eq!(health["databases"]["main"], "unavailable");
    let response = oneshot(&down, get("/queries/quick", &[])).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    let error = json(response).await;
    assert!(
        !error.to_string().contains(&port.to_string()),
        "no internals: {error}"
    );
}

#[tokio::test]
async fn a_get_of_a_writing_query_is_read_only_unless_the_token_may_write() {
    let db = TestMariaDb::new();
    db.execute("create table t (a int)");
    let queries = r#"
[queries.add]
sql = "insert into t (a) values (?) returning a"
params = [{ name = "a", type = "int", required = true }]
"#;
    let tokens = format!(
        "[[tokens]]\nname = \"writer\"\ntoken = \"{WRITER}\"\nqueries = [\"*\"]\nscopes = [\"write\"]\n\
         [[tokens]]\nname = \"reader\"\ntoken = \"{READER}\"\nqueries = [\"*\"]\n"
    );
    // One session, so each request finds the settings the previous one left.
    let state = AppState::new(mariadb_config(
        db.url(),
        "pool_size = 1",
        &format!("{queries}{tokens}"),
    ));
    let add = |value: u32, token: &str| {
        let state = state.clone();
        let authorization = bearer(token);
        async move {
            let response = oneshot(
                &state,
                get(
                    &format!("/queries/add?a={value}"),
                    &[("authorization", &authorization)],
                ),
            )
            .await;
            let status = response.status();
            (status, body(response).await.unwrap())
        }
    };
    for round in 1..=2 {
        let (status, bytes) = add(round, READER).await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(error["sqlstate"], "25006", "{error}");
        let (status, bytes) = add(round, WRITER).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(bytes, format!("{{\"a\":{round}}}\n").into_bytes());
    }
    assert_eq!(
        db.query_text("select group_concat(a order by a) from t"),
        "1,2"
    );
}

#[tokio::test]
async fn a_statement_timeout_stops_the_query_before_the_first_byte() {
    let (db, state) = setup();
    let started = Instant::now();
    let response = oneshot(&state, get("/queries/sleepy?seconds=5", &[])).await;
    let took = started.elapsed();
    // As PostgreSQL's timeout (57014): a 504. MariaDB's (error 1969) comes
    // with SQLSTATE 70100.
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(json(response).await["sqlstate"], "70100");
    assert!(took < Duration::from_secs(4), "stopped after {took:?}");
    let watcher = Watcher::connect(&db).await;
    assert!(watcher.running("sleep(").await.is_empty());
    // The session's timeout is the query's own: others run unbounded.
    let response = oneshot(&state, get("/queries/series?n=3", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn sessions_the_server_ended_while_idle_are_replaced_not_reused() {
    let (db, state) = setup();
    let watcher = Watcher::connect(&db).await;
    for _ in 0..2 {
        let response = oneshot(&state, get("/queries/series?n=2", &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        // The server ends every idle session of the app (as wait_timeout or a
        // restart would); the next request must not get a dead one.
        let killed = watcher.kill_idle().await;
        assert!(killed >= 1, "the pooled session was idle");
        let response = oneshot(&state, get("/queries/series?n=2", &[])).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            body(response).await.unwrap(),
            b"{\"id\":1,\"label\":\"row 1\"}\n{\"id\":2,\"label\":\"row 2\"}\n"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_has_its_query_killed() {
    let (db, state) = setup();
    let watcher = Watcher::connect(&db).await;
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    // 20,000 rows arrive, then the server sleeps for two minutes: the client
    // leaves while nothing is written to it, so only KILL QUERY stops it.
    let socket = start_reading(address, "/queries/stall", "", 1).await.0;
    let watcher = &watcher;
    wait_until(
        PATIENCE,
        "the query to reach its two-minute sleep",
        move || async move { watcher.running("seq_1_to_30000").await == ["User sleep"] },
    )
    .await;
    drop(socket);
    let took = wait_until(
        PATIENCE,
        "the abandoned query to be gone from the process list",
        move || async move { watcher.running("seq_1_to_30000").await.is_empty() },
    )
    .await;
    assert!(
        took < Duration::from_secs(5),
        "killed only {took:?} after the client left"
    );
    let response = reqwest::get(format!("http://{address}/queries/series?n=2"))
        .await
        .unwrap();
    assert_eq!(
        response.text().await.unwrap(),
        "{\"id\":1,\"label\":\"row 1\"}\n{\"id\":2,\"label\":\"row 2\"}\n"
    );
    let _ = stop.send(());
}

/// A configuration whose `[sql]` runs on `url`, as `role` if given, with one
/// token of scope `sql` and the given statement timeout.
fn sql_config(url: &str, role: Option<&str>, timeout: &str) -> Config {
    let role = role.map_or(String::new(), |role| format!("role = {}\n", quoted(role)));
    mariadb_config(
        url,
        "pool_size = 2",
        &format!(
            "[sql]\n{role}statement_timeout = \"{timeout}\"\n\
             [[tokens]]\nname = \"analyst\"\ntoken = \"{ANALYST}\"\nscopes = [\"sql\"]\n"
        ),
    )
}

async fn run_sql(state: &AppState, request: serde_json::Value) -> (StatusCode, serde_json::Value) {
    let response = oneshot(
        state,
        Request::post("/sql")
            .header("authorization", bearer(ANALYST))
            .body(Body::from(request.to_string()))
            .unwrap(),
    )
    .await;
    let status = response.status();
    let bytes = body(response).await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
    });
    (status, value)
}

#[tokio::test]
async fn post_sql_is_refused_at_start_up_for_a_privileged_login_or_role() {
    let db = TestMariaDb::new();
    // The test server's own login may do everything.
    let admin = AppState::new(sql_config(db.url(), None, "10s"));
    let problems = admin.check_databases().await.problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "sql");
    let message = &problems[0].message;
    for right in ["FILE", "SUPER", "SHUTDOWN", "CREATE USER", "GRANT OPTION"] {
        assert!(message.contains(right), "{right}: {message}");
    }
    let (status, _) = run_sql(&admin, serde_json::json!({"sql": "select 1"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);

    let mut accounts = Accounts::new(&db);
    // A role that may read server files, two roles away from the login.
    let filer = accounts.role("filer", "GRANT FILE ON *.* TO {role}");
    let outer = accounts.role("outer", &format!("GRANT `{filer}` TO {{role}}"));
    let (_, url) = accounts.login(
        "member",
        &format!("GRANT SELECT ON {{db}}.* TO {{login}}; GRANT `{outer}` TO {{login}}"),
    );
    let problems = AppState::new(sql_config(&url, None, "10s"))
        .check_databases()
        .await
        .problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0]
            .message
            .contains(&format!("can SET ROLE `{outer}`, which has FILE on *.*")),
        "{}",
        problems[0]
    );

    // A role the login does not hold.
    let (_, plain) = accounts.login("plain", "GRANT SELECT ON {db}.* TO {login}");
    let problems = AppState::new(sql_config(&plain, Some(&filer), "10s"))
        .check_databases()
        .await
        .problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "sql.role", "{}", problems[0]);
    assert!(
        problems[0].message.contains("SET ROLE failed"),
        "{}",
        problems[0]
    );
}

#[tokio::test]
async fn post_sql_runs_read_only_for_an_unprivileged_login_with_parameters() {
    let db = TestMariaDb::new();
    db.execute("create table t (a int); insert into t values (1), (2);");
    let mut accounts = Accounts::new(&db);
    let reader = accounts.role("reader", "GRANT SELECT ON {db}.* TO {role}");
    // INSERT and CREATE too, so that what refuses the writes below is the
    // fence, not the grants.
    let (login, url) = accounts.login(
        "analyst",
        &format!(
            "GRANT SELECT, INSERT, CREATE ON {{db}}.* TO {{login}}; GRANT `{reader}` TO {{login}}"
        ),
    );
    let state = AppState::new(sql_config(&url, Some(&reader), "300ms"));
    let report = state.check_databases().await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let (status, row) = run_sql(
        &state,
        serde_json::json!({
            "sql": "select cast(? as signed) + 1 as n, ? as label, current_role() as role, \
                    substring_index(current_user(), '@', 1) as login",
            "params": [41, "x"]
        }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{row}");
    assert_eq!(
        row,
        serde_json::json!({"n": 42, "label": "x", "role": reader, "login": login})
    );

    for (attempt, sqlstate) in [
        ("insert into t values (3)", "25006"),
        // DDL would commit a plain read-only transaction and run.
        ("create table u (a int)", "25006"),
        // An anonymous block would end one and write.
        (
            "begin not atomic set session transaction read write; commit; \
             insert into t values (4); end",
            "XAE07",
        ),
    ] {
        let (status, error) = run_sql(&state, serde_json::json!({ "sql": attempt })).await;
        assert_ne!(status, StatusCode::OK, "{attempt}: {error}");
        assert_eq!(error["sqlstate"], sqlstate, "{attempt}: {error}");
    }
    let (status, error) = run_sql(
        &state,
        serde_json::json!({"sql": "insert into t values (5)"}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
    assert_eq!(
        db.query_text("select group_concat(a order by a) from t"),
        "1,2"
    );
    assert_eq!(db.query_text("show tables like 'u'"), "");

    // The statement timeout holds, even for a statement that lifts its own.
    for attempt in [
        "select sleep(5)",
        "set statement max_statement_time = 0 for select sleep(5)",
    ] {
        let started = Instant::now();
        let (status, error) = run_sql(&state, serde_json::json!({ "sql": attempt })).await;
        assert_ne!(status, StatusCode::OK, "{attempt}: {error}");
        assert_eq!(error["sqlstate"], "70100", "{attempt}: {error}");
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(4),
            "{attempt}: stopped after {took:?}"
        );
    }
}

#[tokio::test]
async fn named_queries_are_prepared_and_compared_with_their_declarations_at_start_up() {
    let db = TestMariaDb::new();
    db.execute("create table t (id int, name text)");
    let queries = r#"
[queries.good]
sql = "select id, name from t where id = ? and name = ?"
params = [
  { name = "id", type = "bigint" },
  { name = "name", type = "text" },
]

[queries.extra]
sql = "select ? + ? as n"
params = [{ name = "a", type = "int" }]

[queries.fewer]
sql = "select 1 as one"
params = [{ name = "a", type = "int" }]

[queries.broken]
sql = "select * from missing_table"
"#;
    let state = AppState::new(mariadb_config(db.url(), "", queries));
    let report = state.check_databases().await;
    assert!(report.unreachable.is_empty());
    let found: Vec<(usize, &str)> = report
        .problems
        .iter()
        .map(|problem| (problem.line, problem.key.as_str()))
        .collect();
    // The line of each query's `sql`.
    assert_eq!(
        found,
        [
            (21, "queries.broken.sql"),
            (13, "queries.extra.params"),
            (17, "queries.fewer.params"),
        ],
        "{:#?}",
        report.problems
    );
    let messages: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert!(messages[0].contains("doesn't exist"), "{}", messages[0]);
    assert!(
        messages[1].ends_with(
            "queries.extra.params: the SQL takes 2 parameters (? to ?), but 1 is declared"
        ),
        "{}",
        messages[1]
    );
    assert!(
        messages[2].contains("takes no parameters, but 1 is declared"),
        "{}",
        messages[2]
    );
    // The session used for the checks is fine for requests afterwards.
    let response = oneshot(&state, get("/queries/good?id=1&name=x", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
}

/// `POST /tables/{name}` and `POST /queries/{name}/batch` over MariaDB: pooled
/// sessions that load a table and run calls, then go back to the pool.
#[tokio::test]
async fn tables_take_bulk_loads_and_batches_run_calls() {
    let db = TestMariaDb::new();
    db.execute(
        "create table payments (id int primary key, amount decimal(10,2) not null, note text);",
    );
    let rest = format!(
        r#"
[queries.add]
sql = "insert into payments (id, amount, note) values (?, ?, ?)"
params = [
  {{ name = "id", type = "int", required = true }},
  {{ name = "amount", type = "numeric", required = true }},
  {{ name = "note", type = "text" }},
]

[queries.count]
sql = "select count(*) as n from payments"

[tables.payments]
database = "main"

[[tokens]]
name = "writer"
token = "{WRITER}"
queries = ["*"]
scopes = ["write"]
"#
    );
    let state = AppState::new(mariadb_config(db.url(), "pool_size = 2", &rest));
    let rows: String = (1..=1000)
        .map(|id| format!("{{\"id\":{id},\"amount\":\"{id}.50\",\"note\":\"n{id}\"}}\n"))
        .collect();
    let request = Request::post("/tables/payments")
        .header(header::AUTHORIZATION, bearer(WRITER))
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from(rows))
        .unwrap();
    let response = oneshot(&state, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary = json(response).await;
    assert_eq!(summary["written"], 1000, "{summary}");
    assert_eq!(
        db.query_text("select count(*), sum(amount) from payments"),
        "1000\t501000.00"
    );

    let calls: String = (1001..=1100)
        .map(|id| format!("[{id}, \"{id}.25\", \"call {id}\"]\n"))
        .collect();
    let request = Request::post("/queries/add/batch")
        .header(header::AUTHORIZATION, bearer(WRITER))
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .body(Body::from(calls))
        .unwrap();
    let response = oneshot(&state, request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(body(response).await.unwrap()).unwrap();
    assert_eq!(text.lines().count(), 100, "{text}");
    assert!(
        text.lines().next().unwrap().starts_with("{\"line\":1,"),
        "{text}"
    );
    assert_eq!(db.query_text("select count(*) from payments"), "1100");

    // The sessions went back to the pool and serve the next request.
    let response = oneshot(
        &state,
        Request::get("/queries/count")
            .header(header::AUTHORIZATION, bearer(WRITER))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json(response).await["n"], 1100);
}

#[tokio::test]
async fn the_openapi_document_types_rows_with_mariadbs_nullability() {
    let (_db, state) = setup();
    let report = state.check_databases().await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let document = json(oneshot(&state, get("/openapi.json", &[])).await).await;
    let properties = &document["components"]["schemas"]["events_row"]["properties"];
    // MariaDB's result metadata says which columns never hold NULL.
    assert_eq!(
        properties["id"],
        serde_json::json!({"type": "integer", "description": "int"})
    );
    assert_eq!(
        properties["kind"]["type"],
        serde_json::json!(["string", "null"])
    );
    assert_eq!(
        properties["at"]["type"],
        serde_json::json!(["string", "null"])
    );
    assert_eq!(
        properties["paid"]["type"],
        serde_json::json!(["integer", "null"])
    );
    assert_eq!(properties["amount"]["description"], "decimal");
}
