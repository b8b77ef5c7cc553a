//! The configuration parser's tests: defaults, errors at the right line and
//! key, each section's rules, deprecated spellings.

use sha2::{Digest, Sha256};
use sluice_formats::ParamType;

use super::text::parse_bytes;
use super::*;
use crate::throttle::TokenLimits;

const GOOD: &str = r#"
[server]
shutdown_grace = "5s"

[databases.main]
url = "postgres://app:${SLUICE_CONFIG_TEST_PASSWORD}@127.0.0.1:5432/app"
pool_size = 4

[queries.by_status]
sql = "select * from t where status = $1 and at >= $2::timestamptz"
params = [
  { name = "status", type = "text", required = true },
  { name = "since", type = "timestamptz", default = "2024-01-01T00:00:00Z" },
]
statement_timeout = "30s"
max_rows = 1000
max_bytes = "64MiB"

[[tokens]]
name = "ops"
token = "a-long-enough-token-value"
queries = ["*"]
scopes = ["sql"]

[sql]
"#;

#[test]
fn limits_of_tokens_bodies_and_streams_load_with_their_defaults() {
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    let config = Config::parse(GOOD, "good.toml").unwrap();
    assert_eq!(config.max_query_string, DEFAULT_MAX_QUERY_STRING);
    assert_eq!(config.max_body, DEFAULT_MAX_BODY);
    assert_eq!(config.max_stream_duration, DEFAULT_MAX_STREAM_DURATION);
    assert_eq!(config.idle_write_timeout, DEFAULT_IDLE_WRITE_TIMEOUT);
    assert_eq!(config.body_read_timeout, DEFAULT_BODY_READ_TIMEOUT);
    assert_eq!(config.min_body_rate, DEFAULT_MIN_BODY_RATE);
    assert_eq!(config.tokens[0].limits, TokenLimits::default());
    let text = GOOD
        .replace(
            "shutdown_grace = \"5s\"",
            "shutdown_grace = \"5s\"\nmax_body = \"10MiB\"\nidle_write_timeout = \"5s\"\n\
             body_read_timeout = \"2s\"\nmin_body_rate = \"0\"",
        )
        .replace(
            "max_rows = 1000",
            "max_rows = 1000\nmax_stream_duration = \"10m\"",
        )
        .replace(
            "scopes = [\"sql\"]",
            "scopes = [\"sql\"]\nmax_concurrent = 3\nrate = 2.5",
        );
    let config = Config::parse(&text, "good.toml").unwrap();
    assert_eq!(config.max_body, 10 << 20);
    assert_eq!(config.idle_write_timeout, Duration::from_secs(5));
    assert_eq!(config.body_read_timeout, Duration::from_secs(2));
    assert_eq!(config.min_body_rate, 0);
    let limits = &config.queries["by_status"].limits;
    assert_eq!(limits.max_stream_duration, Some(Duration::from_secs(600)));
    assert_eq!(limits.idle_write_timeout, None);
    assert_eq!(
        config.tokens[0].limits,
        TokenLimits {
            max_concurrent: Some(3),
            rate: Some(2.5),
            burst: Some(3),
        }
    );
    for (replacement, key) in [
        ("max_concurrent = 0", "tokens[0].max_concurrent"),
        ("rate = 0", "tokens[0].rate"),
        ("rate = \"fast\"", "tokens[0].rate"),
        ("burst = 5", "tokens[0].burst"),
    ] {
        let error = error_for(&GOOD.replace(
            "scopes = [\"sql\"]",
            &format!("scopes = [\"sql\"]\n{replacement}"),
        ));
        assert_eq!(error.key, key, "{replacement}: {error}");
    }
    let error = error_for(&GOOD.replace("max_rows = 1000", "idle_write_timeout = \"0s\""));
    assert_eq!(error.key, "queries.by_status.idle_write_timeout");
}

#[test]
fn a_full_file_loads_with_env_substitution_and_hashed_tokens() {
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    let config = Config::parse(GOOD, "good.toml").unwrap();
    let target = &config.databases["main"].target;
    assert_eq!(target.product(), "PostgreSQL");
    // The password came from the environment (and is never printed).
    let described = format!("{target:?}");
    assert!(described.contains("password: Some(\"…\")"), "{described}");
    assert!(!described.contains("s3cret"), "{described}");
    let query = &config.queries["by_status"];
    assert_eq!(query.params[1].ty, ParamType::TimestampTz);
    assert_eq!(query.limits.max_bytes, Some(64 << 20));
    assert_eq!(
        query.limits.statement_timeout,
        Some(Duration::from_secs(30))
    );
    assert_eq!(config.shutdown_grace, Duration::from_secs(5));
    assert_eq!(
        config.tokens[0].sha256,
        <[u8; 32]>::from(Sha256::digest(b"a-long-enough-token-value"))
    );
    assert_eq!(
        config.sql.unwrap().limits.statement_timeout,
        Some(Duration::from_secs(30))
    );
}

#[test]
fn tls_needs_both_files() {
    let both = GOOD.replace(
        "shutdown_grace = \"5s\"",
        "tls_cert = \"/etc/sluice/server.crt\"\ntls_key = \"server.key\"",
    );
    let config = Config::parse(&both, "good.toml").unwrap();
    assert_eq!(
        config.tls,
        Some(TlsFiles {
            certificate: "/etc/sluice/server.crt".into(),
            key: "server.key".into(),
        })
    );
    assert_eq!(Config::parse(GOOD, "good.toml").unwrap().tls, None);

    let error = error_for(&GOOD.replace("shutdown_grace = \"5s\"", "tls_cert = \"a.crt\""));
    assert_eq!((error.line, error.key.as_str()), (3, "server.tls_cert"));
    assert!(error.message.contains("needs tls_key"), "{error}");
    let error = error_for(&GOOD.replace("shutdown_grace = \"5s\"", "tls_key = \"a.key\""));
    assert_eq!(error.key, "server.tls_key");
}

fn error_for(text: &str) -> ConfigError {
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    Config::parse(text, "bad.toml").unwrap_err()
}

#[test]
fn the_servers_own_query_string_keys_are_no_parameter_names() {
    for reserved in ["format", "complete"] {
        let error =
            error_for(&GOOD.replace("{ name = \"since\"", &format!("{{ name = \"{reserved}\"")));
        assert_eq!(
            (error.line, error.key.as_str()),
            (13, "queries.by_status.params[1].name")
        );
        assert!(
            error.message.contains("which the server reads itself"),
            "{error}"
        );
    }
}

#[test]
fn errors_name_the_file_the_line_and_the_key() {
    let error = error_for(&GOOD.replace("type = \"timestamptz\"", "type = \"tiemstamptz\""));
    assert_eq!(
        (error.line, error.key.as_str()),
        (13, "queries.by_status.params[1].type")
    );
    assert!(
        error
            .to_string()
            .starts_with("bad.toml:13: queries.by_status.params[1].type: unknown"),
        "{error}"
    );

    let error = error_for(&GOOD.replace(
        "${SLUICE_CONFIG_TEST_PASSWORD}",
        "${SLUICE_NOT_SET_ANYWHERE}",
    ));
    assert_eq!((error.line, error.key.as_str()), (6, "databases.main.url"));
    assert!(error.message.contains("SLUICE_NOT_SET_ANYWHERE"), "{error}");

    let error = error_for(&GOOD.replace("pool_size = 4", "pool_size = \"four\""));
    assert_eq!(
        (error.line, error.key.as_str()),
        (7, "databases.main.pool_size")
    );
    assert_eq!(error.message, "must be between 1 and 10000");

    let error = error_for(&GOOD.replace("max_rows = 1000", "max_rowz = 1000"));
    assert_eq!(
        (error.line, error.key.as_str()),
        (16, "queries.by_status.max_rowz")
    );
    assert!(
        error.message.contains("[queries.NAME] takes database,"),
        "{error}"
    );
    let error = error_for(&format!("{GOOD}\n[servre]\nlisten = \"127.0.0.1:1\"\n"));
    assert_eq!((error.line, error.key.as_str()), (27, "servre"));

    let error = error_for(&GOOD.replace(
        "statement_timeout = \"30s\"",
        "statement_timeout = \"30 parsecs\"",
    ));
    assert_eq!(error.line, 15);

    let error =
        error_for(&GOOD.replace("statement_timeout = \"30s\"", "statement_timeout = \"30\""));
    assert_eq!(
        (error.line, error.key.as_str(), error.message.as_str()),
        (
            15,
            "queries.by_status.statement_timeout",
            "give a unit: 30s, 30ms"
        )
    );

    let error = error_for(&GOOD.replace(
        "default = \"2024-01-01T00:00:00Z\"",
        "default = \"yesterday\"",
    ));
    assert_eq!(
        (error.line, error.key.as_str()),
        (13, "queries.by_status.params[1].default")
    );

    let error = error_for(&GOOD.replace("scopes = [\"sql\"]", "scopes = []"));
    assert_eq!(error.key, "sql");

    let error = error_for(&GOOD.replace("name = \"since\"", "name = \"status\""));
    assert_eq!(
        (error.line, error.key.as_str()),
        (13, "queries.by_status.params[1].name")
    );
    assert!(error.message.contains("declared twice"), "{error}");
}

#[test]
fn tables_need_postgres_and_a_write_token() {
    let with_table =
        format!("{GOOD}\n[tables.events]\ntable = \"app.events\"\nmax_line_bytes = \"1MiB\"\n");
    let error = error_for(&with_table);
    assert_eq!(error.key, "tables.events");
    assert!(error.message.contains("scope \"write\""), "{error}");

    let writable = with_table.replace("scopes = [\"sql\"]", "scopes = [\"sql\", \"write\"]");
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    let config = Config::parse(&writable, "good.toml").unwrap();
    let table = &config.tables["events"];
    assert_eq!(
        (table.database.as_str(), table.table.as_str()),
        ("main", "app.events")
    );
    assert_eq!(table.max_line_bytes, 1 << 20);

    let error =
        error_for(&writable.replace("scopes = [\"sql\", \"write\"]", "scopes = [\"wrote\"]"));
    assert_eq!(error.key, "tokens[0].scopes");

    let error =
        error_for(&writable.replace("max_line_bytes = \"1MiB\"", "max_line_bytes = \"lots\""));
    assert_eq!(
        (error.line, error.key.as_str()),
        (29, "tables.events.max_line_bytes")
    );

    let sqlite = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n\n[tables.events]\n";
    let error = error_for(sqlite);
    assert_eq!(
        (error.line, error.key.as_str()),
        (4, "tables.events.database")
    );
    assert!(error.message.contains("read-only"), "{error}");
}

#[test]
fn table_queries_and_split_by_say_how_flight_cuts_a_query() {
    let text = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                [queries.whole]\ntable = \"app.events\"\n\
                [queries.by_id]\ntable = \"events\"\nsplit_by = \"id\"\n\
                [queries.some]\nsql = \"select * from events where k = $1\"\n\
                params = [{ name = \"k\", type = \"int\" }]\nsplit_by = \"id\"\n\
                [queries.plain]\nsql = \"select 1\"\n";
    let config = Config::parse(text, "good.toml").unwrap();
    let whole = &config.queries["whole"];
    assert_eq!(whole.sql, "select * from \"app\".\"events\"");
    assert_eq!(
        whole.split,
        Some(QuerySplit::Storage {
            table: "app.events".into()
        })
    );
    assert_eq!(whole.line, 4);
    assert_eq!(
        config.queries["by_id"].split,
        Some(QuerySplit::Column("id".into()))
    );
    assert_eq!(
        config.queries["some"].split,
        Some(QuerySplit::Column("id".into()))
    );
    assert_eq!(config.queries["plain"].split, None);
    assert!(config.flight.is_none());

    let both = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                [queries.q]\nsql = \"select 1\"\ntable = \"t\"\n";
    assert!(error_for(both).message.contains("exactly one of sql"));
    let injected = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                    [queries.q]\ntable = \"t; drop table t\"\n";
    assert_eq!(error_for(injected).key, "queries.q.table");
    let with_params = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                       [queries.q]\ntable = \"t\"\nparams = [{ name = \"k\", type = \"int\" }]\n";
    assert_eq!(error_for(with_params).key, "queries.q.params");
    let sqlite = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n\
                  [queries.q]\nsql = \"select 1 as id\"\nsplit_by = \"id\"\n";
    let error = error_for(sqlite);
    assert_eq!(error.key, "queries.q.split_by");
    assert!(error.message.contains("SQLite"), "{error}");
    // A table query on SQLite is one part: nothing to refuse.
    let sqlite_table = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\n[queries.q]\ntable = \"t\"\n";
    assert_eq!(
        Config::parse(sqlite_table, "ok.toml").unwrap().queries["q"].split,
        None
    );
}

#[test]
fn a_table_key_is_a_table_name_read_as_its_database_reads_names() {
    let config = |url: &str, table: &str| {
        format!(
            "[databases.main]\nurl = \"{url}\"\n[queries.q]\ntable = '{table}'\n\
             [tables.t]\ntable = '{table}'\n\
             [[tokens]]\nname = \"w\"\ntoken = \"a-long-enough-token-value\"\nscopes = [\"write\"]\n"
        )
    };
    let postgres = "postgres://u@h/d";
    let parsed = Config::parse(&config(postgres, r#"Shop."Big ""Deal"" Ünï""#), "ok.toml").unwrap();
    assert_eq!(
        parsed.queries["q"].sql,
        r#"select * from "shop"."Big ""Deal"" Ünï""#
    );
    assert_eq!(parsed.tables["t"].table, r#"Shop."Big ""Deal"" Ünï""#);
    let mariadb = "mariadb://u@h/d";
    let parsed = Config::parse(&config(mariadb, "Shop.`we``ird`"), "ok.toml").unwrap();
    assert_eq!(parsed.queries["q"].sql, "select * from `Shop`.`we``ird`");

    for (url, table) in [
        (postgres, "t union all select secret from ev"),
        (postgres, "(select * from ev) s"),
        (postgres, "t -- x"),
        (postgres, "`t`"),
        (mariadb, "\"t\""),
        (mariadb, "t/*x*/"),
    ] {
        let error = error_for(&config(url, table));
        assert_eq!((error.line, error.key.as_str()), (4, "queries.q.table"));
        assert_eq!(
            error.message,
            format!("{table:?} is not a table name (table or schema.table)")
        );
        let error = error_for(
            &config(url, table).replace("[queries.q]\ntable", "[queries.q]\nsql = \"select 1\"\n#"),
        );
        assert_eq!((error.line, error.key.as_str()), (7, "tables.t.table"));
    }
}

#[test]
fn flight_takes_its_defaults_and_needs_a_shared_secret_for_replicas() {
    let base =
        "[databases.main]\nurl = \"postgres://u@h/d\"\n[flight]\nlisten = \"127.0.0.1:8815\"\n";
    let flight = Config::parse(base, "good.toml").unwrap().flight.unwrap();
    assert_eq!(flight.partitions, DEFAULT_PARTITIONS);
    assert_eq!(flight.plan_timeout, Duration::from_secs(600));
    assert_eq!(flight.max_plans_per_token, DEFAULT_MAX_PLANS_PER_TOKEN);
    assert_eq!(flight.unread_plan_timeout, DEFAULT_UNREAD_PLAN_TIMEOUT);
    let unread = format!("{base}unread_plan_timeout = \"0s\"\n");
    assert_eq!(error_for(&unread).key, "flight.unread_plan_timeout");
    assert!(flight.locations.is_empty() && flight.ticket_secret.is_none());
    assert_eq!(flight.numeric_scale, None);
    let scaled = format!("{base}numeric_scale = 0\n");
    let flight_scaled = Config::parse(&scaled, "good.toml").unwrap().flight.unwrap();
    assert_eq!(flight_scaled.numeric_scale, Some(0));
    let too_fine = error_for(&format!("{base}numeric_scale = 39\n"));
    assert_eq!(too_fine.key, "flight.numeric_scale");
    assert!(too_fine.message.contains("between 0 and 38"), "{too_fine}");

    let replicas = format!("{base}locations = [\"grpc://10.0.0.1:8815\"]\n");
    assert_eq!(error_for(&replicas).key, "flight.ticket_secret");
    let short = format!("{replicas}ticket_secret = \"short\"\n");
    assert!(error_for(&short).message.contains("32 bytes"));
    let good = format!(
        "{replicas}ticket_secret = \"{}\"\npartitions = 8\n",
        "s".repeat(32)
    );
    let flight = Config::parse(&good, "good.toml").unwrap().flight.unwrap();
    assert_eq!(flight.partitions, 8);
    assert_eq!(flight.locations, ["grpc://10.0.0.1:8815"]);

    let https = format!("{base}locations = [\"https://x\"]\n");
    assert_eq!(error_for(&https).key, "flight.locations[0]");
    let zero = format!("{base}partitions = 0\n");
    assert_eq!(error_for(&zero).key, "flight.partitions");
    let server = "[server]\nmax_connections = 0\n[databases.main]\nurl = \"postgres://u@h/d\"\n";
    assert_eq!(error_for(server).key, "server.max_connections");
    let server = server.replace("= 0", "= 500");
    assert_eq!(
        Config::parse(&server, "x.toml").unwrap().max_connections,
        Some(500)
    );
    let none = format!("{base}max_plans_per_token = 0\n");
    assert_eq!(error_for(&none).key, "flight.max_plans_per_token");
    let address = base.replace("127.0.0.1:8815", "somewhere");
    assert_eq!(error_for(&address).key, "flight.listen");
}

#[test]
fn a_database_s_planners_are_the_tokens_that_may_run_a_query_splitting_it() {
    let text = "[databases.main]\nurl = \"postgres://u@h/d\"\n\
                [databases.other]\nurl = \"postgres://u@h/e\"\n\
                [queries.whole]\ndatabase = \"main\"\ntable = \"t\"\n\
                [queries.by_id]\ndatabase = \"main\"\nsql = \"select id from t\"\nsplit_by = \"id\"\n\
                [queries.one]\ndatabase = \"main\"\nsql = \"select 1\"\n\
                [queries.elsewhere]\ndatabase = \"other\"\ntable = \"u\"\n\
                [[tokens]]\nname = \"all\"\ntoken = \"all-token-0123456789\"\nqueries = [\"*\"]\n\
                [[tokens]]\nname = \"ids\"\ntoken = \"ids-token-0123456789\"\nqueries = [\"by_id\"]\n\
                [[tokens]]\nname = \"one\"\ntoken = \"one-token-0123456789\"\nqueries = [\"one\", \"elsewhere\"]\n";
    let config = Config::parse(text, "planners.toml").unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(config.planners("main"), ["all", "ids"]);
    assert_eq!(config.planners("other"), ["all", "one"]);
    let open = "[databases.main]\nurl = \"postgres://u@h/d\"\n[queries.whole]\ntable = \"t\"\n";
    assert!(Config::parse(open, "open.toml")
        .unwrap()
        .planners("main")
        .is_empty());
}

#[test]
fn a_database_url_is_opened_by_the_driver_that_knows_it() {
    let sqlite = "[databases.demo]\nurl = \"sqlite:///tmp/x.sqlite\"\n";
    let config = Config::parse(sqlite, "good.toml").unwrap();
    let target = &config.databases["demo"].target;
    assert_eq!(target.product(), "SQLite");
    assert!(target.read_only());

    let error = error_for("[databases.main]\nurl = \"oracle://db.internal/app\"\n");
    assert_eq!((error.line, error.key.as_str()), (2, "databases.main.url"));
    assert!(
        error.message.contains("expected postgres://"),
        "{}",
        error.message
    );
}

#[test]
fn the_same_token_twice_is_an_error_naming_both_entries() {
    let hash: String = Sha256::digest(b"a-long-enough-token-value")
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    for (second, field) in [
        ("token = \"a-long-enough-token-value\"", "token"),
        (&*format!("sha256 = \"{}\"", hash.to_uppercase()), "sha256"),
    ] {
        let text = format!("{GOOD}\n[[tokens]]\nname = \"copy\"\n{second}\nqueries = [\"*\"]\n");
        let error = error_for(&text);
        assert_eq!(
            (error.line, error.key.as_str()),
            (29, &*format!("tokens[1].{field}")),
            "{error}"
        );
        assert!(
            error.message.contains("same token as tokens[0] (\"ops\")"),
            "{error}"
        );
    }
    let different =
        format!("{GOOD}\n[[tokens]]\nname = \"other\"\ntoken = \"another-long-token-value\"\n");
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    assert_eq!(
        Config::parse(&different, "good.toml").unwrap().tokens.len(),
        2
    );
}

#[test]
fn sql_takes_a_role_and_positions_are_kept_for_start_up_checks() {
    std::env::set_var("SLUICE_CONFIG_TEST_PASSWORD", "s3cret");
    let config = Config::parse(
        &format!("{GOOD}role = \"report \\\"reader\\\"\"\n"),
        "good.toml",
    )
    .unwrap();
    assert_eq!(config.file, "good.toml");
    let sql = config.sql.unwrap();
    assert_eq!(sql.role.as_deref(), Some("report \"reader\""));
    assert_eq!(sql.line, 25);
    let query = &config.queries["by_status"];
    assert_eq!(query.line, 10);
    assert_eq!((query.params[0].line, query.params[1].line), (12, 13));

    let error = error_for(&format!("{GOOD}role = \"\"\n"));
    assert_eq!((error.line, error.key.as_str()), (26, "sql.role"));
}

#[test]
fn sizes_parse() {
    assert_eq!(
        parse_bytes(&toml::Value::String("2GB".into())).unwrap(),
        2_000_000_000
    );
    assert_eq!(parse_bytes(&toml::Value::Integer(10)).unwrap(), 10);
    assert!(parse_bytes(&toml::Value::String("lots".into())).is_err());
}

#[test]
fn a_path_is_a_url_that_the_sqlite_driver_claims() {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("app.db");
    let text = format!(
        "[databases.files]\nurl = {:?}\n",
        file.display().to_string()
    );
    let config = Config::parse(&text, "good.toml").unwrap();
    assert!(config.databases["files"].target.read_only());
    assert!(config.deprecations.is_empty());

    let error = error_for("[databases.main]\nurl = \"somewhere/no-database-here\"\n");
    assert_eq!((error.line, error.key.as_str()), (2, "databases.main.url"));
    // The accepted forms come from the drivers, not from the server.
    let forms = sluice_drivers::all().url_forms().join(", ");
    assert!(error.message.ends_with(&forms), "{error}");
    let error = error_for("[databases.main]\npool_size = 2\n");
    assert_eq!((error.line, error.key.as_str()), (1, "databases.main.url"));
    let help = sluice_drivers::all().url_help(false);
    assert_eq!(error.message, format!("give url = \"…\": {help}"));
}

#[test]
fn the_old_sqlite_key_still_opens_its_file_with_a_deprecation_note() {
    let text = "[databases.demo]\nsqlite = \"/tmp/x.sqlite\"\npool_size = 2\n";
    let config = Config::parse(text, "old.toml").unwrap();
    let database = &config.databases["demo"];
    assert_eq!(
        format!("{:?}", database.target),
        "SqliteTarget { path: \"/tmp/x.sqlite\" }"
    );
    assert_eq!(database.pool_size, 2);
    assert_eq!(
        config.deprecations,
        ["old.toml:2: databases.demo.sqlite is deprecated: write url = … instead (the same value)"]
    );
    let both = "[databases.demo]\nurl = \"/tmp/x.sqlite\"\nsqlite = \"/tmp/y.sqlite\"\n";
    let error = error_for(both);
    assert_eq!(error.key.rsplit_once('.').unwrap().0, "databases.demo");
    assert!(error.message.contains("url is given twice"), "{error}");
}
