//! The [`Collective`] abstraction that bucketing is written against.

use crate::error::Result;
use strata_tensor::distributed::ReduceOp;
use strata_tensor::{Device, Tensor};

/// A queued collective operation.
pub trait PendingWork: Send {
    /// Waits until the result can be used by later work on the rank's
    /// device: on a GPU the current stream waits (the host does not block);
    /// on the host the call blocks until the result is written.
    fn wait(self: Box<Self>) -> Result<()>;
}

/// One rank's view of a group of ranks that compute together. Every rank
/// must issue the same collectives in the same order (as with NCCL).
pub trait Collective: Send + Sync {
    /// This rank (0-based).
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;
    /// The device this rank's tensors live on.
    fn device(&self) -> Device;
    /// Starts reducing the contiguous `tensor` across ranks, in place.
    fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Box<dyn PendingWork>>;
    /// Starts copying rank `root`'s contiguous `tensor` into every rank's, in place.
    fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Box<dyn PendingWork>>;
}
