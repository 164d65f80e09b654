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

pub use figures::{Figure, Figures, LinkKind, MAX_BOND};

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

/// A whole number read from an input, with the values it may take.
///
/// Every number the importers read (an attribute of NCCL's dump, the `#` of a matrix's `NV#`)
/// goes through [`Whole::read`]: text that is not a number, or a number the machine cannot
/// have, is refused where it was written rather than replaced by a default, and the
/// diagnostic states what is accepted. Defaults exist only for absent values, and
/// `docs/import.md` lists them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Whole {
    /// What the number is, for the headline: "not {what}".
    pub what: &'static str,
    /// The values accepted.
    pub accepts: Accepts,
    /// What the values mean, when the bare list does not say it.
    pub hint: Option<&'static str>,
}

/// The values a [`Whole`] accepts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Accepts {
    /// Every value from the first to the second, both included.
    Range(i64, i64),
    /// These values only.
    OneOf(&'static [i64]),
}

impl Whole {
    /// The number `text` holds — decimal, or hexadecimal after `0x` as NCCL writes some of its
    /// attributes — or why it is refused: "not a number", or "not {what}".
    pub(crate) fn read(&self, text: &str) -> Result<i64, String> {
        let t = text.trim();
        let (digits, radix) = match t.strip_prefix("0x") {
            Some(hex) => (hex, 16),
            None => (t.strip_prefix('-').unwrap_or(t), 10),
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return Err("not a number".to_string());
        }
        // Digits that overflow an i64 are a number, only far out of range.
        let value = match radix {
            16 => i64::from_str_radix(digits, 16).ok(),
            _ => t.parse::<i64>().ok(),
        };
        match value {
            Some(v) if self.accepts(v) => Ok(v),
            _ => Err(format!("not {}", self.what)),
        }
    }

    fn accepts(&self, value: i64) -> bool {
        match self.accepts {
            Accepts::Range(lo, hi) => (lo..=hi).contains(&value),
            Accepts::OneOf(values) => values.contains(&value),
        }
    }

    /// The accepted values in words: "1 to 18", "1, 2, 4 or 8".
    pub(crate) fn expected(&self) -> String {
        match self.accepts {
            Accepts::Range(lo, hi) => format!("{lo} to {hi}"),
            Accepts::OneOf(values) => {
                let words: Vec<String> = values.iter().map(i64::to_string).collect();
                match words.split_last() {
                    Some((last, rest)) if !rest.is_empty() => {
                        format!("{} or {last}", rest.join(", "))
                    }
                    _ => words.join(""),
                }
            }
        }
    }

    /// The problem for `text`, refused for `reason`, at `range`: the headline names the value
    /// and `subject` (an attribute, a matrix entry), the label what is accepted.
    pub(crate) fn refused(
        &self,
        range: std::ops::Range<usize>,
        subject: &str,
        text: &str,
        reason: &str,
    ) -> Problem {
        let p = problem(
            range,
            format!("{subject} is {text:?}, {reason}"),
            &format!("expected {}", self.expected()),
        );
        match self.hint {
            Some(hint) => p.hint(hint),
            None => p,
        }
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

    #[test]
    fn whole_numbers_are_read_by_one_rule() {
        let width = Whole {
            what: "a width",
            accepts: Accepts::OneOf(&[1, 2, 4]),
            hint: None,
        };
        assert_eq!(width.read(" 4 "), Ok(4));
        assert_eq!(width.read("0x2"), Ok(2));
        for (text, reason) in [
            ("abc", "not a number"),
            ("", "not a number"),
            ("4x", "not a number"),
            ("-", "not a number"),
            ("3", "not a width"),
            ("-4", "not a width"),
            ("4294967295", "not a width"),
            ("99999999999999999999999", "not a width"),
        ] {
            assert_eq!(width.read(text), Err(reason.to_string()), "{text:?}");
        }
        assert_eq!(width.expected(), "1, 2 or 4");
        let count = Whole {
            what: "a count",
            accepts: Accepts::Range(-1, 18),
            hint: None,
        };
        assert_eq!(count.read("-1"), Ok(-1));
        assert_eq!(count.expected(), "-1 to 18");
    }
}
