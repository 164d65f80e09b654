//! From text to [`TopologyFile`]: RON parsing, with every parser complaint turned into a
//! [`Problem`] that points at the offending text and says how to fix it.

use super::ast::TopologyFile;
use crate::diag::Problem;
use ron::extensions::Extensions;
use ron::Options;

/// The UTF-8 byte-order mark some editors write first; RON does not accept it.
pub const BOM: char = '\u{feff}';

/// Parses a topology file.
pub fn parse(source: &str) -> Result<TopologyFile, Problem> {
    let options = Options::default()
        .with_default_extension(Extensions::IMPLICIT_SOME)
        .with_default_extension(Extensions::UNWRAP_VARIANT_NEWTYPES);
    // A byte-order mark becomes three spaces rather than nothing, so every byte offset the
    // parser reports is still that of the user's file.
    let blanked;
    let source = match source.strip_prefix(BOM) {
        Some(rest) => {
            blanked = format!("   {rest}");
            blanked.as_str()
        }
        None => source,
    };
    options
        .from_str::<TopologyFile>(source)
        .map_err(|e| problem_from_ron(source, &e))
}

/// Byte offset of a 1-based (line, column-in-characters) position.
fn offset(source: &str, line: usize, col: usize) -> usize {
    let mut line_start = 0;
    for _ in 1..line.max(1) {
        match source[line_start..].find('\n') {
            Some(i) => line_start += i + 1,
            None => return source.len(),
        }
    }
    let rest = &source[line_start..];
    let in_line = rest
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(rest.len(), |(i, _)| i);
    line_start + in_line
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn problem_from_ron(source: &str, e: &ron::error::SpannedError) -> Problem {
    use ron::Error as E;
    let start = offset(source, e.span.start.line, e.span.start.col);
    let end = offset(source, e.span.end.line, e.span.end.col).max(start);
    // The parser's span ends where it stopped; show at least one character.
    let end = if end == start {
        source[start..]
            .chars()
            .next()
            .map_or(start, |c| start + c.len_utf8())
    } else {
        end
    };
    let range = start..end;
    let within = |outer: &Option<String>| {
        outer
            .as_ref()
            .map_or(String::new(), |o| format!(" in `{o}`"))
    };
    match &e.code {
        E::NoSuchStructField {
            expected,
            found,
            outer,
        } => Problem::at_bytes(
            range,
            format!("unknown field `{found}`{}", within(outer)),
            "not a field here",
        )
        .hint(format!("the fields here are {}", list(expected))),
        E::MissingStructField { field, outer } => Problem::at_bytes(
            range,
            format!("missing field `{field}`{}", within(outer)),
            format!("`{field}` must be given here"),
        )
        .hint(format!("add `{field}: …`")),
        E::DuplicateStructField { field, outer } => Problem::at_bytes(
            range,
            format!("field `{field}` given twice{}", within(outer)),
            "second occurrence",
        )
        .hint("keep one of them"),
        E::NoSuchEnumVariant {
            expected,
            found,
            outer,
        } => Problem::at_bytes(
            range,
            format!("unknown name `{found}`{}", within(outer)),
            "not one of the known names",
        )
        .hint(format!("write one of {}", list(expected))),
        E::InvalidValueForType { expected, found } => Problem::at_bytes(
            range,
            format!("expected {expected}, found {found}"),
            format!("expected {expected}"),
        ),
        E::ExpectedDifferentStructName { expected, found } => Problem::at_bytes(
            range,
            format!("expected `{expected}(…)`, found `{found}(…)`"),
            "wrong name",
        ),
        E::Eof => Problem::at_bytes(
            range,
            "the file ends too early",
            "unexpected end of file",
        )
        .hint("look for an unclosed `(`, `[` or `\"` above"),
        E::TrailingCharacters => Problem::at_bytes(
            range,
            "unexpected text after the end of the topology",
            "nothing may follow the closing `)` of `Topology(…)`",
        ),
        E::ExpectedComma => Problem::at_bytes(range, "expected a comma", "expected `,` before this")
            .hint("fields and list items are separated by commas; is one missing at the end of the previous line?"),
        E::ExceededRecursionLimit => Problem::at_bytes(
            range,
            "the file nests too deeply",
            "nesting goes too deep here",
        )
        .hint("values may nest 128 levels, which allows a tree about 20 switches deep; flatten the tree, or declare it as a `Graph` with `switches`"),
        E::IntegerOutOfBounds => Problem::at_bytes(
            range,
            "number out of range",
            "too large (or negative) for this field",
        ),
        other => Problem::at_bytes(
            range,
            format!("syntax error: {}", lowercase_first(&other.to_string())),
            "here",
        )
        .hint("a topology file is RON: `Topology(name: \"…\", machine: …, phases: […])`; see docs/topology.md"),
    }
}

fn lowercase_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_count_characters() {
        let s = "ab\nçd\nxyz";
        assert_eq!(offset(s, 1, 1), 0);
        assert_eq!(offset(s, 2, 2), 5, "ç is two bytes");
        assert_eq!(offset(s, 3, 3), 9);
        assert_eq!(offset(s, 9, 1), s.len());
    }
}
