//! The gateway over real PostgreSQL, through the real HTTP stack: formats, typed
//! parameters, auth, errors before and after the first byte, limits, the pool.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use common::*;
use sluice_gateway::AppState;
use sluice_testkit::TestDb;

const QUERIES: &str = r#"
[queries.events]
description = "Events of one kind since a moment"
sql = "select id, kind, at, amount, note from events where kind = $1 and at >= $2::timestamptz and id <= $3::int order by id"
params = [
  { name = "kind", type = "text", required = true },
  { name = "since", type = "timestamptz", default = "2024-01-01T00:00:00Z" },
  { name = "max_id", type = "int", default = 1000000 },
]

[queries.series]
sql = "select g as id, 'row ' || g as label from generate_series(1, $1::int) g"
params = [{ name = "n", type = "int", required = true }]

[queries.divide]
sql = "select g as id, 1 / (g - $1::int) as inverse from generate_series(1, 1000000) g"
params = [{ name = "zero_at", type = "int", required = true }]

[queries.cast_in_sql]
sql = "select $1::int as n"
params = [{ name = "value", type = "text", required = true }]

[queries.limited]
sql = "select g from generate_series(1, $1::int) g"
params = [{ name = "n", type = "int", required = true }]
max_rows = 100000

[queries.sleepy]
sql = "select pg_sleep($1::float8) as slept"
params = [{ name = "seconds", type = "double", required = true }]
statement_timeout = "300ms"
"#;

fn setup() -> (TestDb, AppState) {
    let db = TestDb::new();
    db.execute(
        "create table events (id int primary key, kind text, at timestamptz, amount numeric(10,2), note text);
         insert into events select g, case when g % 3 = 0 then 'refund' else 'sale' end,
           timestamptz '2024-01-01 00:00:00+00' + g * interval '1 hour', g * 1.25,
           case when g % 4 = 0 then null else 'note, \"' || g || '\"' end
         from generate_series(1, 500) g;",
    );
    let config = postgres_config(db.url(), "pool_size = 4", QUERIES);
    (db, AppState::new(config))
}

#[tokio::test]
async fn a_named_query_streams_in_every_format_with_bound_parameters() {
    let (db, state) = setup();
    let uri = "/queries/events?kind=refund&since=2024-01-10T00:00:00%2B02:00";
    let sql = "select id, kind, at, amount, note from events where kind = 'refund' \
               and at >= '2024-01-10T00:00:00+02:00' order by id";

    let response = oneshot(&state, get(&format!("{uri}&format=csv"), &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/csv; charset=utf-8"
    );
    let csv = body(response).await.unwrap();
    let expected = db.psql_bytes(&format!("copy ({sql}) to stdout with (format csv, header)"));
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        String::from_utf8(expected).unwrap()
    );

    let response = oneshot(&state, get(uri, &[("accept", "application/x-ndjson")])).await;
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "application/x-ndjson"
    );
    let ndjson = String::from_utf8(body(response).await.unwrap()).unwrap();
    let rows: Vec<serde_json::Value> = ndjson
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let expected: Vec<serde_json::Value> = db
        .query_text(&format!("select row_to_json(t) from ({sql}) t"))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(!rows.is_empty());
    assert_eq!(rows, expected);

    let response = oneshot(&state, get(uri, &[("accept", "application/json")])).await;
    let array: Vec<serde_json::Value> =
        serde_json::from_slice(&body(response).await.unwrap()).unwrap();
    assert_eq!(array, expected);
}

#[tokio::test]
async fn parameters_are_checked_by_type_and_named_in_400s() {
    let (_db, state) = setup();
    let response = oneshot(
        &state,
        get("/queries/events?kind=sale&since=last%20tuesday", &[]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error = json(response).await;
    assert_eq!(error["parameter"], "since");
    assert!(
        error["error"].as_str().unwrap().contains("timestamp"),
        "{error}"
    );

    for (uri, parameter) in [
        ("/queries/events", "kind"),
        ("/queries/events?kind=a&kind=b", "kind"),
        ("/queries/events?kind=a&colour=red", "colour"),
        ("/queries/events?kind=a&max_id=99999999999", "max_id"),
        ("/queries/events?kind=a&format=xml", "format"),
    ] {
        let response = oneshot(&state, get(uri, &[])).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        assert_eq!(json(response).await["parameter"], parameter, "{uri}");
    }

    // A value only the database can judge: its error, with SQLSTATE, is a 400 too.
    let response = oneshot(&state, get("/queries/cast_in_sql?value=twelve", &[])).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error = json(response).await;
    assert_eq!(error["sqlstate"], "22P02");

    // Injection attempts are just values.
    let response = oneshot(&state, get("/queries/events?kind=x'%20or%20'1'='1", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body(response).await.unwrap().is_empty());

    let response = oneshot(&state, get("/queries/nope", &[])).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let response = oneshot(
        &state,
        get("/queries/series?n=3", &[("accept", "image/png")]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_ACCEPTABLE);
}

/// Every route's parameters take one value: a second one is a 400 naming the
/// parameter, before anything runs (not the first or last value silently
/// chosen: `format=csv&format=json` used to answer CSV).
#[tokio::test]
async fn a_repeated_parameter_is_a_400_naming_it_on_every_route() {
    let db = TestDb::new();
    db.execute("create table notes (id int primary key, note text);");
    const TOKEN: &str = "every-scope-token-0123456789";
    let config = postgres_config(
        db.url(),
        "pool_size = 1",
        &format!(
            "[queries.series]\nsql = \"select g from generate_series(1, $1::int) g\"\n\
             params = [{{ name = \"n\", type = \"int\", required = true }}]\n\
             [queries.add_note]\nsql = \"insert into notes values ($1::int, 'x')\"\n\
             params = [{{ name = \"id\", type = \"int\", required = true }}]\n\
             [sql]\n[tables.notes]\ntable = \"notes\"\n\
             [[tokens]]\nname = \"all\"\ntoken = \"{TOKEN}\"\nqueries = [\"*\"]\n\
             scopes = [\"sql\", \"write\"]\n"
        ),
    );
    let state = AppState::new(config);
    let bearer = format!("Bearer {TOKEN}");
    for (method, uri, body, parameter) in [
        (
            "GET",
            "/queries/series?n=1&format=csv&format=json",
            "",
            "format",
        ),
        (
            "GET",
            "/queries/series?format=csv&n=1&format=csv",
            "",
            "format",
        ),
        (
            "GET",
            "/queries/series?n=1&complete=1&complete=0",
            "",
            "complete",
        ),
        ("GET", "/queries/series?n=1&n=2", "", "n"),
        (
            "POST",
            "/sql?format=json&format=csv",
            r#"{"sql": "insert into notes values (1, 'x')"}"#,
            "format",
        ),
        (
            "POST",
            "/queries/add_note/batch?transaction=each&transaction=each",
            "[2]\n",
            "transaction",
        ),
        (
            "POST",
            "/tables/notes?format=ndjson&format=ndjson",
            "{\"id\": 3}\n",
            "format",
        ),
    ] {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::AUTHORIZATION, &bearer)
            .body(Body::from(body))
            .unwrap();
        let response = oneshot(&state, request).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        let error = json(response).await;
        assert_eq!(error["parameter"], parameter, "{uri}: {error}");
        assert!(
            error["error"].as_str().unwrap().contains("more than once"),
            "{uri}: {error}"
        );
    }
    assert_eq!(db.query_text("select count(*) from notes"), "0");
}

#[tokio::test]
async fn invalid_utf8_in_a_parameter_is_a_400_naming_it() {
    let (_db, state) = setup();
    // Percent-encoded bytes that are not UTF-8 (a lone 0xFF, a truncated sequence,
    // an encoded surrogate) are refused, never replaced by U+FFFD.
    for uri in [
        "/queries/events?kind=%FF",
        "/queries/events?kind=sale%C3",
        "/queries/events?kind=%ED%A0%80",
        "/queries/cast_in_sql?value=%FF1",
    ] {
        let response = oneshot(&state, get(uri, &[])).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        let error = json(response).await;
        let parameter = if uri.contains("kind") {
            "kind"
        } else {
            "value"
        };
        assert_eq!(error["parameter"], parameter, "{uri}: {error}");
        assert!(
            error["error"].as_str().unwrap().contains("UTF-8"),
            "{uri}: {error}"
        );
    }
    // A name that is not UTF-8 is refused too, named as it was sent.
    let response = oneshot(&state, get("/queries/events?kind=sale&k%FFnd=x", &[])).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error = json(response).await;
    assert!(
        error["error"].as_str().unwrap().contains("UTF-8"),
        "{error}"
    );
    assert_eq!(error["parameter"], "k%FFnd", "{error}");
    // A query name that is not UTF-8 names no query: a JSON 404, logged and
    // counted, with the name as it was sent.
    let response = oneshot(&state, get("/queries/%FF", &[])).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(
        json(response).await["error"]
            .as_str()
            .unwrap()
            .contains("\"%FF\""),
        "the name as sent"
    );
    let metrics = String::from_utf8(
        body(oneshot(&state, get("/metrics", &[])).await)
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        metrics.contains(
            "sluice_http_requests_total{route=\"queries\",query=\"%FF\",status=\"404\",outcome=\"rejected\"}"
        ),
        "{metrics}"
    );
    // Valid multi-byte text still works, percent-encoded or with `+` for spaces.
    let response = oneshot(&state, get("/queries/events?kind=%C3%A9t%C3%A9+x", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn errors_before_the_first_byte_are_json_with_sqlstate_and_no_internals() {
    let (_db, state) = setup();
    let response = oneshot(&state, get("/queries/divide?zero_at=1", &[])).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let error = json(response).await;
    assert_eq!(error["sqlstate"], "22012");
    assert_eq!(error["error"], "division by zero");

    let response = oneshot(&state, get("/queries/sleepy?seconds=5", &[])).await;
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(json(response).await["sqlstate"], "57014");

    // A named query whose SQL is broken is the server's fault: 500, no SQL text.
    let db = TestDb::new();
    let config = postgres_config(
        db.url(),
        "",
        "[queries.broken]\nsql = \"select * from missing_table\"\n",
    );
    let response = oneshot(&AppState::new(config), get("/queries/broken", &[])).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let error = json(response).await;
    assert_eq!(error["sqlstate"], "42P01");
    assert!(!error.to_string().contains("missing_table"), "{error}");
}

#[tokio::test]
async fn an_error_after_the_first_byte_aborts_the_body() {
    let (_db, state) = setup();
    // Through the router: the body ends in an error, never in a clean end.
    let response = oneshot(&state, get("/queries/divide?zero_at=500000", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let error = body(response).await.unwrap_err();
    assert!(error.contains("division by zero"), "{error}");

    // Through a real socket: the client sees a broken chunked transfer.
    let (address, stop, _task) = listen(state, Duration::from_secs(5)).await;
    let response = reqwest::get(format!("http://{address}/queries/divide?zero_at=500000"))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut received = 0usize;
    let outcome = loop {
        match futures_util::StreamExt::next(&mut stream).await {
            Some(Ok(chunk)) => received += chunk.len(),
            Some(Err(error)) => break Err(error),
            None => break Ok(()),
        }
    };
    assert!(
        outcome.is_err(),
        "the transfer ended cleanly after {received} bytes"
    );
    assert!(
        received > 1_000_000,
        "rows before the error were streamed: {received}"
    );
    let _ = stop.send(());
}

#[tokio::test]
async fn complete_1_ends_a_whole_ndjson_body_with_a_completion_line_and_a_cut_one_without() {
    let (_db, state) = setup();
    let response = oneshot(&state, get("/queries/series?n=3&complete=1", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let text = String::from_utf8(body(response).await.unwrap()).unwrap();
    assert_eq!(
        text,
        "{\"id\":1,\"label\":\"row 1\"}\n{\"id\":2,\"label\":\"row 2\"}\n\
         {\"id\":3,\"label\":\"row 3\"}\n{\"_complete\": true, \"rows\": 3}\n"
    );
    // Off by default, and for an empty result it is the only line.
    let plain = body(oneshot(&state, get("/queries/series?n=3", &[])).await).await;
    assert!(!String::from_utf8(plain.unwrap())
        .unwrap()
        .contains("_complete"));
    let empty = body(oneshot(&state, get("/queries/series?n=0&complete=true", &[])).await).await;
    assert_eq!(empty.unwrap(), b"{\"_complete\": true, \"rows\": 0}\n");

    // A body cut by an error never gets the line.
    let response = oneshot(
        &state,
        get("/queries/divide?zero_at=500000&complete=1", &[]),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body(response)
        .await
        .unwrap_err()
        .contains("division by zero"));

    // JSON shows completion by its closing bracket: nothing is added.
    let array = body(
        oneshot(
            &state,
            get("/queries/series?n=2&complete=1&format=json", &[]),
        )
        .await,
    )
    .await;
    let array: serde_json::Value = serde_json::from_slice(&array.unwrap()).unwrap();
    assert_eq!(array.as_array().unwrap().len(), 2);

    // CSV cannot show it; a value other than 1/0 is a 400 naming the parameter.
    for (uri, message) in [
        (
            "/queries/series?n=3&complete=1&format=csv",
            "CSV has no way to show that a body is complete",
        ),
        ("/queries/series?n=3&complete=yes", "give 1 or 0"),
    ] {
        let response = oneshot(&state, get(uri, &[])).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{uri}");
        let error = json(response).await;
        assert!(
            error["error"].as_str().unwrap().contains(message),
            "{error}"
        );
    }
}

#[tokio::test]
async fn limits_abort_instead_of_truncating() {
    let (_db, state) = setup();
    let response = oneshot(&state, get("/queries/limited?n=100000", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        body(response)
            .await
            .unwrap()
            .iter()
            .filter(|&&byte| byte == b'\n')
            .count(),
        100_000
    );

    let response = oneshot(&state, get("/queries/limited?n=100001", &[])).await;
    // Beyond the first chunk the status is sent, so the body is aborted.
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body(response).await.unwrap_err().contains("max_rows"));
}

#[tokio::test]
async fn gzip_and_zstd_are_used_when_asked_for() {
    let (_db, state) = setup();
    let plain = body(oneshot(&state, get("/queries/series?n=20000", &[])).await)
        .await
        .unwrap();
    for encoding in ["gzip", "zstd"] {
        let response = oneshot(
            &state,
            get("/queries/series?n=20000", &[("accept-encoding", encoding)]),
        )
        .await;
        assert_eq!(response.headers()[header::CONTENT_ENCODING], encoding);
        let compressed = body(response).await.unwrap();
        assert!(
            compressed.len() * 4 < plain.len(),
            "{encoding}: {} vs {}",
            compressed.len(),
            plain.len()
        );
    }
    let response = oneshot(&state, get("/queries/series?n=10", &[])).await;
    assert!(response.headers().get(header::CONTENT_ENCODING).is_none());
}

#[tokio::test]
async fn tokens_give_401_without_a_valid_one_and_403_without_the_right() {
    let db = TestDb::new();
    // [sql] refuses a privileged login: the gateway logs in as a plain role.
    let gateway = db.create_role("gateway");
    std::env::set_var("SLUICE_TEST_ADMIN_TOKEN", "admin-token-0123456789");
    let reader_hash: String = sha2::Digest::finalize(sha2::Digest::chain_update(
        sha2::Sha256::default(),
        "reader-token-0123456789",
    ))
    .iter()
    .map(|byte| format!("{byte:02x}"))
    .collect();
    let config = postgres_config(
        &gateway.url,
        "",
        &format!(
            r#"
[queries.one]
sql = "select 1 as one"
[queries.two]
sql = "select 2 as two"
[sql]
[[tokens]]
name = "admin"
token = "${{SLUICE_TEST_ADMIN_TOKEN}}"
queries = ["*"]
scopes = ["sql"]
[[tokens]]
name = "reader"
sha256 = "{reader_hash}"
queries = ["one"]
"#
        ),
    );
    let state = AppState::new(config);
    let status = |uri: &'static str, token: Option<&'static str>| {
        let state = state.clone();
        async move {
            let authorization = token.map(|token| format!("Bearer {token}"));
            let headers: Vec<(&str, &str)> = authorization
                .iter()
                .map(|value| ("authorization", value.as_str()))
                .collect();
            let response = oneshot(&state, get(uri, &headers)).await;
            if response.status() == StatusCode::UNAUTHORIZED {
                assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
            }
            response.status().as_u16()
        }
    };
    assert_eq!(status("/queries/one", None).await, 401);
    assert_eq!(
        status("/queries/one", Some("wrong-token-0123456789")).await,
        401
    );
    assert_eq!(
        status("/queries/one", Some("admin-token-0123456789")).await,
        200
    );
    assert_eq!(
        status("/queries/two", Some("admin-token-0123456789")).await,
        200
    );
    assert_eq!(
        status("/queries/one", Some("reader-token-0123456789")).await,
        200
    );
    assert_eq!(
        status("/queries/two", Some("reader-token-0123456789")).await,
        403
    );

    let sql = |token: &str, body: &str| {
        Request::post("/sql")
            .header("authorization", format!("Bearer {token}"))
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let response = oneshot(
        &state,
        sql("reader-token-0123456789", r#"{"sql": "select 1"}"#),
    )
    .await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let response = oneshot(
        &state,
        sql(
            "admin-token-0123456789",
            r#"{"sql": "select $1::int + 1 as n", "params": [41]}"#,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(body(response).await.unwrap(), b"{\"n\":42}\n");
    // Parameters are bound as what JSON says they are; arrays and objects as documents.
    let response = oneshot(
        &state,
        sql(
            "admin-token-0123456789",
            r#"{"sql": "select $1::jsonb -> 'a' as a, $2::bool as b, $3::numeric as c", "params": [{"a": [1, "x"]}, true, 1.50]}"#,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        body(response).await.unwrap(),
        b"{\"a\":[1, \"x\"],\"b\":true,\"c\":1.50}\n"
    );
    // Always read-only, whatever the SQL tries.
    db.execute(&format!(
        "create table t (a int); grant insert on t to {}",
        gateway.name
    ));
    let response = oneshot(
        &state,
        sql(
            "admin-token-0123456789",
            r#"{"sql": "insert into t values (1) returning a"}"#,
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(response).await["sqlstate"], "25006");
    assert_eq!(db.query_text("select count(*) from t"), "0");
    let response = oneshot(
        &state,
        sql("admin-token-0123456789", r#"{"sql": "selec 1"}"#),
    )
    .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json(response).await["sqlstate"], "42601");
    // A body over the limit is a JSON 413, logged and counted like any request.
    let huge = format!(
        r#"{{"sql": "select 1", "params": ["{}"]}}"#,
        "x".repeat(3 << 20)
    );
    let response = oneshot(&state, sql("admin-token-0123456789", &huge)).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert!(json(response).await["error"]
        .as_str()
        .unwrap()
        .contains("2 MiB"));
    let metrics = String::from_utf8(
        body(oneshot(&state, get("/metrics", &[])).await)
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(
        metrics.contains(
            "sluice_http_requests_total{route=\"sql\",query=\"\",status=\"413\",outcome=\"rejected\"}"
        ),
        "{metrics}"
    );
    // JSON parameters that are not UTF-8 (raw bytes, a lone surrogate) are refused.
    for body in [
        &b"{\"sql\": \"select $1::text\", \"params\": [\"\xff\"]}"[..],
        &br#"{"sql": "select $1::text", "params": ["\ud800"]}"#[..],
    ] {
        let request = Request::post("/sql")
            .header("authorization", "Bearer admin-token-0123456789")
            .body(Body::from(body.to_vec()))
            .unwrap();
        let response = oneshot(&state, request).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        let error = json(response).await;
        assert_eq!(error["parameter"], "params[0]", "{error}");
    }
}

#[tokio::test]
async fn ad_hoc_sql_is_off_unless_configured() {
    let (_db, state) = setup();
    let response = oneshot(
        &state,
        Request::post("/sql")
            .body(Body::from(r#"{"sql": "select 1"}"#))
            .unwrap(),
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn health_metrics_and_openapi_describe_the_server() {
    let (_db, state) = setup();
    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(json(response).await["databases"]["main"], "ok");

    let series = body(oneshot(&state, get("/queries/series?n=1234", &[])).await)
        .await
        .unwrap();
    assert_eq!(series.iter().filter(|&&byte| byte == b'\n').count(), 1234);
    let response = oneshot(&state, get("/metrics", &[])).await;
    let text = String::from_utf8(body(response).await.unwrap()).unwrap();
    for needle in [
        "sluice_http_requests_total{route=\"queries\",query=\"series\",status=\"200\",outcome=\"complete\"}",
        "sluice_rows_total{query=\"series\"}",
        "sluice_db_round_trips_total{query=\"series\"}",
        "sluice_request_duration_seconds_bucket{route=\"queries\",query=\"series\",le=\"0.5\"}",
        "sluice_pool_connections_in_use{database=\"main\"}",
        "sluice_pool_connections_max{database=\"main\"} 4",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }

    let document = json(oneshot(&state, get("/openapi.json", &[])).await).await;
    let events = &document["paths"]["/queries/events"]["get"];
    assert_eq!(events["summary"], "Events of one kind since a moment");
    let parameters = events["parameters"].as_array().unwrap();
    assert_eq!(parameters[0]["name"], "kind");
    assert_eq!(parameters[0]["required"], true);
    assert_eq!(parameters[1]["schema"]["format"], "date-time");
    // Defaults have their schema's JSON type (a string here made the
    // document invalid OpenAPI).
    assert_eq!(parameters[2]["schema"]["default"], 1000000);
    assert_eq!(parameters[1]["schema"]["default"], "2024-01-01T00:00:00Z");
    assert!(document["paths"]["/queries/limited"]["get"]["description"]
        .as_str()
        .unwrap()
        .contains("100000 rows"));
}

/// The gate `wait_for_gate()` waits for. It opens when dropped too: a test that
/// fails while the gate is shut would otherwise hang, its schema never dropped
/// while the waiting query holds a lock on the gate's table.
struct Gate<'a>(&'a TestDb);

impl Gate<'_> {
    fn open(&self) {
        self.0.execute("insert into gate values (true)");
    }
}

impl Drop for Gate<'_> {
    fn drop(&mut self) {
        self.open();
    }
}

/// A database whose `wait_for_gate()` runs until the gate is opened, and a
/// state over it with one pooled session, `pool_wait`, the queries `hold`
/// (which waits for the gate) and `quick`, and the app's sessions.
async fn gated_pool(pool_wait: &str) -> (TestDb, AppState, Sessions) {
    let db = TestDb::new();
    db.execute(
        "create table gate (opened boolean);
         create function wait_for_gate() returns boolean language plpgsql as $$
         begin
           while not exists (select from gate) loop
             perform pg_sleep(0.01);
           end loop;
           return true;
         end $$;",
    );
    let application = application_name();
    let config = postgres_config(
        &with_application_name(db.url(), &application),
        &format!("pool_size = 1\npool_wait = \"{pool_wait}\""),
        "[queries.hold]\nsql = \"select wait_for_gate() as opened\"\n\
         [queries.quick]\nsql = \"select 1 as one\"\n",
    );
    let sessions = Sessions::watch(&db, &application).await;
    (db, AppState::new(config), sessions)
}

/// Runs `hold` on the pool's one session, once it is running there.
async fn hold_the_pool(
    state: &AppState,
    sessions: &Sessions,
) -> tokio::task::JoinHandle<StatusCode> {
    let holder = tokio::spawn({
        let state = state.clone();
        async move { oneshot(&state, get("/queries/hold", &[])).await.status() }
    });
    wait_until(
        PATIENCE,
        "the pool's one connection to run the holding query",
        move || async move {
            sessions
                .count("state = 'active' and query like '%wait_for_gate%'")
                .await
                == 1
        },
    )
    .await;
    holder
}

#[tokio::test]
async fn an_exhausted_pool_waits_then_answers_503_with_retry_after() {
    let (db, state, sessions) = gated_pool("200ms").await;
    // The one connection is held by a query that runs until the test opens the gate.
    let gate = Gate(&db);
    let holder = hold_the_pool(&state, &sessions).await;
    let started = std::time::Instant::now();
    // Bounded, as the holder never lets go by itself: a pool that waited for it
    // would hang here.
    let response = tokio::time::timeout(PATIENCE, oneshot(&state, get("/queries/quick", &[])))
        .await
        .expect("the request waits no longer than pool_wait");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(json(response).await["error"]
        .as_str()
        .unwrap()
        .contains("busy"));
    gate.open();
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    let response = oneshot(&state, get("/queries/quick", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
}

/// `/health` never queues for a session: with every session held and a
/// `pool_wait` longer than its own 5 s limit, it answers at once that the
/// database is busy (it used to wait, and call the database `timeout`: 503).
#[tokio::test]
async fn health_finds_a_held_pool_busy_without_waiting_for_it() {
    let (db, state, sessions) = gated_pool("60s").await;
    let gate = Gate(&db);
    let holder = hold_the_pool(&state, &sessions).await;
    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let health = json(response).await;
    assert_eq!(health["databases"]["main"], "busy", "{health}");
    assert_eq!(health["status"], "healthy");
    gate.open();
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    // Once the holder's session is back, the check runs on it.
    let state = &state;
    wait_until(
        PATIENCE,
        "the health check to find the pool free",
        || async {
            json(oneshot(state, get("/health", &[])).await).await["databases"]["main"] == "ok"
        },
    )
    .await;
}

#[tokio::test]
async fn a_database_down_at_start_gives_503_and_recovers_by_itself() {
    let db = TestDb::new();
    let port = free_port();
    let config = postgres_config(
        &url_via(&db, port),
        "pool_wait = \"1s\"",
        "[queries.quick]\nsql = \"select 1 as one\"\n",
    );
    let state = AppState::new(config);
    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(response).await["status"], "unhealthy");
    let response = oneshot(&state, get("/queries/quick", &[])).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    let error = json(response).await;
    assert!(
        !error.to_string().contains(&port.to_string()),
        "no internals: {error}"
    );

    let proxy = Proxy::start(&db, port).await;
    let response = oneshot(&state, get("/health", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        body(oneshot(&state, get("/queries/quick", &[])).await)
            .await
            .unwrap(),
        b"{\"one\":1}\n"
    );

    // The database goes away while idle connections sit in the pool, then returns.
    proxy.kill().await;
    assert_eq!(
        oneshot(&state, get("/queries/quick", &[])).await.status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let _proxy = Proxy::start(&db, port).await;
    assert_eq!(
        body(oneshot(&state, get("/queries/quick", &[])).await)
            .await
            .unwrap(),
        b"{\"one\":1}\n"
    );
}

#[tokio::test]
async fn a_database_dying_mid_stream_aborts_the_body() {
    let db = TestDb::new();
    let port = free_port();
    let proxy = Proxy::start(&db, port).await;
    let config = postgres_config(
        &url_via(&db, port),
        "",
        "[queries.big]\nsql = \"select g, repeat('x', 100) as pad from generate_series(1, 5000000) g\"\n",
    );
    let state = AppState::new(config);
    let response = oneshot(&state, get("/queries/big", &[])).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let first = futures_util::StreamExt::next(&mut body)
        .await
        .unwrap()
        .unwrap();
    assert!(!first.is_empty());
    proxy.kill().await;
    let outcome = loop {
        match futures_util::StreamExt::next(&mut body).await {
            Some(Ok(_)) => continue,
            Some(Err(error)) => break Err(error.to_string()),
            None => break Ok(()),
        }
    };
    let error = outcome.expect_err("a body cut by a dead database must not end cleanly");
    assert!(error.contains("connection"), "{error}");
}

#[tokio::test]
async fn the_openapi_document_types_rows_from_the_prepared_statements() {
    let (_db, state) = setup();
    // Before the start-up checks have prepared the queries, rows are any object.
    let document = json(oneshot(&state, get("/openapi.json", &[])).await).await;
    let rows = &document["paths"]["/queries/events"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        rows["application/json"]["schema"]["items"],
        serde_json::json!({"type": "object"})
    );

    let report = state.check_databases().await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let document = json(oneshot(&state, get("/openapi.json", &[])).await).await;
    let rows = &document["paths"]["/queries/events"]["get"]["responses"]["200"]["content"];
    assert_eq!(
        rows["application/json"]["schema"]["items"]["$ref"],
        "#/components/schemas/events_row"
    );
    let row = &document["components"]["schemas"]["events_row"];
    assert_eq!(
        row["required"],
        serde_json::json!(["id", "kind", "at", "amount", "note"])
    );
    let properties = &row["properties"];
    // PostgreSQL says nothing of NULLs in a result: every column may hold one.
    assert_eq!(
        properties["id"],
        serde_json::json!({"type": ["integer", "null"], "description": "int4"})
    );
    assert_eq!(
        properties["at"]["type"],
        serde_json::json!(["string", "null"])
    );
    assert_eq!(properties["amount"]["description"], "numeric");
    assert_eq!(
        properties["amount"]["anyOf"][0],
        serde_json::json!({"type": "number"})
    );
    // The batch route's results carry the same rows.
    let batch = &document["paths"]["/queries/events/batch"]["post"];
    let result = &batch["responses"]["200"]["content"]["application/json"]["schema"]["items"];
    assert_eq!(
        result["properties"]["rows"]["items"]["$ref"],
        "#/components/schemas/events_row"
    );
}

#[tokio::test]
async fn a_batch_takes_a_json_array_and_answers_one() {
    let (_db, state) = setup();
    let request = |body: &str| {
        Request::post("/queries/events/batch")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    let response = oneshot(
        &state,
        request(
            "[[\"refund\", \"2024-01-01T00:00:00Z\", 3],\n {\"kind\": \"sale\", \"max_id\": 2}, 7]",
        ),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let results = json(response).await;
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0]["line"], 1);
    assert_eq!(results[0]["rows"][0]["id"], 3);
    assert_eq!(results[1]["rows"].as_array().unwrap().len(), 2);
    assert!(results[2]["error"]["message"].is_string(), "{results:?}");
    assert_eq!(results[2]["line"], 3);

    let empty = json(oneshot(&state, request("[]")).await).await;
    assert_eq!(empty, serde_json::json!([]));
    // Compressed, the body is polled once more after its end.
    let mut compressed = request("[[\"sale\", \"2024-01-01T00:00:00Z\", 2]]");
    compressed
        .headers_mut()
        .insert(header::ACCEPT_ENCODING, "gzip".parse().unwrap());
    let response = oneshot(&state, compressed).await;
    assert_eq!(response.headers()[header::CONTENT_ENCODING], "gzip");
    assert!(!body(response).await.unwrap().is_empty());
    let response = oneshot(&state, request("{\"kind\": \"sale\"}")).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    let error = json(response).await;
    assert!(
        error["error"].as_str().unwrap().contains("one JSON array"),
        "{error}"
    );
}
