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
use crate::error::Result;
use crate::scalar::Scalar;
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
    for (i, &d) in kept.iter().enumerate() {
        m.ksize[i] = l.shape[d] as i64;
        m.kst[i] = l.strides[d] as i64;
    }
    for (i, &d) in red.iter().enumerate() {
        m.rsize[i] = l.shape[d] as i64;
        m.rst[i] = l.strides[d] as i64;
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
    let f = super::nvrtc::functions(dev, &key, || source(op, d), &["reduce"])?[0];
    let mut pin = base_ptr(input);
    let mut pv = values.map_or(0, base_ptr);
    let mut pi = indices.map_or(0, base_ptr);
    let grid = (nout as u64).min(1 << 20) as u32;
    let mut params: [*mut c_void; 5] = [
        (&mut pin) as *mut u64 as *mut c_void,
        (&mut pv) as *mut u64 as *mut c_void,
        (&mut pi) as *mut u64 as *mut c_void,
        (&mut m) as *mut RMeta as *mut c_void,
        (&mut prm) as *mut Params as *mut c_void,
    ];
    // SAFETY: the parameters match `reduce(const char*, char*, char*, RMeta,
    // Params)`; input addresses come from the input's own sizes and strides,
    // and the outputs are contiguous with one element per kept position (or
    // null, which the kernel does not write).
    unsafe {
        launch_raw(
            dev,
            &key,
            f,
            (grid, 1, 1),
            (RBLOCK, 1, 1),
            dev.stream(),
            &mut params,
        )
    }
}
