//! `topoc check`: parse, diagnose, summarise the machine and the rings each method finds.
//! Every method is admitted within the memory budget before it searches or lowers, as under
//! `topoc compile`, so `check` refuses what `compile` refuses, as fast.

use super::{read, report_error};
use std::path::Path;
use std::process::ExitCode;
use topoc::embed::EmbedError;
use topoc::limits::Budget;
use topoc::lower::Method;
use topoc::machine::summary;

pub fn check(path: &Path, budget: &Budget) -> Result<ExitCode, String> {
    let text = read(path)?;
    let loaded = topoc::load(&text).map_err(|e| report_error(path, &text, &e))?;
    let machine = &loaded.machine;
    println!("machine `{}`", machine.name);
    print!("{}", summary::summarize(machine));
    print!("{}", summary::extras(machine));
    // Compile every phase first, so that `check` refuses what `compile` refuses, as fast,
    // before it asks every method what it would run.
    let options = topoc::Options {
        budget: *budget,
        ..topoc::Options::default()
    };
    topoc::compile(&loaded, &options).map_err(|e| report_error(path, &text, &e))?;
    for method in Method::ALL {
        match method.applies(machine, budget) {
            Ok(embedding) => {
                println!("  {method}: {}", embedding.summary);
                for part in &embedding.parts {
                    println!("    {}", abbreviate(part));
                }
            }
            Err(EmbedError::OverBudget(why)) => println!("  {method}: refused: the schedule {why}"),
            Err(e) => println!("  {method}: does not apply: {e}"),
        }
    }
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
