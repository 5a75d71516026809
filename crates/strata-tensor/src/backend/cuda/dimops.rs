//! Host side of the ops along one dim (softmax, log-softmax, cumsum): picks
//! the kernel of `kernels::dimops` from the `outer x n x inner` shape and
//! launches it on the current stream.

use super::context::CudaDevice;
use super::kernels::dimops::{
    cumsum_source, sm_warp_block, softmax_source, REG_BLOCK_ROW_MAX, SM_BLOCK, SOFTMAX_NAMES,
    WARP_ROW_MAX,
};
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg};
use crate::backend::{Arg, DimShape, SoftmaxMode};
use crate::dtype::DType;
use crate::error::{Result, TensorError};

/// Blocks for `work` items of `per_block` each, capped (the kernels stride).
pub(crate) fn grid(dev: &CudaDevice, work: usize, per_block: usize) -> u32 {
    let cap = (dev.sm_count as usize * 32).max(1);
    work.div_ceil(per_block.max(1)).clamp(1, cap) as u32
}

/// Softmax or log-softmax of the contiguous `input` into the contiguous
/// `out`, scaled and causally masked as `mode` says (rows along the last dim
/// only).
pub(crate) fn softmax(
    dev: &CudaDevice,
    out: &Arg,
    input: &Arg,
    s: DimShape,
    mode: SoftmaxMode,
) -> Result<()> {
    if s.outer * s.n * s.inner == 0 {
        return Ok(());
    }
    let log = mode.log;
    if s.inner != 1 && mode != SoftmaxMode::plain(log) {
        return Err(TensorError::shape(
            "softmax",
            "a scale or a causal mask needs rows along the last dim",
        ));
    }
    let d = input.dtype;
    let key = format!("softmax:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || softmax_source(d), &SOFTMAX_NAMES)?;
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
        let (k, per, threads) = row_kernel(s.n, 16 / d.size(), vec != 0, sm_warp_block(d));
        let g = if per > 1 {
            // A block for every `per` rows (the kernels loop past the
            // grid's limit).
            s.outer.div_ceil(per).clamp(1, i32::MAX as usize) as u32
        } else {
            grid(dev, s.outer, per)
        };
        // The kernels' compute type C: double for f64, float otherwise.
        let (scale64, scale32) = (mode.scale, mode.scale as f32);
        let scale = if d == DType::F64 {
            KArg::of(&scale64)
        } else {
            KArg::of(&scale32)
        };
        let crow = mode.causal_rows as i64;
        let kargs = [
            KArg::of(&pin),
            KArg::of(&pout),
            KArg::of(&rows),
            KArg::of(&n),
            KArg::of(&log_i),
            KArg::of(&vec),
            scale,
            KArg::of(&crow),
        ];
        // SAFETY: the arguments match `sm_warp`/`sm_block`/`sm_rw*`/`sm_rb*`
        // (const char*, char*, i64 rows, i64 n, int, int, C scale, i64 crow;
        // C is double for f64 and float otherwise, as `scale` is); both operands are
        // contiguous with rows * n elements of `d` from their base
        // addresses; `vec` is set only when every row start is 16-byte
        // aligned; the register kernels are picked only for rows they hold.
        unsafe {
            launch(
                dev,
                &key,
                f[k],
                (g, 1, 1),
                (threads, 1, 1),
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

/// The softmax kernel (an index into `SOFTMAX_NAMES`) for contiguous rows of
/// `n` elements with vectors of `v` elements (`vec`: 16-byte loads allowed),
/// the rows each block takes and its threads: the register-cached kernels of
/// [`reg_row_plan`] (the warp kernels `warp` threads a block,
/// [`sm_warp_block`]), the two-pass `sm_block` for longer rows.
fn row_kernel(n: usize, v: usize, vec: bool, warp: u32) -> (usize, usize, u32) {
    match reg_row_plan(n, v, vec) {
        Some(RegRow::Warp(items)) => (
            3 + items.trailing_zeros() as usize,
            (warp / 32) as usize,
            warp,
        ),
        Some(RegRow::Block(items)) => (9 + (items / 8).trailing_zeros() as usize, 1, SM_BLOCK),
        None => (1, 1, SM_BLOCK),
    }
}

/// Which register-cached row kernel holds a row (softmax's `sm_rw*`/`sm_rb*`,
/// cross-entropy's `ce_rw*`/`ce_rb*`, layer norm's `ln_rw*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RegRow {
    /// A warp per row, this many values per lane (1, 2, 4, ..., 32).
    Warp(usize),
    /// A block of `SM_BLOCK` threads per row, this many values each (8,
    /// 16, 32).
    Block(usize),
}

impl RegRow {
    /// Rows per block of the warp kernels.
    pub(crate) const WARP_ROWS: usize = (SM_BLOCK / 32) as usize;

    /// Rows one block of this kernel handles.
    pub(crate) fn rows_per_block(self) -> usize {
        match self {
            RegRow::Warp(_) => RegRow::WARP_ROWS,
            RegRow::Block(_) => 1,
        }
    }
}

/// The register-cached kernel for contiguous rows of `n` elements with
/// vectors of `v` elements (`vec`: 16-byte loads allowed): rows up to
/// `WARP_ROW_MAX` take a warp (`items` a power of two, at least a vector
/// when vectors are used), rows up to `REG_BLOCK_ROW_MAX` a block; `None`
/// for longer rows.
pub(crate) fn reg_row_plan(n: usize, v: usize, vec: bool) -> Option<RegRow> {
    if n <= WARP_ROW_MAX {
        let mut items = n.div_ceil(32).next_power_of_two();
        if vec {
            items = items.max(v);
        }
        Some(RegRow::Warp(items))
    } else if n <= REG_BLOCK_ROW_MAX {
        Some(RegRow::Block(
            n.div_ceil(SM_BLOCK as usize).next_power_of_two().max(8),
        ))
    } else {
        None
    }
}

/// Rows of floats up to this long are summed one element after the other (a
/// thread per row), in the CPU's order: the warp's shuffle scan adds in a
/// tree order, which differs where values cancel (2^62 + 10 - 2^62 - 10 in
/// f32 is -10 in order, 0 in the tree). Longer rows keep the parallel scan.
const SEQUENTIAL_FLOAT_ROW: usize = 128;

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
    let in_order = d.is_float() && s.n <= SEQUENTIAL_FLOAT_ROW;
    if s.inner == 1 && !in_order {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row length gets a kernel whose registers hold the whole row.
    #[test]
    fn row_kernels_hold_their_rows() {
        for v in [2usize, 4, 8] {
            for vec in [false, true] {
                for n in (1..=10_000).chain([50_257, 100_000]) {
                    let (k, per, threads) = row_kernel(n, v, vec, 128);
                    let name = SOFTMAX_NAMES[k];
                    let cap = match name.strip_prefix("sm_rw") {
                        Some(i) => 32 * i.parse::<usize>().unwrap(),
                        None => match name.strip_prefix("sm_rb") {
                            Some(i) => SM_BLOCK as usize * i.parse::<usize>().unwrap(),
                            None => usize::MAX,
                        },
                    };
                    assert!(n <= cap, "{name} for {n}");
                    if name.starts_with("sm_rw") {
                        assert_eq!((per, threads), (4, 128));
                        let items = cap / 32;
                        assert!(!vec || items % v == 0, "{name}: vectors of {v}");
                        assert!(n > cap / 2 || items == 1 || (vec && items == v));
                    } else {
                        assert_eq!((per, threads), (1, SM_BLOCK));
                    }
                    if n > REG_BLOCK_ROW_MAX {
                        assert_eq!(name, "sm_block");
                    }
                }
            }
        }
    }
}
