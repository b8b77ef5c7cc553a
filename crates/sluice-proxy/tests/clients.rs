//! Real clients through the real proxy against a real PostgreSQL: psql, psycopg 3,
//! SQLAlchemy 2 (over psycopg) and pgjdbc commit the round-trip sins, and the
//! proxy names each one; their good versions (COPY, one multi-row insert, a join,
//! `= any($1)`, `selectinload`, prepared statements, one transaction, a JDBC
//! batch) are not named. Every test has its own schema; the Python clients come
//! from the test kit's pinned virtual environment, the Java one is compiled by
//! the test kit against Debian's pgjdbc.

use std::process::Command;
use std::time::Duration;

use sluice_proxy::{Finding, Proxy, ProxyHandle, Shaping};
use sluice_testkit::run_python;
use sluice_testkit::{jdbc_url, JavaProgram, TestDb};

/// A proxy in front of the test server (no delay: the tests count, they do not time).
fn proxy_for(db: &TestDb) -> ProxyHandle {
    let url = db.url();
    let authority = authority(url);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    Proxy::new("127.0.0.1:0", host_port, Shaping::default())
        .start()
        .unwrap()
}

/// The `user[:password]@host:port` part of a URL.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// The test database's URL with the proxy as its host, TLS off (the proxy
/// cannot read TLS), `scheme` in front.
fn url_through(db: &TestDb, proxy: &ProxyHandle, scheme: &str) -> String {
    let url = db.url();
    let authority = authority(url);
    let credentials = authority
        .rsplit_once('@')
        .map_or(String::new(), |(user, _)| format!("{user}@"));
    let after = &url[url.find(authority).unwrap() + authority.len()..];
    let (path, query) = after.split_once('?').unwrap_or((after, ""));
    let separator = if query.is_empty() { "" } else { "&" };
    format!(
        "{scheme}://{credentials}127.0.0.1:{}{path}?sslmode=disable{separator}{query}",
        proxy.address().port()
    )
}

/// The findings once the client's connections have ended and been observed.
fn findings(proxy: &ProxyHandle) -> Vec<Finding> {
    std::thread::sleep(Duration::from_millis(100));
    proxy
        .report()
        .findings()
        .into_iter()
        .map(|(_, finding)| finding.clone())
        .collect()
}

fn psql(url: &str, script: &str) {
    let directory = tempfile::tempdir().unwrap();
    let file = directory.path().join("script.sql");
    std::fs::write(&file, script).unwrap();
    let output = Command::new(sluice_testkit::psql_path())
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn psql_inserting_row_by_row_is_named_and_copy_or_one_insert_is_not() {
    let db = TestDb::new();
    db.execute("create table t (n int)");
    let proxy = proxy_for(&db);
    let url = url_through(&db, &proxy, "postgres");
    let script: String = (0..200)
        .map(|n| format!("insert into t values ({n});\n"))
        .collect();
    psql(&url, &script);
    let found = findings(&proxy);
    assert!(
        matches!(
            &found[..],
            [Finding::RowByRow { statement, executions: 200, round_trips: 200, .. }]
                if statement == "insert into t values ($1)"
        ),
        "{found:?}"
    );
    assert!(found[0]
        .describe()
        .contains("batch it, pipeline it or use COPY"));

    proxy.reset();
    let rows: Vec<String> = (0..200).map(|n| format!("({n})")).collect();
    let data: String = (0..200).map(|n| format!("{n}\n")).collect();
    psql(
        &url,
        &format!(
            "insert into t values {};\ncopy t from stdin;\n{data}\\.\n",
            rows.join(", ")
        ),
    );
    let found = findings(&proxy);
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(db.query_text("select count(*) from t"), "600");
}

/// Customers, each with three orders.
fn create_shop(db: &TestDb, customers: u32) {
    db.execute(&format!(
        "create table customers (id int primary key, name text not null);
         create table orders (id serial primary key,
                              customer_id int not null references customers,
                              total int not null);
         insert into customers select g, 'customer ' || g from generate_series(1, {customers}) g;
         insert into orders (customer_id, total)
             select c, c * 10 + k from generate_series(1, {customers}) c, generate_series(1, 3) k;"
    ));
}

const PSYCOPG_SHOP: &str = r#"
import sys, psycopg
url, mode = sys.argv[1], sys.argv[2]
with psycopg.connect(url, autocommit=True) as conn:
    ids = [row[0] for row in conn.execute("select id from customers order by id")]
    if mode == "n_plus_one":
        orders = [conn.execute("select total from orders where customer_id = %s", (id,)).fetchall()
                  for id in ids]
        print(sum(len(o) for o in orders))
    else:
        orders = conn.execute("select customer_id, total from orders where customer_id = any(%s)",
                              (ids,)).fetchall()
        print(len(orders))
"#;

fn n_plus_ones(found: &[Finding]) -> Vec<(String, u64, String, u64)> {
    found
        .iter()
        .filter_map(|finding| match finding {
            Finding::NPlusOne {
                parent,
                rows,
                statement,
                executions,
                ..
            } => Some((parent.clone(), *rows, statement.clone(), *executions)),
            _ => None,
        })
        .collect()
}

/// Asserts that the findings are one N+1: the 40 customers of a shop, then
/// their orders customer by customer.
fn assert_orders_per_customer(found: &[Finding]) {
    assert_eq!(
        n_plus_ones(found),
        [(
            "select id from customers order by id".to_owned(),
            40,
            "select total from orders where customer_id = $1".to_owned(),
            40
        )],
        "{found:#?}"
    );
}

#[test]
fn psycopg_loading_orders_per_customer_is_an_n_plus_one_and_any_is_not() {
    let db = TestDb::new();
    create_shop(&db, 40);
    let proxy = proxy_for(&db);
    let url = url_through(&db, &proxy, "postgresql");
    let printed = run_python(PSYCOPG_SHOP, &[&url, "n_plus_one"], b"");
    assert_eq!(String::from_utf8_lossy(&printed).trim(), "120");
    let found = findings(&proxy);
    assert_orders_per_customer(&found);
    let words = found.iter().map(Finding::describe).collect::<Vec<_>>();
    assert!(
        words.iter().any(|w| w.contains("N+1 query")
            && w.contains("join, or `= any($1)` with the 40 keys")),
        "{words:#?}"
    );

    proxy.reset();
    let printed = run_python(PSYCOPG_SHOP, &[&url, "any"], b"");
    assert_eq!(String::from_utf8_lossy(&printed).trim(), "120");
    let found = findings(&proxy);
    assert!(found.is_empty(), "{found:?}");
}

const SQLALCHEMY_SHOP: &str = r#"
import sys
from sqlalchemy import ForeignKey, create_engine, select
from sqlalchemy.orm import (DeclarativeBase, Mapped, Session, joinedload, mapped_column,
                            relationship, selectinload)

class Base(DeclarativeBase):
    pass

class Customer(Base):
    __tablename__ = "customers"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str]
    orders: Mapped[list["Order"]] = relationship(back_populates="customer")

class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("customers.id"))
    total: Mapped[int]
    customer: Mapped[Customer] = relationship(back_populates="orders")

url, mode = sys.argv[1], sys.argv[2]
engine = create_engine(url)
if mode.startswith("orders_"):
    # Many-to-one: every order's customer, loaded by its key once per
    # distinct customer (the identity map holds the rest).
    with Session(engine) as session:
        query = select(Order).order_by(Order.id)
        if mode == "orders_selectinload":
            query = query.options(selectinload(Order.customer))
        orders = session.scalars(query).all()
        print(sum(order.customer.id for order in orders))
    sys.exit(0)
with Session(engine) as session:
    query = select(Customer).order_by(Customer.id)
    if mode == "selectinload":
        query = query.options(selectinload(Customer.orders))
    elif mode == "joinedload":
        query = query.options(joinedload(Customer.orders))
    customers = session.scalars(query).unique().all()
    print(sum(order.total for customer in customers for order in customer.orders))
"#;

#[test]
fn sqlalchemy_lazy_loading_is_an_n_plus_one_and_selectinload_or_a_join_is_not() {
    let db = TestDb::new();
    create_shop(&db, 40);
    let expected = db.query_text("select sum(total) from orders");
    let proxy = proxy_for(&db);
    let url = url_through(&db, &proxy, "postgresql+psycopg");
    let printed = run_python(SQLALCHEMY_SHOP, &[&url, "lazy"], b"");
    assert_eq!(String::from_utf8_lossy(&printed).trim(), expected);
    let found = findings(&proxy);
    let n_plus_ones = n_plus_ones(&found);
    assert!(
        matches!(&n_plus_ones[..], [(parent, 40, statement, 40)]
            if parent.starts_with("select customers.id") && parent.contains("from customers order by")
                && statement.contains("from orders where $1")),
        "{found:#?}"
    );

    for mode in ["selectinload", "joinedload"] {
        proxy.reset();
        let printed = run_python(SQLALCHEMY_SHOP, &[&url, mode], b"");
        assert_eq!(String::from_utf8_lossy(&printed).trim(), expected);
        let found = findings(&proxy);
        assert!(found.is_empty(), "{mode}: {found:#?}");
    }
}

#[test]
fn sqlalchemy_lazy_many_to_one_is_an_n_plus_one_by_its_distinct_keys() {
    let db = TestDb::new();
    create_shop(&db, 40);
    let expected = db.query_text("select sum(customer_id) from orders");
    let proxy = proxy_for(&db);
    let url = url_through(&db, &proxy, "postgresql+psycopg");
    // 120 orders of 40 customers: 40 lazy loads, one per distinct customer.
    let printed = run_python(SQLALCHEMY_SHOP, &[&url, "orders_lazy"], b"");
    assert_eq!(String::from_utf8_lossy(&printed).trim(), expected);
    let found = findings(&proxy);
    assert!(
        matches!(&found[..], [Finding::NPlusOne { parent, rows: 120, keys: 40, statement, executions: 40, .. }]
            if parent.contains("from orders order by") && statement.contains("from customers where customers.id = $1")),
        "{found:#?}"
    );
    assert!(!found[0].advice().contains("COPY"), "{}", found[0].advice());

    proxy.reset();
    let printed = run_python(SQLALCHEMY_SHOP, &[&url, "orders_selectinload"], b"");
    assert_eq!(String::from_utf8_lossy(&printed).trim(), expected);
    let found = findings(&proxy);
    assert!(found.is_empty(), "selectinload: {found:#?}");
}

const PSYCOPG_SESSIONS: &str = r#"
import sys, psycopg
url, mode = sys.argv[1], sys.argv[2]
if mode == "chatty":
    # A pool validating on every borrow, and a transaction per statement.
    with psycopg.connect(url) as conn:
        for n in range(30):
            conn.execute("select 1")
            conn.execute("update counters set n = n + 1 where id = %s", (n % 3,))
            conn.commit()
elif mode == "quiet":
    with psycopg.connect(url) as conn:
        with conn.transaction():
            for n in range(30):
                conn.execute("update counters set n = n + 1 where id = %s", (n % 3,))
elif mode in ("unprepared", "prepared"):
    threshold = None if mode == "unprepared" else 0
    with psycopg.connect(url, autocommit=True, prepare_threshold=threshold) as conn:
        for n in range(60):
            conn.execute("select n from counters where id = %s", (n % 3,)).fetchall()
"#;

#[test]
fn chatty_psycopg_sessions_are_named_and_quiet_ones_are_not() {
    let db = TestDb::new();
    db.execute(
        "create table counters (id int primary key, n int not null);
         insert into counters select g, 0 from generate_series(0, 2) g",
    );
    let proxy = proxy_for(&db);
    let url = url_through(&db, &proxy, "postgresql");
    let kinds = |found: &[Finding]| -> Vec<&'static str> {
        found
            .iter()
            .map(|finding| match finding {
                Finding::SessionChatter { .. } => "chatter",
                Finding::TransactionPerStatement { .. } => "transaction per statement",
                Finding::ParsedEveryTime { .. } => "parsed every time",
                Finding::RowByRow { .. } => "row by row",
                _ => "other",
            })
            .collect()
    };

    run_python(PSYCOPG_SESSIONS, &[&url, "chatty"], b"");
    let found = findings(&proxy);
    assert_eq!(
        kinds(&found),
        // The costliest first: BEGIN/COMMIT took 60 round trips, the chatter 31.
        ["transaction per statement", "chatter"],
        "{found:#?}"
    );
    let words = found.iter().map(Finding::describe).collect::<Vec<_>>();
    assert!(
        words[1].starts_with("chatty session: 30 of 30 statements were preceded by `select $1`"),
        "{words:#?}"
    );

    for (mode, expected) in [
        ("quiet", &[][..]),
        ("unprepared", &["row by row", "parsed every time"][..]),
        ("prepared", &["row by row"][..]),
    ] {
        proxy.reset();
        run_python(PSYCOPG_SESSIONS, &[&url, mode], b"");
        let found = findings(&proxy);
        assert_eq!(kinds(&found), expected, "{mode}: {found:#?}");
    }
}

/// A JDBC application's data access, written the slow way and the fast way.
/// pgjdbc sends every statement with the extended protocol (`?` becomes `$1`),
/// with an unnamed statement for the first four executions of a
/// `PreparedStatement` text and a named server-side one from the fifth on
/// (`prepareThreshold`, default 5): the proxy keys both by their text.
const JDBC_SHOP: &str = r#"
import java.sql.*;
import java.util.*;

public class Shop {
    public static void main(String[] args) throws SQLException {
        try (Connection connection = DriverManager.getConnection(args[0])) {
            switch (args[1]) {
                case "row_by_row" -> insert(connection, false);
                case "batch" -> insert(connection, true);
                case "n_plus_one" -> System.out.println(ordersPerCustomer(connection));
                case "join" -> System.out.println(ordersJoined(connection));
                default -> throw new IllegalArgumentException(args[1]);
            }
        }
    }

    /** 200 rows in one transaction, one executeUpdate each or one batch. */
    static void insert(Connection connection, boolean batch) throws SQLException {
        connection.setAutoCommit(false);
        try (PreparedStatement insert = connection.prepareStatement("insert into items values (?)")) {
            for (int n = 0; n < 200; n++) {
                insert.setInt(1, n);
                if (batch) {
                    insert.addBatch();
                } else {
                    insert.executeUpdate();
                }
            }
            if (batch) {
                insert.executeBatch();
            }
        }
        connection.commit();
    }

    /** The customers, then each one's orders: a DAO method called in a loop. */
    static long ordersPerCustomer(Connection connection) throws SQLException {
        List<Integer> ids = new ArrayList<>();
        try (Statement statement = connection.createStatement();
             ResultSet rows = statement.executeQuery("select id from customers order by id")) {
            while (rows.next()) {
                ids.add(rows.getInt(1));
            }
        }
        long orders = 0;
        for (int id : ids) {
            try (PreparedStatement lookup =
                     connection.prepareStatement("select total from orders where customer_id = ?")) {
                lookup.setInt(1, id);
                try (ResultSet rows = lookup.executeQuery()) {
                    while (rows.next()) {
                        orders++;
                    }
                }
            }
        }
        return orders;
    }

    /** The customers with their orders, in one statement. */
    static long ordersJoined(Connection connection) throws SQLException {
        long orders = 0;
        try (Statement statement = connection.createStatement();
             ResultSet rows = statement.executeQuery(
                 "select c.id, o.total from customers c join orders o on o.customer_id = c.id order by c.id")) {
            while (rows.next()) {
                orders++;
            }
        }
        return orders;
    }
}
"#;

/// The shop program, compiled.
fn jdbc_shop() -> JavaProgram {
    JavaProgram::compile("Shop", JDBC_SHOP)
}

/// The pgjdbc URL of the test database through the proxy.
fn jdbc_through(db: &TestDb, proxy: &ProxyHandle) -> String {
    jdbc_url(&url_through(db, proxy, "postgresql"))
}

/// The proxy's figures for one fingerprint: (executions, parses, round trips).
fn figures(proxy: &ProxyHandle, fingerprint: &str) -> (u64, u64, u64) {
    let statements = proxy.report().statements();
    let stats = statements
        .iter()
        .find(|s| s.statement == fingerprint)
        .unwrap_or_else(|| panic!("no {fingerprint:?} in {statements:#?}"));
    (stats.executions, stats.parses, stats.round_trips)
}

#[test]
fn pgjdbc_inserting_row_by_row_is_named_and_a_batch_is_not() {
    let db = TestDb::new();
    db.execute("create table items (n int)");
    let proxy = proxy_for(&db);
    let url = jdbc_through(&db, &proxy);
    let shop = jdbc_shop();
    const INSERT: &str = "insert into items values ($1)";

    shop.run(&[&url, "row_by_row"]);
    let found = findings(&proxy);
    assert!(
        matches!(&found[..],
            [Finding::RowByRow { statement, executions: 200, round_trips: 200, .. }]
                if statement == INSERT),
        "{found:#?}"
    );
    // Parsed unnamed four times, then once as a named statement (prepareThreshold 5):
    // not "parsed every time".
    assert_eq!(figures(&proxy, INSERT), (200, 5, 200));

    // The batch goes out as one pipeline (a Bind and an Execute per row, one
    // Sync), prepared once: 200 executions in a round trip (a few, should the
    // driver flush its buffer before the Sync).
    proxy.reset();
    shop.run(&[&url, "batch"]);
    let found = findings(&proxy);
    assert!(found.is_empty(), "{found:#?}");
    let (executions, parses, round_trips) = figures(&proxy, INSERT);
    assert_eq!((executions, parses), (200, 1));
    assert!(round_trips <= 5, "{round_trips} round trips");

    // Never prepared on the server (prepareThreshold=0): parsed on every execution too.
    proxy.reset();
    shop.run(&[&format!("{url}&prepareThreshold=0"), "row_by_row"]);
    let found = findings(&proxy);
    assert!(
        matches!(
            &found[..],
            [
                Finding::RowByRow { .. },
                Finding::ParsedEveryTime {
                    parses: 200,
                    executions: 200,
                    ..
                }
            ]
        ),
        "{found:#?}"
    );
    assert_eq!(db.query_text("select count(*) from items"), "600");
}

#[test]
fn pgjdbc_loading_orders_per_customer_is_an_n_plus_one_and_a_join_is_not() {
    let db = TestDb::new();
    create_shop(&db, 40);
    let proxy = proxy_for(&db);
    let url = jdbc_through(&db, &proxy);
    let shop = jdbc_shop();

    let printed = shop.run(&[&url, "n_plus_one"]);
    assert_eq!(String::from_utf8_lossy(&printed).trim(), "120");
    let found = findings(&proxy);
    assert_orders_per_customer(&found);
    // A new PreparedStatement per customer, yet server-prepared from the fifth:
    // pgjdbc keeps prepared statements per connection, by their text.
    assert_eq!(
        figures(&proxy, "select total from orders where customer_id = $1"),
        (40, 5, 40)
    );

    proxy.reset();
    let printed = shop.run(&[&url, "join"]);
    assert_eq!(String::from_utf8_lossy(&printed).trim(), "120");
    let found = findings(&proxy);
    assert!(found.is_empty(), "{found:#?}");
}
