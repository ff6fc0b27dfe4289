//! The client against the kernel: its replies recorded as bytes and decoded
//! (`codec_fixtures`), and this machine's kernel in a throwaway network
//! namespace (`live_netns`, root only).
//! One test binary, a module per subject (a binary per file is a link
//! each).

mod codec_fixtures;
mod live_netns;
