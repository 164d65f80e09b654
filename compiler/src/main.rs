//! `topoc`: the command line. See `topoc --help`.

mod cli;

use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(message) => {
            // Messages quote names and paths from users: no control character reaches the
            // terminal raw, except the colours of diagnostics when stderr is a terminal.
            if std::io::stderr().is_terminal() {
                eprintln!("{}", topoc::visible::coloured_message(&message));
            } else {
                eprintln!("{}", topoc::visible::message(&message));
            }
            ExitCode::FAILURE
        }
    }
}

/// Ends the process quietly when its output goes to a reader that stops early (`topoc
/// simulate … | head`), as Unix tools do. Rust ignores SIGPIPE, so without this the first
/// write after the reader leaves panics with "failed printing to stdout". Files are never at
/// risk: they are written whole to a temporary file and renamed.
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any other thread exists; restoring the
    // default action of a signal has no other effect on the process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
