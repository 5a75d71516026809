//! Host side of the reductions: splits the input's dims into kept and reduced
//! ones, packs them into the by-value `RMeta` argument and launches one block
//! per output position (grid-stride beyond the grid).

use super::context::{failure, CudaDevice};
use super::kernels::reduce::{source, RMeta, RBLOCK};
use super::kernels::{tag, MAXD};
use super::launch::{base_ptr, launch_raw, Params};
use super::{set_slot, to_acc};
use crate::backend::{Arg, ReduceOp};
use crate::dispatch_dtype;
use crate::dtype::DType;
use crate::error::Result;
use crate::scalar::Scalar;
use crate::storage::Storage;
use std::ffi::c_void;

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
    let kept: Vec<usize> = (0..l.ndim()).filter(|d| !dims.contains(d)).collect();
    let red: Vec<usize> = (0..l.ndim()).filter(|d| dims.contains(d)).collect();
    if kept.len() > MAXD || red.len() > MAXD {
        return Err(failure(
            dev.device(),
            "reduce",
            format!(
                "{} dims exceed the reduction kernel's limit of {MAXD}",
                l.ndim()
            ),
        ));
    }
    let nout: usize = kept.iter().map(|&d| l.shape[d]).product();
    let nred: usize = red.iter().map(|&d| l.shape[d]).product();
    if nout == 0 {
        return Ok(());
    }
    let mut m = RMeta {
        nk: kept.len() as i32,
        nr: red.len() as i32,
        nout: nout as i64,
        nred: nred as i64,
        ksize: [1; MAXD],
        kst: [0; MAXD],
        rsize: [1; MAXD],
        rst: [0; MAXD],
    };
    // Merge neighbouring dims of each group that are contiguous together
    // (row-major order is kept, so positions `k` and outputs `o` are unchanged).
    let merge = |dims: &[usize]| -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = Vec::new();
        for &d in dims {
            let (sz, st) = (l.shape[d] as i64, l.strides[d] as i64);
            if sz == 1 {
                continue;
            }
            match v.last_mut() {
                Some(last) if last.1 == st * sz => *last = (last.0 * sz, st),
                _ => v.push((sz, st)),
            }
        }
        v
    };
    let (km, rm) = (merge(&kept), merge(&red));
    m.nk = km.len() as i32;
    m.nr = rm.len() as i32;
    for (i, &(sz, st)) in km.iter().enumerate() {
        m.ksize[i] = sz;
        m.kst[i] = st;
    }
    for (i, &(sz, st)) in rm.iter().enumerate() {
        m.rsize[i] = sz;
        m.rst[i] = st;
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
    let (mut pin, mut pv, mut pi) = (
        base_ptr(input),
        values.map_or(0, base_ptr),
        indices.map_or(0, base_ptr),
    );
    let csize = compute_size(d);
    let scratch = if parts > 1 {
        Some(Storage::new(
            nout * parts * (csize + 8),
            input.storage.device(),
        )?)
    } else {
        None
    };
    let mut ppv = scratch.as_ref().map_or(0, |s| s.allocation().ptr());
    let mut ppk = ppv + (nout * parts * csize).next_multiple_of(8) as u64;
    if scratch.is_none() {
        ppk = 0;
    }
    let mut parts_i = parts as i32;
    let grid = ((nout * parts) as u64).min(1 << 20) as u32;
    let mut params: [*mut c_void; 8] = [
        (&mut pin) as *mut u64 as *mut c_void,
        (&mut pv) as *mut u64 as *mut c_void,
        (&mut pi) as *mut u64 as *mut c_void,
        (&mut m) as *mut RMeta as *mut c_void,
        (&mut prm) as *mut Params as *mut c_void,
        (&mut parts_i) as *mut i32 as *mut c_void,
        (&mut ppv) as *mut u64 as *mut c_void,
        (&mut ppk) as *mut u64 as *mut c_void,
    ];
    // SAFETY: the parameters match `reduce(const char*, char*, char*, RMeta,
    // Params, int, char*, char*)`; input addresses come from the input's own
    // sizes and strides; the outputs are contiguous with one element per kept
    // position (or null, which the kernel does not write); with several parts
    // the scratch storage holds nout * parts partial values and positions.
    unsafe {
        launch_raw(
            dev,
            &key,
            f[0],
            (grid, 1, 1),
            (RBLOCK, 1, 1),
            dev.stream(),
            &mut params,
        )?
    };
    if parts > 1 {
        let mut nout_i = nout as i64;
        let grid = (nout as u64).min(1 << 20) as u32;
        let mut params: [*mut c_void; 7] = [
            (&mut ppv) as *mut u64 as *mut c_void,
            (&mut ppk) as *mut u64 as *mut c_void,
            (&mut pv) as *mut u64 as *mut c_void,
            (&mut pi) as *mut u64 as *mut c_void,
            (&mut nout_i) as *mut i64 as *mut c_void,
            (&mut parts_i) as *mut i32 as *mut c_void,
            (&mut prm) as *mut Params as *mut c_void,
        ];
        // SAFETY: the parameters match `combine(const char*, const char*,
        // char*, char*, i64, int, Params)`; the scratch holds the partials the
        // first kernel wrote on the same stream; the outputs are as above.
        unsafe {
            launch_raw(
                dev,
                &key,
                f[1],
                (grid, 1, 1),
                (RBLOCK, 1, 1),
                dev.stream(),
                &mut params,
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
