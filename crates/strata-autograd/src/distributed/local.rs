//! [`LocalGroup`]: ranks of one process (one thread each) that reduce on the
//! host. It serves CPU training and tests: every call is logged in the order
//! it was issued, and ranks that issue different collectives at the same
//! position get a typed error instead of a hang.

use super::collective::{Collective, PendingWork};
use crate::error::{AutogradError, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_tensor::distributed::ReduceOp;
use strata_tensor::{DType, Device, Tensor};

/// What a logged call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// An all-reduce.
    AllReduce(ReduceOp),
    /// A broadcast from a root rank.
    Broadcast(usize),
}

/// One logged collective call, in the order the ranks issued them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// The rank that issued it.
    pub rank: usize,
    /// Its position among that rank's collectives (0-based).
    pub seq: u64,
    /// What it was.
    pub kind: CallKind,
    /// Elements of the buffer.
    pub numel: usize,
}

/// A rank's input: float dtypes in f64, integer and bool dtypes in i64
/// (exact: an i64 above 2^53 does not round, and `i64::MAX` does not
/// come back as `i64::MIN` from a conversion of 2^63).
#[derive(Clone)]
enum Values {
    Float(Vec<f64>),
    Int(Vec<i64>),
}

struct Round {
    kind: CallKind,
    numel: usize,
    dtype: DType,
    /// Each rank's input.
    inputs: Vec<Option<Values>>,
    /// Ranks whose handle is gone: waited for (the result read, or the
    /// wait timed out) or dropped. The last one removes the round.
    finished: usize,
    /// Tensors of ranks that dropped their handle before every rank had
    /// joined: the rank that completes the inputs writes the result into
    /// them (a dropped handle does not cancel the collective).
    orphans: Vec<Tensor>,
}

impl Round {
    fn complete(&self) -> bool {
        self.inputs.iter().all(Option::is_some)
    }

    /// The result; every input must be there.
    fn result(&self) -> Values {
        let inputs: Vec<&Values> = self.inputs.iter().flatten().collect();
        match self.kind {
            CallKind::Broadcast(root) => inputs[root].clone(),
            CallKind::AllReduce(op) => reduce(&inputs, self.numel, op),
        }
    }
}

/// Counts one rank's handle as gone, and removes the round once every
/// rank's is.
fn release(rounds: &mut HashMap<u64, Round>, seq: u64, world: usize) {
    let round = rounds
        .get_mut(&seq)
        .expect("a started round stays until every handle is gone");
    round.finished += 1;
    if round.finished == world {
        rounds.remove(&seq);
    }
}

/// Writes `result` (in f64 or i64) into `tensor` in its own dtype.
fn write(tensor: &Tensor, result: Values) -> Result<()> {
    let (shape, device) = (tensor.shape(), tensor.device());
    let src = match result {
        Values::Float(v) => Tensor::from_vec(v, shape, device)?,
        Values::Int(v) => Tensor::from_vec(v, shape, device)?,
    }
    .to_dtype_contiguous(tensor.dtype())?;
    tensor.copy_(&src)?;
    Ok(())
}

struct Shared {
    world: usize,
    device: Device,
    timeout: Duration,
    rounds: Mutex<HashMap<u64, Round>>,
    arrived: Condvar,
    log: Mutex<Vec<CallRecord>>,
}

/// An in-process group of ranks; see the module docs.
#[derive(Clone)]
pub struct LocalGroup {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LocalGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGroup")
            .field("world_size", &self.shared.world)
            .field("device", &self.shared.device)
            .finish()
    }
}

/// One rank of a [`LocalGroup`].
pub struct LocalRank {
    rank: usize,
    shared: Arc<Shared>,
    next_seq: AtomicU64,
}

impl std::fmt::Debug for LocalRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRank")
            .field("rank", &self.rank)
            .field("world_size", &self.shared.world)
            .finish()
    }
}

impl LocalGroup {
    /// A group of `world_size` ranks whose tensors live on `device`, and
    /// its ranks (hand one to each thread). A rank waits at most 60 s for
    /// the others.
    pub fn new(world_size: usize, device: Device) -> Result<(LocalGroup, Vec<LocalRank>)> {
        LocalGroup::with_timeout(world_size, device, Duration::from_secs(60))
    }

    /// [`LocalGroup::new`] with how long a rank waits for the others before
    /// its `wait` fails (a timeout past what the clock can add, such as
    /// `Duration::MAX`, waits without a deadline).
    pub fn with_timeout(
        world_size: usize,
        device: Device,
        timeout: Duration,
    ) -> Result<(LocalGroup, Vec<LocalRank>)> {
        if world_size == 0 {
            return Err(AutogradError::Distributed {
                msg: "a group needs at least one rank".into(),
            });
        }
        let shared = Arc::new(Shared {
            world: world_size,
            device,
            timeout,
            rounds: Mutex::new(HashMap::new()),
            arrived: Condvar::new(),
            log: Mutex::new(Vec::new()),
        });
        // A world size the host cannot hold ranks for is an error, not an
        // allocation failure that aborts the process.
        let mut ranks = Vec::new();
        ranks
            .try_reserve_exact(world_size)
            .map_err(|_| AutogradError::Distributed {
                msg: format!(
                    "cannot allocate {world_size} ranks for a local group; use one rank per thread"
                ),
            })?;
        ranks.extend((0..world_size).map(|rank| LocalRank {
            rank,
            shared: Arc::clone(&shared),
            next_seq: AtomicU64::new(0),
        }));
        Ok((LocalGroup { shared }, ranks))
    }

    /// Every call issued so far, in issue order.
    pub fn log(&self) -> Vec<CallRecord> {
        self.shared.log.lock().clone()
    }

    /// How many collectives the group still holds state for: started by
    /// some rank and not yet released by every rank's handle (waited for
    /// or dropped). Zero once every started collective has been joined by
    /// all ranks and every handle is gone.
    pub fn collectives_in_flight(&self) -> usize {
        self.shared.rounds.lock().len()
    }
}

impl LocalRank {
    fn start(&self, tensor: &Tensor, kind: CallKind) -> Result<Box<dyn PendingWork>> {
        let what = match kind {
            CallKind::AllReduce(_) => "all_reduce",
            CallKind::Broadcast(_) => "broadcast",
        };
        let err = |msg: String| AutogradError::Distributed {
            msg: format!("{what} on rank {}: {msg}", self.rank),
        };
        if tensor.device() != self.shared.device {
            return Err(err(format!(
                "the tensor is on {} but the group is on {}",
                tensor.device(),
                self.shared.device
            )));
        }
        if !tensor.is_contiguous() {
            return Err(err("the tensor must be contiguous".into()));
        }
        match kind {
            CallKind::Broadcast(root) if root >= self.shared.world => {
                return Err(err(format!(
                    "root {root} is not a rank of a group of {}",
                    self.shared.world
                )));
            }
            CallKind::AllReduce(ReduceOp::Avg) if !tensor.dtype().is_float() => {
                return Err(err(format!(
                    "Avg needs a float dtype, not {}",
                    tensor.dtype()
                )));
            }
            _ => {}
        }
        let values = if tensor.dtype().is_float() {
            Values::Float(tensor.to_dtype_contiguous(DType::F64)?.to_vec::<f64>()?)
        } else {
            Values::Int(tensor.to_dtype_contiguous(DType::I64)?.to_vec::<i64>()?)
        };
        let mut orphaned = None;
        let seq = {
            let mut rounds = self.shared.rounds.lock();
            // This rank's next position, taken only once the call is
            // accepted (under the lock, so that calls of one rank from
            // several threads take distinct ones): a refused call leaves
            // it, and its retry joins the collective it was refused from.
            let seq = self.next_seq.load(Ordering::Relaxed);
            let round = rounds.entry(seq).or_insert_with(|| Round {
                kind,
                numel: tensor.numel(),
                dtype: tensor.dtype(),
                inputs: vec![None; self.shared.world],
                finished: 0,
                orphans: Vec::new(),
            });
            if round.kind != kind || round.numel != tensor.numel() || round.dtype != tensor.dtype()
            {
                return Err(err(format!(
                    "collective #{seq} is {:?} of {} {} elements on another rank but {:?} of {} {} here",
                    round.kind,
                    round.numel,
                    round.dtype,
                    kind,
                    tensor.numel(),
                    tensor.dtype()
                )));
            }
            round.inputs[self.rank] = Some(values);
            // This call completes the inputs: the ranks that dropped their
            // handle already get their result now.
            if round.complete() && !round.orphans.is_empty() {
                orphaned = Some((std::mem::take(&mut round.orphans), round.result()));
            }
            self.next_seq.store(seq + 1, Ordering::Relaxed);
            self.shared.log.lock().push(CallRecord {
                rank: self.rank,
                seq,
                kind,
                numel: tensor.numel(),
            });
            seq
        };
        self.shared.arrived.notify_all();
        if let Some((tensors, result)) = orphaned {
            for t in &tensors {
                // Their ranks gave up their handles, so nothing can report
                // a failure to them; the write only converts back to the
                // dtype the tensor was started with.
                let _ = write(t, result.clone());
            }
        }
        Ok(Box::new(LocalWork {
            rank: self.rank,
            seq,
            shared: Arc::clone(&self.shared),
            tensor: tensor.clone(),
            released: false,
        }))
    }
}

impl Collective for LocalRank {
    fn rank(&self) -> usize {
        self.rank
    }
    fn world_size(&self) -> usize {
        self.shared.world
    }
    fn device(&self) -> Device {
        self.shared.device
    }
    fn all_reduce(&self, tensor: &Tensor, op: ReduceOp) -> Result<Box<dyn PendingWork>> {
        self.start(tensor, CallKind::AllReduce(op))
    }
    fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<Box<dyn PendingWork>> {
        self.start(tensor, CallKind::Broadcast(root))
    }
}

/// One rank's handle on a started collective. Waiting for it or dropping
/// it releases the rank's share of the round (the last one removes it), so
/// handles that are dropped without `wait` do not accumulate. A dropped
/// handle does not cancel the collective, as PyTorch's `Work`: the other
/// ranks get the full result (this rank's input was taken when it started)
/// and this rank's tensor is written too: at once if every rank has joined,
/// else by the rank that joins last. Dropping never blocks.
struct LocalWork {
    rank: usize,
    seq: u64,
    shared: Arc<Shared>,
    tensor: Tensor,
    /// Whether this rank's share of the round was released (by `wait`).
    released: bool,
}

impl PendingWork for LocalWork {
    fn wait(mut self: Box<Self>) -> Result<()> {
        // A timeout too long for the clock (`Duration::MAX`) waits forever.
        let deadline = Instant::now().checked_add(self.shared.timeout);
        let result = {
            let mut rounds = self.shared.rounds.lock();
            loop {
                let round = rounds
                    .get(&self.seq)
                    .expect("a started round stays until every handle is gone");
                if round.complete() {
                    break;
                }
                let Some(deadline) = deadline else {
                    self.shared.arrived.wait(&mut rounds);
                    continue;
                };
                if self
                    .shared
                    .arrived
                    .wait_until(&mut rounds, deadline)
                    .timed_out()
                {
                    let missing: Vec<usize> = rounds[&self.seq]
                        .inputs
                        .iter()
                        .enumerate()
                        .filter(|(_, v)| v.is_none())
                        .map(|(r, _)| r)
                        .collect();
                    // The caller is told the collective failed, so its
                    // tensor is left as it is (not written when the others
                    // join later); its share of the round is released so
                    // that the round goes once they have.
                    release(&mut rounds, self.seq, self.shared.world);
                    self.released = true;
                    return Err(AutogradError::Distributed {
                        msg: format!(
                            "rank {} waited {:?} for ranks {missing:?} to join collective #{}",
                            self.rank, self.shared.timeout, self.seq
                        ),
                    });
                }
            }
            let result = rounds[&self.seq].result();
            release(&mut rounds, self.seq, self.shared.world);
            self.released = true;
            result
        };
        write(&self.tensor, result)
    }
}

impl Drop for LocalWork {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let result = {
            let mut rounds = self.shared.rounds.lock();
            let round = rounds
                .get_mut(&self.seq)
                .expect("a started round stays until every handle is gone");
            // Complete: this rank's result is written below, without
            // waiting. Not yet: the rank that completes the inputs writes
            // it (see `LocalRank::start`).
            let result = if round.complete() {
                Some(round.result())
            } else {
                round.orphans.push(self.tensor.clone());
                None
            };
            release(&mut rounds, self.seq, self.shared.world);
            result
        };
        if let Some(result) = result {
            // A drop cannot report an error; the write only converts back
            // to the dtype the tensor was started with.
            let _ = write(&self.tensor, result);
        }
    }
}

/// The elementwise reduction of the ranks' inputs (all of one kind, as
/// their dtypes agree), ranks in order so every rank computes the same bits.
/// Integer sums wrap in i64 and then in the dtype (as NCCL's and Gloo's
/// integer sums wrap); `Avg` is only for floats (checked when started).
fn reduce(inputs: &[&Values], n: usize, op: ReduceOp) -> Values {
    match inputs[0] {
        Values::Float(_) => {
            let rows: Vec<&Vec<f64>> = inputs
                .iter()
                .map(|v| match v {
                    Values::Float(v) => v,
                    Values::Int(_) => unreachable!("the ranks' dtypes agree"),
                })
                .collect();
            let mut out = fold_ranks(&rows, n, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a + b,
                ReduceOp::Max => a.max(b),
            });
            if op == ReduceOp::Avg {
                out.iter_mut().for_each(|x| *x /= rows.len() as f64);
            }
            Values::Float(out)
        }
        Values::Int(_) => {
            let rows: Vec<&Vec<i64>> = inputs
                .iter()
                .map(|v| match v {
                    Values::Int(v) => v,
                    Values::Float(_) => unreachable!("the ranks' dtypes agree"),
                })
                .collect();
            Values::Int(fold_ranks(&rows, n, |a, b| match op {
                ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                ReduceOp::Max => a.max(b),
            }))
        }
    }
}

/// Element `i` of the result is `f` folded over the ranks' element `i`,
/// rank 0 first.
fn fold_ranks<T: Copy>(rows: &[&Vec<T>], n: usize, f: impl Fn(T, T) -> T) -> Vec<T> {
    (0..n)
        .map(|i| rows[1..].iter().fold(rows[0][i], |acc, v| f(acc, v[i])))
        .collect()
}
