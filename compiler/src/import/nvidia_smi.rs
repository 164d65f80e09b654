//! The matrix of `nvidia-smi topo -m`.
//!
//! The header names the devices (`GPU0 …`, then network cards `NIC0 …` or `mlx5_0 …`), then
//! `CPU Affinity`, `NUMA Affinity` and more. Each row starts with a device and gives its relation
//! to every device of the header: `X` (itself), `NV#` (a bond of # NVLinks), or the PCIe path —
//! `PIX` (at most one PCIe switch), `PXB` (several switches), `PHB` (through the host bridge),
//! `NODE` (between host bridges of one socket), `SYS` (between sockets; older versions write
//! `SOC`). A `NIC Legend:` section may name the cards.
//!
//! The matrix does not say which NVLink generation it shows (`--nvlink`, default `nvlink3`) or
//! which PCIe generation (`--pcie`, default `pcie4`). When a GPU's bonds add up to more NVLinks
//! than a GPU of that generation has (DGX A100 shows `NV12` to each of 7 peers), the bonds go
//! through NVSwitches: each GPU gets one bond to a switch `nvswitch`, as wide as its widest.
//! GPUs share a CPU socket when their NUMA (else CPU) affinity is the same; a card joins the
//! socket of a GPU it is not `SYS` from. Devices of a socket joined by `PIX` or `PXB` share a
//! PCIe switch; the others hang off the socket.

use super::figures::{LinkKind, MAX_BOND};
use super::{also, problem, Accepts, Link, Machine, Whole};
use crate::diag::Problem;
use std::collections::BTreeMap;
use std::ops::Range;

/// What the matrix does not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Generations {
    /// The NVLink generation of `NV#` bonds.
    pub nvlink: LinkKind,
    /// The PCIe generation.
    pub pcie: LinkKind,
}

impl Default for Generations {
    fn default() -> Self {
        Generations {
            nvlink: LinkKind::NvLink3,
            pcie: LinkKind::Pcie4,
        }
    }
}

/// One relation in the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rel {
    Own,
    Nv(u32),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

/// The `#` of `NV#`: the NVLinks of one bond.
const BOND: Whole = Whole {
    what: "a number of NVLinks in a bond",
    accepts: Accepts::Range(1, MAX_BOND as i64),
    hint: Some("a GPU has at most 18 NVLinks (H100, B200)"),
};

/// The relation a token names. `NV` followed by digits is a bond whatever the digits; their
/// value is checked by [`BOND`] where the row is read, so that `NV0` is refused as a bond of no
/// links rather than as an unknown word.
fn relation(token: &str) -> Option<Rel> {
    Some(match token {
        "X" => Rel::Own,
        "PIX" => Rel::Pix,
        "PXB" => Rel::Pxb,
        "PHB" => Rel::Phb,
        "NODE" => Rel::Node,
        "SYS" | "SOC" => Rel::Sys,
        _ => {
            let digits = token
                .strip_prefix("NV")
                .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))?;
            Rel::Nv(digits.parse().unwrap_or(u32::MAX))
        }
    })
}

/// The words of a line with their byte ranges in the whole source.
fn words(line: &str, offset: usize) -> Vec<(&str, Range<usize>)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line
        .char_indices()
        .chain(std::iter::once((line.len(), ' ')))
    {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                out.push((&line[s..i], offset + s..offset + i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    out
}

/// A row as read: the device, its relations, and the affinity it names.
struct Row {
    rels: Vec<(Rel, Range<usize>)>,
    affinity: Option<String>,
}

/// Reads a matrix.
pub fn read(
    source: &str,
    name: &str,
    source_name: &str,
    generations: Generations,
) -> Result<Machine, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut lines = Vec::new();
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        lines.push((line.trim_end_matches(['\n', '\r']), offset));
        offset += line.len();
    }
    let Some(header_at) = lines.iter().position(|(l, _)| !l.trim().is_empty()) else {
        return Err(vec![problem(
            0..0,
            "the file is empty".to_string(),
            "expected the matrix of `nvidia-smi topo -m`",
        )]);
    };
    let (header, header_offset) = lines[header_at];
    let devices: Vec<(&str, Range<usize>)> = words(header, header_offset)
        .into_iter()
        .take_while(|(w, _)| !matches!(*w, "CPU" | "NUMA" | "GPU"))
        .collect();
    if devices.is_empty() || !devices[0].0.starts_with("GPU") {
        return Err(vec![problem(
            header_offset..header_offset + header.len(),
            "the first line is not the header of `nvidia-smi topo -m`".to_string(),
            "expected GPU0 GPU1 …",
        )
        .hint("save the output of `nvidia-smi topo -m` as it is printed")]);
    }
    let n = devices.len();
    let mut rows: Vec<Row> = Vec::new();
    // Card → (name, the legend's line).
    let mut legend: BTreeMap<String, (String, Range<usize>)> = BTreeMap::new();
    let mut in_matrix = true;
    let mut in_legend = false;
    for &(line, line_offset) in &lines[header_at + 1..] {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            if rows.len() == n {
                in_matrix = false;
            }
            continue;
        }
        if trimmed.starts_with("Legend") {
            in_matrix = false;
            continue;
        }
        if trimmed.starts_with("NIC Legend") {
            in_matrix = false;
            in_legend = true;
            continue;
        }
        if in_legend {
            if let Some((k, v)) = trimmed.split_once(':') {
                let at = line_offset..line_offset + line.len();
                legend.insert(k.trim().to_string(), (v.trim().to_string(), at));
            }
            continue;
        }
        if !in_matrix {
            continue;
        }
        let whole = line_offset..line_offset + line.len();
        if rows.len() == n {
            problems.push(
                problem(
                    whole,
                    format!("a row beyond the {n} devices of the header"),
                    "one row too many",
                )
                .hint("each device of the header has exactly one row"),
            );
            break;
        }
        let row =
            read_row(words(line, line_offset), whole, &devices, rows.len()).unwrap_or_else(|p| {
                problems.push(p);
                Row {
                    rels: Vec::new(),
                    affinity: None,
                }
            });
        rows.push(row);
    }
    if rows.len() < n && problems.is_empty() {
        problems.push(problem(
            header_offset..header_offset + header.len(),
            format!(
                "the header names {n} devices but the matrix has {} rows",
                rows.len()
            ),
            "one row per device",
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let names: Vec<String> = devices
        .iter()
        .map(|(d, _)| match d.strip_prefix("GPU") {
            Some(k) if k.chars().all(|c| c.is_ascii_digit()) => format!("gpu{k}"),
            _ => format!("nic-{}", legend.get(*d).map_or(*d, |(n, _)| n.as_str())),
        })
        .collect();
    let is_gpu: Vec<bool> = names.iter().map(|n| n.starts_with("gpu")).collect();
    let mut problems = check_names(&devices, &names, &legend);
    let gpus = is_gpu.iter().filter(|&&g| g).count();
    if gpus < 2 {
        problems.push(
            problem(
                header_offset..header_offset + header.len(),
                format!("the matrix names {gpus} GPU(s); a topology needs at least two"),
                "one GPU",
            )
            .hint("a collective runs between compute nodes, and a topology with fewer than two is refused by `topoc check`"),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let problems = check_pairs(&devices, &rows, &is_gpu);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(build(
        name,
        source_name,
        &names,
        &is_gpu,
        &rows,
        generations,
    ))
}

/// Every device gets its own node: a header that names a device twice, or a NIC legend that
/// gives two cards one name, is refused at the second, since the topology language refuses a
/// node declared twice.
fn check_names(
    devices: &[(&str, Range<usize>)],
    names: &[String],
    legend: &BTreeMap<String, (String, Range<usize>)>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (j, name) in names.iter().enumerate() {
        let Some(i) = names[..j].iter().position(|n| n == name) else {
            continue;
        };
        let (first, second) = (devices[i].0, devices[j].0);
        let message = if first == second {
            format!("the header names `{first}` twice")
        } else {
            format!("`{first}` and `{second}` would both be `{name}`")
        };
        let mut p = also(
            problem(devices[j].1.clone(), message, "named again here"),
            devices[i].1.clone(),
            "first named here",
        );
        for d in [first, second] {
            if let Some((_, at)) = legend.get(d) {
                p = also(p, at.clone(), &format!("the NIC legend's name for `{d}`"));
            }
        }
        problems.push(
            p.hint("each device of the matrix becomes one node, and a node's name is taken once"),
        );
    }
    problems
}

/// Row `i` of the matrix: its relations (one per device of the header) and its affinity.
fn read_row(
    ws: Vec<(&str, Range<usize>)>,
    whole: Range<usize>,
    devices: &[(&str, Range<usize>)],
    i: usize,
) -> Result<Row, Problem> {
    let n = devices.len();
    let expected = &devices[i];
    if ws[0].0 != expected.0 {
        return Err(also(
            problem(
                ws[0].1.clone(),
                format!(
                    "row {} is `{}`, but the header's device {} is `{}`",
                    i + 1,
                    ws[0].0,
                    i + 1,
                    expected.0
                ),
                "expected the devices in the header's order",
            ),
            expected.1.clone(),
            "named here in the header",
        ));
    }
    let rest = &ws[1..];
    let run = rest
        .iter()
        .take_while(|(w, _)| relation(w).is_some())
        .count();
    if run != n {
        let bad = rest.get(run).filter(|(w, _)| {
            run < n && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && *w != "N/A"
        });
        return Err(match bad {
            Some((w, r)) => problem(
                r.clone(),
                format!("unknown relation `{w}` in row `{}`", ws[0].0),
                "not X, NV#, PIX, PXB, PHB, NODE or SYS",
            )
            .hint("the legend of `nvidia-smi topo -m` lists X, NV#, PIX, PXB, PHB, NODE and SYS"),
            None => problem(
                whole,
                format!(
                    "row `{}` has {run} entries, but the header names {n} devices",
                    ws[0].0
                ),
                "wrong length",
            ),
        });
    }
    for (w, r) in &rest[..n] {
        if let Some(digits) = w.strip_prefix("NV") {
            if let Err(reason) = BOND.read(digits) {
                return Err(BOND.refused(
                    r.clone(),
                    &format!("the `#` of `{w}` in row `{}`", ws[0].0),
                    digits,
                    &reason,
                ));
            }
        }
    }
    let rels: Vec<(Rel, Range<usize>)> = rest[..n]
        .iter()
        .filter_map(|(w, r)| relation(w).map(|x| (x, r.clone())))
        .collect();
    let after: Vec<&str> = rest[n..].iter().map(|(w, _)| *w).collect();
    let affinity = match after.as_slice() {
        [_, numa, ..] if *numa != "N/A" => Some(format!("numa {numa}")),
        [cpu, ..] if *cpu != "N/A" => Some(format!("cpus {cpu}")),
        _ => None,
    };
    Ok(Row { rels, affinity })
}

/// What a matrix must hold between every two devices: `X` on the diagonal only, the same
/// relation both ways, and NVLink only between GPUs.
fn check_pairs(devices: &[(&str, Range<usize>)], rows: &[Row], is_gpu: &[bool]) -> Vec<Problem> {
    let n = devices.len();
    let mut problems = Vec::new();
    for i in 0..n {
        for j in 0..n {
            let (a, at) = rows[i].rels[j].clone();
            let b = rows[j].rels[i].0;
            if (i == j) != (a == Rel::Own) {
                problems.push(problem(
                    at,
                    format!(
                        "`{}` to `{}`: X marks a device's own column only",
                        devices[i].0, devices[j].0
                    ),
                    "misplaced",
                ));
            } else if a != b && i < j {
                problems.push(problem(
                    at,
                    format!(
                        "`{}` to `{}` differs from `{}` to `{}`",
                        devices[i].0, devices[j].0, devices[j].0, devices[i].0
                    ),
                    "the matrix is not symmetric",
                ));
            } else if matches!(a, Rel::Nv(_)) && !(is_gpu[i] && is_gpu[j]) {
                problems.push(problem(
                    at,
                    "an NVLink bond to a network card".to_string(),
                    "NV# joins two GPUs",
                ));
            }
        }
    }
    problems
}

/// The machine from a checked matrix.
fn build(
    name: &str,
    source_name: &str,
    names: &[String],
    is_gpu: &[bool],
    rows: &[Row],
    generations: Generations,
) -> Machine {
    let mut machine = Machine {
        name: name.to_string(),
        source: source_name.to_string(),
        gpus: names
            .iter()
            .zip(is_gpu)
            .filter(|(_, &gpu)| gpu)
            .map(|(n, _)| n.clone())
            .collect(),
        ..Machine::default()
    };
    add_nvlinks(&mut machine, names, rows, generations);
    let (socket, sockets) = sockets(names, rows);
    let cpus: Vec<String> = (0..sockets).map(|k| format!("cpu{k}")).collect();
    machine.switches.extend(cpus.iter().cloned());
    add_pcie(
        &mut machine,
        names,
        is_gpu,
        rows,
        &socket,
        &cpus,
        generations,
    );
    for (i, a) in cpus.iter().enumerate() {
        for b in &cpus[i + 1..] {
            push_link(&mut machine, a, b, LinkKind::Smp, 1);
        }
    }
    machine
}

fn push_link(machine: &mut Machine, a: &str, b: &str, kind: LinkKind, count: u32) {
    machine.links.push(Link {
        a: a.to_string(),
        b: b.to_string(),
        kind,
        count,
        scale: 1.0,
    })
}

/// NVLink: direct bonds, or bonds with one NVSwitch when they add up to more than a GPU has.
fn add_nvlinks(machine: &mut Machine, names: &[String], rows: &[Row], generations: Generations) {
    let n = names.len();
    let nv = |i: usize, j: usize| match rows[i].rels[j].0 {
        Rel::Nv(k) => k,
        _ => 0,
    };
    let most = generations.nvlink.links_per_gpu().unwrap_or(u32::MAX);
    let switched = (0..n).any(|i| (0..n).map(|j| nv(i, j)).sum::<u32>() > most);
    if switched {
        machine.switches.push("nvswitch".to_string());
        machine.notes.push(format!(
            "the NV# bonds add up to more than the {most} NVLinks of a {} GPU: they go through NVSwitches",
            generations.nvlink
        ));
        for (i, gpu) in names.iter().enumerate() {
            let widest = (0..n).map(|j| nv(i, j)).max().unwrap_or(0);
            if widest > 0 {
                push_link(machine, gpu, "nvswitch", generations.nvlink, widest);
            }
        }
    } else {
        for i in 0..n {
            for j in i + 1..n {
                if nv(i, j) > 0 {
                    push_link(machine, &names[i], &names[j], generations.nvlink, nv(i, j));
                }
            }
        }
    }
}

/// Each device's socket, by CPU affinity; a device without one joins the first device it is
/// not SYS from. Returns the sockets and how many there are.
fn sockets(names: &[String], rows: &[Row]) -> (Vec<usize>, usize) {
    let n = names.len();
    let mut socket: Vec<Option<usize>> = vec![None; n];
    let mut keys: Vec<String> = Vec::new();
    for i in 0..n {
        if let Some(a) = &rows[i].affinity {
            let k = keys.iter().position(|x| x == a).unwrap_or_else(|| {
                keys.push(a.clone());
                keys.len() - 1
            });
            socket[i] = Some(k);
        }
    }
    for i in 0..n {
        if socket[i].is_none() {
            let near = (0..n).find(|&j| {
                socket[j].is_some() && !matches!(rows[i].rels[j].0, Rel::Sys | Rel::Own)
            });
            socket[i] = Some(near.and_then(|j| socket[j]).unwrap_or_else(|| {
                keys.push(format!("socket of {}", names[i]));
                keys.len() - 1
            }));
        }
    }
    (
        socket.into_iter().map(|s| s.unwrap_or(0)).collect(),
        keys.len(),
    )
}

/// PCIe: devices of a socket joined by PIX or PXB share a PCIe switch under that socket's
/// CPU; any other device hangs from the CPU directly. Network cards are switches.
fn add_pcie(
    machine: &mut Machine,
    names: &[String],
    is_gpu: &[bool],
    rows: &[Row],
    socket: &[usize],
    cpus: &[String],
    generations: Generations,
) {
    let n = names.len();
    let mut group: Vec<usize> = (0..n).collect();
    fn root(group: &mut [usize], mut x: usize) -> usize {
        while group[x] != x {
            group[x] = group[group[x]];
            x = group[x];
        }
        x
    }
    for i in 0..n {
        for j in 0..n {
            if socket[i] == socket[j] && matches!(rows[i].rels[j].0, Rel::Pix | Rel::Pxb) {
                let (a, b) = (root(&mut group, i), root(&mut group, j));
                group[a.max(b)] = a.min(b);
            }
        }
    }
    let mut pcie_switch: BTreeMap<usize, String> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut group, i);
        let members = (0..n).filter(|&j| root(&mut group, j) == r).count();
        let cpu = &cpus[socket[i]];
        let upstream = if members > 1 {
            let next = pcie_switch.len();
            let sw = pcie_switch
                .entry(r)
                .or_insert_with(|| format!("pcie{next}"))
                .clone();
            if !machine.switches.contains(&sw) {
                machine.switches.push(sw.clone());
                push_link(machine, cpu, &sw, generations.pcie, 1);
            }
            sw
        } else {
            cpu.clone()
        };
        if !is_gpu[i] {
            machine.switches.push(names[i].clone());
        }
        push_link(machine, &upstream, &names[i], generations.pcie, 1);
    }
}
