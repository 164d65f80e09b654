//! `topoc check`: parse, diagnose, summarise the machine and the rings each method finds.

use super::{read, report_error};
use std::path::Path;
use std::process::ExitCode;
use topoc::lower::Method;
use topoc::machine::summary;
use topoc::visible;

pub fn check(path: &Path) -> Result<ExitCode, String> {
    let text = read(path)?;
    let loaded = topoc::load(&text).map_err(|e| report_error(path, &text, &e))?;
    let machine = &loaded.machine;
    println!("machine `{}`", visible::line(&machine.name));
    print!("{}", summary::summarize(machine));
    print!("{}", visible::message(&summary::extras(machine)));
    for method in Method::ALL {
        match method.applies(machine) {
            Ok(embedding) => {
                println!("  {method}: {}", visible::message(&embedding.summary));
                for part in &embedding.parts {
                    println!("    {}", abbreviate(part));
                }
            }
            Err(e) => println!(
                "  {method}: does not apply: {}",
                visible::message(&e.to_string())
            ),
        }
    }
    // Compile every phase too, so that `check` reports problems `compile` would.
    topoc::compile(&loaded, &topoc::Options::default())
        .map_err(|e| report_error(path, &text, &e))?;
    println!("{}: ok", visible::line(&path.display().to_string()));
    Ok(ExitCode::SUCCESS)
}

/// Keeps long ring descriptions to one screen line, control characters in names shown as
/// text.
fn abbreviate(s: &str) -> String {
    let s = &visible::line(s);
    const MAX: usize = 160;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head} …")
    }
}
