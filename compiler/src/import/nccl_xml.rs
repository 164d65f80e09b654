//! NCCL's topology dump (`NCCL_TOPO_DUMP_FILE=FILE`), and RCCL's.
//!
//! The file is a tree: `<system>` holds one `<cpu>` per socket; under a CPU, `<pci>` elements
//! nest as the PCIe tree does (a `<pci>` holding other `<pci>`s is a PCIe switch); a `<pci>`
//! holding a `<gpu>` is that GPU, one holding a `<nic>` is a network card whose `<net>`s are
//! its ports (`speed` in Mbit/s). A `<gpu>` lists its NVLinks (`<nvlink target count tclass>`;
//! RCCL writes `<xgmi …>`): `target` is the bus id of the device at the other end, `tclass` its
//! PCI class — a GPU (`0x03…`), an NVSwitch (`0x068000`) or a CPU (`0x0604…`, POWER9).
//!
//! As NCCL does, every NVSwitch link of a GPU goes to one switch, `nvswitch`: the NVSwitch
//! chips of a node form one crossbar, and a GPU's bond to it is one link with one lane per
//! NVLink. CPU sockets are joined to each other by one `smp` link.
//!
//! NCCL reads an `<nvlink>` as one direction of a bond — from the GPU it is listed under, at
//! that GPU's NVLink speed — and a dump NCCL writes lists every GPU-to-GPU bond at both ends.
//! A topology link carries one bandwidth both ways, so both ends must list the bond, with the
//! same count, between GPUs of one generation; a file that does not is refused with both
//! places, not read from one side.

use super::figures::{LinkKind, MAX_BOND, PCIE_WIDTHS};
use super::{also, line_range, problem, Accepts, Link, Machine, Whole};
use crate::diag::Problem;
use roxmltree::{Document, Node};
use std::collections::BTreeMap;
use std::ops::Range;

/// Elements the reader knows; anything else is reported.
const KNOWN: [&str; 9] = [
    "system", "cpu", "pci", "gpu", "nvlink", "xgmi", "nic", "net", "c2c",
];

/// An NVLink (or xGMI bond) as listed, with where it was written.
struct Listed {
    gpu: String,
    target: String,
    tclass: String,
    count: u32,
    at: Range<usize>,
    target_at: Range<usize>,
    tclass_at: Range<usize>,
}

/// PCIe trees are a few levels deep; deeper nesting is refused before it can exhaust the stack.
const MAX_DEPTH: usize = 32;

/// The largest value of NCCL's `int` attributes.
const INT_MAX: i64 = i32::MAX as i64;

/// `dev` of a `<gpu>`: a CUDA device number.
const DEV: Whole = Whole {
    what: "a CUDA device number",
    accepts: Accepts::Range(0, INT_MAX),
    hint: None,
};

/// `rank` of a `<gpu>`.
const RANK: Whole = Whole {
    what: "an NCCL rank",
    accepts: Accepts::Range(0, INT_MAX),
    hint: None,
};

/// `sm` of a `<gpu>`: its compute capability, major × 10 + minor (which are known is decided
/// by [`Reader::generation`]).
const SM: Whole = Whole {
    what: "a compute capability",
    accepts: Accepts::Range(0, INT_MAX),
    hint: Some("`sm` is the compute capability times ten: 70 for V100, 80 for A100, 90 for H100"),
};

/// `count` of an `<nvlink>` or `<xgmi>`: the links of one bond.
const COUNT: Whole = Whole {
    what: "a number of links in a bond",
    accepts: Accepts::Range(1, MAX_BOND as i64),
    hint: Some("a GPU has at most 18 NVLinks (H100, B200); NCCL writes one <nvlink> per peer with the links to it counted"),
};

/// `link_width` of a `<pci>`: its lanes, or 0 when sysfs did not say (read as x16, as NCCL
/// does).
const WIDTH: Whole = Whole {
    what: "a PCIe link width",
    accepts: Accepts::OneOf(&[0, 1, 2, 4, 8, 12, 16, 32]),
    hint: Some("PCIe links are x1, x2, x4, x8, x12, x16 or x32; NCCL writes 0 when the width is not known, which is read as x16"),
};

/// `speed` of a `<net>`, Mbit/s; NCCL reads 0 and below as not known ("some NICs define
/// speed = -1").
const SPEED: Whole = Whole {
    what: "a port speed in Mbit/s",
    accepts: Accepts::Range(i32::MIN as i64, INT_MAX),
    hint: Some("NCCL writes a port's speed in Mbit/s, and 0 or -1 when it is not known"),
};

/// `numaid` of a `<cpu>`: its NUMA node, -1 when the kernel gives none.
const NUMAID: Whole = Whole {
    what: "a NUMA node",
    accepts: Accepts::Range(-1, INT_MAX),
    hint: None,
};

/// A GPU as read.
struct Gpu {
    /// Its NVLink or xGMI generation; `None` when it lists no links (a GPU without is still a
    /// GPU, whatever its `sm`) or its architecture is unknown (already reported).
    generation: Option<LinkKind>,
    /// The CPU socket it hangs from.
    cpu: String,
    /// Its start tag.
    at: Range<usize>,
}

struct Reader<'s> {
    source: &'s str,
    /// `<pci>` levels above the element being read.
    depth: usize,
    machine: Machine,
    problems: Vec<Problem>,
    /// What must be unique — node names (`node gpu0`) and bus ids (`bus 0000:…`) — with
    /// where it was first written.
    taken: BTreeMap<String, Range<usize>>,
    /// GPU bus id → GPU name.
    bus_to_gpu: BTreeMap<String, String>,
    /// GPU name → what was read of it.
    gpu_info: BTreeMap<String, Gpu>,
    /// GPUs with their sort key (rank, else dev).
    gpus: Vec<(i64, String)>,
    nvlinks: Vec<Listed>,
    /// GPUs with an `<nvlink>` that could not be read or names no GPU (already reported):
    /// which bonds they meant to list is not known, so theirs are not checked against their
    /// peers'.
    unread: std::collections::BTreeSet<String>,
}

/// Reads a topology dump. `source_name` goes into the header comment.
pub fn read(source: &str, name: &str, source_name: &str) -> Result<Machine, Vec<Problem>> {
    let doc = match Document::parse(source) {
        Ok(doc) => doc,
        Err(e) => {
            let pos = e.pos();
            let range = line_range(source, pos.row as usize);
            let start = (range.start + pos.col.saturating_sub(1) as usize).min(range.end);
            return Err(vec![problem(
                start..range.end.max(start),
                format!("the file is not well-formed XML: {e}"),
                "here",
            )]);
        }
    };
    let mut reader = Reader {
        source,
        depth: 0,
        machine: Machine {
            name: name.to_string(),
            source: source_name.to_string(),
            ..Machine::default()
        },
        problems: Vec::new(),
        taken: BTreeMap::new(),
        bus_to_gpu: BTreeMap::new(),
        gpu_info: BTreeMap::new(),
        gpus: Vec::new(),
        nvlinks: Vec::new(),
        unread: std::collections::BTreeSet::new(),
    };
    let root = doc.root_element();
    if root.tag_name().name() != "system" {
        reader.problems.push(
            problem(
                root.range(),
                format!(
                    "the root element is <{}>, but an NCCL topology dump starts with <system>",
                    root.tag_name().name()
                ),
                "expected <system>",
            )
            .hint("write the file with NCCL_TOPO_DUMP_FILE=FILE (NCCL) or RCCL's equivalent"),
        );
        return Err(reader.problems);
    }
    reader.known_children(root);
    let mut cpus = Vec::new();
    for (i, cpu) in root.children().filter(Node::is_element).enumerate() {
        if cpu.tag_name().name() != "cpu" {
            continue;
        }
        // A <cpu> without `numaid` (NCCL always writes one) is numbered by its position.
        let id = match cpu.attribute("numaid") {
            Some(_) => reader.number(cpu, "numaid", &NUMAID).unwrap_or(i as i64),
            None => i as i64,
        };
        let name = format!("cpu{id}");
        let at = cpu
            .attribute_node("numaid")
            .map_or_else(|| reader.start_tag(cpu), |a| a.range_value());
        // A socket listed twice is reported; what is under it is still read, for its own
        // problems.
        if reader.declare(
            &format!("node {name}"),
            at,
            &format!("NUMA node {id}"),
            "each <cpu> is one socket with its own `numaid`",
        ) {
            reader.machine.switches.push(name.clone());
            cpus.push(name.clone());
        }
        reader.below(cpu, &name, &name, LinkKind::Pcie4);
    }
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            reader.link(a, b, LinkKind::Smp, 1, 1.0);
        }
    }
    reader.nvlinks_to_links();
    if reader.problems.is_empty() {
        match reader.gpus.as_slice() {
            [] => reader.problems.push(
                problem(
                    root.range(),
                    "the file lists no <gpu>".to_string(),
                    "no GPU in here",
                )
                .hint(
                    "the dump of a node with GPUs lists each inside the <pci> element of its bus",
                ),
            ),
            [(_, only)] => {
                let at = reader.gpu_info[only].at.clone();
                reader.problems.push(
                    problem(
                        at,
                        format!("the file lists one GPU, {only}; a topology needs at least two"),
                        "the only <gpu>",
                    )
                    .hint("a collective runs between compute nodes, and a topology with fewer than two is refused by `topoc check`"),
                );
            }
            _ => {}
        }
    }
    if !reader.problems.is_empty() {
        return Err(reader.problems);
    }
    reader.gpus.sort();
    reader.machine.gpus = reader.gpus.into_iter().map(|(_, n)| n).collect();
    Ok(reader.machine)
}

impl Reader<'_> {
    fn link(&mut self, a: &str, b: &str, kind: LinkKind, count: u32, scale: f64) {
        self.machine.links.push(Link {
            a: a.to_string(),
            b: b.to_string(),
            kind,
            count,
            scale,
        });
    }

    /// Reports children that are not elements the reader knows.
    fn known_children<'a>(&mut self, node: Node<'a, '_>) {
        for child in node.children().filter(Node::is_element) {
            let tag = child.tag_name().name();
            if !KNOWN.contains(&tag) {
                self.problems.push(
                    problem(
                        child.range(),
                        format!("unknown element <{tag}> in <{}>", node.tag_name().name()),
                        "not part of NCCL's topology format",
                    )
                    .hint(format!("the elements are {}", KNOWN.join(", "))),
                );
            }
        }
    }

    fn attr<'a>(&mut self, node: Node<'a, '_>, key: &str) -> Option<&'a str> {
        let value = node.attribute(key);
        if value.is_none() {
            self.problems.push(problem(
                node.range(),
                format!("<{}> has no `{key}` attribute", node.tag_name().name()),
                format!("add {key}=\"…\"").as_str(),
            ));
        }
        value
    }

    /// The number in attribute `key` of `node`, read by `whole`; `None`, with a problem at the
    /// value, when it is absent or refused.
    fn number<'a>(&mut self, node: Node<'a, '_>, key: &str, whole: &Whole) -> Option<i64> {
        let value = self.attr(node, key)?;
        match whole.read(value) {
            Ok(v) => Some(v),
            Err(reason) => {
                let range = value_range(node, key);
                self.problems.push(whole.refused(
                    range,
                    &format!("`{key}` of <{}>", node.tag_name().name()),
                    value,
                    &reason,
                ));
                None
            }
        }
    }

    /// The start tag of `node` (`<gpu dev="0" …>`), where a problem with the element points.
    fn start_tag(&self, node: Node<'_, '_>) -> Range<usize> {
        let start = node.range().start;
        let end = self.source[start..]
            .find('>')
            .map_or(node.range().end, |i| start + i + 1);
        start..end
    }

    /// Takes `key` (a node name or a bus id), written at `at` for `what`; one already taken is
    /// refused with both places, since the topology language refuses a node declared twice and
    /// NCCL keys devices by bus id.
    fn declare(&mut self, key: &str, at: Range<usize>, what: &str, hint: &str) -> bool {
        if let Some(first) = self.taken.get(key) {
            let first = first.clone();
            self.problems.push(
                also(
                    problem(at, format!("{what} is listed twice"), "listed again here"),
                    first,
                    "first listed here",
                )
                .hint(hint),
            );
            return false;
        }
        self.taken.insert(key.to_string(), at);
        true
    }

    /// The devices under `node` (a CPU or a PCIe switch named `parent`), whose links run at
    /// `kind` unless they say otherwise. `cpu` is the socket they belong to.
    fn below<'a>(&mut self, node: Node<'a, '_>, parent: &str, cpu: &str, kind: LinkKind) {
        self.known_children(node);
        for child in node.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "pci" => self.pci(child, parent, cpu, kind),
                "nic" => self.nic(child, parent, kind, 1.0),
                "gpu" => self.gpu(child, node, parent, cpu, kind, 1.0),
                _ => {}
            }
        }
    }

    fn pci<'a>(&mut self, node: Node<'a, '_>, parent: &str, cpu: &str, inherited: LinkKind) {
        if self.depth == MAX_DEPTH {
            self.problems.push(problem(
                node.range().start..node.range().start,
                format!("<pci> elements nested more than {MAX_DEPTH} deep"),
                "too deep",
            ));
            return;
        }
        let Some(busid) = self.attr(node, "busid") else {
            return;
        };
        let bus = busid.to_ascii_lowercase();
        let at = value_range(node, "busid");
        if !self.declare(
            &format!("bus {bus}"),
            at,
            &format!("bus id {bus}"),
            "a bus id names one PCI device; NCCL's dump lists each once",
        ) {
            return;
        }
        let (kind, scale) = self.pcie(node, inherited);
        self.known_children(node);
        let children: Vec<Node> = node.children().filter(Node::is_element).collect();
        if let Some(gpu) = children.iter().find(|c| c.has_tag_name("gpu")) {
            self.gpu(*gpu, node, parent, cpu, kind, scale);
        } else if let Some(nic) = children.iter().find(|c| c.has_tag_name("nic")) {
            self.nic(*nic, parent, kind, scale);
        } else if children.iter().any(|c| c.has_tag_name("pci")) {
            let name = format!("pcie-{bus}");
            self.machine.switches.push(name.clone());
            self.link(parent, &name, kind, 1, scale);
            self.depth += 1;
            self.below(node, &name, cpu, kind);
            self.depth -= 1;
        }
    }

    /// The PCIe generation and width share of a `<pci>` element.
    fn pcie<'a>(&mut self, node: Node<'a, '_>, inherited: LinkKind) -> (LinkKind, f64) {
        let kind = match node.attribute("link_speed").map(str::trim) {
            None | Some("") => inherited,
            Some(s) if s.to_ascii_lowercase().starts_with("unknown") => inherited,
            Some(s) => {
                let rate: Option<f64> = s.split_whitespace().next().and_then(|x| x.parse().ok());
                match rate {
                    Some(r) if r <= 8.0 => LinkKind::Pcie3,
                    Some(r) if r <= 16.0 => LinkKind::Pcie4,
                    Some(r) if r <= 32.0 => LinkKind::Pcie5,
                    _ => {
                        let range = value_range(node, "link_speed");
                        self.problems.push(
                            problem(
                                range,
                                format!("unknown PCIe link speed {s:?}"),
                                "expected 8, 16 or 32 GT/s",
                            )
                            .hint("PCIe 3.0 runs at 8 GT/s, 4.0 at 16 GT/s, 5.0 at 32 GT/s"),
                        );
                        inherited
                    }
                }
            }
        };
        // Absent, empty or 0: sysfs did not say, and NCCL then takes x16 (docs/import.md).
        let width = match node.attribute("link_width").map(str::trim) {
            None | Some("") => 16,
            Some(_) => match self.number(node, "link_width", &WIDTH) {
                Some(0) | None => 16,
                Some(w) => w,
            },
        };
        debug_assert!(width == 16 || PCIE_WIDTHS.iter().any(|&w| i64::from(w) == width));
        (kind, width as f64 / 16.0)
    }

    fn nic<'a>(&mut self, node: Node<'a, '_>, parent: &str, kind: LinkKind, scale: f64) {
        self.known_children(node);
        for net in node.children().filter(|c| c.has_tag_name("net")) {
            let Some(name) = self.attr(net, "name") else {
                continue;
            };
            // NCCL reads an absent speed, 0 or below as not known.
            let speed = match net.attribute("speed") {
                None => None,
                Some(_) => self.number(net, "speed", &SPEED),
            };
            let speed = match speed {
                Some(mbps) if mbps > 0 => format!("{} Gbit/s", mbps as f64 / 1000.0),
                _ => "speed not given".to_string(),
            };
            let switch = format!("nic-{name}");
            let at = value_range(net, "name");
            if !self.declare(
                &format!("node {switch}"),
                at,
                &format!("network port {name:?}"),
                "each <net> is one port, named once in the dump",
            ) {
                continue;
            }
            self.machine
                .notes
                .push(format!("{switch}: network port {name}, {speed}"));
            self.machine.switches.push(switch.clone());
            self.link(parent, &switch, kind, 1, scale);
        }
    }

    /// A GPU: `pci` is its bus element (or its parent, when the dump puts the GPU straight
    /// under a CPU).
    fn gpu<'a>(
        &mut self,
        node: Node<'a, '_>,
        pci: Node<'a, '_>,
        parent: &str,
        cpu: &str,
        kind: LinkKind,
        scale: f64,
    ) {
        self.known_children(node);
        let Some(dev) = self.number(node, "dev", &DEV) else {
            return;
        };
        let name = format!("gpu{dev}");
        let at = self.start_tag(node);
        if !self.declare(
            &format!("node {name}"),
            at.clone(),
            &format!("GPU dev {dev}"),
            "each <gpu> is one CUDA device with its own `dev`",
        ) {
            return;
        }
        // A GPU without a rank (NCCL writes one for every GPU of the communicator) is ordered
        // by its device number.
        let order = match node.attribute("rank") {
            Some(_) => self.number(node, "rank", &RANK).unwrap_or(dev),
            None => dev,
        };
        let has_links = node
            .children()
            .any(|c| c.has_tag_name("nvlink") || c.has_tag_name("xgmi"));
        let generation = if has_links {
            self.generation(node)
        } else {
            None
        };
        // A GPU straight under a <cpu> has no bus id, and so no NVLink can name it.
        if let Some(busid) = pci.attribute("busid") {
            self.bus_to_gpu
                .insert(busid.to_ascii_lowercase(), name.clone());
        }
        self.gpu_info.insert(
            name.clone(),
            Gpu {
                generation,
                cpu: cpu.to_string(),
                at,
            },
        );
        self.gpus.push((order, name.clone()));
        self.link(parent, &name, kind, 1, scale);
        for link in node.children().filter(Node::is_element) {
            if !(link.has_tag_name("nvlink") || link.has_tag_name("xgmi")) {
                continue;
            }
            let (Some(target), Some(count)) = (
                self.attr(link, "target"),
                self.number(link, "count", &COUNT),
            ) else {
                self.unread.insert(name.clone());
                continue;
            };
            let tclass = link.attribute("tclass").unwrap_or("0x030200");
            let range = |key: &str| value_range(link, key);
            self.nvlinks.push(Listed {
                gpu: name.clone(),
                target: target.to_ascii_lowercase(),
                tclass: tclass.to_ascii_lowercase(),
                // COUNT holds it to 1..=MAX_BOND.
                count: count as u32,
                at: link.range(),
                target_at: range("target"),
                tclass_at: range("tclass"),
            });
        }
    }

    /// The NVLink or xGMI generation of a GPU, from `sm` (NVIDIA) or `gcn` (AMD).
    fn generation<'a>(&mut self, node: Node<'a, '_>) -> Option<LinkKind> {
        if let Some(gcn) = node.attribute("gcn") {
            let kind = if gcn.starts_with("gfx908") {
                Some(LinkKind::Xgmi2)
            } else if gcn.starts_with("gfx90a") {
                Some(LinkKind::Xgmi3)
            } else if gcn.starts_with("gfx94") {
                Some(LinkKind::Xgmi4)
            } else {
                None
            };
            if kind.is_none() {
                let range = value_range(node, "gcn");
                self.problems.push(
                    problem(
                        range,
                        format!("unknown AMD GPU architecture {gcn:?}"),
                        "not gfx908, gfx90a or gfx94x",
                    )
                    .hint("MI100 is gfx908, MI200 gfx90a, MI300 gfx942"),
                );
            }
            return kind;
        }
        let sm = self.number(node, "sm", &SM)?;
        let kind = match sm {
            60..=62 => Some(LinkKind::NvLink1),
            70..=75 => Some(LinkKind::NvLink2),
            80..=89 => Some(LinkKind::NvLink3),
            90..=99 => Some(LinkKind::NvLink4),
            100..=129 => Some(LinkKind::NvLink5),
            _ => None,
        };
        if kind.is_none() {
            let range = value_range(node, "sm");
            self.problems.push(
                problem(
                    range,
                    format!("no NVLink generation is known for compute capability sm {sm}"),
                    "expected sm 60 to 129",
                )
                .hint("P100 is sm 60, V100 sm 70, A100 sm 80, H100 sm 90, B200 sm 100"),
            );
        }
        kind
    }

    /// Turns the collected NVLinks into links: GPU pairs once (both ends must list the bond
    /// alike), every NVSwitch link of a GPU into one bond with `nvswitch`, CPU links to the
    /// GPU's socket. No GPU may list more links than its generation has.
    fn nvlinks_to_links(&mut self) {
        // (GPU, peer) → (count, where listed).
        let mut bonds: BTreeMap<(String, String), (u32, Range<usize>)> = BTreeMap::new();
        let mut to_switch: BTreeMap<String, u32> = BTreeMap::new();
        let mut to_cpu: BTreeMap<String, u32> = BTreeMap::new();
        let mut total: BTreeMap<String, u32> = BTreeMap::new();
        for listed in std::mem::take(&mut self.nvlinks) {
            let Listed {
                gpu,
                target,
                tclass,
                count,
                at,
                target_at,
                tclass_at,
            } = listed;
            *total.entry(gpu.clone()).or_default() += count;
            if tclass.starts_with("0x0680") {
                *to_switch.entry(gpu).or_default() += count;
            } else if tclass.starts_with("0x0604") {
                *to_cpu.entry(gpu).or_default() += count;
            } else if tclass.starts_with("0x03") {
                let Some(other) = self.bus_to_gpu.get(&target).cloned() else {
                    self.unread.insert(gpu.clone());
                    self.problems.push(problem(
                        target_at,
                        format!("{gpu} links to bus {target}, where the file lists no GPU"),
                        "no GPU at this bus id",
                    ));
                    continue;
                };
                if other == gpu {
                    self.problems.push(
                        problem(
                            target_at,
                            format!("{gpu} lists an NVLink to its own bus id {target}"),
                            "the GPU's own bus",
                        )
                        .hint("an <nvlink>'s target is the bus id of the device at the other end"),
                    );
                    continue;
                }
                if let Some((_, first)) = bonds.get(&(gpu.clone(), other.clone())) {
                    let first = first.clone();
                    self.problems.push(also(
                        problem(
                            at,
                            format!("{gpu} lists its bond to {other} twice"),
                            "listed again here",
                        ),
                        first,
                        "first listed here",
                    ).hint("NCCL writes one <nvlink> per peer, with all the links to it in `count`"));
                    continue;
                }
                bonds.insert((gpu, other), (count, at));
            } else {
                self.problems.push(
                    problem(
                        tclass_at,
                        format!("unknown link target class {tclass}"),
                        "not a GPU, NVSwitch or CPU",
                    )
                    .hint("GPUs are class 0x03…, NVSwitches 0x068000, CPUs 0x0604…"),
                );
            }
        }
        for (gpu, n) in total {
            let Some(kind) = self.gpu_info[&gpu].generation else {
                continue;
            };
            let most = kind.links_per_gpu().unwrap_or(MAX_BOND);
            if n > most {
                let at = self.gpu_info[&gpu].at.clone();
                self.problems.push(problem(
                    at,
                    format!("{gpu} lists {n} {kind} links, but a GPU of that generation has at most {most}"),
                    "too many links",
                ).hint("the GPU's `sm` (or `gcn`) gives its generation: sm 60 has 4 NVLinks, 70 has 6, 80 has 12, 90 and 100 have 18"));
            }
        }
        for ((a, b), (count, at)) in &bonds {
            if self.unread.contains(a) || self.unread.contains(b) {
                continue;
            }
            let back = bonds.get(&(b.clone(), a.clone()));
            let Some((back_count, back_at)) = back else {
                let b_at = self.gpu_info[b].at.clone();
                self.problems.push(
                    also(
                        problem(
                            at.clone(),
                            format!("{a} lists {count} link(s) to {b}, but {b} lists none to {a}"),
                            "listed at one end only",
                        ),
                        b_at,
                        &format!("{b} lists no link to {a}"),
                    )
                    .hint("NCCL reads each <nvlink> as one direction, from the GPU it is listed under, and writes every bond at both ends; a topology link goes both ways, so both ends must list it"),
                );
                continue;
            };
            if a > b {
                continue;
            }
            // The pair, once: reported at the end listed later in the file.
            let ((x, y, n, x_at), (m, y_at)) = if at.start > back_at.start {
                ((a, b, count, at), (back_count, back_at))
            } else {
                ((b, a, back_count, back_at), (count, at))
            };
            let (kx, ky) = (self.gpu_info[x].generation, self.gpu_info[y].generation);
            if n != m {
                self.problems.push(also(
                    problem(
                        x_at.clone(),
                        format!("{x} lists {n} link(s) to {y}, but {y} lists {m} to {x}"),
                        "the two ends disagree",
                    ),
                    y_at.clone(),
                    &format!("{y} lists {m} here"),
                ));
            } else if let (Some(kx), Some(ky)) = (kx, ky) {
                if kx != ky {
                    self.problems.push(also(
                        problem(
                            x_at.clone(),
                            format!("{x} is {kx} but its peer {y} is {ky}"),
                            &format!("{x}'s end of the bond"),
                        ),
                        y_at.clone(),
                        &format!("{y}'s end"),
                    ).hint("NCCL gives each direction the speed of the GPU it is listed under; a topology link has one bandwidth both ways, and NVLink joins GPUs of one generation"));
                } else {
                    self.link(a, b, kx, *count, 1.0);
                }
            }
        }
        if !to_switch.is_empty() {
            self.machine.switches.push("nvswitch".to_string());
        }
        for (gpu, count) in to_switch {
            if let Some(kind) = self.gpu_info[&gpu].generation {
                self.link(&gpu, "nvswitch", kind, count, 1.0);
            }
        }
        for (gpu, count) in to_cpu {
            let info = &self.gpu_info[&gpu];
            if let Some(kind) = info.generation {
                let cpu = info.cpu.clone();
                self.link(&gpu, &cpu, kind, count, 1.0);
            }
        }
    }
}

/// Where the value of `node`'s attribute `name` is, for a diagnostic; the whole element when
/// the attribute is absent.
fn value_range(node: Node, name: &str) -> std::ops::Range<usize> {
    node.attribute_node(name)
        .map_or(node.range(), |a| a.range_value())
}
