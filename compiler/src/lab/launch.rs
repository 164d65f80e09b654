//! Starts one process per compute node inside its namespace and drives them over their
//! standard input and output: wait until every one says a word, tell every one to go, read
//! what each reports. Every wait has a deadline; on any failure every process is killed and
//! the error quotes what the failing one wrote to standard error.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// One process to start: a name for messages, the namespace, the program and its arguments.
pub struct Spec {
    pub name: String,
    pub namespace: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Scheduling priority (`nice -n`), 0 for the launcher's own.
    pub nice: i32,
}

/// Running processes, killed when dropped if they have not finished.
pub struct Procs {
    names: Vec<String>,
    children: Vec<Child>,
    stdins: Vec<Option<ChildStdin>>,
    lines: Receiver<(usize, Option<String>)>,
    /// Lines a process printed ahead of the call that reads them.
    backlog: Vec<VecDeque<String>>,
    stderr: Vec<PathBuf>,
}

/// Whether to echo every line the processes print (`TOPOC_LAB_DEBUG` set).
fn debug() -> bool {
    std::env::var_os("TOPOC_LAB_DEBUG").is_some()
}

impl Procs {
    /// Starts every process of `specs`, their standard error going to files in `dir`.
    pub fn spawn(specs: &[Spec], dir: &Path) -> Result<Procs, String> {
        Self::spawn_with_env(specs, dir, &[])
    }

    /// [`Procs::spawn`] with extra environment variables. A spec without a namespace runs
    /// where the launcher runs.
    pub fn spawn_with_env(
        specs: &[Spec],
        dir: &Path,
        env: &[(&str, &str)],
    ) -> Result<Procs, String> {
        let (tx, lines) = channel();
        let mut procs = Procs {
            names: Vec::new(),
            children: Vec::new(),
            stdins: Vec::new(),
            lines,
            backlog: Vec::new(),
            stderr: Vec::new(),
        };
        for (i, spec) in specs.iter().enumerate() {
            let err_path = dir.join(format!("{}.stderr", spec.name.replace(['/', ' '], "_")));
            let err = std::fs::File::create(&err_path)
                .map_err(|e| format!("cannot create {}: {e}", err_path.display()))?;
            let mut command = if spec.namespace.is_empty() {
                Command::new("nice")
            } else {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", &spec.namespace, "nice"]);
                c
            };
            command
                .args(["-n", &spec.nice.to_string()])
                .arg(&spec.program);
            let mut child = command
                .args(&spec.args)
                .envs(env.iter().copied())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(err)
                .spawn()
                .map_err(|e| format!("cannot start {} in {}: {e}", spec.name, spec.namespace))?;
            let stdout = child.stdout.take();
            procs.stdins.push(child.stdin.take());
            procs.children.push(child);
            procs.names.push(spec.name.clone());
            procs.backlog.push(VecDeque::new());
            procs.stderr.push(err_path);
            let tx = tx.clone();
            if let Some(stdout) = stdout {
                std::thread::spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        if tx.send((i, Some(line))).is_err() {
                            return;
                        }
                    }
                    let _ = tx.send((i, None));
                });
            }
        }
        Ok(procs)
    }

    /// Waits until every process has printed its next line, which must start with `word`,
    /// and returns the rest of each one's line, by process. (A process that is done early
    /// may already have printed its following lines: they wait for the next call.)
    pub fn expect(&mut self, word: &str, timeout: Duration) -> Result<Vec<String>, String> {
        let deadline = Instant::now() + timeout;
        let mut got: Vec<Option<String>> = vec![None; self.names.len()];
        for (i, slot) in got.iter_mut().enumerate() {
            if let Some(line) = self.backlog.get_mut(i).and_then(VecDeque::pop_front) {
                *slot = Some(line);
            }
        }
        loop {
            let wrong = got.iter().enumerate().find_map(|(i, l)| {
                l.as_ref()
                    .filter(|l| !l.starts_with(word))
                    .map(|l| (i, l.clone()))
            });
            if let Some((i, line)) = wrong {
                let what = format!("said `{line}` where `{word}` was due");
                return Err(self.failure(i, &what));
            }
            if got.iter().all(Option::is_some) {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((i, Some(line))) => {
                    if debug() {
                        eprintln!("[{}] {line}", self.names[i]);
                    }
                    match got.get_mut(i) {
                        Some(slot @ None) => *slot = Some(line),
                        Some(Some(_)) => self.backlog[i].push_back(line),
                        None => {}
                    }
                }
                Ok((i, None)) => {
                    if got.get(i).is_some_and(Option::is_none) {
                        return Err(self.failure(i, &format!("ended before saying `{word}`")));
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let i = got.iter().position(Option::is_none).unwrap_or(0);
                    return Err(
                        self.failure(i, &format!("did not say `{word}` within {timeout:.0?}"))
                    );
                }
            }
        }
        Ok(got
            .into_iter()
            .map(|l| l.unwrap_or_default()[word.len()..].trim().to_string())
            .collect())
    }

    /// Writes `line` to every process.
    pub fn tell(&mut self, line: &str) -> Result<(), String> {
        for i in 0..self.stdins.len() {
            let sent = self.stdins[i]
                .as_mut()
                .map(|s| writeln!(s, "{line}").and_then(|()| s.flush()));
            if !matches!(sent, Some(Ok(()))) {
                return Err(self.failure(i, "stopped reading its input"));
            }
        }
        Ok(())
    }

    /// Waits for every process to exit (within `timeout`), failing if one fails.
    pub fn finish(mut self, timeout: Duration) -> Result<(), String> {
        self.stdins.clear();
        let deadline = Instant::now() + timeout;
        for i in 0..self.children.len() {
            loop {
                match self.children[i].try_wait() {
                    Ok(Some(status)) if status.success() => break,
                    Ok(Some(status)) => {
                        return Err(self.failure(i, &format!("exited with {status}")))
                    }
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Ok(None) => return Err(self.failure(i, "did not exit")),
                    Err(e) => return Err(self.failure(i, &e.to_string())),
                }
            }
        }
        Ok(())
    }

    /// Asks every process to end (SIGTERM, which lets `mpiexec` end its ranks), waits up to
    /// `grace` for them, then kills what is left.
    pub fn terminate(mut self, grace: Duration) {
        self.stdins.clear();
        for child in &self.children {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: plain system call on the id of a child this launcher started and
                // has not yet reaped, so the id cannot have been reused.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline
            && self
                .children
                .iter_mut()
                .any(|c| matches!(c.try_wait(), Ok(None)))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
    }

    /// Kills every process and describes the failure of process `i` with its standard error.
    fn failure(&mut self, i: usize, what: &str) -> String {
        self.kill();
        let stderr = self
            .stderr
            .get(i)
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        let name = self.names.get(i).cloned().unwrap_or_default();
        let mut out = format!("{name} {what}");
        if !stderr.trim().is_empty() {
            out.push_str(&format!("; it reported: {}", stderr.trim()));
        }
        out
    }

    fn kill(&mut self) {
        self.stdins.clear();
        for child in &mut self.children {
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        self.kill();
    }
}
