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
        let mut reader = Reader::at_start(source);
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

/// A bracket that a text opens and never closes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unclosed {
    /// Byte offset of the bracket.
    pub at: usize,
    /// `(`, `[` or `{`.
    pub bracket: char,
    /// What the bracket belongs to, as written before it: `Topology` for `Topology(`,
    /// `phases:` for `phases: [`.
    pub owner: Option<String>,
}

impl Unclosed {
    /// The bracket that closes this one.
    pub fn closer(&self) -> char {
        match self.bracket {
            '(' => ')',
            '[' => ']',
            _ => '}',
        }
    }

    /// The bracketed value as a message names it: `` `Topology(…)` ``, `` `phases: […]` ``,
    /// or `` a `(…)` `` when nothing names it.
    pub fn describe(&self) -> String {
        let (open, close) = (self.bracket, self.closer());
        match &self.owner {
            Some(field) if field.ends_with(':') => format!("`{field} {open}…{close}`"),
            Some(name) => format!("`{name}{open}…{close}`"),
            None => format!("a `{open}…{close}`"),
        }
    }
}

/// How a text ends, token by token: what is still open and where the last token stops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ending {
    /// The brackets opened and not closed, outermost first.
    pub unclosed: Vec<Unclosed>,
    /// The byte offset just past the last token; only whitespace and comments follow.
    pub last: usize,
    /// Whether the last token is one that something must follow: `:`, `,` or an opening
    /// bracket.
    pub dangling: bool,
}

/// Reads `source` as a sequence of RON tokens and reports how it ends, or `None` when it ends
/// inside a string, a character or a block comment (then the literal, not a bracket, is what
/// is left open).
///
/// The parser reports the token it wanted next where it stopped; when it stopped because the
/// text ran out, that token (a comma, a closing bracket, a value) is the wrong thing to tell
/// the user. The brackets still open are the right thing, and this finds them without
/// depending on how far the parser got. A closing bracket that does not match the innermost
/// open one is passed over: the parser has already refused such a text where it occurs.
pub fn ending(source: &str) -> Option<Ending> {
    let mut reader = Reader::at_start(source);
    let mut unclosed: Vec<Unclosed> = Vec::new();
    // The identifier just read, and whether a `:` has followed it: what names a bracket.
    let mut owner: Option<(Range<usize>, bool)> = None;
    let mut last = reader.pos;
    let mut dangling = false;
    loop {
        reader.skip_trivia();
        let Some(c) = reader.peek() else { break };
        let start = reader.pos;
        let mut named = None;
        match c {
            b'"' | b'\'' => reader.quoted(c),
            b'r' if matches!(reader.src.get(start + 1), Some(b'"' | b'#')) => reader.raw_string(),
            c if c.is_ascii_alphabetic() || c == b'_' => {
                named = Some((reader.ident(), false));
            }
            b':' => {
                reader.pos += 1;
                named = owner.take().map(|(name, _)| (name, true));
            }
            b'(' | b'[' | b'{' => {
                reader.pos += 1;
                unclosed.push(Unclosed {
                    at: start,
                    bracket: char::from(c),
                    owner: owner.take().map(|(name, field)| {
                        let name = String::from_utf8_lossy(&reader.src[name]);
                        if field {
                            format!("{name}:")
                        } else {
                            name.into_owned()
                        }
                    }),
                });
            }
            b')' | b']' | b'}' => {
                reader.pos += 1;
                if unclosed.last().is_some_and(|u| u.closer() == char::from(c)) {
                    unclosed.pop();
                }
            }
            _ => reader.pos += 1,
        }
        owner = named;
        last = reader.pos.min(source.len());
        dangling = matches!(c, b':' | b',' | b'(' | b'[' | b'{');
    }
    (!reader.cut).then_some(Ending {
        unclosed,
        last,
        dangling,
    })
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
    /// Set when the text ends inside a string, a character or a block comment.
    cut: bool,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `source`'s value: a byte-order mark is not part of it (see
    /// `parse`).
    fn at_start(source: &'a str) -> Reader<'a> {
        Reader {
            src: source.as_bytes(),
            pos: if source.starts_with(super::parse::BOM) {
                super::parse::BOM.len_utf8()
            } else {
                0
            },
            depth: 0,
            cut: false,
        }
    }

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
                    self.cut |= nesting > 0;
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
                self.quoted(b'"');
                Kind::Scalar
            }
            b'\'' => {
                self.quoted(b'\'');
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

    /// A string or character literal, from its opening `quote` past its closing one.
    fn quoted(&mut self, quote: u8) {
        self.pos += 1;
        while let Some(c) = self.peek() {
            self.pos += 1;
            if c == b'\\' {
                self.pos += 1;
            } else if c == quote {
                return;
            }
        }
        self.cut = true;
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
        self.cut = true;
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
    fn ending_names_the_brackets_left_open() {
        let cut = "Topology(\n    name: \"a (\",\n    phases: [Compute(\"x\"), // ]\n";
        let end = ending(cut);
        let named: Option<Vec<String>> = end
            .as_ref()
            .map(|e| e.unclosed.iter().map(Unclosed::describe).collect());
        assert_eq!(
            named,
            Some(vec!["`Topology(…)`".into(), "`phases: […]`".into()])
        );
        assert_eq!(
            end.map(|e| &cut[..e.last]),
            Some("Topology(\n    name: \"a (\",\n    phases: [Compute(\"x\"),"),
            "the last token is the comma; the comment is not one"
        );
        assert_eq!(
            ending(SRC).map(|e| e.unclosed),
            Some(vec![]),
            "a whole file closes everything"
        );
        assert_eq!(ending("Topology(name: \"open"), None, "inside a string");
        assert_eq!(ending("Topology( /* open"), None, "inside a comment");
    }

    #[test]
    fn display_reads_like_an_accessor() {
        assert_eq!(
            path!["machine", "links", 3, "id"].to_string(),
            "machine.links[3].id"
        );
    }
}
