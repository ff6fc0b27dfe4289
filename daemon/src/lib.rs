//! The pptune daemon (being built).
pub mod kernel;
