//! Reading and writing schedules as RON (the default) and JSON, each in the explicit form
//! (every chunk list written out, pretty-printed) or the compact one (chunk lists as [`runs`],
//! one program step per line); `docs/ir.md` specifies both.
//!
//! Writing is deterministic: the same schedule always gives the same bytes. Reading accepts
//! either form in either format and checks the syntax, the runs and the format version only;
//! a schedule read from a file must still go through [`crate::verify()`] before anything uses
//! it.

mod ron_text;
pub mod runs;

use crate::pattern::{ExpandError, Pattern};
use crate::{Schedule, FORMAT_VERSION};
use ron_text::Document;
use serde::Serialize;
use std::io::{self, Write};
use thiserror::Error;

/// The two text formats a schedule can be written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Rusty Object Notation, pretty-printed. The default.
    Ron,
    /// JSON, pretty-printed.
    Json,
}

/// How a schedule is laid out in its format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Form {
    /// Every chunk id written out, pretty-printed: what the snapshots pin. The default.
    #[default]
    Explicit,
    /// Chunk lists as runs, and no indentation: the file's size follows what the schedule
    /// says rather than how many ids it names.
    Compact,
}

/// Why a schedule file could not be read.
#[derive(Debug, Error)]
pub enum ReadError {
    /// The text is not a schedule in the given format.
    #[error("{format} syntax error at line {line}, column {column}: {message}")]
    Syntax {
        /// Which format the reader expected.
        format: &'static str,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// What the parser said.
        message: String,
    },
    /// The file is a pattern ([`Pattern`]) that does not expand into an explicit schedule.
    #[error("{0}")]
    Pattern(#[from] ExpandError),
    /// The file was written by another version of the IR.
    #[error("schedule format version {found} is not supported (this build reads version {FORMAT_VERSION}); recompile the topology with this topoc")]
    Version {
        /// The version the file declares.
        found: u32,
    },
}

/// Writes `schedule` in `format`, in the explicit form. Deterministic: equal schedules give
/// equal text.
pub fn to_string(schedule: &Schedule, format: Format) -> String {
    to_string_with(schedule, format, Form::Explicit)
}

/// Writes `schedule` in `format` and `form`. Deterministic: equal schedules give equal text.
pub fn to_string_with(schedule: &Schedule, format: Format, form: Form) -> String {
    text(schedule, format, form)
}

/// Writes a schedule in the pattern form ([`Pattern`]) in `format` and `form`.
/// Deterministic, like [`to_string_with`].
pub fn pattern_to_string(pattern: &Pattern, format: Format, form: Form) -> String {
    text(pattern, format, form)
}

/// Writes `schedule` in `format` and `form` to `out`: the bytes of [`to_string_with`], streamed,
/// so that a schedule of hundreds of megabytes is never held as text as well. `out` is written
/// in many small pieces: give it a buffer. The only errors are `out`'s own.
pub fn write_with<W: Write>(
    schedule: &Schedule,
    format: Format,
    form: Form,
    out: W,
) -> io::Result<()> {
    write(schedule, format, form, out)
}

/// [`write_with`] for a schedule in the pattern form: the bytes of [`pattern_to_string`].
pub fn write_pattern_with<W: Write>(
    pattern: &Pattern,
    format: Format,
    form: Form,
    out: W,
) -> io::Result<()> {
    write(pattern, format, form, out)
}

/// A schedule of either form as text.
fn text<T: Serialize + Document>(schedule: &T, format: Format, form: Form) -> String {
    let mut bytes = Vec::new();
    // Writing into memory fails only if serialising does.
    if let Err(e) = write(schedule, format, form, &mut bytes) {
        return unreachable_serialise(&e.to_string());
    }
    String::from_utf8(bytes).unwrap_or_else(|e| unreachable_serialise(&e.to_string()))
}

/// Writes a schedule of either form to `out`, followed by a newline. RON is written by
/// [`ron_text`], which gives the bytes ron's serialiser gives, faster; JSON by serde_json.
fn write<T: Serialize + Document, W: Write>(
    schedule: &T,
    format: Format,
    form: Form,
    mut out: W,
) -> io::Result<()> {
    if format == Format::Ron {
        return ron_text::write(schedule, form, out);
    }
    let _runs = runs::Compact::on(form == Form::Compact);
    match form {
        Form::Compact => serde_json::to_writer(&mut out, schedule)?,
        Form::Explicit => serde_json::to_writer_pretty(&mut out, schedule)?,
    }
    out.write_all(b"\n")
}

/// Serialising plain data structures with no maps keyed by non-strings cannot fail; this keeps
/// the signature infallible while still saying what happened if it ever did.
fn unreachable_serialise(message: &str) -> String {
    format!("/* schedule could not be serialised: {message} */")
}

/// The UTF-8 byte order mark some editors put at the start of a file. Neither parser accepts
/// it, and it is no part of the schedule.
const BOM: char = '\u{feff}';

/// `text` without a leading byte order mark.
fn without_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// Guesses the format of a schedule text: JSON if it starts with `{` (after a byte order mark
/// and blanks), RON otherwise.
pub fn detect(text: &str) -> Format {
    if without_bom(text).trim_start().starts_with('{') {
        Format::Json
    } else {
        Format::Ron
    }
}

/// Whether `text` holds a schedule in the pattern form: its RON starts with the struct name
/// `Pattern`, or its JSON's first key is `grid` (a pattern's first field; an explicit
/// schedule's is `format_version`).
pub fn is_pattern(text: &str) -> bool {
    let mut rest = without_bom(text).trim_start();
    // Skip RON comments before the first item.
    loop {
        if let Some(line) = rest.strip_prefix("//") {
            rest = line.split_once('\n').map_or("", |(_, r)| r).trim_start();
        } else if let Some(block) = rest.strip_prefix("/*") {
            rest = block.split_once("*/").map_or("", |(_, r)| r).trim_start();
        } else {
            break;
        }
    }
    match rest.strip_prefix('{') {
        Some(json) => json.trim_start().starts_with("\"grid\""),
        None => {
            rest.starts_with("Pattern")
                && !rest["Pattern".len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        }
    }
}

/// Reads a schedule written in either format (detected from the text), in any form. A
/// pattern ([`is_pattern`]) is expanded into the explicit schedule it stands for
/// ([`Pattern::expand`]), within that function's limit. A leading UTF-8 byte order mark is
/// skipped; line and column numbers of errors do not count it.
pub fn from_str(text: &str) -> Result<Schedule, ReadError> {
    if is_pattern(text) {
        return Ok(pattern_from_str(text)?.expand()?);
    }
    parse(text)
}

/// Reads a schedule in the pattern form, without expanding it.
pub fn pattern_from_str(text: &str) -> Result<Pattern, ReadError> {
    let pattern: Pattern = parse_any(text)?;
    if pattern.format_version != FORMAT_VERSION {
        return Err(ReadError::Version {
            found: pattern.format_version,
        });
    }
    Ok(pattern)
}

/// Reads an explicit schedule and checks its version.
fn parse(text: &str) -> Result<Schedule, ReadError> {
    let schedule: Schedule = parse_any(text)?;
    if schedule.format_version != FORMAT_VERSION {
        return Err(ReadError::Version {
            found: schedule.format_version,
        });
    }
    Ok(schedule)
}

/// Reads a value of either format.
fn parse_any<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ReadError> {
    let text = without_bom(text);
    runs::new_file();
    Ok(match detect(text) {
        Format::Json => serde_json::from_str(text).map_err(|e| ReadError::Syntax {
            format: "JSON",
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?,
        // An optional value may be written bare (`capacity: 2`) as well as `Some(2)`, as
        // docs/ir.md promises: hand-written files use the bare form.
        Format::Ron => ron::Options::default()
            .with_default_extension(ron::extensions::Extensions::IMPLICIT_SOME)
            .from_str(text)
            .map_err(|e| ReadError::Syntax {
                format: "RON",
                line: e.span.start.line,
                column: e.span.start.col,
                message: match e.code {
                    // RON's own text advises its API, which a user reading a file cannot use.
                    ron::Error::ExceededRecursionLimit => {
                        "values nest more than 128 levels deep; no schedule nests that deep"
                            .to_string()
                    }
                    code => code.to_string(),
                },
            })?,
    })
}
