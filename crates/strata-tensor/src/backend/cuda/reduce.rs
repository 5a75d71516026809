//! Host side of the reductions: the shared [`ReducePlan`] (kept and reduced
//! dims, merged), packed into the by-value `RMeta` argument, picks a kernel
//! (see `kernels::reduce`): `cols` where the kept innermost dim is
//! contiguous and the reduced elements are one strided dim, `rows` where
//! each output's elements are contiguous, the general kernel otherwise; each
//! splits outputs over several blocks (and a second pass) when there are too
//! few outputs to fill the GPU.

use super::context::{CudaDevice, Function};
use super::kernels::reduce::{source, vec_width, RMeta, CBLOCK_X, CBLOCK_Y, RBLOCK, WARP_ROW_MAX};
use super::kernels::{tag, MAXD};
use super::launch::{base_ptr, elementwise, launch, KArg, Params};
use super::{set_slot, to_acc};
use crate::backend::{Arg, Mem, ReduceOp};
use crate::dispatch_dtype;
use crate::dtype::DType;
use crate::error::Result;
use crate::layout::Layout;
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
    let plan = ReducePlan::new(&l.shape, &l.strides, dims);
    let (nout, nred) = (plan.outputs, plan.count);
    if nout == 0 {
        return Ok(());
    }
    if plan.kept.len() > MAXD || plan.reduced.len() > MAXD {
        return reduce_regrouped(dev, op, values, indices, input, dims);
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
    let f = super::nvrtc::functions(
        dev,
        &key,
        || source(op, d),
        &[
            "reduce",
            "combine",
            "rows",
            "cols",
            "cols1",
            "combine_t",
            "rows_warp",
        ],
    )?;
    let k = Kernels {
        general: f[0],
        combine: f[1],
        rows: f[2],
        cols: f[3],
        cols1: f[4],
        combine_t: f[5],
        rows_warp: f[6],
    };
    let ptrs = Ptrs {
        input: base_ptr(input),
        values: values.map_or(0, base_ptr),
        indices: indices.map_or(0, base_ptr),
    };
    // The stride of the one (merged) reduced dim; 0 where nothing is
    // reduced (one element per output).
    let single = match plan.reduced.as_slice() {
        [] => Some(0),
        [r] => Some(r.stride),
        _ => None,
    };
    let contiguous = plan.reduced.is_empty() || single == Some(1);
    match (plan.kept.last(), single) {
        // The kept innermost dim is contiguous and the reduced elements are
        // one strided dim: column-parallel.
        (Some(kept), Some(rs)) if kept.stride == 1 && rs != 1 => {
            cols(dev, &key, &k, &ptrs, &m, &prm, d, &plan, kept.size, rs)
        }
        // Each output's elements are contiguous (or there is one each).
        _ if contiguous => rows(dev, &key, &k, &ptrs, &m, &prm, d, nout, nred),
        _ => general(dev, &key, &k, &ptrs, &m, &prm, d, nout, nred),
    }
}

/// A reduction whose kept or reduced dims do not merge into `MAXD` groups
/// (PyTorch reduces up to 25 such dims): the input is copied into scratch
/// memory laid out as its kept dims then its reduced dims, each group in its
/// own order (so outputs and positions are unchanged), where each group is
/// one run, and that copy is reduced.
fn reduce_regrouped(
    dev: &CudaDevice,
    op: ReduceOp,
    values: Option<&Arg>,
    indices: Option<&Arg>,
    input: &Arg,
    dims: &[usize],
) -> Result<()> {
    let l = &input.layout;
    let (layout, nkept) = regrouped(l, dims);
    let shape = layout.shape.clone();
    let nd = shape.len();
    let src = Arg {
        mem: input.mem,
        layout,
        dtype: input.dtype,
    };
    let d = input.dtype;
    let nbytes = l.numel() * d.size();
    // Nothing to copy (a reduced dim of size 0): the kernels read nothing.
    let scratch = if nbytes > 0 {
        Some(dev.scratch(nbytes)?)
    } else {
        None
    };
    let tmp = Arg {
        mem: Mem {
            ptr: scratch.as_ref().map_or(input.mem.ptr, |s| s.ptr()),
            nbytes,
            device: dev.device(),
            life: std::marker::PhantomData,
        },
        layout: Layout::contiguous(&shape),
        dtype: d,
    };
    elementwise(
        dev,
        "copy",
        || super::kernels::ops::cast(d, d),
        &tmp,
        &[&src],
        Params::default(),
    )?;
    let rdims: Vec<usize> = (nkept..nd).collect();
    // The scratch goes back to this stream's cache after the launches
    // queued on it.
    reduce(dev, op, values, indices, &tmp, &rdims)
}

/// The view of `l` with its kept dims first and its reduced dims (`dims`)
/// last, each group in its own order, and the number of kept dims: its
/// row-major order is output by output, each output's elements in the
/// order of their positions.
fn regrouped(l: &Layout, dims: &[usize]) -> (Layout, usize) {
    let nd = l.ndim();
    let order: Vec<usize> = (0..nd)
        .filter(|d| !dims.contains(d))
        .chain((0..nd).filter(|d| dims.contains(d)))
        .collect();
    let nkept = nd - (0..nd).filter(|d| dims.contains(d)).count();
    let layout = Layout {
        shape: order.iter().map(|&d| l.shape[d]).collect(),
        strides: order.iter().map(|&d| l.strides[d]).collect(),
        offset: l.offset,
    };
    (layout, nkept)
}

/// The kernels of one reduction module.
struct Kernels {
    general: Function,
    combine: Function,
    rows: Function,
    cols: Function,
    cols1: Function,
    combine_t: Function,
    rows_warp: Function,
}

/// Device addresses of the input's first element and of the outputs (0:
/// absent).
struct Ptrs {
    input: u64,
    values: u64,
    indices: u64,
}

/// Blocks that fill the GPU: `per_sm` resident blocks on every SM.
fn fill(dev: &CudaDevice, per_sm: usize) -> usize {
    dev.sm_count.max(1) as usize * per_sm
}

/// Scratch for `slots` partial values of `d` and their positions: the
/// allocation and the addresses of the values and of the positions.
fn partials(
    dev: &CudaDevice,
    d: DType,
    slots: usize,
) -> Result<(strata_alloc::Allocation, u64, u64)> {
    let vbytes = (slots * compute_size(d)).next_multiple_of(8);
    let s = dev.scratch(vbytes + slots * 8)?;
    let (pv, pk) = (s.ptr(), s.ptr() + vbytes as u64);
    Ok((s, pv, pk))
}

/// Outputs whose elements are contiguous: the `rows` kernel, each output
/// split over several blocks (and a `combine` pass) when there are too few
/// outputs to fill the GPU.
#[allow(clippy::too_many_arguments)]
fn rows(
    dev: &CudaDevice,
    key: &str,
    k: &Kernels,
    p: &Ptrs,
    m: &RMeta,
    prm: &Params,
    d: DType,
    nout: usize,
    nred: usize,
) -> Result<()> {
    let want = fill(dev, 8);
    // A part is at least 4 vector loads per thread.
    let min_part = 4 * RBLOCK as usize * vec_width(d);
    let parts = if nout < want && nred >= 2 * min_part {
        want.div_ceil(nout).min(nred / min_part).clamp(1, MAX_PARTS)
    } else {
        1
    };
    if parts == 1 && nred <= WARP_ROW_MAX {
        // Short rows: a warp per output.
        let per_block = (RBLOCK / 32) as usize;
        let grid = (nout.div_ceil(per_block) as u64).min(1 << 20) as u32;
        let (one, null) = (1i32, 0u64);
        // SAFETY: `rows_warp` takes `rows`' parameters (const char*, char*,
        // char*, RMeta, Params, int, char*, char*) and reads, for each
        // output, only its `m.nred` contiguous elements from its kept
        // position's offset (the plan guarantees them); it writes one
        // element per output to the contiguous outputs (null ones are not
        // written); the partial pointers are unused.
        return unsafe {
            launch(
                dev,
                key,
                k.rows_warp,
                (grid, 1, 1),
                (RBLOCK, 1, 1),
                dev.stream(),
                [
                    KArg::of(&p.input),
                    KArg::of(&p.values),
                    KArg::of(&p.indices),
                    KArg::of(m),
                    KArg::of(prm),
                    KArg::of(&one),
                    KArg::of(&null),
                    KArg::of(&null),
                ],
            )
        };
    }
    two_pass(dev, key, k.rows, k, p, m, prm, d, nout, parts)
}

/// Any layout: the general kernel (one block per output, split over parts
/// like `rows`).
#[allow(clippy::too_many_arguments)]
fn general(
    dev: &CudaDevice,
    key: &str,
    k: &Kernels,
    p: &Ptrs,
    m: &RMeta,
    prm: &Params,
    d: DType,
    nout: usize,
    nred: usize,
) -> Result<()> {
    let want = fill(dev, 8);
    let parts = if nout < want && nred >= 16 * RBLOCK as usize {
        want.div_ceil(nout)
            .min(nred / (8 * RBLOCK as usize))
            .clamp(1, MAX_PARTS)
    } else {
        1
    };
    two_pass(dev, key, k.general, k, p, m, prm, d, nout, parts)
}

/// Launches `first` (`rows` or `reduce`: same parameters) over `nout *
/// parts` blocks and, with several parts, `combine` over its partials.
#[allow(clippy::too_many_arguments)]
fn two_pass(
    dev: &CudaDevice,
    key: &str,
    first: Function,
    k: &Kernels,
    p: &Ptrs,
    m: &RMeta,
    prm: &Params,
    d: DType,
    nout: usize,
    parts: usize,
) -> Result<()> {
    let scratch = if parts > 1 {
        Some(partials(dev, d, nout * parts)?)
    } else {
        None
    };
    let (ppv, ppk) = scratch.as_ref().map_or((0, 0), |s| (s.1, s.2));
    let parts_i = parts as i32;
    let grid = ((nout * parts) as u64).min(1 << 20) as u32;
    let kargs = [
        KArg::of(&p.input),
        KArg::of(&p.values),
        KArg::of(&p.indices),
        KArg::of(m),
        KArg::of(prm),
        KArg::of(&parts_i),
        KArg::of(&ppv),
        KArg::of(&ppk),
    ];
    // SAFETY: the parameters match `reduce`'s and `rows`' (const char*,
    // char*, char*, RMeta, Params, int, char*, char*); input addresses come
    // from the input's own sizes and strides (`rows` only reads the
    // `m.nred` contiguous elements of each output, which the plan
    // guarantees); the outputs are contiguous with one element per kept
    // position (or null, which the kernels do not write); with several parts
    // the scratch holds nout * parts partial values and positions.
    unsafe {
        launch(
            dev,
            key,
            first,
            (grid, 1, 1),
            (RBLOCK, 1, 1),
            dev.stream(),
            kargs,
        )?
    };
    if let Some((scratch, _, _)) = scratch {
        let nout_i = nout as i64;
        let grid = (nout as u64).min(1 << 20) as u32;
        let kargs = [
            KArg::of(&ppv),
            KArg::of(&ppk),
            KArg::of(&p.values),
            KArg::of(&p.indices),
            KArg::of(&nout_i),
            KArg::of(&parts_i),
            KArg::of(prm),
        ];
        // SAFETY: the parameters match `combine(const char*, const char*,
        // char*, char*, i64, int, Params)`; the scratch holds the partials the
        // first kernel wrote on the same stream; the outputs are as above.
        unsafe {
            launch(
                dev,
                key,
                k.combine,
                (grid, 1, 1),
                (RBLOCK, 1, 1),
                dev.stream(),
                kargs,
            )?
        };
        // The scratch goes back to the cache of this stream: later users
        // are ordered after the kernels above.
        drop(scratch);
    }
    Ok(())
}

/// The kept innermost dim (`ncols` columns) is contiguous and each output
/// folds one strided dim (`rs` apart): the `cols` kernel, the reduced dim
/// split over `blockIdx.y` parts (and a `combine_t` pass) when there are too
/// few column tiles to fill the GPU.
#[allow(clippy::too_many_arguments)]
fn cols(
    dev: &CudaDevice,
    key: &str,
    k: &Kernels,
    p: &Ptrs,
    m: &RMeta,
    prm: &Params,
    d: DType,
    plan: &ReducePlan,
    ncols: usize,
    rs: usize,
) -> Result<()> {
    let (nout, nred) = (plan.outputs, plan.count);
    // Vector loads of `w` columns where every row of every group starts on
    // a multiple of `w` elements from an aligned address.
    let w = vec_width(d).min(4);
    let esize = d.size() as u64;
    let groups_aligned = plan.kept[..plan.kept.len() - 1]
        .iter()
        .all(|k| k.stride.is_multiple_of(w));
    let vector =
        w > 1 && p.input.is_multiple_of(w as u64 * esize) && rs.is_multiple_of(w) && groups_aligned;
    let (f, w) = if vector { (k.cols, w) } else { (k.cols1, 1) };
    let tile = CBLOCK_X as usize * w;
    let tiles = ncols.div_ceil(tile);
    let blocks = (nout / ncols) * tiles;
    let want = fill(dev, 4);
    // A part is at least 4 loads per thread.
    let min_part = 4 * CBLOCK_Y as usize;
    let parts = if blocks < want && nred >= 2 * min_part {
        want.div_ceil(blocks)
            .min(nred / min_part)
            .clamp(1, MAX_PARTS)
    } else {
        1
    };
    let scratch = if parts > 1 {
        Some(partials(dev, d, nout * parts)?)
    } else {
        None
    };
    let (ppv, ppk) = scratch.as_ref().map_or((0, 0), |s| (s.1, s.2));
    let (ncols_i, tiles_i) = (ncols as i64, tiles as i64);
    let grid = ((blocks as u64).min(1 << 20) as u32, parts as u32, 1);
    let kargs = [
        KArg::of(&p.input),
        KArg::of(&p.values),
        KArg::of(&p.indices),
        KArg::of(m),
        KArg::of(prm),
        KArg::of(&ncols_i),
        KArg::of(&tiles_i),
        KArg::of(&ppv),
        KArg::of(&ppk),
    ];
    // SAFETY: the parameters match `cols`/`cols1` (const char*, char*,
    // char*, RMeta, Params, i64, i64, char*, char*); every address read is
    // the base of a kept group plus a column below `ncols` plus a reduced
    // position below `m.nred` times `rs`: elements of the input's own
    // layout; vector loads are used only where every such row is aligned to
    // the vector (checked above); outputs and scratch as in `two_pass`, the
    // partials stored [part][out].
    unsafe {
        launch(
            dev,
            key,
            f,
            grid,
            (CBLOCK_X, CBLOCK_Y, 1),
            dev.stream(),
            kargs,
        )?
    };
    if let Some((scratch, _, _)) = scratch {
        let (nout_i, parts_i) = (nout as i64, parts as i32);
        let grid = (nout.div_ceil(RBLOCK as usize) as u64).min(1 << 20) as u32;
        let kargs = [
            KArg::of(&ppv),
            KArg::of(&ppk),
            KArg::of(&p.values),
            KArg::of(&p.indices),
            KArg::of(&nout_i),
            KArg::of(&parts_i),
            KArg::of(prm),
        ];
        // SAFETY: the parameters match `combine_t(const char*, const char*,
        // char*, char*, i64, int, Params)`; the scratch holds the nout *
        // parts partials `cols` wrote on the same stream.
        unsafe {
            launch(
                dev,
                key,
                k.combine_t,
                (grid, 1, 1),
                (RBLOCK, 1, 1),
                dev.stream(),
                kargs,
            )?
        };
        drop(scratch);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-dim layout with its dims reversed (nothing merges) reduced over
    /// dim 0 keeps 15 groups; its regrouped copy keeps one of each, with the
    /// same outputs and count, and lists every output's elements in the
    /// order of their positions, as the plan of the original walks them.
    #[test]
    fn a_regrouped_copy_reduces_as_the_original() {
        let nd = 16;
        let shape: Vec<usize> = (0..nd).map(|d| 2 + d % 2).collect();
        let rev: Vec<usize> = shape.iter().rev().copied().collect();
        let rev_st = Layout::contiguous(&rev).strides;
        let l = Layout {
            strides: (0..nd).map(|d| rev_st[nd - 1 - d]).collect(),
            shape,
            offset: 5,
        };
        for dims in [vec![0], vec![1, 3, 4], (0..nd).collect::<Vec<_>>()] {
            let plan = ReducePlan::new(&l.shape, &l.strides, &dims);
            assert!(plan.kept.len() > MAXD || plan.reduced.len() > MAXD);
            let (g, nkept) = regrouped(&l, &dims);
            assert_eq!(nkept, nd - dims.len());
            let c = Layout::contiguous(&g.shape);
            let rdims: Vec<usize> = (nkept..nd).collect();
            let after = ReducePlan::new(&c.shape, &c.strides, &rdims);
            assert!(after.kept.len() <= 1 && after.reduced.len() <= 1);
            assert_eq!((after.outputs, after.count), (plan.outputs, plan.count));
            // Element (output o, position k) of the original plan.
            let red = Layout {
                shape: plan.reduced.iter().map(|r| r.size).collect(),
                strides: plan.reduced.iter().map(|r| r.stride).collect(),
                offset: 0,
            };
            let want: Vec<usize> = plan
                .output_offsets()
                .flat_map(|o| {
                    red.indices()
                        .map(move |k| l.offset + o + k)
                        .collect::<Vec<_>>()
                })
                .collect();
            assert_eq!(g.indices().collect::<Vec<_>>(), want);
        }
    }
}
