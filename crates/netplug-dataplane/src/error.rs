//! The one error type of the data plane: which operation failed, the errno name, and why.

use std::fmt;

use nix::errno::Errno;

/// A failed data-plane operation.
///
/// The errno (`EEXIST`, `ENODEV`, ...) lets callers map a failure to a CNI error code;
/// kernel failures carry the kernel's errno and, where the kernel gave one, its extended-ack text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataplaneError {
    /// What was being done, naming the objects: `create veth "np0a1" with peer "eth0"`.
    pub op: String,
    /// The errno; [`DataplaneError::code`] gives its name.
    pub errno: Errno,
    /// Human-readable reason.
    pub detail: String,
}

impl DataplaneError {
    pub fn new(op: impl Into<String>, errno: Errno, detail: impl Into<String>) -> Self {
        Self { op: op.into(), errno, detail: detail.into() }
    }

    /// A kernel or syscall failure: the detail is the errno's description plus any kernel text.
    pub fn from_errno(op: impl Into<String>, errno: Errno, kernel_text: Option<&str>) -> Self {
        let detail = match kernel_text {
            Some(text) if !text.is_empty() => format!("{} ({})", errno.desc(), text),
            _ => errno.desc().to_string(),
        };
        Self::new(op, errno, detail)
    }

    pub fn from_io(op: impl Into<String>, err: &std::io::Error) -> Self {
        let errno = err.raw_os_error().map(Errno::from_raw).unwrap_or(Errno::EIO);
        Self::from_errno(op, errno, None)
    }

    /// Invalid input, caught before touching the kernel.
    pub fn invalid(op: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(op, Errno::EINVAL, detail)
    }

    /// The errno's symbolic name: `EEXIST`.
    pub fn code(&self) -> String {
        format!("{:?}", self.errno) // nix's Debug form is the symbolic name
    }
}

impl fmt::Display for DataplaneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}]", self.op, self.detail, self.code())
    }
}

impl std::error::Error for DataplaneError {}

pub type Result<T> = std::result::Result<T, DataplaneError>;
