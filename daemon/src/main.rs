//! `pptune`: parse the command line, set up logging and a tokio runtime,
//! dispatch. Everything else lives in the library (`pptune::*`).

use std::process::ExitCode;

use clap::Parser;
use pptune::cmd;
use pptune::cmd::cli::{Cli, Command};

/// Gives SIGPIPE back its default action, as a C program has it: a one-shot
/// command whose reader went away (`pptune status | head -1`) ends quietly,
/// killed by SIGPIPE like `cat` would be, instead of panicking on EPIPE.
/// The daemon keeps Rust's default (ignored, EPIPE returned): a scraper or
/// control client that hangs up must not kill it.
#[allow(unsafe_code)]
fn default_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists;
    // SIG_DFL is a valid disposition and no handler code is involved.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Gives glibc's free heap back to the kernel (`pptune::heap`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_heap() {
    // SAFETY: malloc_trim takes no pointer; it walks glibc's own arenas
    // under their locks and madvises their free pages away.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// One malloc arena for every thread, so a trim reaches all free memory
/// (`pptune::heap`), set before any thread exists.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn one_arena() {
    // SAFETY: mallopt takes two ints and changes a glibc setting; called
    // first thing in main, before any other thread allocates.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// The system allocator, counting the bytes in use: what
/// `pptune::heap` compares the resident heap with. One relaxed
/// atomic add or subtract per call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    pub struct Counting;

    static IN_USE: AtomicUsize = AtomicUsize::new(0);

    /// Bytes allocated and not yet freed.
    pub fn in_use() -> usize {
        IN_USE.load(Relaxed)
    }

    // SAFETY: every call is passed to `System` unchanged (its contract is
    // the caller's); the counter only observes sizes of calls that
    // succeeded.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract, forwarded.
            let p = unsafe { System.alloc(layout) };
            if !p.is_null() {
                IN_USE.fetch_add(layout.size(), Relaxed);
            }
            p
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            // SAFETY: the caller's contract, forwarded.
            let p = unsafe { System.alloc_zeroed(layout) };
            if !p.is_null() {
                IN_USE.fetch_add(layout.size(), Relaxed);
            }
            p
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.dealloc(ptr, layout) };
            IN_USE.fetch_sub(layout.size(), Relaxed);
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // SAFETY: the caller's contract, forwarded.
            let p = unsafe { System.realloc(ptr, layout, new_size) };
            if !p.is_null() {
                if new_size >= layout.size() {
                    IN_USE.fetch_add(new_size - layout.size(), Relaxed);
                } else {
                    IN_USE.fetch_sub(layout.size() - new_size, Relaxed);
                }
            }
            p
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: counting::Counting = counting::Counting;

fn main() -> ExitCode {
    // SIGHUP's default action ends the process: one that arrived before
    // `run` installed its reload handler killed the daemon (exit 129, which
    // `Restart=on-failure` does not restart). Held pending from the first
    // instruction; `run` lets it through once the handler is in place (a
    // reload), the other commands at once (their default: a hangup ends
    // them).
    pptune::publish::notify::hold_sighup(true);
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    one_arena();
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pptune::heap::install(pptune::heap::Hooks {
        trim: trim_heap,
        in_use: counting::in_use,
    });
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Run(_)) {
        pptune::publish::notify::hold_sighup(false);
        default_sigpipe();
    }
    let config = match cli.config_path() {
        Ok(c) => c.map(std::path::Path::to_owned),
        Err(msg) => {
            pptune::say_err!("pptune: {msg}");
            return ExitCode::from(2);
        }
    };
    // The daemon logs; the one-shot commands print for a person.
    if let Command::Run(run) = &cli.command {
        match pptune::publish::logging::filter_from_env() {
            Ok(filter) => pptune::publish::logging::init(run.log_format, filter),
            Err(e) => {
                pptune::say_err!("pptune: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            pptune::say_err!("pptune: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = config.as_deref();
    let result = rt.block_on(cmd::dispatch(cli.command, config));
    // A policy load stuck in its blocking thread (a wedged file system)
    // cannot be joined: waiting for it would turn SIGTERM into the stop
    // timeout's SIGKILL. Everything the daemon keeps is written by now.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    match result {
        Ok(code) => code,
        Err(e) => {
            // Display with the cause chain, not Debug.
            pptune::say_err!("pptune: {e:#}");
            ExitCode::FAILURE
        }
    }
}
