//! Problems in user input, and their rendering with codespan-reporting.
//!
//! A [`Problem`] says what is wrong, points at one or more places in the file (by [`Path`]
//! when the problem was found after parsing, by byte range when the parser found it) and may
//! carry hints. Rendering resolves paths to spans through [`SpanTree`].

use crate::topology::spans::{Path, SpanTree};
use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term;
use std::ops::Range;

/// Where a label points.
#[derive(Clone, Debug, PartialEq)]
pub enum At {
    /// A value of the file, found by path after parsing.
    Path(Path),
    /// A byte range reported by the parser.
    Bytes(Range<usize>),
}

/// A label: a place in the file and what to say about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Where.
    pub at: At,
    /// What.
    pub text: String,
}

/// One problem with a user's file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The headline: what is wrong.
    pub message: String,
    /// The main place.
    pub primary: Mark,
    /// Related places (the first declaration of a duplicate, …).
    pub secondary: Vec<Mark>,
    /// Hints on how to fix it.
    pub notes: Vec<String>,
}

impl Problem {
    /// A problem at `path`, labelled `label`.
    pub fn at(path: Path, message: impl Into<String>, label: impl Into<String>) -> Problem {
        Problem {
            message: message.into(),
            primary: Mark {
                at: At::Path(path),
                text: label.into(),
            },
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// A problem at a byte range.
    pub fn at_bytes(
        range: Range<usize>,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Problem {
        Problem {
            message: message.into(),
            primary: Mark {
                at: At::Bytes(range),
                text: label.into(),
            },
            secondary: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a related place.
    pub fn also(mut self, path: Path, label: impl Into<String>) -> Problem {
        self.secondary.push(Mark {
            at: At::Path(path),
            text: label.into(),
        });
        self
    }

    /// Adds a hint.
    pub fn hint(mut self, note: impl Into<String>) -> Problem {
        self.notes.push(format!("hint: {}", note.into()));
        self
    }

    /// Adds a note that is not a hint.
    pub fn note(mut self, note: impl Into<String>) -> Problem {
        self.notes.push(note.into());
        self
    }
}

/// Renders problems against the file they are about. `color` selects ANSI colours.
pub fn render(file_name: &str, source: &str, problems: &[Problem], color: bool) -> String {
    let tree = SpanTree::new(source);
    let file = SimpleFile::new(file_name, source);
    let config = term::Config::default();
    let resolve = |at: &At| -> Range<usize> {
        let r = match at {
            At::Path(p) => tree.find(p),
            At::Bytes(r) => r.clone(),
        };
        clamp(r, source)
    };
    let mut out = String::new();
    for problem in problems {
        let mut labels = vec![Label::primary((), resolve(&problem.primary.at))
            .with_message(problem.primary.text.clone())];
        labels.extend(
            problem
                .secondary
                .iter()
                .map(|m| Label::secondary((), resolve(&m.at)).with_message(m.text.clone())),
        );
        let diagnostic = Diagnostic::error()
            .with_message(problem.message.clone())
            .with_labels(labels)
            .with_notes(problem.notes.clone());
        let rendered = if color {
            let mut buf = Vec::new();
            let styles = term::Styles::default();
            let mut writer = term::termcolor::Ansi::new(&mut buf);
            let mut styled = term::StylesWriter::new(&mut writer, &styles);
            term::emit_to_write_style(&mut styled, &config, &file, &diagnostic)
                .map(|()| String::from_utf8_lossy(&buf).into_owned())
        } else {
            term::emit_into_string(&config, &file, &diagnostic)
        };
        match rendered {
            Ok(text) => out.push_str(&text),
            // A span outside the file cannot happen after clamping; fall back to plain text.
            Err(_) => out.push_str(&format!("error: {}\n", problem.message)),
        }
    }
    out
}

/// Keeps a range inside the source and on character boundaries.
fn clamp(r: Range<usize>, source: &str) -> Range<usize> {
    let mut start = r.start.min(source.len());
    let mut end = r.end.clamp(start, source.len());
    while !source.is_char_boundary(start) {
        start -= 1;
    }
    while !source.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

/// The name among `names` nearest to `wanted` by edit distance, if it is plausibly a typo
/// and the only one that near (for "did you mean" hints: `N8` among `N0…N7` is no typo of
/// any one of them).
pub fn closest<'a>(wanted: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut near: Vec<(usize, &str)> = names
        .into_iter()
        .map(|n| (edit_distance(wanted, n), n))
        .filter(|(d, n)| *d <= 2.max(n.len() / 3))
        .collect();
    near.sort();
    match near.as_slice() {
        [(d, n), rest @ ..] if rest.first().is_none_or(|(d2, _)| d2 > d) => Some(n),
        _ => None,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
