//! Placeholder: the cost model is being written.
