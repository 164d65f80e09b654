//! Topology import: machine descriptions that other tools write, turned into topology files.
//!
//! - [`nccl_xml`] reads NCCL's topology dump (`NCCL_TOPO_DUMP_FILE`, and RCCL's, which writes
//!   `<xgmi>` where NCCL writes `<nvlink>`).
//! - [`nvidia_smi`] reads the matrix of `nvidia-smi topo -m`.
//!
//! Both build a [`Machine`]: GPUs become compute nodes, NVSwitches, PCIe switches, CPU sockets
//! and NICs become switches (they forward and compute nothing), and every link gets the
//! bandwidth and latency of its kind from [`Figures`] (`docs/import.md` has the table; each
//! figure can be overridden). [`Machine::to_ron`] writes it as a `Graph` topology file with one
//! allreduce phase, ready for `topoc check` and `topoc compile`. Problems with the input are
//! [`Problem`]s pointing at the line, rendered like those of topology files.

pub mod figures;
pub mod nccl_xml;
pub mod nvidia_smi;

pub use figures::{Figure, Figures, LinkKind};

use crate::diag::Problem;
use std::collections::BTreeMap;

/// An imported machine, before it is written out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Machine {
    /// The topology's name.
    pub name: String,
    /// What it was imported from, for the file's header comment.
    pub source: String,
    /// Compute nodes (GPUs), in rank order.
    pub gpus: Vec<String>,
    /// Switches: NVSwitch, PCIe switches, CPU sockets, NICs.
    pub switches: Vec<String>,
    /// The links.
    pub links: Vec<Link>,
    /// Lines for the header comment (NIC speeds, choices made).
    pub notes: Vec<String>,
}

/// One imported link: `count` links of one kind between two nodes, written as one link with
/// `count` lanes and `count` times the bandwidth.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// One end.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Its kind.
    pub kind: LinkKind,
    /// Parallel links (NVLinks in a bond, xGMI links); at least 1.
    pub count: u32,
    /// Share of a full link's bandwidth (a PCIe link narrower than x16), 1.0 otherwise.
    pub scale: f64,
}

impl Machine {
    /// The topology file: a `Graph` with every node and link, and one allreduce phase.
    /// Names from the input are escaped; link ids are `L0`, `L1`, … in order.
    pub fn to_ron(&self, figures: &Figures) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "// Imported by topoc from {}.\n",
            comment(&self.source)
        ));
        let used: BTreeMap<LinkKind, Figure> = self
            .links
            .iter()
            .map(|l| (l.kind, figures.get(l.kind)))
            .collect();
        out.push_str(
            "// Link figures per link and direction (docs/import.md; override with --figure):\n",
        );
        for (kind, f) in &used {
            out.push_str(&format!(
                "//   {kind}: {} GB/s, {} µs\n",
                f.gbytes, f.latency_us
            ));
        }
        for note in &self.notes {
            out.push_str(&format!("// {}\n", comment(note)));
        }
        out.push_str("Topology(\n");
        out.push_str(&format!("    name: {},\n", quote(&self.name)));
        out.push_str("    machine: Graph(\n");
        let list = |names: &[String]| {
            names
                .iter()
                .map(|n| quote(n))
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!("        nodes: [{}],\n", list(&self.gpus)));
        out.push_str(&format!("        switches: [{}],\n", list(&self.switches)));
        out.push_str("        links: [\n");
        for (i, link) in self.links.iter().enumerate() {
            let f = figures.get(link.kind);
            let gbps = f.gbytes * 8.0 * f64::from(link.count) * link.scale;
            out.push_str(&format!(
                "            (id: \"L{i}\", between: ({}, {}), bandwidth_gbps: {}, latency_us: {}, lanes: {}), // {}{}\n",
                quote(&link.a),
                quote(&link.b),
                number(gbps),
                number(f.latency_us),
                link.count,
                link.kind,
                if link.count > 1 {
                    format!(" ×{}", link.count)
                } else if link.scale != 1.0 {
                    format!(" ×{}", number(link.scale))
                } else {
                    String::new()
                }
            ));
        }
        out.push_str("        ],\n    ),\n    phases: [\n");
        out.push_str(
            "        Exchange(name: \"allreduce\", collective: AllReduce, op: Sum, dtype: F32, elements: 1048576),\n",
        );
        out.push_str("    ],\n)\n");
        out
    }
}

/// A RON string literal: quotes and backslashes escaped, control characters as `\u{…}`.
pub fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text for a `//` comment: on one line.
fn comment(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A number as RON reads it back: always with a decimal point, trailing zeros trimmed.
fn number(x: f64) -> String {
    let s = format!("{:.4}", x);
    let s = s.trim_end_matches('0');
    if s.ends_with('.') {
        format!("{s}0")
    } else {
        s.to_string()
    }
}

/// The byte range of 1-based line `line` (without its newline).
pub fn line_range(source: &str, line: usize) -> std::ops::Range<usize> {
    let mut start = 0;
    for (i, l) in source.split_inclusive('\n').enumerate() {
        let end = start + l.trim_end_matches(['\n', '\r']).len();
        if i + 1 == line {
            return start..end;
        }
        start += l.len();
    }
    source.len()..source.len()
}

/// A problem at a byte range with a headline and a label.
fn problem(range: std::ops::Range<usize>, message: String, label: &str) -> Problem {
    Problem::at_bytes(range, message, label)
}

/// Adds a related place at a byte range.
fn also(mut problem: Problem, range: std::ops::Range<usize>, text: &str) -> Problem {
    problem.secondary.push(crate::diag::Mark {
        at: crate::diag::At::Bytes(range),
        text: text.to_string(),
    });
    problem
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_numbers_read_back() {
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\u{a}d\"");
        assert_eq!(number(200.0), "200.0");
        assert_eq!(number(126.0), "126.0");
        assert_eq!(number(0.7), "0.7");
        assert_eq!(line_range("ab\ncd\n", 2), 3..5);
    }
}
