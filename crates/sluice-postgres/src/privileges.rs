//! What makes a PostgreSQL login unfit to run ad-hoc SQL (`POST /sql`), how to
//! find it in one query, and how to say it.
//!
//! `BEGIN READ ONLY` stops writes to tables, not what a privileged role can do
//! without writing one: `COPY … TO PROGRAM` (a shell command as the server's
//! user), `COPY … TO 'file'`, `pg_read_file`, `lo_import`/`lo_export`,
//! `pg_terminate_backend` on anyone's session, `pg_reload_conf`. `SET ROLE` does
//! not help on its own either: the statement can take it back (`RESET ROLE`,
//! `SET ROLE postgres`, `set_config('role', …)`, `SET SESSION AUTHORIZATION` for
//! a superuser login), because PostgreSQL checks those against the *login*
//! (`session_user`), not the current role. So the rule is about the login and
//! everything it can become: it must not be, or be a member (directly or not)
//! of, a superuser role or one of [`SERVER_ROLES`], nor hold `EXECUTE` on one of
//! [`SERVER_FUNCTIONS`] (revoked from PUBLIC by default, granted one by one).
//!
//! [`QUERY`] finds all of that about `session_user`; [`crate::gateway`] runs it
//! in the same message as every ad-hoc statement's `BEGIN` (no extra round trip,
//! and a right granted while the server runs is noticed), and at start-up so a
//! misconfigured server does not start.

use std::fmt;
use std::sync::LazyLock;

/// Predefined roles that reach outside the database.
pub const SERVER_ROLES: [&str; 4] = [
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_execute_server_program",
    "pg_signal_backend",
];

/// Functions that read or write server files or control the server, executable
/// only where granted.
pub const SERVER_FUNCTIONS: [&str; 9] = [
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "lo_import",
    "lo_export",
    "pg_reload_conf",
    "pg_rotate_logfile",
    "pg_promote",
];

/// Finds everything about `session_user` that [`Privileges`] holds: one row per
/// finding, `(kind, name)`, the first always `('login', session_user)`.
pub static QUERY: LazyLock<String> = LazyLock::new(|| {
    let list = |names: &[&str]| {
        names
            .iter()
            .map(|name| format!("'{name}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "SELECT 'login', session_user::text \
         UNION ALL \
         SELECT 'superuser', r.rolname::text FROM pg_catalog.pg_roles r \
          WHERE r.rolsuper AND pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER') \
         UNION ALL \
         SELECT 'member', r.rolname::text FROM pg_catalog.pg_roles r \
          WHERE r.rolname IN ({roles}) \
            AND pg_catalog.pg_has_role(session_user, r.oid, 'MEMBER') \
         UNION ALL \
         SELECT 'execute', p.oid::pg_catalog.regprocedure::text FROM pg_catalog.pg_proc p \
          WHERE p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace \
            AND p.proname IN ({functions}) \
            AND pg_catalog.has_function_privilege(session_user, p.oid, 'EXECUTE')",
        roles = list(&SERVER_ROLES),
        functions = list(&SERVER_FUNCTIONS),
    )
});

/// What [`QUERY`] found about a login.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Privileges {
    /// The login (`session_user`).
    pub login: String,
    /// Superuser roles it is or may become.
    pub superuser_roles: Vec<String>,
    /// Roles of [`SERVER_ROLES`] it is a member of.
    pub server_roles: Vec<String>,
    /// Functions of [`SERVER_FUNCTIONS`] it may execute (with their arguments).
    pub server_functions: Vec<String>,
}

impl Privileges {
    /// Reads [`QUERY`]'s rows.
    pub fn from_rows(rows: &[Vec<Option<String>>]) -> Privileges {
        let mut privileges = Privileges::default();
        for row in rows {
            let (Some(Some(kind)), Some(Some(name))) = (row.first(), row.get(1)) else {
                continue;
            };
            let name = name.clone();
            match kind.as_str() {
                "login" => privileges.login = name,
                "superuser" => privileges.superuser_roles.push(name),
                "member" => privileges.server_roles.push(name),
                "execute" => privileges.server_functions.push(name),
                _ => {}
            }
        }
        privileges
    }

    /// True when the login may do none of it.
    pub fn is_safe(&self) -> bool {
        self.superuser_roles.is_empty()
            && self.server_roles.is_empty()
            && self.server_functions.is_empty()
    }
}

impl fmt::Display for Privileges {
    /// `the login "app" is a superuser`, or what it may do, `; `-separated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let login = &self.login;
        if self.superuser_roles.iter().any(|role| role == login) {
            // A superuser is a member of everything and may execute anything.
            return write!(f, "the login {login:?} is a superuser");
        }
        let mut findings = Vec::new();
        if !self.superuser_roles.is_empty() {
            findings.push(format!(
                "the login {login:?} can SET ROLE to the superuser role{} {}",
                if self.superuser_roles.len() == 1 {
                    ""
                } else {
                    "s"
                },
                quoted_list(&self.superuser_roles)
            ));
        }
        if !self.server_roles.is_empty() {
            findings.push(format!(
                "the login {login:?} is a member (directly or through other roles) of {}",
                self.server_roles.join(", ")
            ));
        }
        if !self.server_functions.is_empty() {
            findings.push(format!(
                "the login {login:?} may execute {}",
                self.server_functions.join(", ")
            ));
        }
        f.write_str(&findings.join("; "))
    }
}

fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|name| format!("{name:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(pairs: &[(&str, &str)]) -> Vec<Vec<Option<String>>> {
        pairs
            .iter()
            .map(|(kind, name)| vec![Some(kind.to_string()), Some(name.to_string())])
            .collect()
    }

    #[test]
    fn findings_are_worded_by_what_the_login_may_do() {
        let superuser = Privileges::from_rows(&rows(&[
            ("login", "postgres"),
            ("superuser", "postgres"),
            ("member", "pg_signal_backend"),
            ("execute", "pg_read_file(text)"),
        ]));
        assert!(!superuser.is_safe());
        assert_eq!(
            superuser.to_string(),
            "the login \"postgres\" is a superuser"
        );

        let member = Privileges::from_rows(&rows(&[
            ("login", "app"),
            ("superuser", "admin"),
            ("member", "pg_read_server_files"),
            ("execute", "lo_export(oid,text)"),
        ]));
        assert_eq!(
            member.to_string(),
            "the login \"app\" can SET ROLE to the superuser role \"admin\"; \
             the login \"app\" is a member (directly or through other roles) of pg_read_server_files; \
             the login \"app\" may execute lo_export(oid,text)"
        );

        let safe = Privileges::from_rows(&rows(&[("login", "reader")]));
        assert!(safe.is_safe());
        assert_eq!(safe.login, "reader");
    }
}
