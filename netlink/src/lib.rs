//! Kernel interface (being built).
