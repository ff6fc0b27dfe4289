//! What `--help` and the man pages say beyond the options: each command's
//! examples and what its exit status means, in one table ([`manual`]).

/// A command's manual beyond its options: examples, and what its exit
/// status means. `pptune CMD --help` and the man page pptune-CMD(8) are
/// both written from it ([`after_help`],
/// tests/tests/packaging/packaging_manpage.rs).
#[derive(Debug, Clone, Copy)]
pub struct Manual {
    /// (command line, what it does).
    pub examples: Examples,
    /// (exit status, what it means for this command).
    pub exit: ExitStatus,
}

/// (command line, what it does), for [`Manual`].
pub type Examples = &'static [(&'static str, &'static str)];
/// (exit status, what it means), for [`Manual`].
pub type ExitStatus = &'static [(u8, &'static str)];

const FAILED: (u8, &str) = (
    1,
    "an error; the message says which (no netlink, no permission, an unreadable file)",
);
const USAGE: (u8, &str) = (
    2,
    "a usage error: an unknown option or value, `--config` where it is not read",
);
const INVALID: (u8, &str) = (
    78,
    "the policy is invalid (EX_CONFIG); every problem is printed with file:line:column",
);

/// Every command's [`Manual`], by the name it has on the command line.
const MANUALS: &[(&str, Manual)] = &[
    (
        "run",
        Manual {
            examples: &[
                (
                    "pptune run",
                    "Observe every interface with page pools under /etc/pptune/policy.yaml, or the embedded default policy when there is none; changes nothing until a policy enforces.",
                ),
                (
                    "pptune run --config /usr/share/doc/pptune/examples/enforce-rings.yaml",
                    "Tune RX rings as that example policy allows.",
                ),
                (
                    "pptune run --metrics-listen :9864 --web-config-file /etc/pptune/web.yml",
                    "Serve /metrics on every address, with the TLS and basic auth that web config file sets (pptune(8), METRICS).",
                ),
            ],
            exit: &[
                (
                    0,
                    "stopped by SIGTERM or SIGINT, after applying the policy's on_stop",
                ),
                (
                    1,
                    "an error at start or one it cannot run past: no netlink, the metrics address in use, another pptune holding the state lock",
                ),
                USAGE,
                (
                    78,
                    "the policy is invalid at start (EX_CONFIG); a reload that is invalid keeps the last good policy instead",
                ),
            ],
        },
    ),
    (
        "status",
        Manual {
            examples: &[
                (
                    "pptune status",
                    "Every interface with page pools: pools, queues, rings, channels and what the running daemon thinks of them.",
                ),
                (
                    "pptune status -i eth0 --json",
                    "One interface, as one JSON document for a script.",
                ),
            ],
            exit: &[
                (0, "printed"),
                (1, "an interface named with -i does not exist, or an error"),
                USAGE,
            ],
        },
    ),
    (
        "plan",
        Manual {
            examples: &[
                (
                    "pptune plan",
                    "What `run` would change now under /etc/pptune, and why.",
                ),
                (
                    "pptune plan --config new-policy.yaml --detailed-exitcode",
                    "Exit 2 when a candidate policy would change something on this host (for configuration management).",
                ),
            ],
            exit: &[
                (
                    0,
                    "printed; with --detailed-exitcode, run would hold everything",
                ),
                FAILED,
                (
                    2,
                    "a usage error; with --detailed-exitcode, run would change something",
                ),
                INVALID,
            ],
        },
    ),
    (
        "check",
        Manual {
            examples: &[
                (
                    "pptune check",
                    "Validate /etc/pptune/policy.yaml and its drop-ins together.",
                ),
                (
                    "pptune check new-policy.yaml",
                    "Validate one file before installing it.",
                ),
            ],
            exit: &[
                (0, "the policy is valid"),
                USAGE,
                (
                    78,
                    "the policy is invalid or cannot be read (EX_CONFIG); every problem is printed with file:line:column",
                ),
            ],
        },
    ),
    (
        "verify",
        Manual {
            examples: &[
                (
                    "pptune verify",
                    "Do the rings and channels pptune set still hold?",
                ),
                (
                    "pptune verify -i eth0 --json",
                    "The same for one interface, for a compliance check.",
                ),
            ],
            exit: &[
                (
                    0,
                    "every knob pptune set holds its value, or pptune set nothing it still owns",
                ),
                FAILED,
                (
                    2,
                    "a knob pptune set differs (each is listed), or a usage error",
                ),
            ],
        },
    ),
    (
        "export",
        Manual {
            examples: &[
                (
                    "pptune export --format systemd-link",
                    "The values pptune set, as .link files for /etc/systemd/network/, to make them permanent.",
                ),
                (
                    "pptune export --format tuned -i eth0",
                    "One interface's values as a TuneD profile fragment.",
                ),
            ],
            exit: &[
                (
                    0,
                    "printed, or nothing to export (pptune set nothing it still owns)",
                ),
                FAILED,
                USAGE,
            ],
        },
    ),
    (
        "restore",
        Manual {
            examples: &[
                (
                    "pptune restore",
                    "Put back every original ring and channel count pptune recorded (through the running daemon when there is one).",
                ),
                ("pptune restore -i eth0", "Only eth0's."),
            ],
            exit: &[
                (0, "every original is back and the record is cleared"),
                (
                    1,
                    "an original could not be put back (each is listed and stays recorded), or an error",
                ),
                USAGE,
            ],
        },
    ),
    (
        "record",
        Manual {
            examples: &[
                (
                    "pptune record --duration 1h -o eth-busy.pptrec",
                    "Record an hour of what the kernel reports, on a host that runs no daemon.",
                ),
                (
                    "pptune replay eth-busy.pptrec",
                    "Then see what the policy would have decided over it.",
                ),
            ],
            exit: &[
                (
                    0,
                    "the duration passed, or SIGINT/SIGTERM ended the recording; the file is complete either way",
                ),
                FAILED,
                USAGE,
                INVALID,
            ],
        },
    ),
    (
        "replay",
        Manual {
            examples: &[
                (
                    "pptune replay /var/lib/pptune/recording",
                    "What the policy decided over the daemon's own rolling recording.",
                ),
                (
                    "pptune replay eth-busy.pptrec --against new-policy.yaml",
                    "What a candidate policy would have decided differently.",
                ),
            ],
            exit: &[
                (0, "printed"),
                (1, "the file is not a recording, or an error"),
                USAGE,
                INVALID,
            ],
        },
    ),
    (
        "history",
        Manual {
            examples: &[
                (
                    "pptune history --since 24h",
                    "Every change and restore of the last day, with its evidence and outcome.",
                ),
                (
                    "pptune history -i eth0 --json",
                    "One interface's changes, for a script.",
                ),
            ],
            exit: &[
                (0, "printed (nothing when nothing was changed)"),
                FAILED,
                (
                    2,
                    "a usage error, or a --since that is neither a duration nor an RFC 3339 time",
                ),
            ],
        },
    ),
    (
        "fleet",
        Manual {
            examples: &[
                (
                    "pptune fleet suggest --prometheus http://prometheus:9090 -o /etc/pptune/policy.d/50-fleet-priors.yaml",
                    "Starting rings per device class (driver, model, firmware, MTU, link speed) from what the fleet's tuned hosts converged to over the last 7 days, as a policy drop-in; `pptune check` validates it and a reload applies it to devices pptune has not changed yet.",
                ),
                (
                    "pptune fleet suggest --prometheus https://thanos.example:10902 --since 720h --min-hosts 20",
                    "A month of a larger fleet, each class backed by at least 20 hosts.",
                ),
            ],
            exit: &[
                (0, "written"),
                (
                    1,
                    "Prometheus unreachable, an HTTP error, an error or partial answer, or no tuned host in the window; nothing is written",
                ),
                USAGE,
            ],
        },
    ),
];

/// The manual of the command named `name` (as on the command line); an
/// empty one for a name that is not a command.
#[must_use]
pub fn manual(name: &str) -> Manual {
    MANUALS.iter().find(|(n, _)| *n == name).map_or(
        Manual {
            examples: &[],
            exit: &[],
        },
        |(_, m)| *m,
    )
}

/// `--help`'s text after the options: [`manual`] as plain text.
#[must_use]
pub fn after_help(name: &str) -> String {
    use std::fmt::Write as _;
    let m = manual(name);
    let mut out = String::from("Examples:\n");
    for (line, what) in m.examples {
        let _ = write!(out, "  $ {line}\n      {what}\n");
    }
    out.push_str("\nExit status:\n");
    for (code, what) in m.exit {
        let _ = writeln!(out, "  {code:<3} {what}");
    }
    out
}
