//! The command line: every subcommand's contract, `verify`, `replay`, coexistence with other ring owners, kernel names as bytes, every knob of the table in what shows it.
//! One test binary, a module per subject (a binary per file linked all of
//! `pptune` once each).

mod cli;
mod coexist;
mod kernel_names;
mod knob_table;
mod replay;
mod verify;
