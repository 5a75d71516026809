//! Host side of the ops along one dim (softmax, log-softmax, cumsum): picks
//! the kernel of `kernels::dimops` from the `outer x n x inner` shape and
//! launches it on the current stream.

use super::context::CudaDevice;
use super::kernels::dimops::{cumsum_source, softmax_source, SM_BLOCK, WARP_ROW_MAX};
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg};
use crate::backend::{Arg, DimShape};
use crate::error::Result;

/// Blocks for `work` items of `per_block` each, capped (the kernels stride).
fn grid(dev: &CudaDevice, work: usize, per_block: usize) -> u32 {
    let cap = (dev.sm_count as usize * 32).max(1);
    work.div_ceil(per_block.max(1)).clamp(1, cap) as u32
}

/// Softmax or log-softmax of the contiguous `input` into the contiguous `out`.
pub(crate) fn softmax(
    dev: &CudaDevice,
    out: &Arg,
    input: &Arg,
    s: DimShape,
    log: bool,
) -> Result<()> {
    if s.outer * s.n * s.inner == 0 {
        return Ok(());
    }
    let d = input.dtype;
    let key = format!("softmax:{}", tag(d));
    let f = super::nvrtc::functions(
        dev,
        &key,
        || softmax_source(d),
        &["sm_warp", "sm_block", "sm_cols"],
    )?;
    let (pin, pout) = (base_ptr(input), base_ptr(out));
    let log_i = i32::from(log);
    let n = s.n as i64;
    if s.inner == 1 {
        let rows = s.outer as i64;
        // 16-byte vectors when every row starts aligned.
        let row_bytes = s.n * d.size();
        let vec = i32::from(
            pin.is_multiple_of(16) && pout.is_multiple_of(16) && row_bytes.is_multiple_of(16),
        );
        let warp = s.n <= WARP_ROW_MAX;
        let (k, g) = if warp {
            (0, grid(dev, s.outer, (SM_BLOCK / 32) as usize))
        } else {
            (1, grid(dev, s.outer, 1))
        };
        let kargs = [
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&rows),
            KArg::of(&n),
            KArg::of(&log_i),
            KArg::of(&vec),
        ];
        // SAFETY: the arguments match `sm_warp`/`sm_block(const char*, char*,
        // i64 rows, i64 n, int, int)`; both operands are contiguous with
        // rows * n elements of `d` from their base addresses; `vec` is set
        // only when every row start is 16-byte aligned.
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
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&outer),
            KArg::of(&n),
            KArg::of(&inner),
            KArg::of(&log_i),
        ];
        // SAFETY: the arguments match `sm_cols(const char*, char*, i64 outer,
        // i64 n, i64 inner, int)`; both operands are contiguous with
        // outer * n * inner elements of `d`.
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

/// Cumulative sum of the contiguous `input` into the contiguous `out`.
pub(crate) fn cumsum(dev: &CudaDevice, out: &Arg, input: &Arg, s: DimShape) -> Result<()> {
    if s.outer * s.n * s.inner == 0 {
        return Ok(());
    }
    let d = input.dtype;
    let key = format!("cumsum:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || cumsum_source(d), &["cs_warp", "cs_cols"])?;
    let (pin, pout) = (base_ptr(input), base_ptr(out));
    let n = s.n as i64;
    if s.inner == 1 {
        let rows = s.outer as i64;
        let g = grid(dev, s.outer, (SM_BLOCK / 32) as usize);
        let kargs = [
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&rows),
            KArg::of(&n),
        ];
        // SAFETY: the arguments match `cs_warp(const char*, char*, i64 rows,
        // i64 n)`; both operands are contiguous with rows * n elements of `d`.
        unsafe {
            launch(
                dev,
                &key,
                f[0],
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
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&outer),
            KArg::of(&n),
            KArg::of(&inner),
        ];
        // SAFETY: the arguments match `cs_cols(const char*, char*, i64 outer,
        // i64 n, i64 inner)`; both operands are contiguous with
        // outer * n * inner elements of `d`.
        unsafe {
            launch(
                dev,
                &key,
                f[1],
                (g, 1, 1),
                (SM_BLOCK, 1, 1),
                dev.stream(),
                kargs,
            )
        }
    }
}
