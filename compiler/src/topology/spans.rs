//! Where things are in a topology file: a small RON reader that records the byte span of every
//! value, so that a problem found after parsing ("link id `L02` is declared twice") can point
//! at the text the user wrote.
//!
//! serde gives us typed values but forgets positions; this module gives positions but no
//! types. The two meet through [`Path`]: checks name the value they complain about by its path
//! (`machine.links[3].id`) and [`SpanTree::find`] turns the path into a span. The reader only
//! has to understand text that serde already accepted, so it is lenient: anything it cannot
//! follow ends the walk, and the deepest span found so far is used.

use std::fmt;
use std::ops::Range;

/// One step of a path into a RON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    /// A named field of a struct (`machine`, `links`).
    Field(String),
    /// An element of a list or tuple, counted from 0.
    Index(usize),
}

/// A path from the top of the file to a value, e.g. `machine.links[3].between.1`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Path(pub Vec<Seg>);

impl Path {
    /// The empty path: the whole file.
    pub fn root() -> Path {
        Path(Vec::new())
    }

    /// This path extended by a field.
    pub fn field(&self, name: &str) -> Path {
        let mut p = self.clone();
        p.0.push(Seg::Field(name.to_string()));
        p
    }

    /// This path extended by an index.
    pub fn index(&self, i: usize) -> Path {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

/// Builds a [`Path`] from dotted segments: `path!["machine", "links", 3, "id"]`.
#[macro_export]
macro_rules! path {
    ($($seg:expr),* $(,)?) => {{
        #[allow(unused_mut)]
        let mut p = $crate::topology::spans::Path::root();
        $( p = $crate::topology::spans::IntoSeg::push_onto($seg, p); )*
        p
    }};
}

/// Something that can extend a path: a field name or an index.
pub trait IntoSeg {
    /// Returns `path` extended by `self`.
    fn push_onto(self, path: Path) -> Path;
}

impl IntoSeg for &str {
    fn push_onto(self, path: Path) -> Path {
        path.field(self)
    }
}

impl IntoSeg for usize {
    fn push_onto(self, path: Path) -> Path {
        path.index(self)
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Field(name) if i == 0 => write!(f, "{name}")?,
                Seg::Field(name) => write!(f, ".{name}")?,
                Seg::Index(k) => write!(f, "[{k}]")?,
            }
        }
        Ok(())
    }
}

/// A value of the file with its span.
#[derive(Clone, Debug)]
struct Value {
    span: Range<usize>,
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Scalar,
    /// A list, a tuple, or the arguments of `Name(…)` written positionally.
    Seq(Vec<Value>),
    /// `(field: value, …)` with or without a name in front.
    Struct(Vec<(String, Value)>),
    /// `{ key: value, … }`
    Map(Vec<(Value, Value)>),
}

/// The spans of every value in a RON text.
#[derive(Clone, Debug)]
pub struct SpanTree {
    root: Option<Value>,
    len: usize,
}

impl SpanTree {
    /// Reads `source`. Never fails: text it cannot follow is simply not indexed.
    pub fn new(source: &str) -> SpanTree {
        let mut reader = Reader {
            src: source.as_bytes(),
            // A byte-order mark is not part of the value (see `parse`).
            pos: if source.starts_with(super::parse::BOM) {
                super::parse::BOM.len_utf8()
            } else {
                0
            },
            depth: 0,
        };
        let root = reader.value();
        SpanTree {
            root,
            len: source.len(),
        }
    }

    /// The span of the value at `path`, or of its deepest ancestor the reader could find.
    pub fn find(&self, path: &Path) -> Range<usize> {
        let Some(mut value) = self.root.as_ref() else {
            return 0..self.len;
        };
        for seg in &path.0 {
            match step(value, seg) {
                Some(next) => value = next,
                None => break,
            }
        }
        value.span.clone()
    }
}

/// One step down from `value`; wrappers with a single positional argument (`Some(…)`, a
/// newtype variant) are looked through when a field is wanted.
fn step<'a>(value: &'a Value, seg: &Seg) -> Option<&'a Value> {
    match (&value.kind, seg) {
        (Kind::Struct(fields), Seg::Field(name)) => {
            fields.iter().find(|(k, _)| k == name).map(|(_, v)| v)
        }
        (Kind::Seq(items), Seg::Field(_)) if items.len() == 1 => step(&items[0], seg),
        (Kind::Seq(items), Seg::Index(i)) => items.get(*i),
        (Kind::Map(entries), Seg::Field(name)) => entries
            .iter()
            .find(|(k, _)| key_matches(k, name))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn key_matches(_key: &Value, _name: &str) -> bool {
    // Map keys are not used by the topology language; kept for completeness of the reader.
    false
}

/// Recursion limit: deeper text is not indexed (serde would have refused it anyway).
const MAX_DEPTH: usize = 128;

struct Reader<'a> {
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn skip_trivia(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_ascii_whitespace() => self.pos += 1,
                Some(b'/') if self.src.get(self.pos + 1) == Some(&b'/') => {
                    while let Some(c) = self.peek() {
                        self.pos += 1;
                        if c == b'\n' {
                            break;
                        }
                    }
                }
                Some(b'/') if self.src.get(self.pos + 1) == Some(&b'*') => {
                    self.pos += 2;
                    let mut nesting = 1usize;
                    while nesting > 0 && self.pos < self.src.len() {
                        if self.src[self.pos..].starts_with(b"/*") {
                            nesting += 1;
                            self.pos += 2;
                        } else if self.src[self.pos..].starts_with(b"*/") {
                            nesting -= 1;
                            self.pos += 2;
                        } else {
                            self.pos += 1;
                        }
                    }
                }
                Some(b'#') if self.src.get(self.pos + 1) == Some(&b'!') => {
                    // `#![enable(...)]` attribute: skip to the closing bracket.
                    while let Some(c) = self.peek() {
                        self.pos += 1;
                        if c == b']' {
                            break;
                        }
                    }
                }
                _ => return,
            }
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_trivia();
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.skip_trivia();
        if self.depth > MAX_DEPTH {
            return None;
        }
        let start = self.pos;
        let c = self.peek()?;
        let kind = match c {
            b'"' => {
                self.string();
                Kind::Scalar
            }
            b'\'' => {
                self.pos += 1;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    if c == b'\\' {
                        self.pos += 1;
                    } else if c == b'\'' {
                        break;
                    }
                }
                Kind::Scalar
            }
            b'[' => {
                self.pos += 1;
                Kind::Seq(self.items(b']')?)
            }
            b'{' => {
                self.pos += 1;
                self.map()?
            }
            b'(' => self.parens()?,
            c if c.is_ascii_alphabetic() || c == b'_' => {
                if c == b'r' && matches!(self.src.get(self.pos + 1), Some(b'"' | b'#')) {
                    self.raw_string();
                    Kind::Scalar
                } else {
                    self.ident();
                    self.skip_trivia();
                    if self.peek() == Some(b'(') {
                        self.parens()?
                    } else {
                        Kind::Scalar
                    }
                }
            }
            _ => {
                // Numbers and anything else scalar-like.
                while let Some(c) = self.peek() {
                    if c.is_ascii_alphanumeric() || matches!(c, b'.' | b'+' | b'-' | b'_') {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                if self.pos == start {
                    return None;
                }
                Kind::Scalar
            }
        };
        Some(Value {
            span: start..self.pos,
            kind,
        })
    }

    fn ident(&mut self) -> Range<usize> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == b'_' {
                self.pos += 1;
            } else {
                break;
            }
        }
        start..self.pos
    }

    fn string(&mut self) {
        self.pos += 1;
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == b'\\' {
                self.pos += 1;
            } else if c == b'"' {
                break;
            }
        }
    }

    fn raw_string(&mut self) {
        self.pos += 1;
        let mut hashes = 0;
        while self.peek() == Some(b'#') {
            hashes += 1;
            self.pos += 1;
        }
        self.pos += 1; // opening quote
        while self.pos < self.src.len() {
            if self.src[self.pos] == b'"'
                && self.src[self.pos + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == b'#')
                    .count()
                    == hashes
            {
                self.pos += 1 + hashes;
                return;
            }
            self.pos += 1;
        }
    }

    /// `( … )`: a struct body if it starts with `ident:`, positional items otherwise.
    fn parens(&mut self) -> Option<Kind> {
        self.pos += 1; // '('
        self.skip_trivia();
        let save = self.pos;
        let is_struct = {
            let name = self.ident();
            let named = !name.is_empty();
            self.skip_trivia();
            let colon = self.peek() == Some(b':') && self.src.get(self.pos + 1) != Some(&b':');
            self.pos = save;
            named && colon
        };
        if !is_struct {
            return Some(Kind::Seq(self.items(b')')?));
        }
        self.depth += 1;
        let mut fields = Vec::new();
        loop {
            self.skip_trivia();
            if self.eat(b')') {
                break;
            }
            let name = self.ident();
            if name.is_empty() {
                self.depth -= 1;
                return None;
            }
            let key = String::from_utf8_lossy(&self.src[name]).into_owned();
            if !self.eat(b':') {
                self.depth -= 1;
                return None;
            }
            let value = self.value()?;
            fields.push((key, value));
            if !self.eat(b',') {
                if self.eat(b')') {
                    break;
                }
                self.depth -= 1;
                return None;
            }
        }
        self.depth -= 1;
        Some(Kind::Struct(fields))
    }

    fn items(&mut self, close: u8) -> Option<Vec<Value>> {
        self.depth += 1;
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                break;
            }
            items.push(self.value()?);
            if !self.eat(b',') {
                if self.eat(close) {
                    break;
                }
                self.depth -= 1;
                return None;
            }
        }
        self.depth -= 1;
        Some(items)
    }

    fn map(&mut self) -> Option<Kind> {
        self.depth += 1;
        let mut entries = Vec::new();
        loop {
            if self.eat(b'}') {
                break;
            }
            let key = self.value()?;
            if !self.eat(b':') {
                self.depth -= 1;
                return None;
            }
            let value = self.value()?;
            entries.push((key, value));
            if !self.eat(b',') {
                if self.eat(b'}') {
                    break;
                }
                self.depth -= 1;
                return None;
            }
        }
        self.depth -= 1;
        Some(Kind::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = r#"// a ladder
Topology(
    name: "x",
    machine: Graph(
        nodes: ["a", "b"],
        links: [
            (id: "L1", between: ("a", "b")),
            (id: "L2", between: ("a", /* the same */ "c")),
        ],
    ),
    phases: [Compute("fwd"), Exchange(name: "g", collective: Broadcast(root: "a"), elements: 4)],
)"#;

    fn text(path: Path) -> &'static str {
        &SRC[SpanTree::new(SRC).find(&path)]
    }

    #[test]
    fn finds_nested_values() {
        assert_eq!(text(path!["name"]), "\"x\"");
        assert_eq!(text(path!["machine", "links", 1, "id"]), "\"L2\"");
        assert_eq!(text(path!["machine", "links", 1, "between", 1]), "\"c\"");
        assert_eq!(text(path!["machine", "nodes", 0]), "\"a\"");
        assert_eq!(text(path!["phases", 0]), "Compute(\"fwd\")");
        assert_eq!(
            text(path!["phases", 1, "collective", "root"]),
            "\"a\"",
            "struct variants are looked into"
        );
    }

    #[test]
    fn missing_path_falls_back_to_deepest_ancestor() {
        assert_eq!(
            text(path!["machine", "links", 7]),
            &SRC[SRC.find("[\n            (id").unwrap_or(0)
                ..SRC.find("],\n    ),").unwrap_or(0) + 1]
        );
    }

    #[test]
    fn display_reads_like_an_accessor() {
        assert_eq!(
            path!["machine", "links", 3, "id"].to_string(),
            "machine.links[3].id"
        );
    }
}
