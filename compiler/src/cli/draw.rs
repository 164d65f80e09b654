//! `topoc draw`: the machine, its embedding or one step's link use, as DOT or SVG.

use super::{
    is_topology, load_verified, output_file, read, report_error, write_atomic, write_stdout,
};
use clap::ValueEnum;
use std::path::Path;
use std::process::ExitCode;
use topoc::draw::{self, layout::LayoutKind, Request, Scene};

/// Picture formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DrawFormat {
    /// Graphviz DOT, with topoc's node positions pinned.
    Dot,
    /// SVG drawn by topoc itself (no Graphviz needed).
    Svg,
}

/// Layouts on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Ladder for ladders, circle for rings, layered with switches, stress otherwise.
    Auto,
    /// Nodes on a circle, in ring order.
    Circle,
    /// Pairs as rows (ladders only).
    Ladder,
    /// Breadth-first levels from the best-connected switch.
    Layered,
    /// Page distances follow hop counts.
    Stress,
}

impl From<LayoutArg> for LayoutKind {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::Auto => LayoutKind::Auto,
            LayoutArg::Circle => LayoutKind::Circle,
            LayoutArg::Ladder => LayoutKind::Ladder,
            LayoutArg::Layered => LayoutKind::Layered,
            LayoutArg::Stress => LayoutKind::Stress,
        }
    }
}

pub fn draw(
    path: &Path,
    request: &Request,
    format: Option<DrawFormat>,
    layout: LayoutArg,
    output: Option<&Path>,
    budget: &topoc::limits::Budget,
) -> Result<ExitCode, String> {
    let output = output_file(&[path], output)?;
    let text = read(path)?;
    let fail = |e: draw::DrawError| format!("error: {}: {e}", path.display());
    let scene = if is_topology(&text) {
        let options = topoc::Options {
            budget: *budget,
            ..topoc::Options::default()
        };
        let compiled =
            topoc::compile_source(&text, &options).map_err(|e| report_error(path, &text, &e))?;
        Scene::from_compiled(&compiled, request).map_err(fail)?
    } else {
        Scene::from_schedule(&load_verified(path)?, request).map_err(fail)?
    };
    let format = format.unwrap_or_else(|| {
        if output.is_some_and(|o| o.extension().is_some_and(|e| e.eq_ignore_ascii_case("svg"))) {
            DrawFormat::Svg
        } else {
            DrawFormat::Dot
        }
    });
    let wanted = LayoutKind::from(layout);
    let placed = draw::layout::compute(&scene, wanted);
    if wanted != LayoutKind::Auto && placed.kind != wanted {
        eprintln!(
            "note: the {} layout does not apply to this machine; using {}",
            name(wanted),
            name(placed.kind)
        );
    }
    let out = match format {
        DrawFormat::Dot => draw::dot::render(&scene, &placed),
        DrawFormat::Svg => draw::svg::render(&scene, &placed),
    };
    match output {
        Some(o) => {
            write_atomic(o, &out)?;
            let line = format!("{} written to {}", scene.subtitle, o.display());
            eprintln!("{}", topoc::visible::line(&line));
        }
        None => write_stdout(|w| w.write_all(out.as_bytes()))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn name(kind: LayoutKind) -> &'static str {
    match kind {
        LayoutKind::Auto => "auto",
        LayoutKind::Circle => "circle",
        LayoutKind::Ladder => "ladder",
        LayoutKind::Layered => "layered",
        LayoutKind::Stress => "stress",
    }
}
