//! The crate's one error: what was being done (naming the table, chain, set or rule), the errno,
//! and why.

use std::fmt;

use nix::errno::Errno;

/// A failed nftables operation, or a description refused before anything reached the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftError {
    /// What was being done, naming the object: `add rule 3 of chain "forward" (comment "pol a")`.
    pub op: String,
    pub errno: Errno,
    /// Human-readable reason: the errno's description and the kernel's extended-ack text, or
    /// what is wrong with the description (naming the field and the value).
    pub detail: String,
}

impl NftError {
    pub fn new(op: impl Into<String>, errno: Errno, detail: impl Into<String>) -> Self {
        Self { op: op.into(), errno, detail: detail.into() }
    }

    /// A description (or a change) that cannot be written: caught before touching the kernel.
    pub fn invalid(op: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(op, Errno::EINVAL, detail)
    }

    /// A kernel or syscall failure: the detail is the errno's description plus any kernel text.
    pub fn from_errno(op: impl Into<String>, errno: Errno, kernel_text: Option<&str>) -> Self {
        let detail = match kernel_text {
            Some(text) if !text.is_empty() => format!("{} ({text})", errno.desc()),
            _ => errno.desc().to_string(),
        };
        Self::new(op, errno, detail)
    }

    pub fn from_io(op: impl Into<String>, err: &std::io::Error) -> Self {
        Self::from_errno(op, err.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO), None)
    }

    /// The errno's symbolic name: `ENOENT`.
    pub fn code(&self) -> String {
        format!("{:?}", self.errno)
    }
}

impl fmt::Display for NftError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.op, self.detail, self.code())
    }
}

impl std::error::Error for NftError {}

pub type Result<T> = std::result::Result<T, NftError>;
