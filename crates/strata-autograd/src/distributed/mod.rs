//! Data-parallel training (PyTorch's `DistributedDataParallel`): each rank
//! runs the same model on its share of the batch, and the gradients are
//! averaged across ranks during backward.
//!
//! * [`Collective`]: what data parallelism needs from a communication
//!   library (an averaging all-reduce and a broadcast, queued and waited for).
//!   [`NcclRank`] implements it with NCCL on a GPU
//!   ([`strata_tensor::distributed::Communicator`]); [`LocalGroup`] is an
//!   in-process group of ranks (threads) that computes on the host and logs
//!   every call, for CPU training, tests and `--gpus 1`-style runs on the CPU.
//! * [`DistributedDataParallel`]: broadcasts the parameters from rank 0, makes
//!   every parameter's `.grad` a view into a contiguous *bucket* (25 MiB by
//!   default, allocated once from strata's allocator), and starts a bucket's
//!   all-reduce from a post-accumulate-grad hook as soon as the last gradient
//!   of that bucket is final, while backward goes on. [`finish`] waits for
//!   every bucket before the optimizer step.
//!
//! [`finish`]: DistributedDataParallel::finish

mod collective;
mod ddp;
mod local;
mod nccl;

pub use collective::{Collective, PendingWork};
pub use ddp::{DdpConfig, DistributedDataParallel, IterationStats, DEFAULT_BUCKET_CAP_BYTES};
pub use local::{CallKind, CallRecord, LocalGroup, LocalRank};
pub use nccl::NcclRank;
pub use strata_tensor::distributed::ReduceOp;
