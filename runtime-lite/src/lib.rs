//! Placeholder: the runtime is being written.
