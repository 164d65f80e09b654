//! topoc.
