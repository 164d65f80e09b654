//! Removes a half-written output file when the process is interrupted.
//!
//! `-o` writes a temporary file beside the target and renames it over the target; a
//! temporary file is removed by its destructor, which never runs when SIGINT or SIGTERM
//! ends the process. So the file being written is recorded here, and a signal handler
//! unlinks it (`unlink` is async-signal-safe), then re-raises the signal with its default
//! action so the process still ends as the signal says.

#[cfg(unix)]
mod imp {
    use std::ffi::CString;
    use std::path::Path;
    use std::ptr;
    use std::sync::atomic::{AtomicPtr, Ordering};
    use std::sync::Once;

    /// The temporary file being written, as a C string, or null. A recorded path is never
    /// freed (one small allocation per output file), so the handler can never read freed
    /// memory, whenever it runs.
    static PENDING: AtomicPtr<libc::c_char> = AtomicPtr::new(ptr::null_mut());

    const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

    extern "C" fn on_signal(signal: libc::c_int) {
        let path = PENDING.swap(ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: `path` is null or a NUL-terminated string that is never freed; `unlink`,
        // `signal` and `raise` are async-signal-safe.
        unsafe {
            if !path.is_null() {
                libc::unlink(path);
            }
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }

    /// Records `path` as the file to remove if the process is interrupted.
    pub fn pending(path: &Path) {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            for signal in SIGNALS {
                // SAFETY: installs a handler that only calls async-signal-safe functions.
                unsafe {
                    libc::signal(signal, on_signal as *const () as libc::sighandler_t);
                }
            }
        });
        use std::os::unix::ffi::OsStrExt;
        if let Ok(c) = CString::new(path.as_os_str().as_bytes()) {
            PENDING.store(c.into_raw(), Ordering::SeqCst);
        }
    }

    /// The recorded file is gone (renamed over the target, or removed): forget it.
    pub fn done() {
        PENDING.store(ptr::null_mut(), Ordering::SeqCst);
    }
}

#[cfg(not(unix))]
mod imp {
    /// Signals are not handled off Unix.
    pub fn pending(_: &std::path::Path) {}
    /// Signals are not handled off Unix.
    pub fn done() {}
}

pub use imp::{done, pending};
