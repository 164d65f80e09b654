//! Schedule text → read → cost model → verify → (if it verifies) run on tiny buffers.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        topoc_fuzz::schedule(text);
    }
});
