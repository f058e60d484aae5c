//! Whether a command may create the log it opens: asked of every backend,
//! so apart from the modules that open one (`location`, `pg`).

/// Whether a command may create the log when it does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Create {
    /// A missing log is a `NotFound` error.
    No,
    /// Create an empty log.
    IfMissing,
}
