//! [`DistributedDataParallel`]: gradient buckets whose all-reduce starts
//! during backward.

use super::collective::{Collective, PendingWork};
use crate::error::{AutogradError, Result};
use crate::grad_mode::NoGradGuard;
use crate::hooks::HookHandle;
use crate::var::Var;
use parking_lot::Mutex;
use std::sync::{Arc, Weak};
use strata_tensor::distributed::ReduceOp;
use strata_tensor::{DType, Tensor};

/// PyTorch's default bucket size: 25 MiB.
pub const DEFAULT_BUCKET_CAP_BYTES: usize = 25 * 1024 * 1024;

/// Settings of [`DistributedDataParallel`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdpConfig {
    /// Most bytes of gradients per bucket (a parameter larger than this gets
    /// a bucket of its own).
    pub bucket_cap_bytes: usize,
    /// Copy rank 0's parameters to every rank when constructed.
    pub broadcast_parameters: bool,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig {
            bucket_cap_bytes: DEFAULT_BUCKET_CAP_BYTES,
            broadcast_parameters: true,
        }
    }
}

/// What happened to the buckets in one iteration (returned by
/// [`DistributedDataParallel::finish`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IterationStats {
    /// Buckets whose all-reduce a gradient hook started, i.e. during backward.
    pub launched_in_backward: usize,
    /// Buckets started by `finish` (their parameters got no gradient hook
    /// call in this iteration: unused parameters, or no backward at all).
    pub launched_in_finish: usize,
    /// Bucket indices in the order their all-reduces were started.
    pub launch_order: Vec<usize>,
}

struct Bucket {
    /// The contiguous gradient storage (one dtype).
    buffer: Tensor,
    /// Indices (into the parameter list) of the parameters it holds.
    params: Vec<usize>,
    /// Element offset of each of those parameters in `buffer`.
    offsets: Vec<usize>,
}

#[derive(Default)]
struct Progress {
    /// Per parameter: its hook ran this iteration.
    ready: Vec<bool>,
    /// Per bucket: parameters still to become ready.
    pending: Vec<usize>,
    /// The next bucket to start (buckets start in index order on every rank).
    next: usize,
    works: Vec<Box<dyn PendingWork>>,
    stats: IterationStats,
}

struct State {
    comm: Arc<dyn Collective>,
    params: Vec<Var>,
    buckets: Vec<Bucket>,
    /// Bucket of each parameter.
    bucket_of: Vec<usize>,
    progress: Mutex<Progress>,
}

/// Data-parallel training of a set of parameters; see the
/// [module docs](super). Typical use, on every rank:
///
/// ```
/// use std::sync::Arc;
/// use strata_autograd::distributed::{DdpConfig, DistributedDataParallel, LocalGroup};
/// use strata_autograd::{Optimizer, Sgd, Var};
/// use strata_tensor::{Device, Tensor};
/// let (_group, mut ranks) = LocalGroup::new(1, Device::Cpu).unwrap();
/// let w = Var::parameter(Tensor::from_slice(&[1.0f32, 2.0], &[2], Device::Cpu).unwrap()).unwrap();
/// let ddp = DistributedDataParallel::new(&[w.clone()], Arc::new(ranks.remove(0)), DdpConfig::default()).unwrap();
/// let mut opt = Sgd::new(vec![w.clone()], 0.1, 0.0).unwrap();
/// let x = Var::new(Tensor::from_slice(&[3.0f32, 4.0], &[2], Device::Cpu).unwrap());
/// ddp.zero_grad().unwrap();
/// w.mul(&x).unwrap().sum(None, false).unwrap().backward().unwrap();
/// ddp.finish().unwrap();                  // gradients averaged across ranks
/// opt.step().unwrap();
/// assert_eq!(w.to_vec::<f32>().unwrap(), vec![0.7, 1.6]);
/// ```
pub struct DistributedDataParallel {
    state: Arc<State>,
    hooks: Vec<HookHandle>,
}

impl std::fmt::Debug for DistributedDataParallel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedDataParallel")
            .field("rank", &self.state.comm.rank())
            .field("world_size", &self.state.comm.world_size())
            .field("buckets", &self.bucket_params())
            .finish()
    }
}

fn ddp_err(msg: impl Into<String>) -> AutogradError {
    AutogradError::Distributed { msg: msg.into() }
}

/// Groups parameters into buckets: in reverse order (the order backward
/// produces their gradients), one dtype per bucket, at most `cap` bytes
/// unless one parameter alone is larger. Returns, per bucket, its dtype and
/// its parameter indices.
fn plan_buckets(params: &[Var], cap: usize) -> Vec<(DType, Vec<usize>)> {
    let mut buckets: Vec<(DType, Vec<usize>, usize)> = Vec::new();
    // The open bucket of each dtype, as an index into `buckets`.
    let mut open: Vec<(DType, usize)> = Vec::new();
    for i in (0..params.len()).rev() {
        let dtype = params[i].dtype();
        // Saturating: an expanded parameter may count more bytes than usize
        // holds (its bucket buffer then fails to allocate, a typed error).
        let bytes = params[i].numel().saturating_mul(dtype.size());
        let slot = open.iter().position(|(d, _)| *d == dtype);
        match slot {
            Some(s) if buckets[open[s].1].2.saturating_add(bytes) <= cap => {
                let b = &mut buckets[open[s].1];
                b.1.push(i);
                b.2 = b.2.saturating_add(bytes);
            }
            _ => {
                buckets.push((dtype, vec![i], bytes));
                let idx = buckets.len() - 1;
                match slot {
                    Some(s) => open[s].1 = idx,
                    None => open.push((dtype, idx)),
                }
            }
        }
    }
    buckets.into_iter().map(|(d, p, _)| (d, p)).collect()
}

impl DistributedDataParallel {
    /// Sets up data parallelism for `params` (leaves that require grad, on
    /// the collective's device, each given once): broadcasts them from rank
    /// 0 (unless `config` says not to), allocates the buckets, makes every
    /// `.grad` a view into its bucket (keeping a gradient already there) and
    /// registers the hooks that start each bucket's all-reduce.
    pub fn new(
        params: &[Var],
        comm: Arc<dyn Collective>,
        config: DdpConfig,
    ) -> Result<DistributedDataParallel> {
        if params.is_empty() {
            return Err(ddp_err("no parameters given"));
        }
        if config.bucket_cap_bytes == 0 {
            return Err(ddp_err("bucket_cap_bytes must be positive"));
        }
        let device = comm.device();
        // Each parameter's address, to find one given twice in linear time
        // (a scan of the earlier ones was quadratic in the count).
        let mut seen = std::collections::HashSet::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            if !p.is_leaf() || !p.requires_grad() {
                return Err(ddp_err(format!(
                    "parameter {i} is not a leaf that requires grad"
                )));
            }
            if p.device() != device {
                return Err(ddp_err(format!(
                    "parameter {i} is on {} but the communicator's device is {device}",
                    p.device()
                )));
            }
            if !seen.insert(Arc::as_ptr(p.inner())) {
                return Err(ddp_err(format!("parameter {i} is given twice")));
            }
        }
        if config.broadcast_parameters {
            // Refused before anything is sent: writing the broadcast values
            // into a parameter whose elements share memory (an expanded
            // one) fails in PyTorch too, and failing after the broadcast
            // would leave the earlier parameters changed.
            if let Some(i) = params
                .iter()
                .position(|p| p.data().layout().has_internal_overlap())
            {
                return Err(ddp_err(format!(
                    "parameter {i} has elements that share memory (an expanded tensor); \
                     the broadcast cannot write into it: pass a copy, or set \
                     broadcast_parameters to false"
                )));
            }
        }
        let _no_grad = NoGradGuard::new();
        if config.broadcast_parameters {
            broadcast_parameters(params, comm.as_ref())?;
        }
        let mut buckets = Vec::new();
        let mut bucket_of = vec![0; params.len()];
        for (b, (dtype, members)) in plan_buckets(params, config.bucket_cap_bytes)
            .into_iter()
            .enumerate()
        {
            let total = members
                .iter()
                .try_fold(0usize, |acc, &i| acc.checked_add(params[i].numel()))
                .ok_or_else(|| {
                    ddp_err(format!(
                        "the {dtype} parameters of bucket {b} hold more elements than usize counts; \
                         use a smaller bucket_cap_bytes"
                    ))
                })?;
            let buffer = Tensor::zeros(&[total], dtype, device)?;
            let mut offsets = Vec::with_capacity(members.len());
            let mut off = 0;
            for &i in &members {
                bucket_of[i] = b;
                offsets.push(off);
                off += params[i].numel();
            }
            buckets.push(Bucket {
                buffer,
                params: members,
                offsets,
            });
        }
        let state = Arc::new(State {
            comm,
            params: params.to_vec(),
            buckets,
            bucket_of,
            progress: Mutex::new(Progress::default()),
        });
        for b in &state.buckets {
            for (&i, &off) in b.params.iter().zip(&b.offsets) {
                let view = state.grad_view(b, i, off)?;
                if let Some(old) = params[i].grad() {
                    view.copy_(&old)?;
                }
                params[i].set_grad(Some(view.clone()))?;
                params[i].inner().set_grad_destination(Some(view));
            }
        }
        state.reset(&mut state.progress.lock());
        let mut hooks = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            let weak: Weak<State> = Arc::downgrade(&state);
            hooks.push(
                p.register_post_accumulate_grad_hook(move |_| match weak.upgrade() {
                    Some(s) => s.mark_ready(i),
                    None => Ok(()),
                })?,
            );
        }
        Ok(DistributedDataParallel { state, hooks })
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.state.comm.rank()
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.state.comm.world_size()
    }

    /// The parameters, in the order given.
    pub fn parameters(&self) -> &[Var] {
        &self.state.params
    }

    /// The parameter indices of each bucket, buckets in launch order.
    pub fn bucket_params(&self) -> Vec<Vec<usize>> {
        self.state
            .buckets
            .iter()
            .map(|b| b.params.clone())
            .collect()
    }

    /// Bytes of all buckets (allocated once, from the device's allocator).
    pub fn bucket_bytes(&self) -> usize {
        self.state
            .buckets
            .iter()
            .map(|b| b.buffer.numel() * b.buffer.dtype().size())
            .sum()
    }

    /// Bucket `index`'s buffer (a handle on the same storage), if it exists.
    pub fn bucket(&self, index: usize) -> Option<Tensor> {
        self.state.buckets.get(index).map(|b| b.buffer.clone())
    }

    /// Clears every gradient for the next iteration: `.grad` becomes `None`
    /// (PyTorch's `zero_grad(set_to_none=True)`), with no device work. The
    /// next backward writes each parameter's first gradient straight into its
    /// bucket view (a copy instead of zeroing the bucket and adding into it)
    /// and makes that view its `.grad` again; a parameter that gets no
    /// gradient has its view zeroed when its bucket starts. Call it before
    /// each forward; an optimizer's `zero_grad(true)` does the same.
    pub fn zero_grad(&self) -> Result<()> {
        for p in &self.state.params {
            p.set_grad(None)?;
        }
        Ok(())
    }

    /// Starts the buckets that backward did not (parameters without a
    /// gradient this iteration), waits for every bucket's all-reduce (on a
    /// GPU: the current stream waits), and readies the next iteration.
    /// After it, every `.grad` holds the average over the ranks.
    pub fn finish(&self) -> Result<IterationStats> {
        let (works, mut stats, started) = {
            let mut p = self.state.progress.lock();
            let started = self.state.launch_rest(&mut p);
            let works = std::mem::take(&mut p.works);
            let stats = std::mem::take(&mut p.stats);
            self.state.reset(&mut p);
            (works, stats, started)
        };
        started?;
        for w in works {
            w.wait()?;
        }
        stats.launched_in_finish = stats.launch_order.len() - stats.launched_in_backward;
        Ok(stats)
    }
}

impl Drop for DistributedDataParallel {
    fn drop(&mut self) {
        for h in self.hooks.drain(..) {
            h.remove();
        }
        // Only destinations that are still this instance's bucket views (a
        // later DDP over the same parameters may have set its own).
        for (i, p) in self.state.params.iter().enumerate() {
            let bucket = &self.state.buckets[self.state.bucket_of[i]].buffer;
            if p.inner()
                .grad_destination()
                .is_some_and(|d| d.same_storage(bucket))
            {
                p.inner().set_grad_destination(None);
            }
        }
    }
}

impl State {
    /// The view of bucket `b` that is parameter `i`'s gradient: with the
    /// parameter's strides where it is non-overlapping and dense (so that
    /// the view spans the same `numel` elements from `off`), else
    /// row-major, as PyTorch's `Reducer::initialize_bucket_views` lays the
    /// views out (the layout AccumulateGrad gives a first `.grad`, see
    /// `Var::grad`).
    fn grad_view(&self, b: &Bucket, i: usize, off: usize) -> Result<Tensor> {
        let p = &self.params[i];
        let shape: Vec<i64> = p.shape().iter().map(|&s| s as i64).collect();
        let data = p.data();
        if data.layout().is_dense() && p.numel() > 0 {
            let strides: Vec<i64> = data.strides().iter().map(|&s| s as i64).collect();
            return Ok(b.buffer.as_strided(&shape, &strides, Some(off as i64))?);
        }
        Ok(b.buffer
            .narrow(0, off as i64, p.numel() as i64)?
            .view(&shape)?)
    }

    fn reset(&self, p: &mut Progress) {
        p.ready = vec![false; self.params.len()];
        p.pending = self.buckets.iter().map(|b| b.params.len()).collect();
        p.next = 0;
        p.works.clear();
        p.stats = IterationStats::default();
    }

    /// Parameter `i`'s gradient is final for this iteration (its hook ran).
    fn mark_ready(&self, i: usize) -> Result<()> {
        let mut p = self.progress.lock();
        if p.ready[i] {
            return Err(ddp_err(format!(
                "parameter {i} got its gradient twice in one iteration; call finish() after each backward"
            )));
        }
        let b = self.bucket_of[i];
        // No gradient (none flowed to it this pass) is zeroed at launch.
        let foreign = self.params[i]
            .grad()
            .is_some_and(|g| !g.same_storage(&self.buckets[b].buffer));
        if foreign {
            return Err(ddp_err(format!(
                "the gradient of parameter {i} is not a view into its bucket \
                 (it was assigned with set_grad); set it to None or call \
                 DistributedDataParallel::zero_grad"
            )));
        }
        p.ready[i] = true;
        p.pending[b] -= 1;
        self.launch_ready(&mut p, true)
    }

    /// Starts every bucket not started yet (as if its parameters were ready).
    fn launch_rest(&self, p: &mut Progress) -> Result<()> {
        for pending in &mut p.pending {
            *pending = 0;
        }
        self.launch_ready(p, false)
    }

    /// Starts, in index order, every bucket whose parameters are all ready.
    fn launch_ready(&self, p: &mut Progress, in_backward: bool) -> Result<()> {
        while p.next < self.buckets.len() && p.pending[p.next] == 0 {
            let b = p.next;
            // A parameter without a gradient this iteration contributes zeros.
            let bucket = &self.buckets[b];
            for (&i, &off) in bucket.params.iter().zip(&bucket.offsets) {
                let param = &self.params[i];
                if param.grad().is_none() {
                    let view = self.grad_view(bucket, i, off)?;
                    view.zero_()?;
                    param.set_grad(Some(view))?;
                }
            }
            let work = self
                .comm
                .all_reduce(&self.buckets[b].buffer, ReduceOp::Avg)?;
            p.works.push(work);
            p.stats.launch_order.push(b);
            if in_backward {
                p.stats.launched_in_backward += 1;
            }
            p.next += 1;
        }
        Ok(())
    }
}

/// Copies rank 0's parameters to every rank (in place).
fn broadcast_parameters(params: &[Var], comm: &dyn Collective) -> Result<()> {
    let mut works = Vec::new();
    let mut copies = Vec::new();
    for p in params {
        let data = p.data();
        if data.is_contiguous() {
            works.push(comm.broadcast(data, 0)?);
        } else {
            let c = data.contiguous()?;
            works.push(comm.broadcast(&c, 0)?);
            copies.push((data.clone(), c));
        }
    }
    for w in works {
        w.wait()?;
    }
    for (dst, src) in copies {
        dst.copy_(&src)?;
    }
    Ok(())
}
