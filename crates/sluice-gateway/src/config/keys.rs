//! The vocabulary of the one definition of every configuration key: its
//! section, name, type as users write it, default, meaning and old spellings.
//! Each table's module defines its [`Section`]; the parser reads it through
//! `super::entries`, and the book's reference page is written from it
//! (`super::reference`).

use std::time::Duration;

/// What a key's value is, as users write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Text in quotes.
    Text,
    /// Text in which `${NAME}` is replaced by the environment variable `NAME`.
    EnvText,
    /// `"host:port"`.
    Address,
    /// A duration with a unit; zero allowed.
    Duration,
    /// A duration above zero.
    Timeout,
    /// A byte count: an integer or text with a unit.
    Size,
    /// An integer from 1 to this.
    Count(usize),
    /// A positive integer.
    Positive,
    /// A decimal scale: an integer from 0 to 38 (Arrow's `Decimal128`).
    Scale,
    /// A number, integer or fraction.
    Number,
    /// `true` or `false`.
    Flag,
    /// Text, a number or a boolean (a value of a declared type).
    Scalar,
    /// One of these words.
    Word(&'static [&'static str]),
    /// A list of text.
    TextList,
    /// A list of these words.
    WordList(&'static [&'static str]),
    /// A list of inline tables, whose keys the named section defines.
    Tables(&'static str),
}

/// What a key is when the file leaves it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDefault {
    /// The file must give it.
    Required,
    /// No value; the text says what that means ("no limit").
    Absent(&'static str),
    /// This duration.
    Duration(Duration),
    /// This many bytes.
    Size(u64),
    /// This count.
    Count(usize),
    /// This flag.
    Flag(bool),
    /// This word.
    Word(&'static str),
}

/// One configuration key.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Its name in its section.
    pub name: &'static str,
    /// What its value is.
    pub ty: Type,
    /// What it is when left out.
    pub default: KeyDefault,
    /// What it does, one paragraph of Markdown.
    pub meaning: &'static str,
    /// Its value in the reference page's whole-file example (TOML); `None`:
    /// left out of it (an alternative to another key of the example).
    pub example: Option<&'static str>,
    /// Earlier spellings, still read, each with a deprecation note.
    pub old_names: &'static [&'static str],
}

/// One table of the file and its keys.
#[derive(Debug)]
pub struct Section {
    /// Its dotted path, `NAME` standing for the names users choose
    /// (`queries.NAME`); the first part is the file's top-level key.
    pub path: &'static str,
    /// How the file writes it (`[queries.NAME]`, `[[tokens]]`).
    pub heading: &'static str,
    /// What it is for, one paragraph of Markdown.
    pub about: &'static str,
    /// Its keys, in the order the reference lists them.
    pub keys: &'static [Key],
}

impl Section {
    /// The key named `name`. Every name the parser asks for is defined: a
    /// missing one is a bug, found by the tests that read every key.
    pub fn key(&self, name: &str) -> &'static Key {
        self.keys
            .iter()
            .find(|key| key.name == name)
            .unwrap_or_else(|| panic!("[{}] defines no key {name:?}", self.path))
    }

    /// The file's top-level key this section lives under.
    pub fn top(&self) -> &'static str {
        self.path.split('.').next().unwrap_or(self.path)
    }

    /// The key `name` is a current or old spelling of.
    pub(super) fn spelled(&self, name: &str) -> Option<&'static Key> {
        self.keys
            .iter()
            .find(|key| key.name == name || key.old_names.contains(&name))
    }
}

/// Words in quotes, joined (`"oid" or "inline"`).
pub(super) fn quoted(words: &[&str], last: &str) -> String {
    let quoted: Vec<String> = words.iter().map(|word| format!("{word:?}")).collect();
    match quoted.split_last() {
        Some((final_word, [])) => final_word.clone(),
        Some((final_word, rest)) => format!("{}{last}{final_word}", rest.join(", ")),
        None => String::new(),
    }
}

/// A type as the reference and the errors name it.
pub fn type_name(ty: Type) -> String {
    match ty {
        Type::Text => "text".into(),
        Type::EnvText => "text, `${NAME}` replaced from the environment".into(),
        Type::Address => "address `\"host:port\"`".into(),
        Type::Duration => "duration".into(),
        Type::Timeout => "duration above zero".into(),
        Type::Size => "size".into(),
        Type::Count(most) => format!("integer from 1 to {most}"),
        Type::Positive => "positive integer".into(),
        Type::Scale => "integer from 0 to 38".into(),
        Type::Number => "number".into(),
        Type::Flag => "boolean".into(),
        Type::Scalar => "text, number or boolean".into(),
        Type::Word(words) => quoted(words, " or "),
        Type::TextList => "list of text".into(),
        Type::WordList(words) => format!("list of {}", quoted(words, ", ")),
        Type::Tables(section) => format!("list of tables (`{section}`)"),
    }
}

/// A default as the reference shows it.
pub fn default_text(default: KeyDefault) -> String {
    match default {
        KeyDefault::Required => "required".into(),
        KeyDefault::Absent(text) => text.into(),
        KeyDefault::Duration(duration) => format!("`{}`", duration_text(duration)),
        KeyDefault::Size(bytes) => format!("`{}`", size_text(bytes)),
        KeyDefault::Count(count) => count.to_string(),
        KeyDefault::Flag(flag) => format!("`{flag}`"),
        KeyDefault::Word(word) => format!("`{word:?}`"),
    }
}

/// `30s`, `10m`, `1h`: the largest whole unit.
fn duration_text(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0 => format!("{}ms", duration.as_millis()),
        _ if seconds.is_multiple_of(3600) => format!("{}h", seconds / 3600),
        _ if seconds.is_multiple_of(60) => format!("{}m", seconds / 60),
        _ => format!("{seconds}s"),
    }
}

/// `8KiB`, `1GiB`: the largest whole binary unit.
fn size_text(bytes: u64) -> String {
    for (unit, factor) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_shown_in_their_largest_whole_unit() {
        assert_eq!(
            default_text(KeyDefault::Duration(Duration::from_secs(600))),
            "`10m`"
        );
        assert_eq!(
            default_text(KeyDefault::Duration(Duration::from_secs(90))),
            "`90s`"
        );
        assert_eq!(default_text(KeyDefault::Size(64 << 20)), "`64MiB`");
        assert_eq!(default_text(KeyDefault::Size(1000)), "`1000`");
        assert_eq!(quoted(&["sql", "write"], " or "), "\"sql\" or \"write\"");
    }
}
