//! Patterns across a connection's sequence of statements, fed by the
//! [`Observer`](crate::observe::Observer) as statements run and rows come back:
//!
//! - **N+1**: a result of R rows, then one statement run again and again with
//!   a parameter (bound or literal) taken from a column of those rows. The
//!   rows' values are kept per column (only of results up to
//!   [`RESULT_ROWS_KEPT`] rows, values up to [`VALUE_BYTES_KEPT`] bytes) for the
//!   last [`PARENTS_KEPT`] statements that returned rows;
//! - **chatty sessions**: validation queries (`select 1`) or session commands
//!   (`SET`, `SHOW`, `RESET`, `DISCARD ALL`) before most statements, and
//!   transactions around single statements.
//!
//! Values are compared as text. A binary value (a client may bind or fetch
//! integers in binary) of 2, 4 or 8 bytes is also read as a big-endian integer,
//! so a key fetched as text and bound in binary (or the other way round) still
//! matches.

use std::collections::{HashMap, HashSet};

/// Results longer than this are not kept as possible N+1 parents: their values
/// would cost memory for a pattern a result that long rarely starts.
pub const RESULT_ROWS_KEPT: u64 = 10_000;
/// Longer values are not kept (keys are short).
pub const VALUE_BYTES_KEPT: usize = 64;
/// Results kept as possible N+1 parents, one per statement, newest first.
pub const PARENTS_KEPT: usize = 16;
/// Fewer follow-up executions than this are not called an N+1.
pub const N_PLUS_ONE_MINIMUM: u64 = 10;
/// Fewer statements (or transactions) than this are not called chatty.
pub const SESSION_MINIMUM: u64 = 20;

/// What a statement does for the session patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `BEGIN`, `START TRANSACTION`.
    Begin,
    /// `COMMIT`, `ROLLBACK`, `END`, `ABORT`.
    End,
    /// A validation query or a session command: `select 1`, `SET`, `SHOW`,
    /// `RESET`, `DISCARD ALL`.
    Chatter,
    /// `SAVEPOINT`, `RELEASE`, `ROLLBACK TO`: neither work nor chatter.
    Other,
    /// Anything else: the application's work.
    Work,
}

/// The role of a statement, by its fingerprint.
pub fn role(fingerprint: &str) -> Role {
    let text = fingerprint.trim_end_matches(';').trim();
    if text.contains(';') {
        // Several statements in one message: work, whatever they are.
        return Role::Work;
    }
    let first = text.split([' ', '(']).next().unwrap_or("");
    match first {
        "begin" | "start" => Role::Begin,
        "rollback" if text.contains(" to ") => Role::Other,
        "commit" | "rollback" | "end" | "abort" => Role::End,
        "set" | "show" | "reset" => Role::Chatter,
        "discard" if text == "discard all" => Role::Chatter,
        "savepoint" | "release" => Role::Other,
        _ if text == "select $1" => Role::Chatter,
        _ => Role::Work,
    }
}

/// An N+1 seen: `statement` ran once per row of `parent`'s results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NPlusOne {
    /// The statement whose rows gave the values.
    pub parent: String,
    /// Rows it returned (over all the times the pattern was seen).
    pub rows: u64,
    /// Distinct values of those rows the statement was run with.
    pub keys: u64,
    /// The statement run once per row (or once per distinct key).
    pub statement: String,
    /// Its executions with a value from those rows.
    pub executions: u64,
}

/// One result (an answer's rows): their values, per column.
#[derive(Debug, Default)]
struct Answer {
    fingerprint: String,
    rows: u64,
    columns: Vec<HashSet<String>>,
    /// More rows than [`RESULT_ROWS_KEPT`]: values dropped.
    too_long: bool,
}

/// A result that may start an N+1, and the statements run after it.
#[derive(Debug)]
struct Parent {
    result: Answer,
    /// Per statement run since.
    followers: HashMap<String, Follower>,
}

/// A statement run after a parent result.
#[derive(Debug, Default)]
struct Follower {
    /// Its executions.
    executions: u64,
    /// Those with a value from the parent's result.
    matched: u64,
    /// The parent's values it was run with, each once.
    keys: HashSet<String>,
}

impl Parent {
    /// The N+1s this parent started, if any: a statement run (nearly) only
    /// with the parent's values, for at least half of its rows or of the
    /// distinct values of one of its columns. The second is how an ORM loads
    /// a many-to-one relation: 1,000 books of 100 authors make 100 lazy loads
    /// of an author, one per distinct key.
    fn n_plus_ones(&self) -> impl Iterator<Item = NPlusOne> + '_ {
        self.followers
            .iter()
            .filter(|(_, follower)| {
                follower.matched >= N_PLUS_ONE_MINIMUM
                    && follower.matched * 10 >= follower.executions * 9
                    && (follower.matched * 2 >= self.result.rows
                        || self.covers_a_column(&follower.keys))
            })
            .map(|(statement, follower)| NPlusOne {
                parent: self.result.fingerprint.clone(),
                rows: self.result.rows,
                keys: follower.keys.len() as u64,
                statement: statement.clone(),
                executions: follower.matched,
            })
    }

    /// Whether `keys` hold at least half the distinct values of one of the
    /// result's columns.
    fn covers_a_column(&self, keys: &HashSet<String>) -> bool {
        self.result.columns.iter().any(|column| {
            let used = keys.iter().filter(|key| column.contains(*key)).count();
            used >= 1 && used * 2 >= column.len()
        })
    }
}

/// Session figures for the chatty-session findings.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Session {
    /// Statements of the application's work.
    pub work: u64,
    /// Of them, those preceded (since the previous one) by chatter.
    pub preceded_by_chatter: u64,
    /// Transactions ended.
    pub transactions: u64,
    /// Of them, those holding one statement of work or none.
    pub single_statement_transactions: u64,
}

/// The patterns' state for one connection.
#[derive(Debug, Default)]
pub struct Patterns {
    reading: Option<Answer>,
    parents: Vec<Parent>,
    confirmed: Vec<NPlusOne>,
    session: Session,
    chatter_since_work: bool,
    in_transaction: bool,
    work_in_transaction: u64,
}

impl Patterns {
    /// A statement ran with these parameter values (bound and literal).
    pub fn executed(&mut self, fingerprint: &str, values: &[String]) {
        self.session_step(role(fingerprint));
        for parent in &mut self.parents {
            if parent.result.fingerprint == fingerprint {
                continue;
            }
            let matched = values.iter().find(|value| {
                parent
                    .result
                    .columns
                    .iter()
                    .any(|column| column.contains(*value))
            });
            let follower = parent.followers.entry(fingerprint.to_owned()).or_default();
            follower.executions += 1;
            if let Some(value) = matched {
                follower.matched += 1;
                // Bounded by the parent's kept values.
                if !follower.keys.contains(value) {
                    follower.keys.insert(value.clone());
                }
            }
        }
    }

    fn session_step(&mut self, role: Role) {
        let session = &mut self.session;
        match role {
            Role::Begin => {
                self.in_transaction = true;
                self.work_in_transaction = 0;
            }
            Role::End if self.in_transaction => {
                self.in_transaction = false;
                session.transactions += 1;
                if self.work_in_transaction <= 1 {
                    session.single_statement_transactions += 1;
                }
            }
            Role::Chatter => self.chatter_since_work = true,
            Role::Work => {
                session.work += 1;
                if std::mem::take(&mut self.chatter_since_work) {
                    session.preceded_by_chatter += 1;
                }
                self.work_in_transaction += 1;
            }
            Role::End | Role::Other => {}
        }
    }

    /// A row of `fingerprint`'s result (a `DataRow` body).
    pub fn row(&mut self, fingerprint: &str, body: &[u8]) {
        if self
            .reading
            .as_ref()
            .is_some_and(|reading| reading.fingerprint != fingerprint)
        {
            self.result_ended();
        }
        let reading = self.reading.get_or_insert_with(|| Answer {
            fingerprint: fingerprint.to_owned(),
            ..Answer::default()
        });
        reading.rows += 1;
        if reading.too_long {
            return;
        }
        if reading.rows > RESULT_ROWS_KEPT {
            reading.too_long = true;
            reading.columns = Vec::new();
            return;
        }
        keep_values(&mut reading.columns, body);
    }

    /// The result being read ended (complete, or failed).
    pub fn result_ended(&mut self) {
        let Some(result) = self.reading.take() else {
            return;
        };
        if result.too_long || result.rows < 2 {
            return;
        }
        if let Some(index) = self
            .parents
            .iter()
            .position(|parent| parent.result.fingerprint == result.fingerprint)
        {
            let old = self.parents.remove(index);
            self.confirmed.extend(old.n_plus_ones());
        }
        if self.parents.len() >= PARENTS_KEPT {
            let oldest = self.parents.remove(0);
            self.confirmed.extend(oldest.n_plus_ones());
        }
        self.parents.push(Parent {
            result,
            followers: HashMap::new(),
        });
    }

    /// The N+1s seen so far, one per pair of statements.
    pub fn n_plus_ones(&self) -> Vec<NPlusOne> {
        let mut merged: Vec<NPlusOne> = Vec::new();
        let live = self.parents.iter().flat_map(Parent::n_plus_ones);
        for found in self.confirmed.iter().cloned().chain(live) {
            match merged
                .iter_mut()
                .find(|m| m.parent == found.parent && m.statement == found.statement)
            {
                Some(known) => {
                    known.rows += found.rows;
                    known.keys += found.keys;
                    known.executions += found.executions;
                }
                None => merged.push(found),
            }
        }
        merged
    }

    /// The session figures so far.
    pub fn session(&self) -> Session {
        self.session.clone()
    }
}

/// Adds a `DataRow`'s values to the columns' sets.
fn keep_values(columns: &mut Vec<HashSet<String>>, body: &[u8]) {
    let Some(count) = body
        .get(..2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    else {
        return;
    };
    if columns.len() < count {
        columns.resize_with(count, HashSet::new);
    }
    let mut rest = &body[2..];
    for column in columns.iter_mut().take(count) {
        let Some(length) = rest
            .get(..4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        else {
            return;
        };
        rest = &rest[4..];
        let Ok(length) = usize::try_from(length) else {
            continue; // NULL
        };
        let Some(value) = rest.get(..length) else {
            return; // cut off (a very long row)
        };
        rest = &rest[length..];
        column.extend(value_candidates(value));
    }
}

/// A value as text, and as an integer when it may be a binary one.
pub fn value_candidates(value: &[u8]) -> Vec<String> {
    let mut candidates = Vec::new();
    if value.len() > VALUE_BYTES_KEPT {
        return candidates;
    }
    if let Ok(text) = std::str::from_utf8(value) {
        candidates.push(text.to_owned());
    }
    let integer = match value.len() {
        2 => Some(i64::from(i16::from_be_bytes([value[0], value[1]]))),
        4 => Some(i64::from(i32::from_be_bytes(
            value.try_into().expect("4 bytes"),
        ))),
        8 => Some(i64::from_be_bytes(value.try_into().expect("8 bytes"))),
        _ => None,
    };
    candidates.extend(integer.map(|n| n.to_string()));
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_row(values: &[&str]) -> Vec<u8> {
        let mut body = (values.len() as u16).to_be_bytes().to_vec();
        for value in values {
            body.extend_from_slice(&(value.len() as i32).to_be_bytes());
            body.extend_from_slice(value.as_bytes());
        }
        body
    }

    #[test]
    fn statements_have_roles() {
        assert_eq!(role("begin"), Role::Begin);
        assert_eq!(
            role("start transaction isolation level serializable"),
            Role::Begin
        );
        assert_eq!(role("commit;"), Role::End);
        assert_eq!(role("rollback to savepoint a"), Role::Other);
        assert_eq!(role("select $1"), Role::Chatter);
        assert_eq!(role("set search_path = $1"), Role::Chatter);
        assert_eq!(role("discard all"), Role::Chatter);
        assert_eq!(role("select $1 from t"), Role::Work);
        assert_eq!(role("begin; insert into t values ($1); commit"), Role::Work);
    }

    #[test]
    fn an_n_plus_one_is_found_and_a_loop_of_unrelated_values_is_not() {
        let mut patterns = Patterns::default();
        patterns.executed("select id from parent", &[]);
        for id in 1..=20 {
            patterns.row(
                "select id from parent",
                &data_row(&[&format!("{}", id * 7)]),
            );
        }
        patterns.result_ended();
        for id in 1..=20 {
            patterns.executed(
                "select * from child where parent_id = $1",
                &[format!("{}", id * 7)],
            );
            patterns.row(
                "select * from child where parent_id = $1",
                &data_row(&["x", "y"]),
            );
            patterns.result_ended();
        }
        // An unrelated loop: 200 values, a few of which happen to be keys.
        for n in 0..200 {
            patterns.executed("insert into t values ($1)", &[n.to_string()]);
        }
        let found = patterns.n_plus_ones();
        assert_eq!(
            found,
            [NPlusOne {
                parent: "select id from parent".into(),
                rows: 20,
                keys: 20,
                statement: "select * from child where parent_id = $1".into(),
                executions: 20,
            }]
        );
    }

    #[test]
    fn a_many_to_one_n_plus_one_is_found_by_its_distinct_keys() {
        // 1,000 books of 100 authors, then one lazy load per distinct author
        // (an ORM's identity map loads each author once).
        let mut patterns = Patterns::default();
        let books = "select books.id, books.author_id from books";
        patterns.executed(books, &[]);
        for id in 0..1000 {
            let author = format!("{}", 5000 + id % 100);
            patterns.row(books, &data_row(&[&format!("{id}"), &author]));
        }
        patterns.result_ended();
        let author = "select authors.id, authors.name from authors where authors.id = $1";
        for key in 0..100 {
            patterns.executed(author, &[format!("{}", 5000 + key)]);
            patterns.row(author, &data_row(&["x", "y"]));
            patterns.result_ended();
        }
        assert_eq!(
            patterns.n_plus_ones(),
            [NPlusOne {
                parent: books.into(),
                rows: 1000,
                keys: 100,
                statement: author.into(),
                executions: 100,
            }]
        );
        // Ten of the hundred authors is a few lookups, not an N+1.
        let mut few = Patterns::default();
        few.executed(books, &[]);
        for id in 0..1000 {
            let author = format!("{}", 5000 + id % 100);
            few.row(books, &data_row(&[&format!("{id}"), &author]));
        }
        few.result_ended();
        for key in 0..10 {
            few.executed(author, &[format!("{}", 5000 + key)]);
        }
        assert!(few.n_plus_ones().is_empty());
    }

    #[test]
    fn binary_integers_match_their_text() {
        assert!(value_candidates(&42i32.to_be_bytes()).contains(&"42".to_owned()));
        assert!(value_candidates(&42i64.to_be_bytes()).contains(&"42".to_owned()));
    }

    #[test]
    fn chatter_and_single_statement_transactions_are_counted() {
        let mut patterns = Patterns::default();
        for _ in 0..30 {
            patterns.executed("select $1", &[]);
            patterns.executed("begin", &[]);
            patterns.executed("update t set a = $1", &[]);
            patterns.executed("commit", &[]);
        }
        assert_eq!(
            patterns.session(),
            Session {
                work: 30,
                preceded_by_chatter: 30,
                transactions: 30,
                single_statement_transactions: 30,
            }
        );
    }
}
