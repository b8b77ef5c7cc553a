//! [`SECTIONS`]: every table of the file, which the parser checks the file's
//! top-level keys against and the reference page lists.

use super::keys::Section;
use super::{databases, flight, queries, server, sql, tables, tokens};

/// Every table of the file, in the order the reference lists them.
pub static SECTIONS: [&Section; 8] = [
    &server::SECTION,
    &databases::SECTION,
    &queries::SECTION,
    &queries::PARAMS,
    &sql::SECTION,
    &tables::SECTION,
    &tokens::SECTION,
    &flight::SECTION,
];
