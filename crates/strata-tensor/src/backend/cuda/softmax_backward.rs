//! Host side of the softmax / log-softmax gradient: picks the kernel of
//! `kernels::softmax_backward` from the `outer x n x inner` shape and
//! launches it on the current stream.

use super::context::CudaDevice;
use super::dimops::grid;
use super::kernels::dimops::{SM_BLOCK, WARP_ROW_MAX};
use super::kernels::softmax_backward::source;
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg};
use crate::backend::{Arg, DimShape};
use crate::error::Result;

/// `out` = the gradient of softmax (log-softmax with `log`) from the output
/// gradient `grad` and the forward's output `y`; contiguous, one float dtype.
pub(crate) fn softmax_backward(
    dev: &CudaDevice,
    out: &Arg,
    grad: &Arg,
    y: &Arg,
    s: DimShape,
    log: bool,
) -> Result<()> {
    if s.outer * s.n * s.inner == 0 {
        return Ok(());
    }
    let d = y.dtype;
    let key = format!("softmax_backward:{}", tag(d));
    let f = super::nvrtc::functions(
        dev,
        &key,
        || source(d),
        &["smb_warp", "smb_block", "smb_cols"],
    )?;
    let (pg, py, pout) = (base_ptr(grad), base_ptr(y), base_ptr(out));
    let log_i = i32::from(log);
    let n = s.n as i64;
    if s.inner == 1 {
        let rows = s.outer as i64;
        let row_bytes = s.n * d.size();
        let vec = i32::from(
            pg.is_multiple_of(16)
                && py.is_multiple_of(16)
                && pout.is_multiple_of(16)
                && row_bytes.is_multiple_of(16),
        );
        let (k, g) = if s.n <= WARP_ROW_MAX {
            (0, grid(dev, s.outer, (SM_BLOCK / 32) as usize))
        } else {
            (1, grid(dev, s.outer, 1))
        };
        let kargs = [
            KArg::of(&pg),
            KArg::of(&py),
            KArg::of(&pout),
            KArg::of(&rows),
            KArg::of(&n),
            KArg::of(&log_i),
            KArg::of(&vec),
        ];
        // SAFETY: the arguments match `smb_warp`/`smb_block(const char*,
        // const char*, char*, i64 rows, i64 n, int, int)`; the three operands
        // are contiguous with rows * n elements of `d` from their base
        // addresses; `vec` is set only when every row start is 16-byte aligned.
        unsafe {
            launch(
                dev,
                &key,
                f[k],
                (g, 1, 1),
                (SM_BLOCK, 1, 1),
                dev.stream(),
                kargs,
            )
        }
    } else {
        let (outer, inner) = (s.outer as i64, s.inner as i64);
        let g = grid(dev, s.outer * s.inner, SM_BLOCK as usize);
        let kargs = [
            KArg::of(&pg),
            KArg::of(&py),
            KArg::of(&pout),
            KArg::of(&outer),
            KArg::of(&n),
            KArg::of(&inner),
            KArg::of(&log_i),
        ];
        // SAFETY: the arguments match `smb_cols(const char*, const char*,
        // char*, i64 outer, i64 n, i64 inner, int)`; the operands are
        // contiguous with outer * n * inner elements of `d`.
        unsafe {
            launch(
                dev,
                &key,
                f[2],
                (g, 1, 1),
                (SM_BLOCK, 1, 1),
                dev.stream(),
                kargs,
            )
        }
    }
}
