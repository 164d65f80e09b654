//! From text to [`TopologyFile`]: RON parsing, with every parser complaint turned into a
//! [`Problem`] that points at the offending text and says how to fix it.

use super::ast::TopologyFile;
use super::spans::{self, Unclosed};
use crate::diag::Problem;
use ron::extensions::Extensions;
use ron::Options;
use std::ops::Range;

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
    if let Some(problem) = unclosed_at_end(source, &e.code, start..end) {
        return problem;
    }
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

/// The most unclosed brackets labelled in the file; the hint still lists every closer.
const SHOWN_UNCLOSED: usize = 3;

/// The problem when the parser ran out of text with brackets still open (`code` and `span`:
/// its complaint and where), whatever it reported. Running out of text mid-value shows up as
/// whichever token the parser wanted next — a comma after the last field, a `]` after the
/// last item, a value after a trailing comma — and for a file whose last `)` is missing,
/// "expected a comma" sends the user looking for the wrong mistake. What is missing is a
/// closing bracket, so the problem names the innermost bracket left open, points at where
/// the file ends and labels the open brackets.
///
/// The parser ran out of text when it says so (`Eof`); when it stopped past the last token;
/// or when its complaint reaches the end of the text (its span may cover the last token) and
/// is about what should follow: a separator or closing bracket it wanted after a complete
/// last value, or anything at all after a last `:`, `,` or opening bracket. A complaint about
/// the last token itself (an unknown name, a number where a string belongs) keeps its own
/// message: that token is wrong, whatever should follow it.
fn unclosed_at_end(source: &str, code: &ron::Error, span: Range<usize>) -> Option<Problem> {
    use ron::Error as E;
    let ending = spans::ending(source)?;
    let innermost = ending.unclosed.last()?;
    let wants_punctuation = matches!(
        code,
        E::ExpectedComma
            | E::ExpectedMapColon
            | E::ExpectedArrayEnd
            | E::ExpectedStructLikeEnd
            | E::ExpectedOptionEnd
            | E::ExpectedMapEnd
    );
    let ran_out = matches!(code, E::Eof)
        || span.start >= ending.last
        || (span.end >= ending.last && (wants_punctuation || ending.dangling));
    if !ran_out {
        return None;
    }
    let closers: String = ending.unclosed.iter().rev().map(Unclosed::closer).collect();
    let mut problem = Problem::at_bytes(
        ending.last..ending.last,
        format!("the file ends before {} is closed", innermost.describe()),
        format!("the file ends here; `{}` expected", innermost.closer()),
    );
    for (i, open) in ending
        .unclosed
        .iter()
        .rev()
        .take(SHOWN_UNCLOSED)
        .enumerate()
    {
        let label = if i == 0 {
            format!("this `{}` is never closed", open.bracket)
        } else {
            format!("this `{}` is not closed either", open.bracket)
        };
        problem = problem.also_bytes(open.at..open.at + 1, label);
    }
    let hint = match ending.unclosed.len() {
        1 => format!("add the missing `{closers}` where {} should end", innermost.describe()),
        n => format!(
            "{n} brackets are open at the end; add the missing `{closers}` (innermost first) where each value should end"
        ),
    };
    Some(problem.hint(hint))
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

    fn message(source: &str) -> String {
        parse(source).err().map(|p| p.message).unwrap_or_default()
    }

    #[test]
    fn running_out_of_text_names_the_open_bracket() {
        let head = "Topology(name: \"x\", machine: Graph(nodes: [\"a\", \"b\"], links: [";
        for rest in [
            "",
            "(id",
            "(id:",
            "(id: \"L1\"",
            "(id: \"L1\", between: (\"a\",",
        ] {
            assert!(
                message(&format!("{head}{rest}\n")).starts_with("the file ends before"),
                "{rest}: {}",
                message(&format!("{head}{rest}\n"))
            );
        }
        assert_eq!(
            message("Topology(name: \"x\", machine: Ring(nodes: 4)"),
            "the file ends before `Topology(…)` is closed",
            "a comma wanted after the last field"
        );
        assert!(
            message("Topology(name: \"x\", machine: Rign").starts_with("unknown name `Rign`"),
            "a wrong last token keeps its own message"
        );
        assert_eq!(
            message("Topology(name: \"x\"\n  machine: Ring(nodes: 4))"),
            "expected a comma",
            "a comma missing inside the file is still one"
        );
    }
}
