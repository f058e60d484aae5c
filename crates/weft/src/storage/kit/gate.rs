//! The lifecycle of a storage handle: open, closed, or stopped by a failure.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// Whether a handle still works, and if not, why.
///
/// *Closed* is the caller's doing ([`Storage::close`](crate::Storage::close)):
/// every read and write then fails with `Closed`. *Stopped* is a failure's
/// doing (a fenced producer, a failed `fdatasync`): writes fail from then
/// on with [`Error::after_stop`] of the error that stopped them — `Fenced`
/// stays `Fenced` with its epochs — while what was committed stays
/// readable.
#[derive(Debug)]
pub struct Gate {
    /// Names the handle in messages ("the log directory").
    what: &'static str,
    closed: AtomicBool,
    stopped: Mutex<Option<Error>>,
}

impl Gate {
    /// An open gate for the handle `what` names.
    pub fn new(what: &'static str) -> Self {
        Gate {
            what,
            closed: AtomicBool::new(false),
            stopped: Mutex::new(None),
        }
    }

    /// `Closed` once the handle was closed.
    pub fn check_open(&self) -> Result<()> {
        if self.is_closed() {
            return Err(Error::closed(format!("{} is closed", self.what)));
        }
        Ok(())
    }

    /// `Closed` once closed; once stopped, the error later writes get.
    pub fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        match self.stopped() {
            Some(cause) => Err(cause.after_stop(self.what)),
            None => Ok(()),
        }
    }

    /// Stops writes for good because of `cause`. The first cause wins;
    /// true when this call stopped the gate.
    pub fn stop(&self, cause: &Error) -> bool {
        let mut stopped = self.stopped.lock().unwrap_or_else(|p| p.into_inner());
        if stopped.is_some() {
            return false;
        }
        *stopped = Some(cause.clone());
        true
    }

    /// The error that stopped writes, if one did.
    pub fn stopped(&self) -> Option<Error> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Closes the handle; true when this call closed it.
    pub fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::AcqRel)
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// True once closed or stopped: no write will succeed any more.
    pub fn is_done(&self) -> bool {
        self.is_closed() || self.stopped().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorDetail, ErrorKind};

    #[test]
    fn a_stop_keeps_the_first_cause_and_reads_stay_open() {
        let gate = Gate::new("the test writer");
        assert!(gate.check_writable().is_ok());
        assert!(gate.stop(&Error::fenced(1, 2)));
        assert!(!gate.stop(&Error::internal("later")));
        let err = gate.check_writable().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Fenced);
        assert_eq!(
            err.detail(),
            Some(&ErrorDetail::Fenced { ours: 1, theirs: 2 })
        );
        assert!(gate.check_open().is_ok(), "a stopped handle still reads");
        assert!(gate.close());
        assert!(!gate.close());
        assert_eq!(gate.check_open().unwrap_err().kind(), ErrorKind::Closed);
        assert_eq!(gate.check_writable().unwrap_err().kind(), ErrorKind::Closed);
    }
}
