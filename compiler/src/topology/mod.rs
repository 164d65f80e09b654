//! The topology language: RON files declaring a machine and its BSP program.
//!
//! [`parse()`] turns text into [`ast::TopologyFile`]; [`spans`] finds where values are in the
//! text so that later checks can point at them.

pub mod ast;
pub mod kinds;
pub mod parse;
pub mod spans;

pub use parse::parse;
