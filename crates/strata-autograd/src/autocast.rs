//! Automatic mixed precision (PyTorch's `torch.autocast`): a scoped,
//! thread-local region for one device type and one low-precision dtype
//! (bf16 or f16) in which each op runs in the precision its policy names.
//!
//! The policy of every op is in **two tables**, one per device type as in
//! PyTorch: [`POLICIES`] for CUDA and [`CPU_POLICIES`] for the CPU, which
//! the op wrappers of this crate consult through [`cast_inputs`] before
//! computing (one thread-local read when no region is active):
//!
//! | policy | ops (CUDA) | ops (CPU) | inputs become |
//! |---|---|---|---|
//! | [`CastPolicy::LowerPrecision`] | `matmul`, `mm`, `bmm`, `linear`, `addmm`, `baddbmm`, `attention` (its softmax computes in f32) | the same | the region's dtype (f32, f16, bf16 inputs; f64 is left alone) |
//! | [`CastPolicy::Fp32`] | `softmax`, `log_softmax`, `layer_norm`, the losses, `sum`, `mean`, `cumsum`, `exp`, `log`, `pow`, `rsqrt`, ... | the losses (`cross_entropy`, `nll_loss`, `mse_loss`) | f32 |
//! | [`CastPolicy::Promote`] | `cat`, `stack`, `addcmul`, `addcdiv`, `scatter_add`, `index_put`, `where` | `cat`, `stack` | the widest float dtype among them |
//!
//! Ops not in the table run in their inputs' dtypes; binary element-wise ops
//! (`add`, `mul`, ...) then follow ordinary type promotion, so bf16 + f32 is
//! f32, as under PyTorch's autocast. On the CPU, PyTorch's autocast casts
//! only the matrix products (to the low precision) and the losses (to f32):
//! a softmax, layer_norm or sum of a bf16 product stays in bf16 there
//! (computed in f32 inside the kernel, rounded to bf16), where CUDA's
//! computes it from an f32 copy and returns f32.
//!
//! Casts are recorded ops (`ToCopyBackward`), so gradients flow back to the
//! f32 tensors in their own dtype. A leaf that requires grad (a parameter) in
//! f32 is cast **once per region** (and again after an in-place change, such
//! as an optimizer step inside the region, where PyTorch's cache keeps handing
//! out the stale copy): the low-precision copy is kept in a cache that is
//! freed when the outermost region ends (as PyTorch's autocast cache).
//! The cache is used only while grad mode is on, so a copy made under
//! `no_grad` (say in a checkpointed forward) is never reused where a gradient
//! must flow through it. Every graph recorded in the region shares the
//! copy's cast node, which saves nothing and is never released by a
//! backward: training iterations may run inside one region.
//!
//! ```
//! use strata_autograd::{autocast, DeviceType, Var};
//! use strata_tensor::{DType, Device, Tensor};
//! let w = Var::parameter(Tensor::ones(&[4, 4], DType::F32, Device::Cpu).unwrap()).unwrap();
//! let x = Var::new(Tensor::ones(&[2, 4], DType::F32, Device::Cpu).unwrap());
//! let loss = autocast(DeviceType::Cpu, DType::BF16, || -> strata_autograd::Result<Var> {
//!     let y = x.matmul(&w)?;               // bf16
//!     assert_eq!(y.dtype(), DType::BF16);
//!     assert_eq!(y.sum(None, false)?.dtype(), DType::BF16);  // f32 on CUDA
//!     y.mse_loss(&Var::new(Tensor::zeros(&[2, 4], DType::F32, Device::Cpu)?), Default::default(), None)
//! }).unwrap().unwrap();
//! assert_eq!(loss.dtype(), DType::F32);    // a loss: f32 on both
//! loss.backward().unwrap();
//! assert_eq!(w.grad().unwrap().dtype(), DType::F32);  // gradients reach the f32 parameter
//! ```

use crate::error::{AutogradError, Result};
use crate::grad_mode::is_grad_enabled;
use crate::var::Var;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use strata_tensor::{DType, Device, Tensor};

/// The kind of device an autocast region applies to (ops on tensors of other
/// devices are not affected).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceType {
    /// The CPU.
    Cpu,
    /// Any CUDA device.
    Cuda,
}

impl DeviceType {
    /// The kind of `device`.
    pub fn of(device: Device) -> DeviceType {
        match device {
            Device::Cpu => DeviceType::Cpu,
            Device::Cuda(_) => DeviceType::Cuda,
        }
    }
}

/// How an op's inputs are cast inside an autocast region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastPolicy {
    /// To the region's low-precision dtype (matrix products).
    LowerPrecision,
    /// To f32 (numerically sensitive ops: softmax, norms, losses, reductions).
    Fp32,
    /// To the widest float dtype among the inputs (ops that do not promote by themselves).
    Promote,
}

/// The autocast policy on CUDA devices of every op that has one, by op
/// name (PyTorch's CUDA lists; the CPU's are [`CPU_POLICIES`]).
pub const POLICIES: &[(&str, CastPolicy)] = &[
    // Matrix products: the low-precision dtype (tensor cores).
    ("matmul", CastPolicy::LowerPrecision),
    ("mm", CastPolicy::LowerPrecision),
    ("bmm", CastPolicy::LowerPrecision),
    ("linear", CastPolicy::LowerPrecision),
    ("addmm", CastPolicy::LowerPrecision),
    ("baddbmm", CastPolicy::LowerPrecision),
    ("conv1d", CastPolicy::LowerPrecision),
    ("conv2d", CastPolicy::LowerPrecision),
    ("conv3d", CastPolicy::LowerPrecision),
    ("conv_transpose1d", CastPolicy::LowerPrecision),
    ("conv_transpose2d", CastPolicy::LowerPrecision),
    ("conv_transpose3d", CastPolicy::LowerPrecision),
    // Attention's GEMMs (its softmax computes in f32 inside the op).
    ("attention", CastPolicy::LowerPrecision),
    // Numerically sensitive ops: f32.
    ("softmax", CastPolicy::Fp32),
    ("log_softmax", CastPolicy::Fp32),
    ("layer_norm", CastPolicy::Fp32),
    ("cross_entropy", CastPolicy::Fp32),
    ("nll_loss", CastPolicy::Fp32),
    ("mse_loss", CastPolicy::Fp32),
    ("sum", CastPolicy::Fp32),
    ("mean", CastPolicy::Fp32),
    ("cumsum", CastPolicy::Fp32),
    ("exp", CastPolicy::Fp32),
    ("log", CastPolicy::Fp32),
    ("pow", CastPolicy::Fp32),
    ("rsqrt", CastPolicy::Fp32),
    ("norm", CastPolicy::Fp32),
    ("cdist", CastPolicy::Fp32),
    // Multi-input ops that do not promote by themselves: the widest dtype.
    ("cat", CastPolicy::Promote),
    ("stack", CastPolicy::Promote),
    ("addcmul", CastPolicy::Promote),
    ("addcdiv", CastPolicy::Promote),
    ("scatter_add", CastPolicy::Promote),
    ("index_put", CastPolicy::Promote),
    ("where", CastPolicy::Promote),
];

/// The autocast policy on the CPU of every op that has one, by op name:
/// PyTorch 2.15's CPU lists (`autocast_mode.cpp`), restricted to strata's
/// ops. They are shorter than CUDA's: softmax, log_softmax, layer_norm,
/// the reductions and the element-wise math are in neither of its CPU
/// lists, so they run in their inputs' dtype (a bf16 softmax is bf16), and
/// `where`, `addcmul` and `addcdiv` follow ordinary type promotion while
/// `scatter_add` and `index_put` need equal dtypes.
///
/// ```python
/// with torch.autocast("cpu", dtype=torch.bfloat16):
///     h = x @ w                  # bf16
///     h.softmax(-1).dtype        # torch.bfloat16 (torch.float32 on CUDA)
///     F.cross_entropy(h, t).dtype  # torch.float32
/// ```
pub const CPU_POLICIES: &[(&str, CastPolicy)] = &[
    ("matmul", CastPolicy::LowerPrecision),
    ("mm", CastPolicy::LowerPrecision),
    ("bmm", CastPolicy::LowerPrecision),
    ("linear", CastPolicy::LowerPrecision),
    ("addmm", CastPolicy::LowerPrecision),
    ("baddbmm", CastPolicy::LowerPrecision),
    ("conv1d", CastPolicy::LowerPrecision),
    ("conv2d", CastPolicy::LowerPrecision),
    ("conv3d", CastPolicy::LowerPrecision),
    ("conv_transpose1d", CastPolicy::LowerPrecision),
    ("conv_transpose2d", CastPolicy::LowerPrecision),
    ("conv_transpose3d", CastPolicy::LowerPrecision),
    // PyTorch's `scaled_dot_product_attention`.
    ("attention", CastPolicy::LowerPrecision),
    ("cross_entropy", CastPolicy::Fp32),
    ("nll_loss", CastPolicy::Fp32),
    ("mse_loss", CastPolicy::Fp32),
    ("cdist", CastPolicy::Fp32),
    ("cat", CastPolicy::Promote),
    ("stack", CastPolicy::Promote),
];

/// The policy of `op` on CUDA devices (`None`: the op runs in its inputs'
/// dtypes); [`policy_on`] for either device type.
pub fn policy(op: &str) -> Option<CastPolicy> {
    policy_on(DeviceType::Cuda, op)
}

/// The policy of `op` in a region for `device_type` (`None`: the op runs
/// in its inputs' dtypes).
pub fn policy_on(device_type: DeviceType, op: &str) -> Option<CastPolicy> {
    let table = match device_type {
        DeviceType::Cuda => POLICIES,
        DeviceType::Cpu => CPU_POLICIES,
    };
    table.iter().find(|(name, _)| *name == op).map(|p| p.1)
}

/// The settings of an active autocast region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AutocastState {
    /// The device type whose ops are cast.
    pub device_type: DeviceType,
    /// The low-precision dtype (bf16 or f16).
    pub dtype: DType,
}

thread_local! {
    /// The innermost region's settings (`None`: outside autocast, or in a disabled region).
    static STATE: Cell<Option<AutocastState>> = const { Cell::new(None) };
    /// Live guards on this thread (enabled or not), outermost first, by
    /// id with the settings each entered; the cache is freed when none is
    /// left. A guard dropped out of order leaves the list wherever it sits,
    /// so the state is always the innermost live guard's.
    static REGIONS: RefCell<Vec<(u64, Option<AutocastState>)>> = const { RefCell::new(Vec::new()) };
    /// The id of the next guard.
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
    /// Low-precision copies of f32 leaves that require grad, by the leaf's
    /// identity and the copy's dtype (nested regions of bf16 and f16 each
    /// get their own copy; keyed by the leaf alone, an f16 region inside a
    /// bf16 one was handed the bf16 copy, and its ops failed on mixed dtypes).
    /// Each copy is kept with the leaf's version when it was made: a leaf
    /// modified in place since (an optimizer step inside the region) is
    /// cast again.
    static CACHE: RefCell<HashMap<(usize, DType), (Var, u64)>> = RefCell::new(HashMap::new());
}

/// The settings of the autocast region active on this thread, if any.
pub fn autocast_state() -> Option<AutocastState> {
    STATE.with(Cell::get)
}

/// Whether an autocast region is active on this thread for `device_type`.
pub fn is_autocast_enabled(device_type: DeviceType) -> bool {
    autocast_state().is_some_and(|s| s.device_type == device_type)
}

/// Number of low-precision parameter copies cached by the current region.
pub fn autocast_cache_len() -> usize {
    CACHE.with(|c| c.borrow().len())
}

/// An autocast region: until dropped, ops on tensors of `device_type` run in
/// the precision their [`policy`] names. Regions nest; a disabled region
/// (`AutocastGuard::disabled()`) turns autocast off inside an enabled one.
#[must_use = "autocast ends as soon as the guard is dropped"]
pub struct AutocastGuard {
    id: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl AutocastGuard {
    /// Enters a region for `device_type` in `dtype`, which must be
    /// [`DType::BF16`] or [`DType::F16`].
    pub fn new(device_type: DeviceType, dtype: DType) -> Result<AutocastGuard> {
        if !matches!(dtype, DType::BF16 | DType::F16) {
            return Err(AutogradError::Autocast {
                msg: format!(
                    "autocast runs in bf16 or f16, not {dtype}; pass DType::BF16 or DType::F16"
                ),
            });
        }
        Ok(AutocastGuard::enter(Some(AutocastState {
            device_type,
            dtype,
        })))
    }

    /// Enters a region in which autocast is off (PyTorch's `autocast(enabled=False)`).
    pub fn disabled() -> AutocastGuard {
        AutocastGuard::enter(None)
    }

    /// Enters a region with the given settings (`None`: disabled); used to
    /// replay the state a checkpointed forward ran under.
    pub(crate) fn enter(state: Option<AutocastState>) -> AutocastGuard {
        let id = NEXT_ID.with(|n| {
            let id = n.get();
            n.set(id.wrapping_add(1));
            id
        });
        REGIONS.with(|r| r.borrow_mut().push((id, state)));
        STATE.with(|s| s.set(state));
        AutocastGuard {
            id,
            _not_send: std::marker::PhantomData,
        }
    }
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        // Guards dropped out of order (`drop(outer)` before `drop(inner)`)
        // must not restore a state that a live guard no longer wants: the
        // state is the innermost remaining guard's, or off when none is left.
        let (state, depth) = REGIONS.with(|r| {
            let mut r = r.borrow_mut();
            r.retain(|&(id, _)| id != self.id);
            (r.last().and_then(|&(_, s)| s), r.len())
        });
        STATE.with(|s| s.set(state));
        if depth == 0 {
            // Take the map out first: dropping the copies may run arbitrary drops.
            let cache = CACHE.with(|c| std::mem::take(&mut *c.borrow_mut()));
            drop(cache);
        }
    }
}

/// Runs `f` in an autocast region for `device_type` in `dtype` (bf16 or f16).
pub fn autocast<R>(device_type: DeviceType, dtype: DType, f: impl FnOnce() -> R) -> Result<R> {
    let _g = AutocastGuard::new(device_type, dtype)?;
    Ok(f())
}

fn is_castable(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

/// `v` in `dtype`, through the cache for f32 parameters.
fn cast(v: &Var, dtype: DType, low: DType) -> Result<Var> {
    if v.dtype() == dtype || !is_castable(v.dtype()) {
        return Ok(v.clone());
    }
    let cacheable = dtype == low
        && v.dtype() == DType::F32
        && v.is_leaf()
        && v.requires_grad()
        && !v.is_view()
        && is_grad_enabled();
    if !cacheable {
        return v.to_dtype(dtype);
    }
    let key = (std::sync::Arc::as_ptr(v.inner()) as usize, dtype);
    // A copy of an older version of the leaf is stale: an optimizer step
    // inside the region updated the leaf, and the next forward must see the
    // update. (PyTorch 2.15's autocast cache hands out the stale copy until
    // the region ends, so every forward of a training loop inside one region
    // ran with the first iteration's weights; strata casts again.)
    let version = v.version();
    if let Some((hit, _)) = CACHE.with(|c| {
        c.borrow()
            .get(&key)
            .filter(|(_, at)| *at == version)
            .cloned()
    }) {
        return Ok(hit);
    }
    let copy = v.to_dtype(dtype)?;
    // Every graph recorded in the region goes through this one cast node
    // (it saves nothing): a backward must not release it for the next.
    if let Some(node) = copy.grad_fn() {
        node.never_release();
    }
    // A stale copy replaced here is dropped after the borrow ends (its
    // drop may run arbitrary drops).
    let stale = CACHE.with(|c| c.borrow_mut().insert(key, (copy.clone(), version)));
    drop(stale);
    Ok(copy)
}

/// The inputs of `op` as the active autocast region wants them, or `None`
/// when nothing changes (no region for the inputs' device type, no policy for
/// `op`, or every input already in the right dtype). Every op wrapper that
/// has a policy calls this first.
pub fn cast_inputs(op: &str, inputs: &[&Var]) -> Result<Option<Vec<Var>>> {
    let Some(state) = autocast_state() else {
        return Ok(None);
    };
    let Some(first) = inputs.first() else {
        return Ok(None);
    };
    if DeviceType::of(first.device()) != state.device_type {
        return Ok(None);
    }
    let Some(policy) = policy_on(state.device_type, op) else {
        return Ok(None);
    };
    let target = match policy {
        CastPolicy::LowerPrecision => state.dtype,
        CastPolicy::Fp32 => DType::F32,
        CastPolicy::Promote => {
            let widest = inputs
                .iter()
                .map(|v| v.dtype())
                .filter(|d| is_castable(*d))
                .max_by_key(|d| match d {
                    DType::F32 => 2,
                    DType::F16 => 1,
                    _ => 0,
                });
            match widest {
                Some(d) => d,
                None => return Ok(None),
            }
        }
    };
    if inputs
        .iter()
        .all(|v| v.dtype() == target || !is_castable(v.dtype()))
    {
        return Ok(None);
    }
    inputs
        .iter()
        .map(|v| cast(v, target, state.dtype))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// A tensor argument of `op` (not a variable: a loss's class weights or
/// probability targets) as the active autocast region wants it, or `None`
/// when it stays as it is. PyTorch's autocast casts every eligible
/// floating-point argument of an op it casts (a bf16 class weight of a
/// cross-entropy in a region is cast to f32 with the logits), not only
/// the differentiable ones.
pub(crate) fn cast_tensor_arg(op: &str, t: Option<&Tensor>) -> Result<Option<Tensor>> {
    let (Some(t), Some(state)) = (t, autocast_state()) else {
        return Ok(None);
    };
    if DeviceType::of(t.device()) != state.device_type {
        return Ok(None);
    }
    let target = match policy_on(state.device_type, op) {
        Some(CastPolicy::Fp32) => DType::F32,
        Some(CastPolicy::LowerPrecision) => state.dtype,
        Some(CastPolicy::Promote) | None => return Ok(None),
    };
    if t.dtype() == target || !is_castable(t.dtype()) {
        return Ok(None);
    }
    Ok(Some(t.to_dtype_contiguous(target)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_one_policy() {
        for table in [POLICIES, CPU_POLICIES] {
            let mut names: Vec<&str> = table.iter().map(|p| p.0).collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "an op is listed twice");
        }
        assert_eq!(policy("matmul"), Some(CastPolicy::LowerPrecision));
        assert_eq!(policy("softmax"), Some(CastPolicy::Fp32));
        assert_eq!(policy("add"), None);
        let cpu = |op| policy_on(DeviceType::Cpu, op);
        assert_eq!(cpu("matmul"), Some(CastPolicy::LowerPrecision));
        assert_eq!(cpu("cross_entropy"), Some(CastPolicy::Fp32));
        assert_eq!(cpu("softmax"), None);
        assert_eq!(cpu("layer_norm"), None);
        assert_eq!(cpu("sum"), None);
    }

    #[test]
    fn regions_nest_restore_and_refuse_wide_dtypes() {
        assert!(autocast_state().is_none());
        assert!(AutocastGuard::new(DeviceType::Cpu, DType::F32).is_err());
        assert!(autocast_state().is_none());
        let outer = AutocastGuard::new(DeviceType::Cpu, DType::BF16).unwrap();
        {
            let _off = AutocastGuard::disabled();
            assert!(!is_autocast_enabled(DeviceType::Cpu));
        }
        assert!(is_autocast_enabled(DeviceType::Cpu));
        assert!(!is_autocast_enabled(DeviceType::Cuda));
        drop(outer);
        assert!(autocast_state().is_none());
    }
}
