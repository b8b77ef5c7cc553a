//! `[[tokens]]`: the bearer tokens (only their SHA-256 is kept), the named
//! queries and scopes each allows, and each token's rate and concurrency limits.

use std::collections::BTreeMap;
use std::fmt;

use sha2::{Digest, Sha256};

use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use super::queries::QueryConfig;
use crate::throttle::{default_burst, TokenLimits};

/// The scopes a token may have.
const SCOPES: &[&str] = &["sql", "write"];

/// The shortest `token`, in bytes.
const MIN_TOKEN_CHARACTERS: usize = 16;

/// `[[tokens]]`' keys.
pub(super) static SECTION: Section = Section {
    path: "tokens",
    heading: "[[tokens]]",
    about: "Bearer tokens; only their SHA-256 is kept. With no token configured, named queries are \
            open and the server binds to localhost only ([Tokens](serve.md#tokens)). Two entries with \
            the same token (compared by SHA-256, whether given as `token` or `sha256`) are an error \
            naming both.",
    keys: &[
        Key {
            name: "name",
            ty: Type::Text,
            default: KeyDefault::Required,
            meaning: "The token's name, for logs.",
            example: Some("\"reporting\""),
            old_names: &[],
        },
        Key {
            name: "sha256",
            ty: Type::EnvText,
            default: KeyDefault::Absent("one of `sha256`, `token` is required"),
            meaning: "`sha256sum` of the token (64 hex digits).",
            example: Some("\"6f3a0c2c1b0f8e4d9a7b5c3e1f2d4a6b8c0e2f4a6b8d0c2e4f6a8b0d2c4e6f8a\""),
            old_names: &[],
        },
        Key {
            name: "token",
            ty: Type::EnvText,
            default: KeyDefault::Absent("—"),
            meaning: "Instead of `sha256`: the token itself, at least 16 characters, usually `\"${ENV_VAR}\"`.",
            example: None,
            old_names: &[],
        },
        Key {
            name: "queries",
            ty: Type::TextList,
            default: KeyDefault::Absent("none"),
            meaning: "The named queries it may run, or `[\"*\"]` for all.",
            example: Some("[\"payments_by_status\"]"),
            old_names: &[],
        },
        Key {
            name: "scopes",
            ty: Type::WordList(SCOPES),
            default: KeyDefault::Absent("none"),
            meaning: "`\"sql\"`: may use `POST /sql`; `\"write\"`: may write (`POST /tables`, writing \
                      named queries and batches).",
            example: Some("[\"sql\", \"write\"]"),
            old_names: &[],
        },
        Key {
            name: "max_concurrent",
            ty: Type::Count(u32::MAX as usize),
            default: KeyDefault::Absent("no limit"),
            meaning: "Requests of this token in flight at once; more get 429.",
            example: Some("4"),
            old_names: &[],
        },
        Key {
            name: "rate",
            ty: Type::Number,
            default: KeyDefault::Absent("no limit"),
            meaning: "Requests per second on average, from 0.001; more get 429 with `Retry-After`.",
            example: Some("10"),
            old_names: &[],
        },
        Key {
            name: "burst",
            ty: Type::Count(u32::MAX as usize),
            default: KeyDefault::Absent("`rate`, rounded up"),
            meaning: "Requests at once after a quiet spell (with `rate`).",
            example: Some("20"),
            old_names: &[],
        },
    ],
};

/// Which named queries a token may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    /// All of them (`"*"`).
    All,
    /// These.
    Only(Vec<String>),
}

impl Allowed {
    /// Whether the named query `name` is among them.
    pub fn includes(&self, name: &str) -> bool {
        match self {
            Allowed::All => true,
            Allowed::Only(names) => names.iter().any(|allowed| allowed == name),
        }
    }
}

/// A bearer token. Only its SHA-256 is kept.
#[derive(Clone)]
pub struct TokenConfig {
    /// A name for logs.
    pub name: String,
    /// SHA-256 of the token.
    pub sha256: [u8; 32],
    /// The named queries it may run.
    pub queries: Allowed,
    /// Extra scopes (`sql` for `POST /sql`).
    pub scopes: Vec<String>,
    /// How many requests it may have in flight, and how often it may ask.
    pub limits: TokenLimits,
}

impl fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenConfig")
            .field("name", &self.name)
            .field("queries", &self.queries)
            .field("scopes", &self.scopes)
            .field("limits", &self.limits)
            .finish()
    }
}

/// `[[tokens]]`: each different from the others.
pub(super) fn tokens_section(
    tables: &[Entries<'_>],
    queries: &BTreeMap<String, QueryConfig>,
) -> Result<Vec<TokenConfig>, ConfigError> {
    let mut tokens: Vec<TokenConfig> = Vec::new();
    for entries in tables {
        tokens.push(token_entry(entries, queries, &tokens)?);
    }
    Ok(tokens)
}

/// One of `[[tokens]]`, after `earlier` ones, which it must differ from.
fn token_entry(
    entries: &Entries<'_>,
    queries: &BTreeMap<String, QueryConfig>,
    earlier: &[TokenConfig],
) -> Result<TokenConfig, ConfigError> {
    let name = entries.required_text("name")?;
    let (sha256, field, span) = token_hash(entries)?;
    if let Some(index) = earlier.iter().position(|earlier| earlier.sha256 == sha256) {
        return Err(entries.error(
            field,
            span,
            format!(
                "the same token as tokens[{index}] ({:?}): every token must be different, \
                 or a request could not tell which rights it has",
                earlier[index].name
            ),
        ));
    }
    Ok(TokenConfig {
        name: name.value,
        sha256,
        queries: allowed_queries(entries, queries)?,
        scopes: entries
            .list("scopes")?
            .into_iter()
            .map(|scope| scope.value)
            .collect(),
        limits: token_limits(entries)?,
    })
}

/// A token's `max_concurrent`, `rate` and `burst`.
fn token_limits(entries: &Entries<'_>) -> Result<TokenLimits, ConfigError> {
    let max_concurrent = entries.count("max_concurrent")?.map(|count| count as usize);
    let rate = match entries.number("rate")? {
        Some(rate) if rate.value.is_finite() && (0.001..=1e9).contains(&rate.value) => {
            Some(rate.value)
        }
        Some(rate) => {
            return Err(entries.error(
                "rate",
                rate.span,
                "expected requests per second, a number from 0.001 (e.g. 10, 0.5)",
            ))
        }
        None => None,
    };
    let burst = match entries.count("burst")? {
        Some(_) if rate.is_none() => {
            return Err(entries.error(
                "burst",
                entries.span(),
                "goes with rate (the requests per second it lets arrive at once)",
            ))
        }
        Some(burst) => Some(burst as u32),
        None => rate.map(default_burst),
    };
    Ok(TokenLimits {
        max_concurrent,
        rate,
        burst,
    })
}

/// The SHA-256 of a token: given as `sha256`, or computed from `token`; with
/// the key that gave it and where.
fn token_hash(
    entries: &Entries<'_>,
) -> Result<([u8; 32], &'static str, std::ops::Range<usize>), ConfigError> {
    match (entries.text("sha256")?, entries.text("token")?) {
        (Some(hash), None) => match parse_sha256(&hash.value) {
            Some(sha256) => Ok((sha256, "sha256", hash.span)),
            None => Err(entries.error(
                "sha256",
                hash.span,
                "expected 64 hex digits (sha256sum of the token)",
            )),
        },
        (None, Some(plain)) if plain.value.len() < MIN_TOKEN_CHARACTERS => Err(entries.error(
            "token",
            plain.span,
            format!("tokens must be at least {MIN_TOKEN_CHARACTERS} characters"),
        )),
        (None, Some(plain)) => Ok((
            Sha256::digest(plain.value.as_bytes()).into(),
            "token",
            plain.span,
        )),
        _ => {
            Err(entries
                .table_error("give exactly one of sha256 = \"…\" or token = \"${VARIABLE}\""))
        }
    }
}

/// A token's `queries`: `["*"]`, or names of configured queries.
fn allowed_queries(
    entries: &Entries<'_>,
    queries: &BTreeMap<String, QueryConfig>,
) -> Result<Allowed, ConfigError> {
    let names = entries.list("queries")?;
    if names.iter().any(|name| name.value == "*") {
        return Ok(Allowed::All);
    }
    if let Some(unknown) = names.iter().find(|name| !queries.contains_key(&name.value)) {
        return Err(entries.error(
            "queries",
            unknown.span.clone(),
            format!("no query named {:?}", unknown.value),
        ));
    }
    Ok(Allowed::Only(
        names.into_iter().map(|name| name.value).collect(),
    ))
}

/// Whether some token has `scope`: a section that needs one is useless without it.
pub(super) fn has_scope(tokens: &[TokenConfig], scope: &str) -> bool {
    tokens
        .iter()
        .any(|token| token.scopes.iter().any(|given| given == scope))
}

fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut hash = [0u8; 32];
    for (index, byte) in hash.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(hash)
}
