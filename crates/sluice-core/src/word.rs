//! Settings spelled as one of a few words (`--on-error abort|skip`,
//! `?on_conflict=update`, `lob = "inline"`): each is one type that lists its
//! spellings once ([`Word::SPELLINGS`]) and reads and prints them with its
//! `FromStr` and `Display`, so the command line's parser, its help, the HTTP
//! routes, the OpenAPI document and the configuration all take the same words
//! and refuse the same ones the same way ("expected abort or skip").

use std::fmt::Display;
use std::str::FromStr;

/// A setting spelled as one of a fixed list of words.
pub trait Word: FromStr<Err = String> + Display + Clone + Send + Sync + 'static {
    /// Every spelling it reads, in the order help lists them.
    const SPELLINGS: &'static [&'static str];
}

/// What a word of `spellings` must be, for the error of a word that is not
/// one: `expected error, ignore or update`.
pub fn expected(spellings: &[&str]) -> String {
    match spellings {
        [] => "expected nothing".to_owned(),
        [only] => format!("expected {only}"),
        [others @ .., last] => format!("expected {} or {last}", others.join(", ")),
    }
}

/// Declares a fieldless enum whose variants each have one spelling, with its
/// [`Word`] list, `FromStr` (refusing other words with [`expected`]) and
/// `Display`, from one list.
macro_rules! spelled_enum {
    (
        $(#[$meta:meta])*
        $visibility:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident = $spelling:literal,)+
        }
    ) => {
        $(#[$meta])*
        $visibility enum $name {
            $($(#[$variant_meta])* $variant,)+
        }

        impl $crate::word::Word for $name {
            const SPELLINGS: &'static [&'static str] = &[$($spelling),+];
        }

        impl ::std::str::FromStr for $name {
            type Err = String;

            fn from_str(text: &str) -> Result<$name, String> {
                match text {
                    $($spelling => Ok($name::$variant),)+
                    _ => Err($crate::word::expected(
                        <$name as $crate::word::Word>::SPELLINGS,
                    )),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, formatter: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                formatter.write_str(match self {
                    $($name::$variant => $spelling,)+
                })
            }
        }
    };
}

pub(crate) use spelled_enum;

#[cfg(test)]
mod tests {
    use super::*;

    spelled_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Colour {
            Red = "red",
            Light = "light-blue",
        }
    }

    #[test]
    fn each_spelling_reads_and_prints_as_itself() {
        for spelling in Colour::SPELLINGS {
            assert_eq!(spelling.parse::<Colour>().unwrap().to_string(), *spelling);
        }
        assert_eq!("light-blue".parse(), Ok(Colour::Light));
        assert_eq!(
            "Red".parse::<Colour>(),
            Err("expected red or light-blue".to_owned())
        );
    }

    #[test]
    fn the_expected_words_read_as_a_sentence() {
        assert_eq!(expected(&["abort", "skip"]), "expected abort or skip");
        assert_eq!(
            expected(&["error", "ignore", "update"]),
            "expected error, ignore or update"
        );
        assert_eq!(expected(&["copy"]), "expected copy");
    }
}
