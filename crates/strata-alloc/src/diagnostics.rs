//! The diagnostics' entry points: PyTorch-format snapshots, the HTML report,
//! history and out-of-memory observers, on an allocator or on any device.

use crate::allocator::CachingAllocator;
use crate::driver::{Device, StreamId};
use crate::error::{AllocError, OutOfMemory};
use crate::history::{Action, HistoryOptions};
use crate::snapshot::SegmentSnapshot;
use std::path::Path;

fn write_error(path: &Path, reason: impl std::fmt::Display) -> AllocError {
    AllocError::Write {
        path: path.display().to_string(),
        reason: reason.to_string(),
    }
}

/// The snapshot of `allocator` as PyTorch's pickle (see
/// [`CachingAllocator::snapshot_pickle`]). As in PyTorch, which copies a
/// device's trace before it takes the segments (and records the `snapshot`
/// event with them), the trace carried ends with the event before this
/// snapshot: this snapshot's own event shows in the next one.
pub(crate) fn snapshot_pickle(allocator: &CachingAllocator) -> Result<Vec<u8>, AllocError> {
    let device = allocator.device();
    crate::snapshot_pickle::check_ordinal(device, "snapshot_pickle")?;
    allocator.with_state(|st| {
        let (bytes, active) = pickle(st, device)?;
        // Only a snapshot taken is recorded (a refused one changes nothing).
        record_snapshot(st, active);
        Ok(bytes)
    })
}

/// The snapshot of `st` pickled, and the active bytes it was taken at (the
/// size of its `snapshot` trace event); records nothing.
fn pickle(st: &crate::state::State, device: Device) -> Result<(Vec<u8>, u64), AllocError> {
    let bytes = crate::snapshot_pickle::encode(&crate::snapshot_pickle::document(st, device))
        .map_err(|e| AllocError::Write {
            path: "(snapshot)".into(),
            reason: e.to_string(),
        })?;
    Ok((bytes, st.stats.active_bytes.all().current as u64))
}

/// Records the `snapshot` trace event of a snapshot taken at `active` bytes.
fn record_snapshot(st: &mut crate::state::State, active: u64) {
    if st.history.enabled() {
        st.history
            .push(Action::Snapshot, 0, active, StreamId::DEFAULT);
    }
    st.track(Action::Snapshot, 0, active, StreamId::DEFAULT);
}

/// Writes `allocator`'s snapshot to `path` (see
/// [`CachingAllocator::dump_snapshot`]).
pub(crate) fn dump_snapshot_of(
    allocator: &CachingAllocator,
    path: &Path,
) -> Result<(), AllocError> {
    // A snapshot that is not written must leave no `snapshot` trace event
    // behind: the file is opened first (a device the format cannot hold is
    // refused before it is created, which would empty an existing one), the
    // snapshot taken without recording, and its event recorded once the
    // bytes are written (a disk that is full, say, refuses them after the
    // file opened). The event keeps the active bytes the snapshot was taken
    // at; the file is written outside the allocator's lock.
    let device = allocator.device();
    crate::snapshot_pickle::check_ordinal(device, "dump_snapshot")?;
    let mut file = std::fs::File::create(path).map_err(|e| write_error(path, e))?;
    let (bytes, active) = allocator.with_state(|st| pickle(st, device))?;
    std::io::Write::write_all(&mut file, &bytes).map_err(|e| write_error(path, e))?;
    allocator.with_state(|st| record_snapshot(st, active));
    Ok(())
}

/// `allocator`'s HTML report (see [`CachingAllocator::memory_report_html`]).
pub(crate) fn memory_report_html(allocator: &CachingAllocator) -> String {
    let device = allocator.device();
    allocator.with_state(|st| crate::report::render(st, device))
}

/// Writes `allocator`'s HTML report to `path` (see
/// [`CachingAllocator::memory_report`]).
pub(crate) fn memory_report_of(
    allocator: &CachingAllocator,
    path: &Path,
) -> Result<(), AllocError> {
    let html = memory_report_html(allocator);
    std::fs::write(path, html).map_err(|e| write_error(path, e))
}

/// Starts recording `device`'s allocation history (with call sites) into a
/// ring buffer of `max_entries` (at least one, as in PyTorch), or stops
/// with `None` (PyTorch's
/// `torch.cuda.memory._record_memory_history`).
pub fn record_memory_history(device: Device, max_entries: Option<usize>) -> Result<(), AllocError> {
    crate::allocator(device)?.record_history(max_entries);
    Ok(())
}

/// [`record_memory_history`] with all of PyTorch's options (`enabled`,
/// `context`, `stacks`, `skip_actions`: see [`HistoryOptions`] and
/// [`CachingAllocator::record_history_opts`]).
pub fn record_memory_history_opts(device: Device, opts: &HistoryOptions) -> Result<(), AllocError> {
    crate::allocator(device)?.record_history_opts(opts);
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
