//! Problems in user input, and their rendering with codespan-reporting.
//!
//! A [`Problem`] says what is wrong, points at one or more places in the file (by [`Path`]
//! when the problem was found after parsing, by byte range when the parser found it) and may
//! carry hints. Rendering resolves paths to spans through [`SpanTree`].

pub mod excerpt;

use crate::topology::spans::{Path, SpanTree};
use crate::visible;
use codespan_reporting::diagnostic::{Diagnostic, Label};
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

    /// Adds a related place by byte range (for problems the parser found).
    pub fn also_bytes(mut self, range: Range<usize>, label: impl Into<String>) -> Problem {
        self.secondary.push(Mark {
            at: At::Bytes(range),
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

/// The most problems [`render`] shows; the rest are counted (as rustc stops after a limit).
/// A file with thousands of problems is mostly one mistake repeated.
pub const MAX_SHOWN: usize = 20;

/// Renders problems against the file they are about. `color` selects ANSI colours.
///
/// At most [`MAX_SHOWN`] problems are shown, then a line counting the others. Each shows only
/// the lines its labels touch, long lines cut to a window around the labels, control
/// characters as text (see [`excerpt`]); user text in messages, labels and notes has its
/// control characters shown as text too. The output is therefore bounded whatever the file.
pub fn render(file_name: &str, source: &str, problems: &[Problem], color: bool) -> String {
    let tree = SpanTree::new(source);
    let lines = excerpt::Lines::new(source);
    let config = term::Config::default();
    let resolve = |at: &At| -> Range<usize> {
        let r = match at {
            At::Path(p) => tree.find(p),
            At::Bytes(r) => r.clone(),
        };
        clamp(r, source)
    };
    // Headlines and labels are one line each, whatever a quoted name holds; notes may run
    // over several.
    let one_line = |text: &str| visible::line(text).into_owned();
    let shown = |text: &str| visible::message(text).into_owned();
    let mut out = String::new();
    for problem in problems.iter().take(MAX_SHOWN) {
        let marks: Vec<(&Mark, Range<usize>)> = std::iter::once(&problem.primary)
            .chain(&problem.secondary)
            .map(|m| (m, resolve(&m.at)))
            .collect();
        let ranges: Vec<Range<usize>> = marks.iter().map(|(_, r)| r.clone()).collect();
        let file = excerpt::Excerpt::new(file_name, &lines, &ranges, &config);
        let labels = marks.iter().enumerate().map(|(i, (m, r))| {
            let label = if i == 0 {
                Label::primary((), file.map(r))
            } else {
                Label::secondary((), file.map(r))
            };
            label.with_message(one_line(&m.text))
        });
        let diagnostic = Diagnostic::error()
            .with_message(one_line(&problem.message))
            .with_labels(labels.collect())
            .with_notes(problem.notes.iter().map(|n| shown(n)).collect());
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
            // The excerpt answers every line codespan asks for; fall back to plain text.
            Err(_) => out.push_str(&format!("error: {}\n", one_line(&problem.message))),
        }
    }
    if problems.len() > MAX_SHOWN {
        out.push_str(&format!(
            "note: {} more problem(s) not shown; the first {MAX_SHOWN} are above\n\n",
            problems.len() - MAX_SHOWN
        ));
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
