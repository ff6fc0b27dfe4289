//! The crate's error types.
//!
//! [`CodecError`] is what a malformed or truncated message gives (never a
//! panic); [`KernelError`] is the kernel saying no, with everything its
//! `NLMSG_ERROR` carried; [`Error`] is what a [`crate::Client`] call returns.

use std::fmt;
use std::io;

/// A message or attribute that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Fewer bytes than a header or fixed-size value needs.
    #[error("{what}: truncated, need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// An attribute whose payload length is not one the type allows
    /// (e.g. a `uint` that is neither 4 nor 8 bytes).
    #[error("attribute {attr} ({kind}): invalid length {len}")]
    BadLength {
        attr: &'static str,
        kind: u16,
        len: usize,
    },
    /// A length field that points outside the buffer or below its header.
    #[error("{what}: length field {len} invalid for {have} remaining bytes")]
    BadFrame {
        what: &'static str,
        len: usize,
        have: usize,
    },
    /// A message that lacks an attribute the protocol requires.
    #[error("{what}: missing attribute {attr}")]
    Missing {
        what: &'static str,
        attr: &'static str,
    },
    /// A message of a type this code does not expect here.
    #[error("unexpected message: {0}")]
    Unexpected(String),
}

impl From<CodecError> for netlink_packet_core::DecodeError {
    fn from(e: CodecError) -> Self {
        Self::from(e.to_string())
    }
}

/// The kernel refused a request (`NLMSG_ERROR` with a non-zero code, or a
/// dump that ended with an error in `NLMSG_DONE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelError {
    /// Positive errno (`EOPNOTSUPP`, `EINVAL` …).
    pub errno: i32,
    /// `NLMSGERR_ATTR_MSG`: the extended-ack message, if any.
    pub message: Option<String>,
    /// `NLMSGERR_ATTR_OFFS`: byte offset of the offending attribute in the
    /// request, if the kernel gave one.
    pub offset: Option<u32>,
    /// The offending attribute resolved against the request we sent, as a
    /// dotted path of names (`rings.rx`, `channels.rx-count`).
    pub attr: Option<String>,
    /// `NLMSGERR_ATTR_MISS_TYPE`: a required attribute that was missing.
    pub missing_type: Option<u32>,
    /// `NLMSGERR_ATTR_MISS_NEST`: offset of the nest it was missing from
    /// (then `attr` names that nest).
    pub missing_nest: Option<u32>,
}

impl KernelError {
    /// A bare errno with no extack.
    #[must_use]
    pub fn from_errno(errno: i32) -> Self {
        Self {
            errno,
            message: None,
            offset: None,
            attr: None,
            missing_type: None,
            missing_nest: None,
        }
    }

    /// The extack message, or the errno's description.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.message {
            Some(m) => m.clone(),
            None => io::Error::from_raw_os_error(self.errno).to_string(),
        }
    }

    /// `EOPNOTSUPP` (95): the operation or the driver hook does not exist.
    #[must_use]
    pub fn is_not_supported(&self) -> bool {
        self.errno == libc::EOPNOTSUPP
    }

    /// `ENODEV` (19): the device is gone (or never existed).
    #[must_use]
    pub fn is_no_device(&self) -> bool {
        self.errno == libc::ENODEV
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let os = io::Error::from_raw_os_error(self.errno);
        match &self.message {
            Some(m) => write!(f, "{m} ({os})")?,
            None => write!(f, "{os}")?,
        }
        match (self.missing_type, &self.attr) {
            (Some(t), Some(a)) => write!(f, ", missing attribute type {t} in {a}")?,
            (Some(t), None) => write!(f, ", missing attribute type {t}")?,
            (None, Some(a)) => write!(f, ", attribute {a}")?,
            (None, None) => {
                if let Some(o) = self.offset {
                    write!(f, ", attribute at offset {o}")?;
                }
            }
        }
        Ok(())
    }
}

impl std::error::Error for KernelError {}

/// What a [`crate::Client`] call can fail with. Variants are named after the
/// action that failed and carry the device and the cause.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Opening or configuring a netlink socket.
    #[error("opening {family} netlink socket")]
    OpenSocket {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    /// Sending or receiving on a socket.
    #[error("{family} netlink socket I/O")]
    Io {
        family: &'static str,
        #[source]
        source: io::Error,
    },
    /// A generic netlink family is not registered in this kernel.
    #[error("generic netlink family {0:?} is not available in this kernel")]
    FamilyMissing(&'static str),
    /// Resolving a family through nlctrl.
    #[error("resolving generic netlink family {family:?}")]
    ResolveFamily {
        family: &'static str,
        #[source]
        source: Box<Error>,
    },
    /// The kernel refused a request.
    /// The kernel's answer is part of the message, not also a `source()`.
    #[error("{op}{}: kernel refused: {cause}", ifname_suffix(.ifname))]
    Kernel {
        /// The operation, e.g. `rings-set`, `page-pool-get`.
        op: &'static str,
        ifname: Option<String>,
        cause: KernelError,
    },
    /// A reply did not decode.
    #[error("{op}: malformed reply")]
    Decode {
        op: &'static str,
        #[source]
        source: CodecError,
    },
    /// Reading a file (sysfs, procfs).
    #[error("reading {path}")]
    ReadFile {
        path: String,
        #[source]
        source: io::Error,
    },
    /// Entering a network namespace.
    #[error("entering network namespace {name}")]
    EnterNetns {
        name: String,
        #[source]
        source: io::Error,
    },
}

fn ifname_suffix(i: &Option<String>) -> String {
    i.as_ref().map(|n| format!(" on {n}")).unwrap_or_default()
}

impl Error {
    /// The kernel's refusal, if this is one.
    #[must_use]
    pub fn kernel(&self) -> Option<&KernelError> {
        match self {
            Self::Kernel { cause, .. } => Some(cause),
            Self::ResolveFamily { source, .. } => source.kernel(),
            _ => None,
        }
    }

    /// The errno of a kernel refusal or an I/O error.
    #[must_use]
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Kernel { cause, .. } => Some(cause.errno),
            Self::Io { source, .. } | Self::OpenSocket { source, .. } => source.raw_os_error(),
            Self::ResolveFamily { source, .. } => source.errno(),
            _ => None,
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
