//! Progress on standard error while a compile runs long: which phase, which method is being
//! lowered, the verifier. Large machines take seconds to minutes per method, and a silent
//! terminal for that long looks like a hang.
//!
//! Off until [`enable`] is called, which the command line does only when standard error is a
//! terminal: tests, pipes and redirected output never see it, and the library's results do not
//! depend on it. A spinner with the elapsed time and what is being done; it is cleared when the
//! work ends ([`finish`]), so the compile report that follows stands alone.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::OnceLock;
use std::time::Duration;

/// The spinner, once enabled.
static SPINNER: OnceLock<ProgressBar> = OnceLock::new();

/// Shows progress on standard error from now on.
pub fn enable() {
    SPINNER.get_or_init(|| {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed}] {wide_msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    });
}

/// Says what is being done now; `what` is only evaluated when progress is shown.
pub fn doing(what: impl FnOnce() -> String) {
    if let Some(bar) = SPINNER.get() {
        bar.set_message(crate::visible::line(&what()).into_owned());
    }
}

/// Clears the spinner: the work it followed is done (or failed).
pub fn finish() {
    if let Some(bar) = SPINNER.get() {
        bar.finish_and_clear();
    }
}
