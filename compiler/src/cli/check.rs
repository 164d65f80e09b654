//! `topoc check`: parse, diagnose, summarise the machine and the rings each method finds.

use super::{read, report_error};
use std::path::Path;
use std::process::ExitCode;
use topoc::lower::{Knobs, Method};
use topoc::machine::summary;

pub fn check(path: &Path) -> Result<ExitCode, String> {
    let text = read(path)?;
    let (_, machine) = topoc::compile::load(&text).map_err(|e| report_error(path, &text, &e))?;
    println!("machine `{}`", machine.name);
    print!("{}", summary::summarize(&machine));
    print!("{}", summary::extras(&machine));
    for method in Method::ALL {
        if method == Method::InNetwork {
            match topoc::lower::in_network::applies(&machine) {
                Ok(how) => println!("  {method}: {how}"),
                Err(e) => println!("  {method}: does not apply: {e}"),
            }
            continue;
        }
        if method == Method::Tree {
            match topoc::lower::tree::stages_of(&machine) {
                Ok(stages) => {
                    println!("  {method}: {} stage(s), level by level", stages.len());
                    for s in stages {
                        println!("    {}", abbreviate(&s));
                    }
                }
                Err(e) => println!("  {method}: does not apply: {e}"),
            }
            continue;
        }
        if method == Method::Trees {
            match topoc::embed::trees::pack(&machine, schedule_ir::Collective::AllReduce) {
                Ok(packing) => {
                    println!(
                        "  {method}: {} spanning tree(s) for allreduce, proved",
                        packing.trees.len()
                    );
                    for (i, (t, x)) in packing.trees.iter().zip(&packing.shares).enumerate() {
                        let tree = format!("{:.1}% {}", 100.0 * x, t.describe(&machine));
                        println!("    tree {}: {}", i + 1, abbreviate(&tree));
                    }
                }
                Err(e) => println!("  {method}: does not apply: {e}"),
            }
            continue;
        }
        if matches!(
            method,
            Method::RotatedHd | Method::CubePlanes | Method::HalvingDoubling
        ) {
            match method.lower(&machine, &probe(), &Knobs::default()) {
                Ok(l) => println!("  {method}: applies, {} steps", l.phase.steps),
                Err(e) => println!("  {method}: does not apply: {e}"),
            }
            continue;
        }
        match method.embed(&machine) {
            Ok(rings) => {
                let count = rings.len();
                let plural = if count == 1 { "" } else { "s" };
                if rings.iter().any(|r| r.is_routed()) {
                    println!(
                        "  {method}: {count} ring{plural} through the switches, each hop routed, proved"
                    );
                } else {
                    println!("  {method}: {count} link-disjoint Hamiltonian ring{plural}, proved");
                }
                for (i, r) in rings.iter().enumerate() {
                    println!("    ring {}: {}", i + 1, abbreviate(&r.describe(&machine)));
                }
            }
            Err(e) => println!("  {method}: does not apply: {e}"),
        }
    }
    // Compile every phase too, so that `check` reports problems `compile` would.
    topoc::compile(&text, &topoc::Options::default()).map_err(|e| report_error(path, &text, &e))?;
    println!("{}: ok", path.display());
    Ok(ExitCode::SUCCESS)
}

/// A small allreduce to see whether a structured method applies.
fn probe() -> topoc::lower::PhaseSpec {
    topoc::lower::PhaseSpec {
        name: "probe".to_string(),
        collective: schedule_ir::Collective::AllReduce,
        op: schedule_ir::ReduceOp::Sum,
        dtype: schedule_ir::DType::F32,
        elements: 1 << 20,
    }
}

/// Keeps long ring descriptions to one screen line.
fn abbreviate(s: &str) -> String {
    const MAX: usize = 160;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head} …")
    }
}
