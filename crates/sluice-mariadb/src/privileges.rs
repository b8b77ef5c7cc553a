//! What makes a MariaDB or MySQL login unfit to run ad-hoc SQL (`POST
//! /sql`), how to find it, and how to say it.
//!
//! Nothing in a transaction stops what a privileged login does without
//! writing a table (`SELECT … INTO OUTFILE`, `KILL`, `SET GLOBAL`,
//! `SHUTDOWN`), and the statement may `SET ROLE` to any role granted to the
//! login, so the login and every role it holds must be free of
//! [`SERVER_RIGHTS`] and of `GRANT OPTION` on `*.*`. The login's global
//! privileges come from `information_schema.USER_PRIVILEGES`; a role's are
//! visible to an unprivileged login only while the role is its current one,
//! so each role granted to the login is set in turn and `SHOW GRANTS FOR
//! CURRENT_ROLE` read (it lists the roles the role holds too).
//!
//! [`crate::gateway`] sends `privilege_query` with the statements that
//! fence every ad-hoc request in, in their round trip, and hands its rows to
//! `check_login`, which costs one more round trip only when the login holds
//! roles: each role's rights (`role_probes`), then the configured (or
//! default) role back.
//!
//! # Limits
//!
//! - MySQL's role checks use `SHOW GRANTS … USING` and `APPLICABLE_ROLES`
//!   (MySQL 8.0.19 or later); they were written from MySQL's manual and have
//!   not run against a MySQL server.
//! - `PROCESS` is allowed: it shows the text of other sessions' statements
//!   (with any values written in them), not their tables.

use std::fmt;

use sluice_core::database::{Refusal, StartError};

use crate::sql::identifier;
use crate::Connection;

/// Global rights that reach past the fence around ad-hoc SQL (see the module
/// docs), spelled as `USER_PRIVILEGES` and `SHOW GRANTS` spell them, with
/// MySQL's underscores read as spaces:
///
/// - files on the server (`INTO OUTFILE`, `LOAD_FILE()`, `LOAD DATA INFILE`):
///   `FILE`;
/// - everything (`SET GLOBAL`, `KILL` of anyone, …): `SUPER`, `ALL PRIVILEGES`;
/// - the server itself: `SHUTDOWN`, `RELOAD` (`FLUSH`, `RESET`; `FLUSH TABLES
///   WITH READ LOCK` stops every writer);
/// - accounts: `CREATE USER`, `SET USER` (routines and views defined as
///   anyone);
/// - other logins' sessions (`KILL`): `CONNECTION ADMIN`;
/// - the binary log, which shows every database's changes or changes the
///   server: `BINLOG MONITOR` (MariaDB's `SHOW BINLOG EVENTS`), `REPLICATION
///   SLAVE` (MySQL's), `BINLOG ADMIN`, `BINLOG REPLAY`, and replication:
///   `REPLICATION MASTER ADMIN`, `REPLICATION SLAVE ADMIN`;
/// - writes on a read-only server, links to other servers: `READ_ONLY
///   ADMIN`, `FEDERATED ADMIN`;
/// - MySQL 8's dynamic rights of the same kinds.
pub const SERVER_RIGHTS: [&str; 31] = [
    "FILE",
    "SUPER",
    "ALL PRIVILEGES",
    "SHUTDOWN",
    "RELOAD",
    "CREATE USER",
    "SET USER",
    "CONNECTION ADMIN",
    "BINLOG MONITOR",
    "REPLICATION SLAVE",
    "BINLOG ADMIN",
    "BINLOG REPLAY",
    "REPLICATION MASTER ADMIN",
    "REPLICATION SLAVE ADMIN",
    "READ ONLY ADMIN",
    "FEDERATED ADMIN",
    "SYSTEM VARIABLES ADMIN",
    "SYSTEM USER",
    "SET USER ID",
    "ROLE ADMIN",
    "CREATE ROLE",
    "DROP ROLE",
    "ENCRYPTION KEY ADMIN",
    "GROUP REPLICATION ADMIN",
    "REPLICATION APPLIER",
    "CLONE ADMIN",
    "PERSIST RO VARIABLES ADMIN",
    "INNODB REDO LOG ARCHIVE",
    "BACKUP ADMIN",
    "AUDIT ADMIN",
    "FIREWALL ADMIN",
];

/// Judges the login by the rows of [`privilege_query`] (`rows`, as the text
/// protocol read them) and, when it holds roles, by each role's rights, read
/// in one more round trip that leaves the `configured` role (or the login's
/// default one) current again: `Refused` when the login or a role it holds is
/// privileged.
pub(crate) async fn check_login(
    connection: &mut Connection,
    rows: Vec<Vec<Option<Vec<u8>>>>,
    configured: Option<&str>,
    mariadb: bool,
) -> Result<(), StartError> {
    let mut privileges = Privileges::from_rows(&text_rows(rows));
    if !privileges.roles.is_empty() {
        read_role_rights(connection, &mut privileges, configured, mariadb).await?;
    }
    if privileges.is_safe() {
        Ok(())
    } else {
        Err(StartError::Refused(Refusal::Privileged(
            privileges.to_string(),
        )))
    }
}

/// Fills in the rights of each role the login holds, and leaves the session
/// with the configured role (or the login's default one) current again.
async fn read_role_rights(
    connection: &mut Connection,
    privileges: &mut Privileges,
    configured: Option<&str>,
    mariadb: bool,
) -> Result<(), StartError> {
    let statements = role_probes(privileges, configured, mariadb);
    let mut answers = connection
        .exchange(&statements)
        .await
        .map_err(StartError::classify)?
        .into_iter();
    for role in &mut privileges.roles {
        // MariaDB answers SET ROLE, then SHOW GRANTS FOR CURRENT_ROLE; a role
        // whose rights cannot be read keeps `None`, which refuses.
        let set = if mariadb { answers.next() } else { None };
        let shown = answers.next();
        if let (None | Some(Ok(_)), Some(Ok(grants))) = (set, shown) {
            role.rights = Some(Rights::from_grants(&text_rows(grants.rows)));
        }
    }
    match answers.next() {
        Some(Err(error)) => Err(StartError::classify(error)),
        _ => Ok(()),
    }
}

/// The statements that show each role's global rights: on MariaDB the role
/// must be current (`SET ROLE`, `SHOW GRANTS FOR CURRENT_ROLE`), and the role
/// the request runs as is set again after them; MySQL shows them for the
/// login `USING` the role.
fn role_probes(privileges: &Privileges, configured: Option<&str>, mariadb: bool) -> Vec<String> {
    let mut statements = Vec::new();
    for role in &privileges.roles {
        if mariadb {
            statements.push(format!("SET ROLE {}", identifier(&role.name)));
            statements.push("SHOW GRANTS FOR CURRENT_ROLE".to_owned());
        } else {
            let host = role.host.as_deref().unwrap_or("%");
            statements.push(format!(
                "SHOW GRANTS FOR CURRENT_USER() USING {}@{}",
                identifier(&role.name),
                identifier(host)
            ));
        }
    }
    if mariadb {
        let current = configured.or_else(|| {
            privileges
                .roles
                .iter()
                .find(|role| role.default)
                .map(|role| role.name.as_str())
        });
        statements.push(match current {
            Some(role) => format!("SET ROLE {}", identifier(role)),
            None => "SET ROLE NONE".to_owned(),
        });
    }
    statements
}

/// A text result's rows as strings (NULL as `None`).
fn text_rows(rows: Vec<Vec<Option<Vec<u8>>>>) -> Vec<Vec<Option<String>>> {
    rows.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|value| value.map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
                .collect()
        })
        .collect()
}

/// Finds what [`Privileges`] holds about the login, one row per finding,
/// `(kind, name, detail)`: `('login', CURRENT_USER(), NULL)`, then `('global',
/// privilege, is_grantable)` for each of its global privileges, then
/// `('role' | 'default role', role, host)` for each role granted to it
/// directly (the roles those hold come with them).
pub(crate) fn privilege_query(mariadb: bool) -> String {
    // USER_PRIVILEGES names the login 'user'@'host'; CURRENT_USER() is
    // user@host, and only the host is sure to hold no '@'.
    const GRANTEE: &str = "CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER()) \
         - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)) - 1), '''@''', \
         SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";
    let roles = if mariadb {
        "SELECT IF(IS_DEFAULT = 'YES', 'default role', 'role'), ROLE_NAME, NULL \
         FROM information_schema.APPLICABLE_ROLES WHERE GRANTEE = CURRENT_USER()"
    } else {
        "SELECT IF(IS_DEFAULT = 'YES' OR IS_MANDATORY = 'YES', 'default role', 'role'), \
         ROLE_NAME, ROLE_HOST FROM information_schema.APPLICABLE_ROLES \
         WHERE GRANTEE = USER AND GRANTEE_HOST = HOST"
    };
    format!(
        "SELECT 'login', CURRENT_USER(), NULL \
         UNION ALL \
         SELECT 'global', PRIVILEGE_TYPE, IS_GRANTABLE FROM information_schema.USER_PRIVILEGES \
          WHERE GRANTEE = {GRANTEE} \
         UNION ALL \
         {roles}"
    )
}

/// Global rights that matter for ad-hoc SQL, of a login or a role.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Rights {
    /// Rights of [`SERVER_RIGHTS`] held on `*.*`, as the server spells them.
    server: Vec<String>,
    /// `GRANT OPTION` on `*.*`: its rights can be handed to any account.
    grant_option: bool,
}

impl Rights {
    fn add(&mut self, privilege: &str, grantable: bool) {
        if is_server_right(privilege) && !self.server.iter().any(|known| known == privilege) {
            self.server.push(privilege.to_owned());
        }
        self.grant_option |= grantable || privilege.eq_ignore_ascii_case("GRANT OPTION");
    }

    /// The global rights in `SHOW GRANTS` lines (`GRANT FILE, SUPER ON *.* TO
    /// …`, `… WITH GRANT OPTION`); other lines grant roles or rights on
    /// databases and tables.
    fn from_grants(rows: &[Vec<Option<String>>]) -> Rights {
        let mut rights = Rights::default();
        for line in rows.iter().filter_map(|row| row.first()?.as_deref()) {
            let Some((list, target)) = line
                .strip_prefix("GRANT ")
                .and_then(|rest| rest.split_once(" ON *.* TO "))
            else {
                continue;
            };
            let grantable = target.contains(" WITH GRANT OPTION");
            for privilege in list.split(',') {
                rights.add(privilege.trim(), grantable);
            }
        }
        rights
    }

    fn is_empty(&self) -> bool {
        self.server.is_empty() && !self.grant_option
    }

    /// `FILE, SUPER on *.*`, `GRANT OPTION on *.*`.
    fn describe(&self) -> String {
        let mut names = self.server.clone();
        if self.grant_option {
            names.push("GRANT OPTION".to_owned());
        }
        format!("{} on *.*", names.join(", "))
    }
}

/// Whether `privilege` is one of [`SERVER_RIGHTS`] (MySQL's `BINLOG_ADMIN`
/// too).
fn is_server_right(privilege: &str) -> bool {
    let spaced = privilege.trim().replace('_', " ");
    SERVER_RIGHTS
        .iter()
        .any(|right| right.eq_ignore_ascii_case(&spaced))
}

/// A role granted to the login.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Role {
    name: String,
    /// MySQL's role host.
    host: Option<String>,
    /// On from the login (MariaDB's default role, MySQL's default or
    /// mandatory roles).
    default: bool,
    /// Its global rights with those of the roles it holds; `None` until read,
    /// or when they could not be.
    rights: Option<Rights>,
}

/// What [`privilege_query`] and the role probes found about a login.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Privileges {
    /// `user@host`.
    login: String,
    /// Whether the login's own global privileges were found (every login has
    /// at least `USAGE`): if not, nothing can be said of it.
    found: bool,
    rights: Rights,
    roles: Vec<Role>,
}

impl Privileges {
    /// Reads [`privilege_query`]'s rows.
    fn from_rows(rows: &[Vec<Option<String>>]) -> Privileges {
        let mut privileges = Privileges::default();
        for row in rows {
            let column = |index: usize| row.get(index).cloned().flatten();
            let (Some(kind), Some(name)) = (column(0), column(1)) else {
                continue;
            };
            match kind.as_str() {
                "login" => privileges.login = name,
                "global" => {
                    privileges.found = true;
                    let grantable = column(2).is_some_and(|value| value == "YES");
                    privileges.rights.add(&name, grantable);
                }
                "role" | "default role" => privileges.roles.push(Role {
                    name,
                    host: column(2),
                    default: kind == "default role",
                    rights: None,
                }),
                _ => {}
            }
        }
        privileges
    }

    /// True when neither the login nor any role it holds reaches past the fence.
    fn is_safe(&self) -> bool {
        self.found
            && self.rights.is_empty()
            && self
                .roles
                .iter()
                .all(|role| role.rights.as_ref().is_some_and(Rights::is_empty))
    }
}

impl fmt::Display for Privileges {
    /// `the login "app@%" has FILE, SUPER on *.*; the login "app@%" can SET
    /// ROLE `admin`, which has …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let login = &self.login;
        let mut findings = Vec::new();
        if !self.found {
            findings.push(format!(
                "the login {login:?} could not be checked: information_schema.USER_PRIVILEGES \
                 shows none of its global privileges"
            ));
        }
        if !self.rights.is_empty() {
            findings.push(format!(
                "the login {login:?} has {}",
                self.rights.describe()
            ));
        }
        for role in &self.roles {
            let default = if role.default { " (on by default)" } else { "" };
            let rights = match &role.rights {
                Some(rights) if rights.is_empty() => continue,
                Some(rights) => format!("which has {}", rights.describe()),
                None => "whose rights could not be read".to_owned(),
            };
            findings.push(format!(
                "the login {login:?} can SET ROLE {}{default}, {rights}",
                identifier(&role.name)
            ));
        }
        f.write_str(&findings.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(values: &[&[Option<&str>]]) -> Vec<Vec<Option<String>>> {
        values
            .iter()
            .map(|row| row.iter().map(|value| value.map(str::to_owned)).collect())
            .collect()
    }

    #[test]
    fn the_login_is_judged_by_its_global_rights() {
        let root = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("root@localhost"), None],
            &[Some("global"), Some("SELECT"), Some("YES")],
            &[Some("global"), Some("PROCESS"), Some("YES")],
            &[Some("global"), Some("FILE"), Some("YES")],
            &[Some("global"), Some("SUPER"), Some("YES")],
            &[Some("global"), Some("READ_ONLY ADMIN"), Some("YES")],
        ]));
        assert!(!root.is_safe());
        assert_eq!(
            root.to_string(),
            "the login \"root@localhost\" has FILE, SUPER, READ_ONLY ADMIN, GRANT OPTION on *.*"
        );

        let plain = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("app@%"), None],
            &[Some("global"), Some("USAGE"), Some("NO")],
            &[Some("global"), Some("PROCESS"), Some("NO")],
        ]));
        assert!(plain.is_safe(), "{plain}");

        let unseen = Privileges::from_rows(&rows(&[&[Some("login"), Some("o'dd@%"), None]]));
        assert!(!unseen.is_safe());
        assert!(unseen.to_string().contains("could not be checked"));
        assert!(is_server_right("BINLOG_ADMIN"), "MySQL's spelling");
    }

    #[test]
    fn every_role_the_login_holds_is_judged_by_its_grants() {
        let mut privileges = Privileges::from_rows(&rows(&[
            &[Some("login"), Some("app@%"), None],
            &[Some("global"), Some("USAGE"), Some("NO")],
            &[Some("role"), Some("outer"), None],
            &[Some("default role"), Some("reader"), None],
        ]));
        assert!(!privileges.is_safe(), "roles not yet read");
        assert_eq!(
            role_probes(&privileges, None, true),
            [
                "SET ROLE `outer`",
                "SHOW GRANTS FOR CURRENT_ROLE",
                "SET ROLE `reader`",
                "SHOW GRANTS FOR CURRENT_ROLE",
                "SET ROLE `reader`",
            ]
        );
        assert_eq!(
            role_probes(&privileges, Some("we`ird"), false),
            [
                "SHOW GRANTS FOR CURRENT_USER() USING `outer`@`%`",
                "SHOW GRANTS FOR CURRENT_USER() USING `reader`@`%`",
            ]
        );
        privileges.roles[0].rights = Some(Rights::from_grants(&rows(&[
            &[Some("GRANT `filer` TO `outer`")],
            &[Some("GRANT USAGE ON *.* TO `outer`")],
            &[Some("GRANT FILE ON *.* TO `filer`")],
            &[Some(
                "GRANT SELECT, INSERT ON `shop`.* TO `outer` WITH GRANT OPTION",
            )],
        ])));
        privileges.roles[1].rights = Some(Rights::from_grants(&rows(&[&[Some(
            "GRANT SELECT ON `shop`.* TO `reader`",
        )]])));
        assert!(!privileges.is_safe());
        assert_eq!(
            privileges.to_string(),
            "the login \"app@%\" can SET ROLE `outer`, which has FILE on *.*"
        );
        privileges.roles[0].rights = Some(Rights::from_grants(&rows(&[&[Some(
            "GRANT ALL PRIVILEGES ON *.* TO `outer` WITH GRANT OPTION",
        )]])));
        assert!(privileges
            .to_string()
            .ends_with("which has ALL PRIVILEGES, GRANT OPTION on *.*"));
        privileges.roles[0].rights = None;
        assert!(privileges
            .to_string()
            .ends_with("whose rights could not be read"));
        privileges.roles[0].rights = Some(Rights::default());
        assert!(privileges.is_safe());
    }
}
