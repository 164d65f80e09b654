//! The RON text of a schedule ([`Schedule`] or [`Pattern`]), written directly: the very bytes
//! `ron::ser::to_writer_pretty` writes with this crate's two layouts ([`Layout`]), produced
//! several times faster.
//!
//! **Why not serde.** A compiled schedule is mostly instructions: a 1,024-node allreduce holds
//! millions of them and 100–300 MB of text. Through serde, ron checks every field and variant
//! name character by character before writing it, formats every id through `core::fmt`, and
//! hands every comma and name to the output as a separate write; that took a fifth to a third
//! of a whole compile. Here the names are constants written as they are, ids go through a
//! small decimal formatter ([`Text::uint`]), and the text gathers in a buffer that the output
//! receives in large pieces ([`FLUSH_AT`]), so a file of hundreds of megabytes is still never
//! held whole. Reading stays with serde and ron, and so does JSON.
//!
//! **What is reproduced.** ron 0.12's pretty serialiser with `struct_names` and
//! `compact_structs` on, `compact_arrays` and `separate_tuple_members` off, and no extension:
//!
//! - a struct is `Name(field: value, …)` on one line, whatever it holds; a struct variant is
//!   `Variant(field: value, …)`, a newtype variant `Variant(value)`, a unit variant `Variant`,
//!   an option `Some(value)` or `None`, a tuple `(a, b)`. A field skipped when it holds its
//!   default (`skip_serializing_if`) is not written at all. Structs and tuples do not nest:
//!   only lists do.
//! - a list opens a nesting level. Within the layout's depth limit a non-empty list puts
//!   every element on a line of its own, indented once per level and followed by a comma,
//!   and its `]` on a line indented one level less; an empty list is `[]`. Past the limit the
//!   elements follow each other, separated by a comma and the layout's separator.
//! - a string is `"`, then every character as `char::escape_debug` writes it (so `'` is
//!   `\'`, a control character `\u{1b}`, and a combining mark `\u{301}` even inside the
//!   string), then `"`.
//! - a float is its `Debug` text (`200.0`, `1e-9`), with a `-` before a negative NaN.
//! - an integer is its decimal digits.
//!
//! The field order and the skipped defaults follow the `#[serde]` attributes of the types in
//! `lib.rs` and `pattern.rs`: a field added there must be added here too. The tests hold this
//! writer to ron's own output, kept as their oracle, on random schedules and on every example.

use super::runs::{Encoder, Written};
use super::Form;
use crate::pattern::{Grid, Pattern};
use crate::{
    Band, Buffer, BufferId, BufferKind, Chunk, ChunkIds, Collective, DType, Instr, Link, LinkUse,
    Machine, Node, NodeKind, Phase, Program, ProgramItem, RecvMode, ReduceOp, Schedule,
};
use std::io::{self, Write};

#[cfg(test)]
mod tests;

/// How many bytes of text gather before they are handed to the output: large enough that the
/// output sees few writes, small enough that the text is never held whole.
const FLUSH_AT: usize = 1 << 16;

/// The layout parameters of one [`Form`], as given to ron's `PrettyConfig` before: the
/// explicit form indents by two spaces and writes a program's steps one instruction per line
/// (depth limit 4); the compact form does not indent or space, and writes one program step
/// per line (depth limit 3). Both use `\n` for new lines.
#[derive(Clone, Copy)]
struct Layout {
    /// How many spaces are written per nesting level before an element on a line of its own.
    indent: usize,
    /// Written after a comma or a colon that does not end a line, if anything is. One byte
    /// pushed rather than a slice copied: the text is mostly such small pieces.
    separator: Option<u8>,
    /// The deepest list level whose elements go on lines of their own.
    depth_limit: usize,
}

impl Layout {
    fn of(form: Form) -> Layout {
        match form {
            Form::Explicit => Layout {
                indent: 2,
                separator: Some(b' '),
                depth_limit: 4,
            },
            Form::Compact => Layout {
                indent: 0,
                separator: None,
                depth_limit: 3,
            },
        }
    }
}

/// A value written as RON text: a schedule of either form.
pub(super) trait Document {
    /// Writes the value, not followed by a newline.
    fn write_ron<W: Write>(&self, text: &mut Text<W>) -> io::Result<()>;
}

/// Writes `document` in `form` to `out`, followed by a newline. The only errors are `out`'s.
pub(super) fn write<D: Document, W: Write>(document: &D, form: Form, out: W) -> io::Result<()> {
    let mut text = Text {
        buf: Vec::with_capacity(FLUSH_AT + FLUSH_AT / 4),
        out,
        layout: Layout::of(form),
        runs: (form == Form::Compact).then(Encoder::default),
        depth: 0,
    };
    document.write_ron(&mut text)?;
    text.buf.push(b'\n');
    text.spill()
}

/// RON text being written: the pieces of ron's pretty serialiser, each writing what ron
/// writes for it, into a buffer that [`Text::spill`] hands to the output.
pub(super) struct Text<W> {
    buf: Vec<u8>,
    out: W,
    layout: Layout,
    /// In the compact form, what cuts chunk lists into runs.
    runs: Option<Encoder>,
    /// The number of lists open: ron's indentation level.
    depth: usize,
}

/// Two decimal digits for every number below 100, so that an id is formatted two digits per
/// division.
const DIGIT_PAIRS: &[u8; 200] = b"\
    0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

impl<W: Write> Text<W> {
    /// Hands the text gathered so far to the output.
    fn spill(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    /// Hands the text to the output once enough has gathered.
    fn spill_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= FLUSH_AT {
            self.spill()
        } else {
            Ok(())
        }
    }

    #[inline]
    fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// An unsigned integer in decimal, as `Display` writes it. The digits are formed from the
    /// front of a fixed array, copied whole (a copy of constant size, done in place) and the
    /// copy cut to length: no call to copy a few bytes.
    fn uint(&mut self, value: impl Into<u64>) {
        let mut n: u64 = value.into();
        let len = n.checked_ilog10().map_or(1, |l| l as usize + 1);
        let mut digits = [0u8; 20];
        let mut at = len;
        while n >= 100 {
            let pair = (n % 100) as usize * 2;
            n /= 100;
            at -= 2;
            digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        }
        if n >= 10 {
            let pair = n as usize * 2;
            digits[..2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        } else {
            digits[0] = b'0' + n as u8;
        }
        let end = self.buf.len() + len;
        self.buf.extend_from_slice(&digits);
        self.buf.truncate(end);
    }

    /// A float as ron writes it: its `Debug` text, the shortest that reads back to the same
    /// value, after a `-` for a negative NaN. Floats are few (two per link), so `core::fmt`
    /// is used as ron uses it rather than imitated.
    fn float(&mut self, value: f64) {
        if value.is_nan() && value.is_sign_negative() {
            self.buf.push(b'-');
        }
        self.raw(format!("{value:?}").as_bytes());
    }

    /// A string as ron writes it: quoted, every character escaped by `char::escape_debug`.
    /// Printable ASCII other than quotes and the backslash stands for itself there, and is
    /// copied without asking.
    fn string(&mut self, value: &str) {
        self.buf.push(b'"');
        for c in value.chars() {
            if (c == ' ' || c.is_ascii_graphic()) && !matches!(c, '"' | '\'' | '\\') {
                self.buf.push(c as u8);
            } else {
                let mut scalar = [0u8; 4];
                for e in c.escape_debug() {
                    self.raw(e.encode_utf8(&mut scalar).as_bytes());
                }
            }
        }
        self.buf.push(b'"');
    }

    /// `Name(` of a struct, or of a struct or newtype variant.
    #[inline]
    fn open(&mut self, name: &str) {
        self.raw(name.as_bytes());
        self.buf.push(b'(');
    }

    /// The first field's `key: `.
    #[inline]
    fn first(&mut self, key: &str) {
        self.raw(key.as_bytes());
        self.buf.push(b':');
        self.separator();
    }

    /// A following field's `, key: `.
    #[inline]
    fn field(&mut self, key: &str) {
        self.buf.push(b',');
        self.separator();
        self.first(key);
    }

    /// The `)` closing a struct, a variant, an option or a tuple.
    #[inline]
    fn close(&mut self) {
        self.buf.push(b')');
    }

    /// Whether the lists open now put their elements on lines of their own.
    fn on_lines(&self) -> bool {
        self.depth <= self.layout.depth_limit
    }

    /// `[` of a list of `len` elements: one level deeper, and a new line if its elements go
    /// on lines of their own.
    fn list_open(&mut self, len: usize) {
        self.buf.push(b'[');
        self.depth += 1;
        if self.on_lines() && len > 0 {
            self.buf.push(b'\n');
        }
    }

    /// What comes before element `index` of the open list, then the text handed to the
    /// output if enough has gathered.
    fn item(&mut self, index: usize) -> io::Result<()> {
        self.before(index);
        self.spill_if_full()
    }

    /// What comes before element `index` of the open list: after the first, a comma and a new
    /// line or the separator; on lines of their own, the indentation.
    fn before(&mut self, index: usize) {
        let on_lines = self.on_lines();
        if index > 0 {
            self.buf.push(b',');
            if on_lines {
                self.buf.push(b'\n');
            } else {
                self.separator();
            }
        }
        if on_lines {
            self.indent(self.depth);
        }
    }

    /// `]` of the open list of `len` elements: on lines of their own, the last element's comma
    /// and new line and the indentation of the level outside.
    fn list_close(&mut self, len: usize) {
        if self.on_lines() && len > 0 {
            self.raw(b",\n");
            self.indent(self.depth - 1);
        }
        self.depth -= 1;
        self.buf.push(b']');
    }

    fn indent(&mut self, levels: usize) {
        for _ in 0..levels * self.layout.indent {
            self.buf.push(b' ');
        }
    }

    #[inline]
    fn separator(&mut self) {
        if let Some(separator) = self.layout.separator {
            self.buf.push(separator);
        }
    }

    /// A list of `items`, each written by `each`.
    fn list<T>(
        &mut self,
        items: &[T],
        mut each: impl FnMut(&mut Self, &T) -> io::Result<()>,
    ) -> io::Result<()> {
        self.list_open(items.len());
        for (i, x) in items.iter().enumerate() {
            self.item(i)?;
            each(self, x)?;
        }
        self.list_close(items.len());
        Ok(())
    }

    /// `Some(value)` of an integer, or `None`.
    fn option_uint(&mut self, value: Option<impl Into<u64>>) {
        match value {
            Some(v) => {
                self.open("Some");
                self.uint(v);
                self.close();
            }
            None => self.raw(b"None"),
        }
    }

    fn machine(&mut self, machine: &Machine) -> io::Result<()> {
        self.open("Machine");
        self.first("name");
        self.string(&machine.name);
        self.field("nodes");
        self.list(&machine.nodes, |t, n| {
            t.node(n);
            Ok(())
        })?;
        self.field("links");
        self.list(&machine.links, |t, l| {
            t.link(l);
            Ok(())
        })?;
        if let Some(gbps) = machine.reduce_gbps {
            self.field("reduce_gbps");
            self.open("Some");
            self.float(gbps);
            self.close();
        }
        if !crate::is_zero(&machine.switch_latency_us) {
            self.field("switch_latency_us");
            self.float(machine.switch_latency_us);
        }
        self.close();
        Ok(())
    }

    fn node(&mut self, node: &Node) {
        self.open("Node");
        self.first("name");
        self.string(&node.name);
        self.field("kind");
        self.raw(match node.kind {
            NodeKind::Compute => b"Compute",
            NodeKind::Switch => b"Switch",
        });
        if node.capacity.is_some() {
            self.field("capacity");
            self.option_uint(node.capacity);
        }
        self.close();
    }

    fn link(&mut self, link: &Link) {
        self.open("Link");
        self.first("name");
        self.string(&link.name);
        self.field("a");
        self.uint(link.a.0);
        self.field("b");
        self.uint(link.b.0);
        self.field("bandwidth_gbps");
        self.float(link.bandwidth_gbps);
        self.field("latency_us");
        self.float(link.latency_us);
        self.field("lanes");
        self.uint(link.lanes);
        self.close();
    }

    /// The `program` field, written only when the program is not empty.
    fn program(&mut self, program: &[ProgramItem]) -> io::Result<()> {
        if program.is_empty() {
            return Ok(());
        }
        self.field("program");
        self.list(program, |t, item| t.program_item(item))
    }

    fn program_item(&mut self, item: &ProgramItem) -> io::Result<()> {
        match item {
            ProgramItem::Compute(name) => {
                self.open("Compute");
                self.string(name);
            }
            ProgramItem::Exchange(name) => {
                self.open("Exchange");
                self.string(name);
            }
            ProgramItem::Bands { name, bands } => {
                self.open("Bands");
                self.first("name");
                self.string(name);
                self.field("bands");
                self.list(bands, |t, band| {
                    t.band(band);
                    Ok(())
                })?;
            }
        }
        self.close();
        Ok(())
    }

    fn band(&mut self, band: &Band) {
        self.open("Band");
        self.first("min_bytes");
        self.uint(band.min_bytes);
        self.field("max_bytes");
        self.option_uint(band.max_bytes);
        self.field("phase");
        self.string(&band.phase);
        self.close();
    }

    fn phase(&mut self, phase: &Phase) -> io::Result<()> {
        self.open("Phase");
        self.first("name");
        self.string(&phase.name);
        self.field("collective");
        self.collective(phase.collective);
        self.field("op");
        self.raw(match phase.op {
            ReduceOp::Sum => b"Sum",
            ReduceOp::Prod => b"Prod",
            ReduceOp::Max => b"Max",
            ReduceOp::Min => b"Min",
            ReduceOp::Mean => b"Mean",
        });
        self.field("dtype");
        self.raw(match phase.dtype {
            DType::F32 => b"F32",
            DType::F64 => b"F64",
            DType::I32 => b"I32",
            DType::I64 => b"I64",
            DType::F16 => b"F16",
            DType::BF16 => b"BF16",
        });
        self.field("elements");
        self.uint(phase.elements);
        self.field("algorithm");
        self.string(&phase.algorithm);
        self.field("chunks");
        self.list(&phase.chunks, |t, c| {
            t.chunk(c);
            Ok(())
        })?;
        self.field("buffers");
        self.list(&phase.buffers, |t, b| {
            t.buffer(b);
            Ok(())
        })?;
        self.field("steps");
        self.uint(phase.steps);
        if !phase.links.is_exclusive() {
            self.field("links");
            self.raw(match phase.links {
                LinkUse::Exclusive => b"Exclusive",
                LinkUse::Shared => b"Shared",
            });
        }
        self.field("programs");
        self.list(&phase.programs, |t, p| t.node_program(p))?;
        self.close();
        Ok(())
    }

    fn collective(&mut self, collective: Collective) {
        match collective {
            Collective::AllReduce => self.raw(b"AllReduce"),
            Collective::ReduceScatter => self.raw(b"ReduceScatter"),
            Collective::AllGather => self.raw(b"AllGather"),
            Collective::Broadcast { root } => {
                self.open("Broadcast");
                self.first("root");
                self.uint(root.0);
                self.close();
            }
            Collective::Reduce { root } => {
                self.open("Reduce");
                self.first("root");
                self.uint(root.0);
                self.close();
            }
        }
    }

    fn chunk(&mut self, chunk: &Chunk) {
        self.open("Chunk");
        self.first("start");
        self.uint(chunk.start);
        self.field("end");
        self.uint(chunk.end);
        if chunk.owner.is_some() {
            self.field("owner");
            self.option_uint(chunk.owner.map(|o| o.0));
        }
        self.close();
    }

    fn buffer(&mut self, buffer: &Buffer) {
        self.open("Buffer");
        self.first("name");
        self.string(&buffer.name);
        self.field("kind");
        self.raw(match buffer.kind {
            BufferKind::Data => b"Data",
            BufferKind::Scratch => b"Scratch",
        });
        self.close();
    }

    fn node_program(&mut self, program: &Program) -> io::Result<()> {
        self.open("Program");
        self.first("steps");
        self.list(&program.steps, |t, step| {
            t.list(step, |t, instr| t.instr(instr))
        })?;
        self.close();
        Ok(())
    }

    fn instr(&mut self, instr: &Instr) -> io::Result<()> {
        match instr {
            Instr::Send {
                link,
                via,
                to,
                buffer,
                chunks,
            } => {
                self.open("Send");
                self.first("link");
                self.uint(link.0);
                if !via.is_empty() {
                    self.field("via");
                    self.list(via, |t, l| {
                        t.uint(l.0);
                        Ok(())
                    })?;
                }
                self.field("to");
                self.uint(to.0);
                self.field("buffer");
                self.uint(buffer.0);
                self.field("chunks");
                self.chunk_ids(chunks)?;
            }
            Instr::Recv {
                link,
                from,
                buffer,
                chunks,
                mode,
            } => {
                self.open("Recv");
                self.first("link");
                self.uint(link.0);
                self.field("from");
                self.uint(from.0);
                self.field("buffer");
                self.uint(buffer.0);
                self.field("chunks");
                self.chunk_ids(chunks)?;
                self.field("mode");
                self.raw(match mode {
                    RecvMode::Store => b"Store",
                    RecvMode::Reduce => b"Reduce",
                });
            }
            Instr::Reduce { src, dst, chunks } => self.src_dst("Reduce", *src, *dst, chunks)?,
            Instr::Copy { src, dst, chunks } => self.src_dst("Copy", *src, *dst, chunks)?,
            Instr::Scale {
                buffer,
                chunks,
                divisor,
            } => {
                self.open("Scale");
                self.first("buffer");
                self.uint(buffer.0);
                self.field("chunks");
                self.chunk_ids(chunks)?;
                self.field("divisor");
                self.uint(*divisor);
            }
        }
        self.close();
        Ok(())
    }

    /// The fields of a reduce or a copy, `variant` naming which.
    fn src_dst(
        &mut self,
        variant: &str,
        src: BufferId,
        dst: BufferId,
        chunks: &ChunkIds,
    ) -> io::Result<()> {
        self.open(variant);
        self.first("src");
        self.uint(src.0);
        self.field("dst");
        self.uint(dst.0);
        self.field("chunks");
        self.chunk_ids(chunks)
    }

    /// A chunk list: every id, or in the compact form the items [`Encoder::items`] cuts it
    /// into.
    fn chunk_ids(&mut self, chunks: &ChunkIds) -> io::Result<()> {
        if let Some(mut runs) = self.runs.take() {
            let written = self.list(runs.items(chunks), |t, item| {
                t.run_item(*item);
                Ok(())
            });
            self.runs = Some(runs);
            return written;
        }
        let len = chunks.len();
        self.list_open(len);
        for (i, id) in chunks.iter().enumerate() {
            self.item(i)?;
            self.uint(id.0);
        }
        self.list_close(len);
        Ok(())
    }

    /// An item of a chunk list in the compact form: an id, or a run as the tuple
    /// `(start, [(count, stride), …])`, with a `(count, step)` of blocks in front for a
    /// two-level run.
    fn run_item(&mut self, item: Written) {
        match item {
            Written::Id(id) => self.uint(id),
            Written::Run {
                start,
                blocks,
                count,
                stride,
            } => {
                self.buf.push(b'(');
                self.uint(start);
                self.pair_separator();
                let dims = if blocks.is_some() { 2 } else { 1 };
                self.list_open(dims);
                if let Some((n, step)) = blocks {
                    self.before(0);
                    self.dim(n, step);
                }
                self.before(dims - 1);
                self.dim(count, stride);
                self.list_close(dims);
                self.close();
            }
        }
    }

    /// One `(count, stride)` of a run.
    fn dim(&mut self, count: u32, stride: u32) {
        self.buf.push(b'(');
        self.uint(count);
        self.pair_separator();
        self.uint(stride);
        self.close();
    }

    /// The `,` and separator between the two members of a tuple.
    fn pair_separator(&mut self) {
        self.buf.push(b',');
        self.separator();
    }

    fn grid(&mut self, grid: &Grid) -> io::Result<()> {
        self.open("Grid");
        self.first("sizes");
        self.list(&grid.sizes, |t, &s| {
            t.uint(s);
            Ok(())
        })?;
        self.field("nodes");
        self.list(&grid.nodes, |t, n| {
            t.uint(n.0);
            Ok(())
        })?;
        self.close();
        Ok(())
    }

    fn phases(&mut self, phases: &[Phase]) -> io::Result<()> {
        self.field("phases");
        self.list(phases, |t, p| t.phase(p))
    }
}

impl Document for Schedule {
    fn write_ron<W: Write>(&self, text: &mut Text<W>) -> io::Result<()> {
        text.open("Schedule");
        text.first("format_version");
        text.uint(self.format_version);
        text.field("machine");
        text.machine(&self.machine)?;
        text.program(&self.program)?;
        text.phases(&self.phases)?;
        text.close();
        Ok(())
    }
}

impl Document for Pattern {
    fn write_ron<W: Write>(&self, text: &mut Text<W>) -> io::Result<()> {
        text.open("Pattern");
        text.first("grid");
        text.grid(&self.grid)?;
        text.field("format_version");
        text.uint(self.format_version);
        text.field("machine");
        text.machine(&self.machine)?;
        text.program(&self.program)?;
        text.phases(&self.phases)?;
        text.close();
        Ok(())
    }
}
