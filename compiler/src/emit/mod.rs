//! Back ends that write a verified schedule in a format other tools run.
//!
//! Every emitter takes a [`schedule_ir::VerifiedSchedule`]: only the verifier makes one, so
//! nothing unproved is ever written. An emitter either returns the whole text or an error that
//! says why the schedule cannot be expressed in its format; it never writes half a file.
//!
//! | module     | format | what it exports |
//! |------------|--------|-----------------|
//! | [`chakra`] | Chakra execution traces for ASTRA-sim | one allreduce, reduce-scatter or allgather phase, a trace per rank and size |
//! | [`msccl`]  | MSCCL algorithm XML (msccl-executor-nccl, RCCL, microsoft/msccl) | one allreduce, reduce-scatter or allgather phase |
//! | [`mscclpp`] | MSCCL++ execution-plan JSON (release v0.7.0) | one allreduce, reduce-scatter or allgather phase |

pub mod chakra;
mod layout;
pub mod msccl;
pub mod mscclpp;
