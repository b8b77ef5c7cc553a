//! What a hostile client cannot do, and what stops a misconfigured server from
//! starting: GET of a named query is read-only without scope `write`; without
//! tokens only local `Host` names are served; `POST /sql` runs as an unprivileged
//! login it cannot escape; named queries are prepared and compared with their
//! declarations at start-up.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use sluice_gateway::check_when_reachable;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";
const ANALYST: &str = "analyst-token-012345678";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[tokio::test]
async fn a_get_of_a_writing_query_is_read_only_unless_the_token_may_write() {
    let db = TestDb::new();
    db.execute("create table t (a int)");
    let queries = r#"
[queries.add]
sql = "insert into t (a) values ($1::int) returning a"
params = [{ name = "a", type = "int", required = true }]
"#;
    let tokens = format!(
        r#"
[[tokens]]
name = "writer"
token = "{WRITER}"
queries = ["*"]
scopes = ["write"]
[[tokens]]
name = "reader"
token = "{READER}"
queries = ["*"]
"#
    );
    // One session, so each request finds the settings the previous one left.
    let state = AppState::new(postgres_config(
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
        db.query_text("select string_agg(a::text, ',') from t"),
        "1,2"
    );

    // Without tokens nobody may write through GET.
    let open = AppState::new(postgres_config(db.url(), "", queries));
    let response = oneshot(&open, get("/queries/add?a=3", &[])).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    assert_eq!(json(response).await["sqlstate"], "25006");
    assert_eq!(db.query_text("select count(*) from t"), "2");
}

/// The status line of a raw HTTP/1.1 GET of `path` with `host` as `Host`.
async fn status_with_host(address: std::net::SocketAddr, path: &str, host: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response.lines().next().unwrap_or("").to_owned()
}

#[tokio::test]
async fn without_tokens_only_local_host_names_are_served() {
    let db = TestDb::new();
    let queries = "[queries.one]\nsql = \"select 1 as one\"\n";
    let state = AppState::new(postgres_config(db.url(), "", queries));
    let (address, _stop, _task) = listen(state.clone(), Duration::from_secs(1)).await;
    let port = address.port();
    for host in [
        format!("evil.example:{port}"),
        "evil.example:8080".to_owned(),
        format!("localhost.evil.example:{port}"),
    ] {
        assert_eq!(
            status_with_host(address, "/queries/one", &host).await,
            "HTTP/1.1 403 Forbidden",
            "{host}"
        );
    }
    for host in [
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        "localhost".to_owned(),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(
            status_with_host(address, "/queries/one", &host).await,
            "HTTP/1.1 200 OK",
            "{host}"
        );
    }
    let response = oneshot(&state, get("/health", &[("host", "evil.example:8080")])).await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let error = json(response).await;
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("evil.example:8080"),
        "{error}"
    );

    // With tokens, the token is the check.
    let guarded = AppState::new(postgres_config(
        db.url(),
        "",
        &format!("{queries}[[tokens]]\nname = \"r\"\ntoken = \"{READER}\"\nqueries = [\"*\"]\n"),
    ));
    let response = oneshot(
        &guarded,
        get(
            "/queries/one",
            &[
                ("host", "gateway.example:8080"),
                ("authorization", &bearer(READER)),
            ],
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
}

/// A configuration whose `[sql]` runs on `url`, as `role` if given, with one
/// token of scope `sql`.
fn sql_config(url: &str, role: Option<&str>) -> sluice_gateway::Config {
    let role = role.map_or(String::new(), |role| format!("role = {}\n", quoted(role)));
    postgres_config(
        url,
        "pool_size = 2",
        &format!(
            "[sql]\n{role}\n[[tokens]]\nname = \"analyst\"\ntoken = \"{ANALYST}\"\nscopes = [\"sql\"]\n"
        ),
    )
}

async fn run_sql(state: &AppState, sql: &str) -> (StatusCode, serde_json::Value) {
    let body = serde_json::json!({ "sql": sql }).to_string();
    let response = oneshot(
        state,
        Request::post("/sql")
            .header("authorization", bearer(ANALYST))
            .body(Body::from(body))
            .unwrap(),
    )
    .await;
    let status = response.status();
    let bytes = common::body(response).await.unwrap();
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
    });
    (status, value)
}

#[tokio::test]
async fn ad_hoc_sql_runs_as_its_role_and_cannot_escape_it() {
    let db = TestDb::new();
    let login = db.create_role("login");
    let reader = db.create_role("reader");
    db.execute(&format!(
        "create table secrets (s text); create table visible (v text);
         insert into visible values ('seen');
         grant {} to {};
         grant select on visible to {};",
        reader.name, login.name, reader.name
    ));
    let state = AppState::new(sql_config(&login.url, Some(&reader.name)));
    assert!(state.check_databases().await.problems.is_empty());

    let (status, rows) =
        run_sql(&state, "select current_user as role, session_user as login").await;
    assert_eq!(status, StatusCode::OK, "{rows}");
    assert_eq!(
        rows,
        serde_json::json!({"role": reader.name, "login": login.name})
    );
    let (status, rows) = run_sql(&state, "select v from visible").await;
    assert_eq!(
        (status, rows),
        (StatusCode::OK, serde_json::json!({"v": "seen"}))
    );

    // A superuser's session the attacker would like to end.
    let application = application_name();
    let victim = AppState::new(postgres_config(
        &with_application_name(db.url(), &application),
        "",
        "[queries.one]\nsql = \"select 1 as one\"\n",
    ));
    assert_eq!(
        oneshot(&victim, get("/queries/one", &[])).await.status(),
        StatusCode::OK
    );
    let victim_pid = db.query_text(&format!(
        "select pid from pg_stat_activity where application_name = '{application}'"
    ));
    let superuser = db.query_text("select current_user");

    // Each attempt is refused by PostgreSQL: the login is not a superuser and not
    // a member of anything that could reach the server.
    for (attempt, sqlstate) in [
        (format!("set role {superuser}"), "42501"),
        (
            format!("select set_config('role', '{superuser}', false)"),
            "42501",
        ),
        (format!("set session authorization {superuser}"), "42501"),
        (
            format!("select pg_terminate_backend({victim_pid})"),
            "42501",
        ),
    ]
    .into_iter()
    .chain(
        [
            ("copy (select 1) to program 'true'", "42501"),
            ("copy (select 1) to '/tmp/sluice-escape'", "42501"),
            ("select pg_read_file('postgresql.conf')", "42501"),
            ("select pg_ls_dir('.')", "42501"),
            ("select lo_import('/etc/hostname')", "42501"),
            ("select lo_export(1, '/tmp/sluice-escape')", "42501"),
            ("select pg_reload_conf()", "42501"),
            // One statement per request: the second could not run after the first.
            ("reset role; copy (select 1) to program 'true'", "42601"),
            // The transaction's first snapshot is taken before the statement.
            ("set transaction read write", "25001"),
            ("select * from secrets", "42501"),
            ("insert into visible values ('x') returning v", "25006"),
        ]
        .map(|(attempt, sqlstate)| (attempt.to_owned(), sqlstate)),
    ) {
        let (status, error) = run_sql(&state, &attempt).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{attempt}: {error}");
        assert_eq!(error["sqlstate"], sqlstate, "{attempt}: {error}");
    }
    // RESET ROLE itself is allowed, and leads back to the unprivileged login only.
    let (status, _) = run_sql(&state, "reset role").await;
    assert_eq!(status, StatusCode::OK);
    let (_, rows) = run_sql(&state, "select current_user as role").await;
    assert_eq!(
        rows["role"],
        reader.name.as_str(),
        "each request starts afresh"
    );
    assert_eq!(db.query_text("select count(*) from visible"), "1");
    assert_eq!(
        db.query_text(&format!(
            "select count(*) from pg_stat_activity where pid = {victim_pid}"
        )),
        "1"
    );
}

#[tokio::test]
async fn a_privileged_login_is_refused_at_start_up_and_by_every_request() {
    let db = TestDb::new();
    // The test server's own login is a superuser: a role for [sql] does not help,
    // since the statement could RESET ROLE.
    let reader = db.create_role("reader");
    let superuser = AppState::new(sql_config(db.url(), Some(&reader.name)));
    let report = superuser.check_databases().await;
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let problem = &report.problems[0];
    assert_eq!((problem.key.as_str(), problem.line), ("sql", 4));
    assert!(problem.message.contains("is a superuser"), "{problem}");
    assert!(problem.message.contains("[databases.NAME]"), "{problem}");
    for attempt in [
        "select 1",
        "reset role",
        "copy (select 1) to program 'true'",
    ] {
        let (status, error) = run_sql(&superuser, attempt).await;
        assert_eq!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{attempt}: {error}"
        );
    }

    // A member, through a group, of a role that reads server files.
    let login = db.create_role("login");
    let group = db.create_role("group");
    db.execute(&format!(
        "grant pg_read_server_files to {group}; grant {group} to {login};",
        group = group.name,
        login = login.name
    ));
    let member = AppState::new(sql_config(&login.url, None));
    let problems = member.check_databases().await.problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.contains(&format!(
            "the login {:?} is a member (directly or through other roles) of pg_read_server_files",
            login.name
        )),
        "{}",
        problems[0]
    );
    assert_eq!(
        run_sql(&member, "select 1").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );

    // A right granted while the server runs is noticed by the next request.
    let plain = db.create_role("plain");
    let state = AppState::new(sql_config(&plain.url, None));
    assert!(state.check_databases().await.problems.is_empty());
    assert_eq!(run_sql(&state, "select 1 as one").await.0, StatusCode::OK);
    db.execute(&format!("grant pg_signal_backend to {}", plain.name));
    assert_eq!(
        run_sql(&state, "select 1 as one").await.0,
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let problems = state.check_databases().await.problems;
    assert!(
        problems[0].message.contains("pg_signal_backend"),
        "{}",
        problems[0]
    );

    // EXECUTE on a server-file function, granted one by one.
    let reader_of_files = db.create_role("files");
    db.execute(&format!(
        "grant execute on function pg_read_file(text) to {}",
        reader_of_files.name
    ));
    let problems = AppState::new(sql_config(&reader_of_files.url, None))
        .check_databases()
        .await
        .problems;
    assert!(
        problems[0]
            .message
            .contains("may execute pg_read_file(text)"),
        "{}",
        problems[0]
    );
    db.execute(&format!(
        "revoke execute on function pg_read_file(text) from {}",
        reader_of_files.name
    ));

    // A role the login cannot SET.
    let stranger = db.create_role("stranger");
    let lonely = db.create_role("lonely");
    let problems = AppState::new(sql_config(&lonely.url, Some(&stranger.name)))
        .check_databases()
        .await
        .problems;
    assert_eq!(problems[0].key, "sql.role", "{}", problems[0]);
    assert!(
        problems[0].message.contains("SET ROLE failed"),
        "{}",
        problems[0]
    );
}

#[tokio::test]
async fn named_queries_are_prepared_and_compared_with_their_declarations_at_start_up() {
    let db = TestDb::new();
    db.execute("create table t (id int, name text, small smallint)");
    let queries = r#"
[queries.good]
sql = "select id, name from t where id = $1 and name = $2 and small = $3::smallint"
params = [
  { name = "id", type = "bigint" },
  { name = "name", type = "text" },
  { name = "small", type = "smallint" },
]

[queries.extra]
sql = "select $1::int + $2::int as n"
params = [{ name = "a", type = "int" }]

[queries.fewer]
sql = "select 1 as one"
params = [{ name = "a", type = "int" }]

[queries.broken]
sql = "selec 1"

[queries.typed]
sql = "select id from t where name = $1 and small = $2"
params = [
  { name = "name", type = "int" },
  { name = "small", type = "int" },
]
"#;
    let state = AppState::new(postgres_config(db.url(), "", queries));
    let report = state.check_databases().await;
    assert!(report.unreachable.is_empty());
    let found: Vec<(usize, &str)> = report
        .problems
        .iter()
        .map(|problem| (problem.line, problem.key.as_str()))
        .collect();
    // postgres_config puts three lines before the queries.
    assert_eq!(
        found,
        [
            (22, "queries.broken.sql"),
            (14, "queries.extra.params"),
            (18, "queries.fewer.params"),
            (27, "queries.typed.params[0].type"),
        ],
        "{:#?}",
        report.problems
    );
    let messages: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
    assert!(messages[0].contains("syntax error"), "{}", messages[0]);
    assert!(
        messages[1].ends_with(
            "queries.extra.params: the SQL takes 2 parameters ($1 to $2), but 1 is declared"
        ),
        "{}",
        messages[1]
    );
    assert!(messages[1].starts_with("test.toml:14: "), "{}", messages[1]);
    assert!(
        messages[2].contains("takes no parameters, but 1 is declared"),
        "{}",
        messages[2]
    );
    assert!(
        messages[3].contains(
            "declared int, but PostgreSQL takes $1 as text: cast it in the SQL ($1::int)"
        ),
        "{}",
        messages[3]
    );
    // The session used for the checks is fine for requests afterwards.
    let response = oneshot(&state, get("/queries/good?id=1&name=x&small=2", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_database_down_at_start_is_checked_once_it_answers() {
    let db = TestDb::new();
    let port = free_port();
    let state = AppState::new(postgres_config(
        &url_via(&db, port),
        "pool_wait = \"1s\"",
        "[queries.extra]\nsql = \"select $1::int + $2::int as n\"\nparams = [{ name = \"a\", type = \"int\" }]\n",
    ));
    let report = state.check_databases().await;
    assert!(report.problems.is_empty());
    assert_eq!(report.unreachable, ["main"]);
    let checks = tokio::spawn(check_when_reachable(
        state.clone(),
        "main".into(),
        Duration::from_millis(50),
    ));
    let _proxy = Proxy::start(&db, port).await;
    let problems = tokio::time::timeout(Duration::from_secs(60), checks)
        .await
        .expect("the checks run once the database answers")
        .unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "queries.extra.params");
}

#[tokio::test]
async fn ad_hoc_sql_has_its_statement_timeout_and_never_reuses_a_session() {
    let db = TestDb::new();
    let login = db.create_role("timed");
    let config = postgres_config(
        &login.url,
        "pool_size = 1",
        &format!(
            "[queries.pid]\nsql = \"select pg_backend_pid() as pid\"\n\
             [sql]\nstatement_timeout = \"300ms\"\n\
             [[tokens]]\nname = \"analyst\"\ntoken = \"{ANALYST}\"\nscopes = [\"sql\"]\nqueries = [\"*\"]\n"
        ),
    );
    let state = AppState::new(config);
    assert!(state.check_databases().await.problems.is_empty());

    let (status, error) = run_sql(&state, "select pg_sleep(30)").await;
    assert_ne!(status, StatusCode::OK, "{error}");
    assert_eq!(
        error["sqlstate"], "57014",
        "cancelled by the timeout: {error}"
    );

    // One pooled connection: named queries reuse its session, POST /sql never does.
    let named_pid = || {
        let state = state.clone();
        async move {
            let response = oneshot(
                &state,
                get("/queries/pid", &[("authorization", &bearer(ANALYST))]),
            )
            .await;
            assert_eq!(response.status(), StatusCode::OK);
            json(response).await["pid"].clone()
        }
    };
    let sql_pid = || {
        let state = state.clone();
        async move {
            let (status, row) = run_sql(&state, "select pg_backend_pid() as pid").await;
            assert_eq!(status, StatusCode::OK, "{row}");
            row["pid"].clone()
        }
    };
    let first = named_pid().await;
    assert_eq!(
        named_pid().await,
        first,
        "a named query's session is reused"
    );
    let after_sql = sql_pid().await;
    assert_ne!(
        sql_pid().await,
        after_sql,
        "each POST /sql gets a new session"
    );
    assert_ne!(
        named_pid().await,
        after_sql,
        "and its session is not returned"
    );
}
