//! [`Collective`] over NCCL: one rank of a
//! [`strata_tensor::distributed::Communicator`].

use super::collective::{Collective, PendingWork};
use crate::error::Result;
use std::sync::Arc;
use strata_tensor::distributed::{Communicator, ReduceOp, Work};
use strata_tensor::{Device, Tensor};

/// One rank of an NCCL communicator as a [`Collective`].
#[derive(Clone, Debug)]
pub struct NcclRank {
    comm: Arc<Communicator>,
}

impl NcclRank {
    /// Wraps a communicator.
    pub fn new(comm: Communicator) -> NcclRank {
        NcclRank {
            comm: Arc::new(comm),
        }
    }

    /// The communicator.
    pub fn communicator(&self) -> &Communicator {
        &self.comm
    }
}

struct NcclWork(Work);

impl PendingWork for NcclWork {
    fn wait(self: Box<Self>) -> Result<()> {
        Ok(self.0.wait()?)
    }
}

impl Collective for NcclRank {
    fn rank(&self) -> usize {
        self.comm.rank()
    }
    fn world_size(&self) -> usize {
        self.comm.world_size()
    }
    fn device(&self) -> Device {
        self.comm.device()
    }
    fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Box<dyn PendingWork>> {
        Ok(Box::new(NcclWork(self.comm.all_reduce(tensor, op)?)))
    }
    fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Box<dyn PendingWork>> {
        Ok(Box::new(NcclWork(self.comm.broadcast(tensor, root)?)))
    }
}
