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

use super::figures::LinkKind;
use super::{line_range, problem, Link, Machine};
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

struct Reader {
    /// `<pci>` levels above the element being read.
    depth: usize,
    machine: Machine,
    problems: Vec<Problem>,
    /// GPU bus id → (name, NVLink kind, its CPU socket).
    gpu_at: BTreeMap<String, (String, LinkKind, String)>,
    /// GPUs with their sort key (rank, else dev).
    gpus: Vec<(u64, String)>,
    nvlinks: Vec<Listed>,
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
        depth: 0,
        machine: Machine {
            name: name.to_string(),
            source: source_name.to_string(),
            ..Machine::default()
        },
        problems: Vec::new(),
        gpu_at: BTreeMap::new(),
        gpus: Vec::new(),
        nvlinks: Vec::new(),
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
        let id = cpu
            .attribute("numaid")
            .map_or_else(|| i.to_string(), str::to_string);
        let name = format!("cpu{id}");
        reader.machine.switches.push(name.clone());
        cpus.push(name.clone());
        reader.below(cpu, &name, &name, LinkKind::Pcie4);
    }
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            reader.link(a, b, LinkKind::Smp, 1, 1.0);
        }
    }
    reader.nvlinks_to_links();
    if reader.gpus.is_empty() && reader.problems.is_empty() {
        reader.problems.push(
            problem(
                root.range(),
                "the file lists no <gpu>".to_string(),
                "no GPU in here",
            )
            .hint("the dump of a node with GPUs lists each inside the <pci> element of its bus"),
        );
    }
    if !reader.problems.is_empty() {
        return Err(reader.problems);
    }
    reader.gpus.sort();
    reader.machine.gpus = reader.gpus.into_iter().map(|(_, n)| n).collect();
    Ok(reader.machine)
}

impl Reader {
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

    fn number<'a>(&mut self, node: Node<'a, '_>, key: &str) -> Option<u64> {
        let value = self.attr(node, key)?;
        let parsed = value
            .strip_prefix("0x")
            .map_or_else(|| value.parse().ok(), |h| u64::from_str_radix(h, 16).ok());
        if parsed.is_none() {
            let range = node
                .attribute_node(key)
                .map_or(node.range(), |a| a.range_value());
            self.problems.push(problem(
                range,
                format!(
                    "`{key}` of <{}> is {value:?}, not a number",
                    node.tag_name().name()
                ),
                "expected a number",
            ));
        }
        parsed
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
        let (kind, scale) = self.pcie(node, inherited);
        self.known_children(node);
        let children: Vec<Node> = node.children().filter(Node::is_element).collect();
        if let Some(gpu) = children.iter().find(|c| c.has_tag_name("gpu")) {
            self.gpu(*gpu, node, parent, cpu, kind, scale);
        } else if let Some(nic) = children.iter().find(|c| c.has_tag_name("nic")) {
            self.nic(*nic, parent, kind, scale);
        } else if children.iter().any(|c| c.has_tag_name("pci")) {
            let name = format!("pcie-{}", busid.to_ascii_lowercase());
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
                        let range = node
                            .attribute_node("link_speed")
                            .map_or(node.range(), |a| a.range_value());
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
        let width = node
            .attribute("link_width")
            .and_then(|w| w.trim().parse::<u32>().ok())
            .filter(|&w| w > 0 && w <= 16)
            .unwrap_or(16);
        (kind, f64::from(width) / 16.0)
    }

    fn nic<'a>(&mut self, node: Node<'a, '_>, parent: &str, kind: LinkKind, scale: f64) {
        self.known_children(node);
        for net in node.children().filter(|c| c.has_tag_name("net")) {
            let Some(name) = self.attr(net, "name") else {
                continue;
            };
            let speed = net
                .attribute("speed")
                .and_then(|s| s.parse::<u64>().ok())
                .map_or("speed not given".to_string(), |mbps| {
                    format!("{} Gbit/s", mbps / 1000)
                });
            let switch = format!("nic-{name}");
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
        let Some(dev) = self.number(node, "dev") else {
            return;
        };
        let name = format!("gpu{dev}");
        if self.gpus.iter().any(|(_, n)| *n == name) {
            self.problems.push(problem(
                node.range(),
                format!("GPU dev {dev} is listed twice"),
                "listed again here",
            ));
            return;
        }
        let order = node
            .attribute("rank")
            .and_then(|r| r.parse::<u64>().ok())
            .unwrap_or(dev);
        let has_links = node
            .children()
            .any(|c| c.has_tag_name("nvlink") || c.has_tag_name("xgmi"));
        // The generation matters only for a GPU's own links; a GPU without is still a GPU.
        let generation = if has_links {
            self.generation(node).unwrap_or(LinkKind::NvLink3)
        } else {
            LinkKind::NvLink3
        };
        let busid = pci.attribute("busid").unwrap_or("").to_ascii_lowercase();
        self.gpu_at
            .insert(busid, (name.clone(), generation, cpu.to_string()));
        self.gpus.push((order, name.clone()));
        self.link(parent, &name, kind, 1, scale);
        for link in node.children().filter(Node::is_element) {
            if !(link.has_tag_name("nvlink") || link.has_tag_name("xgmi")) {
                continue;
            }
            let (Some(target), Some(count)) =
                (self.attr(link, "target"), self.number(link, "count"))
            else {
                continue;
            };
            let tclass = link.attribute("tclass").unwrap_or("0x030200");
            let range = |key: &str| {
                link.attribute_node(key)
                    .map_or(link.range(), |a| a.range_value())
            };
            self.nvlinks.push(Listed {
                gpu: name.clone(),
                target: target.to_ascii_lowercase(),
                tclass: tclass.to_ascii_lowercase(),
                count: u32::try_from(count).unwrap_or(u32::MAX),
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
                let range = node
                    .attribute_node("gcn")
                    .map_or(node.range(), |a| a.range_value());
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
        let sm = self.number(node, "sm")?;
        let kind = match sm {
            60..=62 => Some(LinkKind::NvLink1),
            70..=75 => Some(LinkKind::NvLink2),
            80..=89 => Some(LinkKind::NvLink3),
            90..=99 => Some(LinkKind::NvLink4),
            100..=129 => Some(LinkKind::NvLink5),
            _ => None,
        };
        if kind.is_none() {
            let range = node
                .attribute_node("sm")
                .map_or(node.range(), |a| a.range_value());
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

    /// Turns the collected NVLinks into links: GPU pairs once (both ends must agree), every
    /// NVSwitch link of a GPU into one bond with `nvswitch`, CPU links to the GPU's socket.
    fn nvlinks_to_links(&mut self) {
        let mut pairs: BTreeMap<(String, String), u32> = BTreeMap::new();
        let mut to_switch: BTreeMap<String, u32> = BTreeMap::new();
        let mut to_cpu: BTreeMap<String, u32> = BTreeMap::new();
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
            if tclass.starts_with("0x0680") {
                *to_switch.entry(gpu).or_default() += count;
            } else if tclass.starts_with("0x0604") {
                *to_cpu.entry(gpu).or_default() += count;
            } else if tclass.starts_with("0x03") {
                let Some((other, _, _)) = self.gpu_at.get(&target).cloned() else {
                    self.problems.push(problem(
                        target_at,
                        format!("{gpu} links to bus {target}, where the file lists no GPU"),
                        "no GPU at this bus id",
                    ));
                    continue;
                };
                let key = if gpu < other {
                    (gpu.clone(), other.clone())
                } else {
                    (other.clone(), gpu.clone())
                };
                match pairs.get(&key) {
                    Some(&seen) if seen != count => {
                        self.problems.push(problem(
                            at.clone(),
                            format!(
                                "{gpu} lists {count} link(s) to {other}, but {other} lists {seen} to {gpu}"
                            ),
                            "the two ends disagree",
                        ));
                    }
                    Some(_) => {}
                    None => {
                        pairs.insert(key, count);
                    }
                }
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
        let kind_of = |reader: &Reader, gpu: &str| {
            reader
                .gpu_at
                .values()
                .find(|(n, _, _)| n == gpu)
                .map(|(_, k, cpu)| (*k, cpu.clone()))
        };
        for ((a, b), count) in pairs {
            if let Some((kind, _)) = kind_of(self, &a) {
                self.link(&a, &b, kind, count.max(1), 1.0);
            }
        }
        if !to_switch.is_empty() {
            self.machine.switches.push("nvswitch".to_string());
        }
        for (gpu, count) in to_switch {
            if let Some((kind, _)) = kind_of(self, &gpu) {
                self.link(&gpu, "nvswitch", kind, count.max(1), 1.0);
            }
        }
        for (gpu, count) in to_cpu {
            if let Some((kind, cpu)) = kind_of(self, &gpu) {
                self.link(&gpu, &cpu, kind, count.max(1), 1.0);
            }
        }
    }
}
