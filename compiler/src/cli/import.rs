//! `topoc import`: a topology file from NCCL's topology dump or `nvidia-smi topo -m`.

use super::{output_file, read, write_atomic, write_stdout};
use clap::ValueEnum;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use topoc::import::{self, nvidia_smi::Generations, Figures, LinkKind};

/// The formats `topoc import` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// NCCL's topology dump (written with NCCL_TOPO_DUMP_FILE=FILE), or RCCL's.
    NcclXml,
    /// The matrix printed by `nvidia-smi topo -m`.
    NvidiaSmi,
}

/// Arguments of `topoc import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The input's format.
    #[arg(value_enum)]
    format: Format,
    /// The file to read.
    file: PathBuf,
    /// Where to write the topology file (standard output when absent or `-`).
    /// Written whole or not at all.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// The topology's name (default: the input file's name without its extension).
    #[arg(long)]
    name: Option<String>,
    /// Replace a link figure, per link and direction: KEY=GBPS or KEY=GBPS,US (GB/s, µs).
    /// Keys: nvlink1 … nvlink5, xgmi2 … xgmi4, pcie3 … pcie5, smp, net. Repeatable; the
    /// defaults are in docs/import.md.
    #[arg(long = "figure", value_name = "KEY=GBPS[,US]")]
    figures: Vec<String>,
    /// For nvidia-smi: the NVLink generation of its NV# bonds (nvlink1 … nvlink5).
    #[arg(long, default_value = "nvlink3")]
    nvlink: String,
    /// For nvidia-smi: the PCIe generation (pcie3, pcie4, pcie5).
    #[arg(long, default_value = "pcie4")]
    pcie: String,
}

/// Runs `topoc import`.
pub fn import(args: &ImportArgs) -> Result<ExitCode, String> {
    let mut figures = Figures::default();
    for spec in &args.figures {
        figures
            .set(spec)
            .map_err(|e| format!("error: --figure {spec}: {e}"))?;
    }
    let kind = |text: &str, flag: &str, prefix: &str| {
        LinkKind::from_key(text)
            .filter(|k| k.key().starts_with(prefix))
            .ok_or_else(|| format!("error: --{flag} {text}: expected {prefix}1 … (see --help)"))
    };
    let generations = Generations {
        nvlink: kind(&args.nvlink, "nvlink", "nvlink")?,
        pcie: kind(&args.pcie, "pcie", "pcie")?,
    };
    let output = output_file(&[&args.file], args.output.as_deref())?;
    let text = read(&args.file)?;
    let name = args.name.clone().unwrap_or_else(|| stem(&args.file));
    let shown = args.file.display().to_string();
    let (format, machine) = match args.format {
        Format::NcclXml => (
            "NCCL topology dump",
            import::nccl_xml::read(&text, &name, &shown),
        ),
        Format::NvidiaSmi => (
            "nvidia-smi topo -m",
            import::nvidia_smi::read(&text, &name, &shown, generations),
        ),
    };
    let machine = machine.map_err(|problems| {
        let color = std::io::stderr().is_terminal();
        let mut out = topoc::diag::render(&shown, &text, &problems, color);
        out.push_str(&format!(
            "error: {shown} is not a readable {format} ({} problem(s)); nothing was written",
            problems.len()
        ));
        out
    })?;
    let ron = machine.to_ron(&figures);
    // The file must be one `topoc check` accepts; a failure here is a bug in the import.
    topoc::compile::load(&ron).map_err(|e| {
        format!("error: the topology imported from {shown} does not load ({e}); please report this")
    })?;
    match output {
        Some(path) => {
            write_atomic(path, &ron)?;
            let line = format!(
                "topology `{}` ({} GPUs, {} switches, {} links) written to {}",
                machine.name,
                machine.gpus.len(),
                machine.switches.len(),
                machine.links.len(),
                path.display()
            );
            eprintln!("{}", topoc::visible::line(&line));
        }
        None => write_stdout(|w| w.write_all(ron.as_bytes()))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn stem(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || "imported".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    name.split('.').next().unwrap_or("imported").to_string()
}
