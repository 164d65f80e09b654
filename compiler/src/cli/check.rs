//! `topoc check`: parse, diagnose, summarise.

use super::{read, report_error};
use std::path::Path;
use std::process::ExitCode;
use topoc::lower::Method;

pub fn check(path: &Path) -> Result<ExitCode, String> {
    let text = read(path)?;
    let (_, machine) = topoc::compile::load(&text).map_err(|e| report_error(path, &text, &e))?;
    let compute = machine.compute_nodes();
    let degrees: Vec<usize> = compute.iter().map(|&n| machine.links_at(n).len()).collect();
    println!("machine `{}`", machine.name);
    println!(
        "  {} nodes ({} compute), {} links, degree {}..{}",
        machine.node_count(),
        compute.len(),
        machine.link_count(),
        degrees.iter().min().unwrap_or(&0),
        degrees.iter().max().unwrap_or(&0),
    );
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
        match method.embed(&machine) {
            Ok(rings) => {
                println!(
                    "  {method}: {} link-disjoint Hamiltonian ring(s), proved",
                    rings.len()
                );
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
