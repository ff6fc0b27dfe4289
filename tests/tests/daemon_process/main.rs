//! The real `pptune` binary as a process: start-up, control socket, files, one instance per namespace, signals, load, crash safety of the recording.
//! One test binary, a module per subject (a binary per file linked all of
//! `pptune` once each).

mod daemon_binary;
mod daemon_control;
mod daemon_control_half_close;
mod daemon_files;
mod daemon_instance;
mod daemon_lifecycle;
mod recording_sigkill;
