//! The diagnostics' entry points: PyTorch-format snapshots, the HTML report,
//! history and out-of-memory observers, on an allocator or on any device.

use crate::allocator::CachingAllocator;
use crate::driver::{Device, StreamId};
use crate::error::{AllocError, OutOfMemory};
use crate::history::Action;
use crate::snapshot::SegmentSnapshot;
use std::path::Path;

fn write_error(path: &Path, reason: impl std::fmt::Display) -> AllocError {
    AllocError::Write {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

impl CachingAllocator {
    /// The snapshot as the bytes of PyTorch's pickle (what
    /// [`dump_snapshot`](Self::dump_snapshot) writes). Taking it records a
    /// `snapshot` trace event while history is on, as PyTorch does.
    pub fn snapshot_pickle(&self) -> Result<Vec<u8>, AllocError> {
        let device = self.device();
        self.with_state(|st| {
            if st.history.enabled() {
                let active = st.stats.active_bytes.all().current as u64;
                st.history
                    .push(Action::Snapshot, 0, active, StreamId::DEFAULT);
            }
            let doc = crate::snapshot_pickle::document(st, device);
            crate::snapshot_pickle::encode(&doc)
        })
        .map_err(|e| AllocError::Write {
            path: "(snapshot)".into(),
            reason: e.to_string(),
        })
    }

    /// Writes the snapshot to `path` in the format of PyTorch's
    /// `torch.cuda.memory._dump_snapshot`: open it with
    /// `python -m torch.cuda._memory_viz trace_plot <path> -o trace.html` or
    /// on <https://pytorch.org/memory_viz>. Its segments and blocks are always
    /// there; the trace and the blocks' frames (call sites) only when history
    /// is on.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use strata_alloc::{AllocatorConfig, CachingAllocator, StreamId};
    /// use strata_alloc::driver::sim::SimDriver;
    ///
    /// let a = CachingAllocator::new(Arc::new(SimDriver::h100()), AllocatorConfig::default());
    /// a.record_history(Some(1000));
    /// let _x = a.allocate(4096, StreamId::DEFAULT).unwrap();
    /// let path = std::env::temp_dir().join("strata_doc_snapshot.pickle");
    /// a.dump_snapshot(&path).unwrap();
    /// assert!(std::fs::metadata(&path).unwrap().len() > 0);
    /// assert!(a.dump_snapshot("/no/such/dir/x.pickle").is_err());
    /// ```
    pub fn dump_snapshot(&self, path: impl AsRef<Path>) -> Result<(), AllocError> {
        let path = path.as_ref();
        let bytes = self.snapshot_pickle()?;
        std::fs::write(path, bytes).map_err(|e| write_error(path, e))
    }

    /// Writes a self-contained HTML report of this allocator to `path` (see
    /// [`report`](crate::report)).
    pub fn memory_report(&self, path: impl AsRef<Path>) -> Result<(), AllocError> {
        let path = path.as_ref();
        let html = self.memory_report_html();
        std::fs::write(path, html).map_err(|e| write_error(path, e))
    }

    /// The HTML report as a string.
    pub fn memory_report_html(&self) -> String {
        let device = self.device();
        self.with_state(|st| crate::report::render(st, device))
    }
}

/// Starts recording `device`'s allocation history (with call sites) into a
/// ring buffer of `max_entries`, or stops with `None` (PyTorch's
/// `torch.cuda.memory._record_memory_history`).
pub fn record_memory_history(device: Device, max_entries: Option<usize>) -> Result<(), AllocError> {
    crate::allocator(device)?.record_history(max_entries);
    Ok(())
}

/// Writes `device`'s snapshot to `path` in PyTorch's pickle format (see
/// [`CachingAllocator::dump_snapshot`]).
pub fn dump_snapshot(device: Device, path: impl AsRef<Path>) -> Result<(), AllocError> {
    crate::allocator(device)?.dump_snapshot(path)
}

/// Writes `device`'s HTML memory report to `path` (see
/// [`report`](crate::report)).
pub fn memory_report(device: Device, path: impl AsRef<Path>) -> Result<(), AllocError> {
    crate::allocator(device)?.memory_report(path)
}

/// Registers a closure called with the error and a snapshot of `device`'s
/// segments whenever an allocation there fails for lack of memory, before the
/// error returns (see [`CachingAllocator::on_oom`]).
pub fn set_oom_observer(
    device: Device,
    observer: impl Fn(&OutOfMemory, &[SegmentSnapshot]) + Send + Sync + 'static,
) -> Result<(), AllocError> {
    crate::allocator(device)?.on_oom(observer);
    Ok(())
}
