//! Link figures per interconnect generation: what an imported link's bandwidth and latency are,
//! since neither NCCL's topology dump nor `nvidia-smi topo -m` states them.
//!
//! Each figure is per link (one NVLink, one xGMI link, one x16 PCIe link) and per direction;
//! `docs/import.md` gives the table and where the numbers come from. `--figure KEY=GBPS` (GB/s)
//! or `--figure KEY=GBPS,US` (and a latency in µs) replaces one.

use crate::machine::build::LATENCY;
use std::fmt;

/// The most links one GPU has, and so the widest bond an import writes: 18 NVLinks on an H100
/// or a B200 (NCCL reads at most 18 per GPU). No AMD GPU has as many xGMI links.
pub const MAX_BOND: u32 = 18;

// A bond is written as one link with a lane per NVLink: the language must take that many.
const _: () = assert!(MAX_BOND <= crate::machine::build::MAX_LANES);

/// The PCIe widths an imported link may have, in lanes: those of the PCIe specification.
pub const PCIE_WIDTHS: [u32; 7] = [1, 2, 4, 8, 12, 16, 32];

/// The bandwidth range of one link of a kind, GB/s. An imported link carries between 1/16 of
/// one (an x1 PCIe link) and [`MAX_BOND`] of them, so a figure held to this range gives a link
/// the topology language accepts whatever the input: 1e-5 / 16 × 8 Gbit/s is above its
/// minimum, 1e6 × 18 × 8 below its maximum.
const GBYTES: (f64, f64) = (1e-5, 1e6);

/// A kind of link with its own figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkKind {
    /// NVLink 1.0 (P100, sm 60).
    NvLink1,
    /// NVLink 2.0 (V100, sm 70).
    NvLink2,
    /// NVLink 3.0 (A100, sm 80).
    NvLink3,
    /// NVLink 4.0 (H100, sm 90).
    NvLink4,
    /// NVLink 5.0 (B200, sm 100).
    NvLink5,
    /// AMD Infinity Fabric (xGMI) of MI100 (gfx908).
    Xgmi2,
    /// xGMI of MI200: MI210, MI250, MI250X (gfx90a).
    Xgmi3,
    /// xGMI of MI300 (gfx942).
    Xgmi4,
    /// PCIe 3.0, per x16 link.
    Pcie3,
    /// PCIe 4.0, per x16 link.
    Pcie4,
    /// PCIe 5.0, per x16 link.
    Pcie5,
    /// The link between two CPU sockets (QPI, UPI, Infinity Fabric between sockets).
    Smp,
    /// A network port, when the input does not give its speed.
    Net,
}

impl LinkKind {
    /// Every kind, in table order.
    pub const ALL: [LinkKind; 13] = [
        LinkKind::NvLink1,
        LinkKind::NvLink2,
        LinkKind::NvLink3,
        LinkKind::NvLink4,
        LinkKind::NvLink5,
        LinkKind::Xgmi2,
        LinkKind::Xgmi3,
        LinkKind::Xgmi4,
        LinkKind::Pcie3,
        LinkKind::Pcie4,
        LinkKind::Pcie5,
        LinkKind::Smp,
        LinkKind::Net,
    ];

    /// The key used on the command line and in comments.
    pub fn key(self) -> &'static str {
        match self {
            LinkKind::NvLink1 => "nvlink1",
            LinkKind::NvLink2 => "nvlink2",
            LinkKind::NvLink3 => "nvlink3",
            LinkKind::NvLink4 => "nvlink4",
            LinkKind::NvLink5 => "nvlink5",
            LinkKind::Xgmi2 => "xgmi2",
            LinkKind::Xgmi3 => "xgmi3",
            LinkKind::Xgmi4 => "xgmi4",
            LinkKind::Pcie3 => "pcie3",
            LinkKind::Pcie4 => "pcie4",
            LinkKind::Pcie5 => "pcie5",
            LinkKind::Smp => "smp",
            LinkKind::Net => "net",
        }
    }

    /// The kind with this key.
    pub fn from_key(key: &str) -> Option<LinkKind> {
        LinkKind::ALL.into_iter().find(|k| k.key() == key)
    }

    /// Most links a GPU of this NVLink generation has (NVLink 1 to 5: 4, 6, 12, 18, 18, as NCCL
    /// reads them); `None` for other kinds.
    pub fn links_per_gpu(self) -> Option<u32> {
        match self {
            LinkKind::NvLink1 => Some(4),
            LinkKind::NvLink2 => Some(6),
            LinkKind::NvLink3 => Some(12),
            LinkKind::NvLink4 | LinkKind::NvLink5 => Some(18),
            _ => None,
        }
    }

    /// The default figure: GB/s per direction of one link, and one-way latency in µs.
    fn default_figure(self) -> Figure {
        let (gbytes, latency_us) = match self {
            LinkKind::NvLink1 => (20.0, 0.7),
            LinkKind::NvLink2 | LinkKind::NvLink3 | LinkKind::NvLink4 => (25.0, 0.7),
            LinkKind::NvLink5 => (50.0, 0.7),
            LinkKind::Xgmi2 => (46.0, 1.0),
            LinkKind::Xgmi3 => (50.0, 1.0),
            LinkKind::Xgmi4 => (64.0, 1.0),
            LinkKind::Pcie3 => (15.75, 1.5),
            LinkKind::Pcie4 => (31.5, 1.5),
            LinkKind::Pcie5 => (63.0, 1.5),
            LinkKind::Smp => (40.0, 2.0),
            LinkKind::Net => (25.0, 3.0),
        };
        Figure { gbytes, latency_us }
    }
}

impl fmt::Display for LinkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Bandwidth and latency of one link of a kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    /// GB/s (10⁹ bytes per second) per direction.
    pub gbytes: f64,
    /// One-way latency, µs.
    pub latency_us: f64,
}

/// The figures in force: the defaults, with any overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    table: Vec<(LinkKind, Figure)>,
}

impl Default for Figures {
    fn default() -> Self {
        Figures {
            table: LinkKind::ALL
                .into_iter()
                .map(|k| (k, k.default_figure()))
                .collect(),
        }
    }
}

impl Figures {
    /// The figure for a kind.
    pub fn get(&self, kind: LinkKind) -> Figure {
        self.table
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(kind.default_figure(), |(_, f)| *f)
    }

    /// Applies one `KEY=GBPS` or `KEY=GBPS,US` override.
    pub fn set(&mut self, spec: &str) -> Result<(), String> {
        let keys = || {
            LinkKind::ALL
                .iter()
                .map(|k| k.key())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (key, value) = spec
            .split_once('=')
            .ok_or_else(|| format!("`{spec}` is not KEY=GBPS or KEY=GBPS,US"))?;
        let kind = LinkKind::from_key(key.trim())
            .ok_or_else(|| format!("`{key}` is not a link kind; the kinds are {}", keys()))?;
        let mut figure = self.get(kind);
        let (gb, us) = match value.split_once(',') {
            Some((gb, us)) => (gb, Some(us)),
            None => (value, None),
        };
        figure.gbytes = bandwidth(gb)?;
        if let Some(us) = us {
            figure.latency_us = match us.trim().parse::<f64>() {
                Ok(v) if LATENCY.accepts(v) => v,
                _ => {
                    return Err(format!(
                        "`{us}` is not a latency in µs ({})",
                        LATENCY.range()
                    ))
                }
            };
        }
        for entry in &mut self.table {
            if entry.0 == kind {
                entry.1 = figure;
            }
        }
        Ok(())
    }
}

/// A bandwidth in GB/s, held to [`GBYTES`] so that every link an import writes with it is in
/// the topology language's range and the imported file always loads.
fn bandwidth(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (GBYTES.0..=GBYTES.1).contains(&v) => Ok(v),
        _ => Err(format!(
            "`{text}` is not a bandwidth in GB/s (between {:e} and {:e} GB/s per link)",
            GBYTES.0, GBYTES.1
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::build::BANDWIDTH;

    #[test]
    fn overrides_replace_one_figure_and_refuse_nonsense() {
        let mut f = Figures::default();
        f.set("nvlink3=20").expect("a valid override");
        assert_eq!(f.get(LinkKind::NvLink3).gbytes, 20.0);
        assert_eq!(f.get(LinkKind::NvLink3).latency_us, 0.7);
        f.set("pcie4=30,2.5").expect("a valid override");
        assert_eq!(
            f.get(LinkKind::Pcie4),
            Figure {
                gbytes: 30.0,
                latency_us: 2.5
            }
        );
        assert_eq!(f.get(LinkKind::NvLink2).gbytes, 25.0);
        assert!(f
            .set("nvlink9=1")
            .expect_err("no such kind")
            .contains("not a link kind"));
        assert!(f.set("nvlink3=-1").is_err());
        assert!(f.set("nvlink3").is_err());
        assert!(f.set("nvlink3=1,x").is_err());
        // Subnormal and absurd figures are refused here, not by the imported file's load.
        assert!(f
            .set("nvlink3=1e-320")
            .expect_err("subnormal")
            .contains("between 1e-5 and 1e6 GB/s"));
        assert!(f.set("nvlink3=1e7").is_err());
        assert!(f.set("nvlink3=20,1e-320").is_err());
        assert!(f.set("nvlink3=20,1e300").is_err());
        assert!(f.set("nvlink3=20,0").is_ok());
    }

    #[test]
    fn every_link_an_import_writes_is_in_the_languages_range() {
        let narrowest = GBYTES.0 * 8.0 * f64::from(PCIE_WIDTHS[0]) / 16.0;
        let widest =
            GBYTES.1 * 8.0 * f64::from(MAX_BOND.max(PCIE_WIDTHS[PCIE_WIDTHS.len() - 1] / 16));
        assert!(BANDWIDTH.accepts(narrowest), "{narrowest}");
        assert!(BANDWIDTH.accepts(widest), "{widest}");
        assert!(LinkKind::ALL
            .iter()
            .all(|k| (GBYTES.0..=GBYTES.1).contains(&k.default_figure().gbytes)));
        assert!(LinkKind::ALL
            .iter()
            .filter_map(|k| k.links_per_gpu())
            .all(|n| n <= MAX_BOND));
    }
}
