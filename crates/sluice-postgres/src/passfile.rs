//! libpq's files beside the connection string: the password file (`.pgpass`,
//! `passfile`, `PGPASSFILE`) and the connection service file
//! (`pg_service.conf`, `service`, `PGSERVICE`).

use std::path::{Path, PathBuf};

use sluice_core::Error;

use crate::conninfo::Settings;

/// Where libpq's per-user files live: `$HOME`.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

/// The password file to read: `passfile`, else `~/.pgpass`.
pub(crate) fn password_file(settings: &Settings) -> Option<PathBuf> {
    match settings.get("passfile") {
        Some(path) => Some(PathBuf::from(path)),
        None => home().map(|home| home.join(".pgpass")),
    }
}

/// What a password file says for one connection.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The password of the first matching line.
    Found(Vec<u8>),
    /// No line matches, or there is no file.
    NotFound,
    /// The file was not read: others may read it (libpq ignores it too).
    Ignored(PathBuf),
}

/// The password `file` gives for `host`, `port`, `database` and `user`: the
/// first line `host:port:database:user:password` whose fields match (`*`
/// matches anything; `\` escapes `:` and `\`).
pub(crate) fn look_up(file: &Path, host: &str, port: u16, database: &str, user: &str) -> Lookup {
    use std::os::unix::fs::MetadataExt;
    let Ok(metadata) = std::fs::metadata(file) else {
        return Lookup::NotFound;
    };
    if !metadata.is_file() {
        return Lookup::NotFound;
    }
    if metadata.mode() & 0o077 != 0 {
        return Lookup::Ignored(file.to_owned());
    }
    let Ok(text) = std::fs::read_to_string(file) else {
        return Lookup::NotFound;
    };
    let port = port.to_string();
    let wanted = [host, port.as_str(), database, user];
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let fields = split_fields(line);
        let [ref host, ref port, ref database, ref user, ref password] = fields[..] else {
            continue;
        };
        let matches = [host, port, database, user]
            .iter()
            .zip(wanted)
            .all(|(field, value)| field.as_str() == "*" || field.as_str() == value);
        if matches {
            return Lookup::Found(password.clone().into_bytes());
        }
    }
    Lookup::NotFound
}

/// The fields of a password-file line: `:`-separated, `\` escaping the next
/// character; the last field takes the rest of the line.
fn split_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' => fields
                .last_mut()
                .expect("one field at least")
                .extend(characters.next()),
            ':' if fields.len() < 5 => fields.push(String::new()),
            other => fields.last_mut().expect("one field at least").push(other),
        }
    }
    fields
}

/// The settings of service `name`: from `PGSERVICEFILE` (else
/// `~/.pg_service.conf`), else from `pg_service.conf` in `PGSYSCONFDIR` (else
/// the system's directory, `/etc/postgresql-common` as Debian's libpq).
pub(crate) fn service(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings, Error> {
    let user_file = env("PGSERVICEFILE")
        .map(PathBuf::from)
        .or_else(|| home().map(|home| home.join(".pg_service.conf")));
    let system_file =
        Path::new(&env("PGSYSCONFDIR").unwrap_or_else(|| "/etc/postgresql-common".to_owned()))
            .join("pg_service.conf");
    for file in user_file.iter().chain([&system_file]) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        if let Some(settings) = service_section(&text, name, file)? {
            return Ok(settings);
        }
    }
    Err(Error::config(format!(
        "service {name:?} is not defined in {} or {}",
        user_file.map_or("~/.pg_service.conf".to_owned(), |file| file
            .display()
            .to_string()),
        system_file.display()
    )))
}

/// The `[name]` section of a service file, if it has one.
fn service_section(text: &str, name: &str, file: &Path) -> Result<Option<Settings>, Error> {
    let mut settings: Option<Settings> = None;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            if settings.is_some() {
                break;
            }
            if section == name {
                settings = Some(Settings::default());
            }
            continue;
        }
        let Some(settings) = settings.as_mut() else {
            continue;
        };
        let (key, value) = line.split_once('=').ok_or_else(|| {
            Error::config(format!(
                "{}:{}: expected key=value in service {name:?}",
                file.display(),
                number + 1
            ))
        })?;
        settings
            .set(key.trim(), value.trim().to_owned())
            .map_err(|error| {
                Error::config(format!("{}:{}: {error}", file.display(), number + 1))
            })?;
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_first_matching_line_gives_the_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "# comment\nother:5432:*:*:no\ndb\\:1:*:sales:*:p\\:a\\\\ss:word\n*:*:*:bob:fallback\n",
        )
        .unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            look_up(&file, "db:1", 5432, "sales", "alice"),
            Lookup::Found(b"p:a\\ss:word".to_vec())
        );
        assert_eq!(
            look_up(&file, "h", 1, "d", "bob"),
            Lookup::Found(b"fallback".to_vec())
        );
        assert_eq!(look_up(&file, "h", 1, "d", "carol"), Lookup::NotFound);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            look_up(&file, "h", 1, "d", "bob"),
            Lookup::Ignored(file.clone())
        );
        assert_eq!(
            look_up(&dir.path().join("none"), "h", 1, "d", "bob"),
            Lookup::NotFound
        );
    }

    #[test]
    fn services_come_from_the_user_file_then_the_system_one() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.conf");
        std::fs::write(
            &user,
            "[sales]\nhost=db1\n# c\nsslmode = verify-full\n[other]\nhost=x\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("pg_service.conf"),
            "[hr]\nhost=db2\nport=6432\n",
        )
        .unwrap();
        let env = |variable: &str| match variable {
            "PGSERVICEFILE" => Some(user.display().to_string()),
            "PGSYSCONFDIR" => Some(dir.path().display().to_string()),
            _ => None,
        };
        let sales = service("sales", &env).unwrap();
        assert_eq!(sales.get("host"), Some("db1"));
        assert_eq!(sales.get("sslmode"), Some("verify-full"));
        assert_eq!(service("hr", &env).unwrap().get("port"), Some("6432"));
        let error = service("nope", &env).unwrap_err().to_string();
        assert!(
            error.starts_with("service \"nope\" is not defined in"),
            "{error}"
        );
        std::fs::write(&user, "[bad]\nfrobnicate=1\n").unwrap();
        let error = service("bad", &env).unwrap_err().to_string();
        assert!(
            error.contains("user.conf:2: invalid connection string: unknown option `frobnicate`"),
            "{error}"
        );
    }
}
