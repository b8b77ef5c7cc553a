//! Statement fingerprints: a statement's text with its constants replaced by
//! placeholders, the way PostgreSQL's `pg_stat_statements` shows normalised
//! queries, so that `insert into t values (1)` and `insert into t values (2)`
//! (and the bound `insert into t values ($1)`) are one statement in reports.
//!
//! The rules:
//! - constants become `$n`: numbers (a leading minus included where it is a
//!   sign, not a subtraction), strings in every form (`'…'`, `E'…'`, `B'…'`,
//!   `X'…'`, `N'…'`, `U&'…'`, dollar-quoted `$tag$…$tag$`); `true`, `false`
//!   and `null` stay, as they are keywords to PostgreSQL too; casts stay
//!   (`'5'::int` is `$1::int`, `date '2024-01-01'` is `date $1`);
//! - bound parameters stay parameters; all placeholders are numbered in order
//!   of first appearance, so an `IN` list of a different length earlier in the
//!   text does not change the numbers after it;
//! - an `IN (…)` list of constants or parameters, of any length, becomes one
//!   placeholder list, `in ($1 /*, ... */)` (PostgreSQL 18's form);
//! - `VALUES (…), (…), …` rows of the same shape become the first row alone,
//!   so a multi-row insert has the fingerprint of a one-row insert;
//! - comments and trailing semicolons are dropped, white space is one space (none inside parentheses
//!   or around `.` and `::`), unquoted words are lower case (PostgreSQL folds
//!   them so), quoted identifiers are kept as written.
//!
//! The tokenizer is written here rather than taken from a crate: the proxy sees
//! any text a client sends — cut at 16 KiB, in any dialect of PostgreSQL's
//! SQL, sometimes invalid — and must still group it. A full parser
//! (sqlparser-rs) rejects what it does not know, is heavy for a proxy that
//! reads every statement, and builds an AST where a token stream is all a
//! fingerprint needs. Lexing PostgreSQL's tokens (strings, comments, dollar
//! quotes, operators) is small and cannot fail: anything unknown is kept as a
//! symbol, and an unterminated string or comment runs to the end.

/// A statement's fingerprint and the constants taken out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    /// The normalised text.
    pub text: String,
    /// The constants' values, in order (strings without their quotes), for
    /// matching them against values the server returned earlier.
    pub constants: Vec<String>,
}

/// One token of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// An unquoted word (keyword or identifier), lower case.
    Word(String),
    /// A quoted identifier, as written (quotes included).
    Quoted(String),
    /// A constant, by its value.
    Constant(String),
    /// A bound parameter `$n`.
    Parameter(u32),
    /// An `IN` list of constants or parameters, squashed (its values kept).
    List(Vec<Token>),
    /// Punctuation or an operator.
    Symbol(String),
}

impl Token {
    fn is_value(&self) -> bool {
        matches!(
            self,
            Token::Constant(_) | Token::Parameter(_) | Token::List(_)
        )
    }

    fn is_symbol(&self, symbol: &str) -> bool {
        matches!(self, Token::Symbol(s) if s == symbol)
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self, Token::Word(w) if w == word)
    }
}

/// Keywords after which an operand is expected: a `-` following one is a sign,
/// and a `(` following one is spaced (it opens an expression, not arguments).
const KEYWORDS: &[&str] = &[
    "select",
    "from",
    "where",
    "and",
    "or",
    "not",
    "in",
    "values",
    "as",
    "on",
    "join",
    "using",
    "into",
    "set",
    "returning",
    "with",
    "when",
    "then",
    "else",
    "case",
    "between",
    "like",
    "ilike",
    "is",
    "by",
    "having",
    "limit",
    "offset",
    "union",
    "intersect",
    "except",
    "return",
    "table",
    "update",
    "delete",
    "insert",
    "distinct",
    "over",
    "filter",
    "within",
    "do",
    "conflict",
];

/// Keywords taking a parenthesised argument like a function: `any($1)`.
const FUNCTION_LIKE: &[&str] = &["any", "all", "some", "exists", "array", "cast"];

/// The fingerprint of `text`.
pub fn fingerprint(text: &str) -> Fingerprint {
    let mut tokens = tokenize(text);
    // As pg_stat_statements: `select 1;` is `select 1` (psql sends the `;`).
    while tokens.last().is_some_and(|token| token.is_symbol(";")) {
        tokens.pop();
    }
    let tokens = squash_values_rows(squash_in_lists(tokens));
    let mut constants = Vec::new();
    collect_constants(&tokens, &mut constants);
    Fingerprint {
        text: render(&tokens),
        constants,
    }
}

fn collect_constants(tokens: &[Token], constants: &mut Vec<String>) {
    for token in tokens {
        match token {
            Token::Constant(value) => constants.push(value.clone()),
            Token::List(items) => collect_constants(items, constants),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------
// Tokenizing

/// Splits `text` into tokens, dropping white space and comments.
fn tokenize(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut lexer = Lexer {
        chars,
        at: 0,
        tokens: Vec::new(),
    };
    lexer.run();
    lexer.tokens
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    tokens: Vec<Token>,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn starts_with(&self, prefix: &str) -> bool {
        prefix
            .chars()
            .enumerate()
            .all(|(index, c)| self.peek(index) == Some(c))
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            if c.is_whitespace() {
                self.at += 1;
            } else if self.starts_with("--") {
                self.skip_line_comment();
            } else if self.starts_with("/*") {
                self.skip_block_comment();
            } else if c == '\'' {
                let value = self.quoted_string(false);
                self.tokens.push(Token::Constant(value));
            } else if c == '"' {
                let raw = self.quoted_identifier();
                self.tokens.push(Token::Quoted(raw));
            } else if c == '$' {
                self.dollar();
            } else if c.is_ascii_digit()
                || (c == '.' && self.peek(1).is_some_and(|n| n.is_ascii_digit()))
            {
                let number = self.number();
                self.tokens.push(Token::Constant(number));
            } else if c.is_alphabetic() || c == '_' {
                self.word();
            } else {
                self.symbol();
            }
        }
    }

    fn skip_line_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            self.at += 1;
            if c == '\n' {
                break;
            }
        }
    }

    /// `/* … */`, nested as PostgreSQL nests them.
    fn skip_block_comment(&mut self) {
        let mut depth = 0;
        while self.peek(0).is_some() {
            if self.starts_with("/*") {
                depth += 1;
                self.at += 2;
            } else if self.starts_with("*/") {
                depth -= 1;
                self.at += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.at += 1;
            }
        }
    }

    /// A `'…'` string starting here; `backslashes`: an `E'…'` string, where a
    /// backslash escapes the next character.
    fn quoted_string(&mut self, backslashes: bool) -> String {
        self.at += 1;
        let mut value = String::new();
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                '\\' if backslashes => {
                    if let Some(next) = self.peek(0) {
                        value.push(next);
                        self.at += 1;
                    }
                }
                '\'' if self.peek(0) == Some('\'') => {
                    value.push('\'');
                    self.at += 1;
                }
                '\'' => break,
                _ => value.push(c),
            }
        }
        value
    }

    fn quoted_identifier(&mut self) -> String {
        let start = self.at;
        self.at += 1;
        while let Some(c) = self.peek(0) {
            self.at += 1;
            if c == '"' {
                if self.peek(0) == Some('"') {
                    self.at += 1;
                } else {
                    break;
                }
            }
        }
        self.chars[start..self.at].iter().collect()
    }

    /// `$n` (a parameter), `$tag$…$tag$` (a dollar-quoted string) or a lone `$`.
    fn dollar(&mut self) {
        let digits: String = self.chars[self.at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if !digits.is_empty() {
            self.at += 1 + digits.len();
            self.tokens
                .push(Token::Parameter(digits.parse().unwrap_or(u32::MAX)));
            return;
        }
        let tag: String = self.chars[self.at + 1..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        if self.peek(1 + tag.chars().count()) != Some('$') {
            self.at += 1;
            self.tokens.push(Token::Symbol("$".into()));
            return;
        }
        let delimiter = format!("${tag}$");
        self.at += delimiter.chars().count();
        let mut value = String::new();
        while self.peek(0).is_some() && !self.starts_with(&delimiter) {
            value.push(self.chars[self.at]);
            self.at += 1;
        }
        self.at = (self.at + delimiter.chars().count()).min(self.chars.len());
        self.tokens.push(Token::Constant(value));
    }

    /// A number: digits (with `_` separators), a fraction, an exponent, or a
    /// `0x`/`0o`/`0b` integer.
    fn number(&mut self) -> String {
        let start = self.at;
        let digit_run = |lexer: &mut Lexer| {
            while lexer
                .peek(0)
                .is_some_and(|c| c.is_ascii_digit() || c == '_')
            {
                lexer.at += 1;
            }
        };
        if self.peek(0) == Some('0') && self.peek(1).is_some_and(|c| "xXoObB".contains(c)) {
            self.at += 2;
            while self
                .peek(0)
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                self.at += 1;
            }
            return self.chars[start..self.at].iter().collect();
        }
        digit_run(self);
        if self.peek(0) == Some('.') && self.peek(1) != Some('.') {
            self.at += 1;
            digit_run(self);
        }
        if self.peek(0).is_some_and(|c| matches!(c, 'e' | 'E')) {
            let sign = usize::from(self.peek(1).is_some_and(|c| matches!(c, '+' | '-')));
            if self.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                self.at += 1 + sign;
                digit_run(self);
            }
        }
        self.chars[start..self.at].iter().collect()
    }

    /// A keyword or identifier, or a prefixed string: `E'…'`, `B'…'`,
    /// `X'…'`, `N'…'`, `U&'…'` (and `U&"…"`, a quoted identifier).
    fn word(&mut self) {
        let first = self.peek(0).unwrap_or(' ').to_ascii_lowercase();
        if self.peek(1) == Some('\'') && "ebxn".contains(first) {
            self.at += 1;
            let value = self.quoted_string(first == 'e');
            self.tokens.push(Token::Constant(value));
            return;
        }
        if first == 'u' && self.peek(1) == Some('&') && matches!(self.peek(2), Some('\'' | '"')) {
            self.at += 2;
            let token = if self.peek(0) == Some('\'') {
                Token::Constant(self.quoted_string(false))
            } else {
                Token::Quoted(format!("U&{}", self.quoted_identifier()))
            };
            self.tokens.push(token);
            return;
        }
        let start = self.at;
        while self
            .peek(0)
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        {
            self.at += 1;
        }
        let word: String = self.chars[start..self.at].iter().collect();
        self.tokens.push(Token::Word(word.to_lowercase()));
    }

    /// Punctuation, `::`, or an operator (a run of operator characters, ended
    /// before a comment starts); a sign before a number joins the number.
    fn symbol(&mut self) {
        const OPERATOR: &str = "+-*/<>=~!@#%^&|`?";
        let c = self.chars[self.at];
        if self.starts_with("::") {
            self.at += 2;
            self.tokens.push(Token::Symbol("::".into()));
            return;
        }
        if !OPERATOR.contains(c) {
            self.at += 1;
            self.tokens.push(Token::Symbol(c.to_string()));
            return;
        }
        let start = self.at;
        while self.peek(0).is_some_and(|c| OPERATOR.contains(c))
            && !(self.at > start && (self.starts_with("--") || self.starts_with("/*")))
        {
            self.at += 1;
        }
        let operator: String = self.chars[start..self.at].iter().collect();
        let number_follows = self.peek(0).is_some_and(|c| {
            c.is_ascii_digit() || (c == '.' && self.peek(1).is_some_and(|n| n.is_ascii_digit()))
        });
        if operator == "-" && number_follows && self.operand_expected() {
            let number = self.number();
            self.tokens.push(Token::Constant(format!("-{number}")));
        } else {
            self.tokens.push(Token::Symbol(operator));
        }
    }

    /// Whether the previous token leaves an operand to come (so a `-` is a sign).
    fn operand_expected(&self) -> bool {
        match self.tokens.last() {
            None => true,
            Some(Token::Symbol(symbol)) => !matches!(symbol.as_str(), ")" | "]"),
            Some(Token::Word(word)) => KEYWORDS.contains(&word.as_str()),
            Some(_) => false,
        }
    }
}

// ---------------------------------------------------------------------------
// Squashing lists and rows

/// `in (v, v, …)` of constants or parameters (each perhaps cast) becomes one
/// [`Token::List`].
fn squash_in_lists(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut at = 0;
    while at < tokens.len() {
        let after_in = out.last().is_some_and(|last| last.is_word("in"));
        if after_in && tokens[at].is_symbol("(") {
            if let Some((items, end)) = value_list(&tokens, at + 1) {
                out.push(Token::Symbol("(".into()));
                out.push(Token::List(items));
                out.push(Token::Symbol(")".into()));
                at = end + 1;
                continue;
            }
        }
        out.push(tokens[at].clone());
        at += 1;
    }
    out
}

/// The values of a list `v, v, … )` starting at `start`, and the index of
/// its `)`, if it holds only values (each perhaps followed by `::type`).
fn value_list(tokens: &[Token], start: usize) -> Option<(Vec<Token>, usize)> {
    let mut items = Vec::new();
    let mut at = start;
    loop {
        let value = tokens.get(at).filter(|token| token.is_value())?;
        items.push(value.clone());
        at += 1;
        if tokens.get(at).is_some_and(|t| t.is_symbol("::")) {
            tokens.get(at + 1).filter(|t| matches!(t, Token::Word(_)))?;
            at += 2;
        }
        match tokens.get(at)? {
            token if token.is_symbol(",") => at += 1,
            token if token.is_symbol(")") => return Some((items, at)),
            _ => return None,
        }
    }
}

/// `values (…), (…), …`: rows after the first, when shaped like it (values in
/// the same places), are dropped; their constants are kept in a list after
/// the first row so they still count as the statement's values.
fn squash_values_rows(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut at = 0;
    while at < tokens.len() {
        out.push(tokens[at].clone());
        at += 1;
        if !out.last().is_some_and(|t| t.is_word("values")) {
            continue;
        }
        let Some(first_end) = group_end(&tokens, at) else {
            continue;
        };
        let first = &tokens[at..=first_end];
        out.extend_from_slice(first);
        at = first_end + 1;
        let mut dropped = Vec::new();
        while tokens.get(at).is_some_and(|t| t.is_symbol(",")) {
            match group_end(&tokens, at + 1) {
                Some(end) if same_shape(first, &tokens[at + 1..=end]) => {
                    dropped.extend(
                        tokens[at + 1..=end]
                            .iter()
                            .filter(|t| t.is_value())
                            .cloned(),
                    );
                    at = end + 1;
                }
                _ => break,
            }
        }
        if !dropped.is_empty() {
            // Invisible in the text, kept for the values.
            out.push(Token::List(dropped));
        }
    }
    out
}

/// The index of the `)` closing the group opened at `start`, if a `(` is there.
fn group_end(tokens: &[Token], start: usize) -> Option<usize> {
    if !tokens.get(start)?.is_symbol("(") {
        return None;
    }
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate().skip(start) {
        if token.is_symbol("(") {
            depth += 1;
        } else if token.is_symbol(")") {
            depth -= 1;
            if depth == 0 {
                return Some(index);
            }
        }
    }
    None
}

/// Whether two rows differ only in their values.
fn same_shape(a: &[Token], b: &[Token]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.is_value() && y.is_value()) || x == y)
}

// ---------------------------------------------------------------------------
// Rendering

/// The tokens as text, placeholders numbered in order of first appearance.
fn render(tokens: &[Token]) -> String {
    let mut text = String::new();
    let mut numbers = Numbering::default();
    let mut previous: Option<&Token> = None;
    for token in tokens {
        let piece = match token {
            Token::Word(word) | Token::Symbol(word) | Token::Quoted(word) => word.clone(),
            Token::Constant(_) => format!("${}", numbers.fresh()),
            Token::Parameter(number) => format!("${}", numbers.parameter(*number)),
            // The rows a VALUES list lost: nothing to show.
            Token::List(items) if previous.is_some_and(|p| p.is_symbol(")")) => {
                let _ = items;
                continue;
            }
            Token::List(items) => format!("{} /*, ... */", list_placeholder(items, &mut numbers)),
        };
        if previous.is_some_and(|previous| spaced(previous, token)) {
            text.push(' ');
        }
        text.push_str(&piece);
        previous = Some(token);
    }
    text
}

/// The placeholder of a squashed `IN` list: its first parameter's, when it
/// starts with one, else a fresh one.
fn list_placeholder(items: &[Token], numbers: &mut Numbering) -> String {
    match items.first() {
        Some(Token::Parameter(number)) => {
            let first = numbers.parameter(*number);
            for item in &items[1..] {
                if let Token::Parameter(number) = item {
                    numbers.parameter(*number);
                }
            }
            format!("${first}")
        }
        _ => format!("${}", numbers.fresh()),
    }
}

/// Placeholder numbers: parameters keep one number each however often they
/// appear; constants take the next free one.
#[derive(Default)]
struct Numbering {
    next: u32,
    parameters: Vec<(u32, u32)>,
}

impl Numbering {
    fn fresh(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    fn parameter(&mut self, original: u32) -> u32 {
        if let Some((_, number)) = self.parameters.iter().find(|(o, _)| *o == original) {
            return *number;
        }
        let number = self.fresh();
        self.parameters.push((original, number));
        number
    }
}

/// Whether a space goes between two tokens.
fn spaced(previous: &Token, token: &Token) -> bool {
    let tight_after = ["(", "[", ".", "::"];
    let tight_before = [")", "]", ",", ";", ".", "::", "["];
    if tight_after.iter().any(|s| previous.is_symbol(s))
        || tight_before.iter().any(|s| token.is_symbol(s))
    {
        return false;
    }
    if token.is_symbol("(") {
        // A call `f(…)` is tight; `in (…)`, `values (…)`, `and (…)` are not.
        return match previous {
            Token::Word(word) => {
                KEYWORDS.contains(&word.as_str()) && !FUNCTION_LIKE.contains(&word.as_str())
            }
            Token::Quoted(_) => false,
            _ => true,
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statements and their expected fingerprints.
    const CASES: &[(&str, &str)] = &[
        // numbers of every kind, signs and subtraction
        ("SELECT 1", "select $1"),
        (
            "select 42, 3.14, .5, 1e10, 2.5E-3, 0x1F, 1_000",
            "select $1, $2, $3, $4, $5, $6, $7",
        ),
        (
            "select -1, a - 1, a-1, (-2.5)",
            "select $1, a - $2, a - $3, ($4)",
        ),
        (
            "select * from t where x = -7",
            "select * from t where x = $1",
        ),
        // strings in every form
        (
            "select 'it''s', E'a\\'b', B'101', X'ff', N'nat', U&'d\\0061t'",
            "select $1, $2, $3, $4, $5, $6",
        ),
        (
            "select $$dollar 'quoted'$$, $tag$with $$ inside$tag$",
            "select $1, $2",
        ),
        ("select 'a' || 'b'", "select $1 || $2"),
        // keywords stay, casts stay
        ("select true, FALSE, null", "select true, false, null"),
        (
            "select '5'::int, 7::bigint, cast('x' as text)",
            "select $1::int, $2::bigint, cast($3 as text)",
        ),
        (
            "select date '2024-01-01', interval '1 day'",
            "select date $1, interval $2",
        ),
        // comments and white space
        (
            "select /* a /* nested */ comment */ 1 -- trailing\n from   t",
            "select $1 from t",
        ),
        (
            "SELECT\n\tid\n  FROM\tusers WHERE id=5;",
            "select id from users where id = $1",
        ),
        ("select 1; select 'a';", "select $1; select $2"),
        // quoted identifiers kept, unquoted folded
        (
            "select \"UserId\" from \"My Table\" where Name = 'x'",
            "select \"UserId\" from \"My Table\" where name = $1",
        ),
        ("select u.id from s.users u", "select u.id from s.users u"),
        // bound parameters stay, numbered in order
        ("insert into t values ($1)", "insert into t values ($1)"),
        (
            "update t set a = $2, b = 'x' where id = $1",
            "update t set a = $1, b = $2 where id = $3",
        ),
        // IN lists of any length
        (
            "select * from t where id in (1, 2, 3)",
            "select * from t where id in ($1 /*, ... */)",
        ),
        (
            "select * from t where id IN (7)",
            "select * from t where id in ($1 /*, ... */)",
        ),
        (
            "select * from t where id in ('a','b') and k = 3",
            "select * from t where id in ($1 /*, ... */) and k = $2",
        ),
        (
            "select * from t where id in ($1, $2, $3) and k = $4",
            "select * from t where id in ($1 /*, ... */) and k = $4",
        ),
        (
            "select * from t where id not in (1::int, 2::int)",
            "select * from t where id not in ($1 /*, ... */)",
        ),
        (
            "select * from t where id in (select id from u)",
            "select * from t where id in (select id from u)",
        ),
        // multi-row VALUES
        ("insert into t values (1)", "insert into t values ($1)"),
        (
            "insert into t (a, b) values (1, 'x'), (2, 'y'), (3, 'z')",
            "insert into t(a, b) values ($1, $2)",
        ),
        (
            "insert into t values ($1, $2), ($3, $4)",
            "insert into t values ($1, $2)",
        ),
        (
            "insert into t values (1, now()), (2, now())",
            "insert into t values ($1, now())",
        ),
        // functions, any(), arrays
        (
            "select count(*) from t where id = any($1)",
            "select count(*) from t where id = any($1)",
        ),
        (
            "select array[1, 2, 3], a[1]",
            "select array[$1, $2, $3], a[$4]",
        ),
        // odd or cut text still fingerprints
        ("select 'unterminated", "select $1"),
        ("select 1 /* unterminated", "select $1"),
    ];

    #[test]
    fn statements_have_the_expected_fingerprints() {
        let mut failures = Vec::new();
        for (statement, expected) in CASES {
            let found = fingerprint(statement).text;
            if found != *expected {
                failures.push(format!(
                    "{statement:?}\n  expected {expected:?}\n  found    {found:?}"
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn literal_and_bound_versions_share_a_fingerprint() {
        assert_eq!(
            fingerprint("insert into t values (17)").text,
            fingerprint("insert  into T values ($1)").text
        );
        assert_eq!(
            fingerprint("select * from t where a in (1, 2) and b = 3").text,
            fingerprint("select * from t where a in (4, 5, 6, 7) and b = 8").text
        );
    }

    #[test]
    fn constants_are_kept_in_order() {
        let found = fingerprint("select * from c where p = 17 and n = 'it''s' and k in (1, 2)");
        assert_eq!(found.constants, ["17", "it's", "1", "2"]);
        let rows = fingerprint("insert into t values (1, 'a'), (2, 'b')");
        assert_eq!(rows.constants, ["1", "a", "2", "b"]);
    }
}
