//! Host side of the reductions: the shared [`ReducePlan`] (kept and reduced
//! dims, merged), packed into the by-value `RMeta` argument and launches one block
//! per output position (grid-stride beyond the grid).

use super::context::{failure, CudaDevice};
use super::kernels::reduce::{source, RMeta, RBLOCK};
use super::kernels::{tag, MAXD};
use super::launch::{base_ptr, launch, KArg, Params};
use super::{set_slot, to_acc};
use crate::backend::{Arg, ReduceOp};
use crate::dispatch_dtype;
use crate::dtype::DType;
use crate::error::Result;
use crate::reduce_plan::ReducePlan;
use crate::scalar::Scalar;

/// Reduces `input` over `dims` into the contiguous `values` and/or `indices`.
pub(crate) fn reduce(
    dev: &CudaDevice,
    op: ReduceOp,
    values: Option<&Arg>,
    indices: Option<&Arg>,
    input: &Arg,
    dims: &[usize],
) -> Result<()> {
    let l = &input.layout;
    let nred_dims = (0..l.ndim()).filter(|d| dims.contains(d)).count();
    if l.ndim() - nred_dims > MAXD || nred_dims > MAXD {
        return Err(failure(
            dev.device(),
            "reduce",
            format!(
                "{} dims exceed the reduction kernel's limit of {MAXD}",
                l.ndim()
            ),
        ));
    }
    let plan = ReducePlan::new(&l.shape, &l.strides, dims);
    let (nout, nred) = (plan.outputs, plan.count);
    if nout == 0 {
        return Ok(());
    }
    let mut m = RMeta {
        nk: plan.kept.len() as i32,
        nr: plan.reduced.len() as i32,
        nout: nout as i64,
        nred: nred as i64,
        ksize: [1; MAXD],
        kst: [0; MAXD],
        rsize: [1; MAXD],
        rst: [0; MAXD],
    };
    for (i, k) in plan.kept.iter().enumerate() {
        m.ksize[i] = k.size as i64;
        m.kst[i] = k.stride as i64;
    }
    for (i, r) in plan.reduced.iter().enumerate() {
        m.rsize[i] = r.size as i64;
        m.rst[i] = r.stride as i64;
    }
    let d = input.dtype;
    let mut prm = Params::default();
    set_slot(
        &mut prm,
        0,
        d,
        dispatch_dtype!(d, T => to_acc::<T>(Scalar::Int(nred as i64))),
    );
    let key = format!("reduce:{op:?}:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || source(op, d), &["reduce", "combine"])?;
    // Few outputs over many elements: split each output over `parts` blocks.
    let want_blocks = dev.sm_count as usize * 8;
    let parts = if nout < want_blocks && nred >= 16 * RBLOCK as usize {
        want_blocks
            .div_ceil(nout)
            .min(nred / (8 * RBLOCK as usize))
            .clamp(1, MAX_PARTS)
    } else {
        1
    };
    let (pin, pv, pi) = (
        base_ptr(input),
        values.map_or(0, base_ptr),
        indices.map_or(0, base_ptr),
    );
    let csize = compute_size(d);
    let scratch = if parts > 1 {
        Some(dev.scratch((nout * parts * csize).next_multiple_of(8) + nout * parts * 8)?)
    } else {
        None
    };
    let ppv = scratch.as_ref().map_or(0, |s| s.ptr());
    let mut ppk = ppv + (nout * parts * csize).next_multiple_of(8) as u64;
    if scratch.is_none() {
        ppk = 0;
    }
    let parts_i = parts as i32;
    let grid = ((nout * parts) as u64).min(1 << 20) as u32;
    let kargs = [
        KArg::of(&pin),
        KArg::of(&pv),
        KArg::of(&pi),
        KArg::of(&m),
        KArg::of(&prm),
        KArg::of(&parts_i),
        KArg::of(&ppv),
        KArg::of(&ppk),
    ];
    // SAFETY: the parameters match `reduce(const char*, char*, char*, RMeta,
    // Params, int, char*, char*)`; input addresses come from the input's own
    // sizes and strides; the outputs are contiguous with one element per kept
    // position (or null, which the kernel does not write); with several parts
    // the scratch storage holds nout * parts partial values and positions.
    unsafe {
        launch(
            dev,
            &key,
            f[0],
            (grid, 1, 1),
            (RBLOCK, 1, 1),
            dev.stream(),
            kargs,
        )?
    };
    if parts > 1 {
        let nout_i = nout as i64;
        let grid = (nout as u64).min(1 << 20) as u32;
        let kargs = [
            KArg::of(&ppv),
            KArg::of(&ppk),
            KArg::of(&pv),
            KArg::of(&pi),
            KArg::of(&nout_i),
            KArg::of(&parts_i),
            KArg::of(&prm),
        ];
        // SAFETY: the parameters match `combine(const char*, const char*,
        // char*, char*, i64, int, Params)`; the scratch holds the partials the
        // first kernel wrote on the same stream; the outputs are as above.
        unsafe {
            launch(
                dev,
                &key,
                f[1],
                (grid, 1, 1),
                (RBLOCK, 1, 1),
                dev.stream(),
                kargs,
            )?
        };
    }
    // The scratch goes back to the cache of this stream: later users are
    // ordered after the kernels above.
    drop(scratch);
    Ok(())
}

/// Most partials per output.
const MAX_PARTS: usize = 1024;

/// Bytes of the compute type of `d` (partials are stored in it).
fn compute_size(d: DType) -> usize {
    match d {
        DType::F64 | DType::I64 => 8,
        DType::F32 | DType::F16 | DType::BF16 | DType::I32 => 4,
        DType::U8 | DType::Bool => 1,
    }
}
