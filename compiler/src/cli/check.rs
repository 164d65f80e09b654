//! `topoc check`: parse, diagnose, summarise the machine and the rings each method finds.
//! Every method is admitted within the memory budget before it searches or lowers, as under
//! `topoc compile`, so `check` refuses what `compile` refuses, as fast.

use super::{read, report_error};
use std::path::Path;
use std::process::ExitCode;
use topoc::compile::Verdict;
use topoc::embed::EmbedError;
use topoc::limits::Budget;
use topoc::lower::Method;
use topoc::machine::summary;
use topoc::simulate::format_seconds;
use topoc::visible;

pub fn check(path: &Path, budget: &Budget) -> Result<ExitCode, String> {
    let text = read(path)?;
    let loaded = topoc::load(&text).map_err(|e| report_error(path, &text, &e))?;
    let machine = &loaded.machine;
    println!("machine `{}`", visible::line(&machine.name));
    print!("{}", summary::summarize(machine));
    print!("{}", visible::message(&summary::extras(machine)));
    // Compile every phase first, so that `check` refuses what `compile` refuses, as fast,
    // before it asks every method what it would run.
    let options = topoc::Options {
        budget: *budget,
        ..topoc::Options::default()
    };
    let compiled = topoc::compile(&loaded, &options).map_err(|e| report_error(path, &text, &e))?;
    for method in Method::ALL {
        match method.applies(machine, budget) {
            Ok(embedding) => {
                println!("  {method}: {}", visible::message(&embedding.summary));
                for part in &embedding.parts {
                    println!("    {}", abbreviate(part));
                }
            }
            Err(EmbedError::OverBudget(why)) => println!(
                "  {method}: refused: the schedule {}",
                visible::message(&why.to_string())
            ),
            Err(e) => println!(
                "  {method}: does not apply: {}",
                visible::message(&e.to_string())
            ),
        }
    }
    print_choices(&compiled);
    println!("{}: ok", visible::line(&path.display().to_string()));
    Ok(ExitCode::SUCCESS)
}

/// Which method each phase gets and why: under `auto` its estimate against the next best, then
/// the compile report's comparison of every method weighed, with the refusals.
fn print_choices(compiled: &topoc::Compiled) {
    println!("method per phase:");
    for note in &compiled.notes {
        if note.weighed.is_empty() {
            println!(
                "  phase `{}`: {}, named by the file ({})",
                visible::line(&note.phase),
                note.method,
                visible::message(&note.reason)
            );
            continue;
        }
        let mut priced = note.weighed.iter().filter_map(|w| match w.verdict {
            Verdict::Estimate(s) => Some((w.method, s)),
            _ => None,
        });
        let margin = match (priced.next(), priced.next()) {
            (Some((_, best)), Some((next, s))) if best == s => format!(
                "{}, tied with {next}; of equal estimates the first in the registry is taken",
                format_seconds(best)
            ),
            (Some((_, best)), Some((next, s))) => format!(
                "{}, {:.1}% below {next} at {}",
                format_seconds(best),
                100.0 * (1.0 - best / s),
                format_seconds(s)
            ),
            (Some((_, best)), None)
                if note
                    .weighed
                    .iter()
                    .any(|w| matches!(w.verdict, Verdict::Skipped(_))) =>
            {
                format!("{}, below every other method's floor", format_seconds(best))
            }
            (Some((_, best)), None) => {
                format!(
                    "{}, the only method that lowers it here",
                    format_seconds(best)
                )
            }
            _ => String::new(),
        };
        println!(
            "  phase `{}`: auto takes {} ({margin})",
            visible::line(&note.phase),
            note.method
        );
        println!("    {}", visible::message(&note.reason));
    }
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
