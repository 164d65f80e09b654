//! The part of a file one diagnostic shows, as codespan-reporting will print it.
//!
//! codespan-reporting prints every line a label touches whole and raw. A one-line file of
//! 154 KB with thousands of problems was therefore printed once per problem (920 MB of
//! output), and a control character in the file reached the terminal. An [`Excerpt`] holds
//! only the lines the diagnostic shows, each cut to a window around its labels (`…` marks
//! a cut) with control characters shown as text (`\x1b`), and answers codespan's questions
//! with the original line and column numbers, so `file:line:col` and the line gutter still
//! name the place in the user's file.

use crate::visible;
use codespan_reporting::files::{Error, Files};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// Lines longer than this many bytes are cut to a window around the labels.
pub const MAX_LINE: usize = 200;

/// Bytes kept before the first and after the last label of a cut line.
const MARGIN: usize = 60;

/// The start of every line of a file, computed once for all its diagnostics.
pub struct Lines<'s> {
    source: &'s str,
    starts: Vec<usize>,
}

impl<'s> Lines<'s> {
    /// Indexes `source`.
    pub fn new(source: &'s str) -> Lines<'s> {
        Lines {
            source,
            starts: codespan_reporting::files::line_starts(source).collect(),
        }
    }

    fn index(&self, byte: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= byte)
            .saturating_sub(1)
    }

    /// The line's text without its line break, as a byte range.
    fn content(&self, index: usize) -> Range<usize> {
        let start = self.starts[index];
        let end = self
            .starts
            .get(index + 1)
            .copied()
            .unwrap_or(self.source.len());
        let text = &self.source[start..end];
        let trimmed = text.trim_end_matches(['\n', '\r']);
        start..start + trimmed.len()
    }
}

/// One shown line: its index in the original file and its range in the excerpt's text.
struct Shown {
    index: usize,
    range: Range<usize>,
}

/// The lines one diagnostic shows; see the module doc.
pub struct Excerpt {
    name: String,
    text: String,
    shown: Vec<Shown>,
    /// Original byte offset of a label's end → its byte offset in `text`.
    offsets: BTreeMap<usize, usize>,
    /// Byte offset in `text` → the original column (1-based, in characters).
    columns: BTreeMap<usize, usize>,
    /// Where the primary label starts: a cut line keeps it in view.
    focus: Option<usize>,
}

impl Excerpt {
    /// The excerpt of `lines` that shows the label `ranges` (already inside the source and
    /// on character boundaries), with the context lines `config` asks for.
    pub fn new(
        name: &str,
        lines: &Lines<'_>,
        ranges: &[Range<usize>],
        config: &codespan_reporting::term::Config,
    ) -> Excerpt {
        let mut wanted = BTreeSet::new();
        for r in ranges {
            let (first, last) = (lines.index(r.start), lines.index(r.end));
            wanted.insert(first);
            wanted.insert(last);
            // codespan prints the first and last lines of a label spanning several lines.
            wanted.extend((first + 1..last).take(config.start_context_lines));
            wanted.extend((first + 1..last).rev().take(config.end_context_lines));
        }
        // A single line between two shown lines is printed rather than a break.
        let gaps: Vec<usize> = wanted
            .iter()
            .zip(wanted.iter().skip(1))
            .filter(|(a, b)| **b == **a + 2)
            .map(|(a, _)| a + 1)
            .collect();
        wanted.extend(gaps);

        let ends: BTreeSet<usize> = ranges.iter().flat_map(|r| [r.start, r.end]).collect();
        let mut excerpt = Excerpt {
            name: visible::line(name).into_owned(),
            text: String::new(),
            shown: Vec::new(),
            offsets: BTreeMap::new(),
            columns: BTreeMap::new(),
            focus: ranges.first().map(|r| r.start),
        };
        for index in wanted {
            excerpt.push_line(lines, index, &ends);
        }
        excerpt
    }

    /// Appends line `index`, cut to a window around the label ends on it.
    fn push_line(&mut self, lines: &Lines<'_>, index: usize, ends: &BTreeSet<usize>) {
        let source = lines.source;
        let content = lines.content(index);
        let line_end = lines.starts.get(index + 1).copied().unwrap_or(source.len());
        let here: Vec<usize> = ends.range(content.start..=line_end).copied().collect();
        let focus = self
            .focus
            .filter(|f| (content.start..=line_end).contains(f));
        let window = window(source, &content, &here, focus);
        let start = self.text.len();
        if window.start > content.start {
            self.text.push('…');
        }
        let mut marks = here.iter().copied().peekable();
        let column = |p: usize| source[content.start..p.min(content.end)].chars().count() + 1;
        for (i, c) in source[window.clone()].char_indices() {
            let p = window.start + i;
            while let Some(m) = marks.next_if(|&m| m <= p) {
                self.mark(m, column(m));
            }
            match visible::escape(c) {
                Some(shown) if c != '\t' => self.text.push_str(&shown),
                _ => self.text.push(c),
            }
        }
        // Ends past the window (or on the line break) point just after the shown text.
        for m in marks {
            self.mark(m, column(m));
        }
        if window.end < content.end {
            self.text.push('…');
        }
        self.text.push('\n');
        self.shown.push(Shown {
            index,
            range: start..self.text.len(),
        });
    }

    fn mark(&mut self, original: usize, column: usize) {
        let at = self.text.len();
        self.offsets.entry(original).or_insert(at);
        self.columns.entry(at).or_insert(column);
    }

    /// Where an original label range lies in the excerpt.
    pub fn map(&self, r: &Range<usize>) -> Range<usize> {
        let at = |b: usize| self.offsets.get(&b).copied().unwrap_or(0);
        at(r.start)..at(r.end).max(at(r.start))
    }
}

/// The bytes of a line's `content` to show: all of it when short, else a window of about
/// [`MAX_LINE`] bytes from just before the first label end `marks` holds, or before the
/// `focus` (the primary label's start) when the labels lie further apart than a window.
fn window(
    source: &str,
    content: &Range<usize>,
    marks: &[usize],
    focus: Option<usize>,
) -> Range<usize> {
    if content.len() <= MAX_LINE {
        return content.clone();
    }
    let first = marks.first().copied().unwrap_or(content.start);
    let last = marks.last().copied().unwrap_or(first);
    let first = match focus {
        Some(f) if last - first + 2 * MARGIN > MAX_LINE => f,
        _ => first,
    };
    let mut start = first.saturating_sub(MARGIN).max(content.start);
    let mut end = (last + MARGIN).min(start + MAX_LINE).min(content.end);
    while !source.is_char_boundary(start) {
        start -= 1;
    }
    while !source.is_char_boundary(end) {
        end += 1;
    }
    start..end
}

impl<'a> Files<'a> for Excerpt {
    type FileId = ();
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, (): ()) -> Result<&'a str, Error> {
        Ok(&self.name)
    }

    fn source(&'a self, (): ()) -> Result<&'a str, Error> {
        Ok(&self.text)
    }

    fn line_index(&'a self, (): (), byte_index: usize) -> Result<usize, Error> {
        let i = self
            .shown
            .partition_point(|s| s.range.start <= byte_index)
            .saturating_sub(1);
        self.shown
            .get(i)
            .map(|s| s.index)
            .ok_or(Error::IndexTooLarge {
                given: byte_index,
                max: self.text.len(),
            })
    }

    fn column_number(
        &'a self,
        (): (),
        line_index: usize,
        byte_index: usize,
    ) -> Result<usize, Error> {
        if let Some(&column) = self.columns.get(&byte_index) {
            return Ok(column);
        }
        let range = self.line_range((), line_index)?;
        Ok(codespan_reporting::files::column_index(&self.text, range, byte_index) + 1)
    }

    fn line_range(&'a self, (): (), line_index: usize) -> Result<Range<usize>, Error> {
        // A line codespan asks for that is not shown is empty (it is never printed: the
        // excerpt holds every line codespan prints).
        let end = self.text.len();
        Ok(self
            .shown
            .iter()
            .find(|s| s.index == line_index)
            .map_or(end..end, |s| s.range.clone()))
    }
}
