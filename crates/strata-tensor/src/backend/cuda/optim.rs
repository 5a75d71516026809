//! Host side of the fused optimizer steps (`kernels::optim`).

use super::context::CudaDevice;
use super::dimops::grid;
use super::kernels::optim::source;
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg};
use crate::backend::Arg;
use crate::error::Result;
use crate::ops::AdamHyper;

/// Threads per block of `adam_step`.
const BLOCK: u32 = 256;

/// One Adam / AdamW step over `n` elements of the contiguous `p`, `g`, `m`,
/// `v` (one float dtype, distinct storages).
pub(crate) fn adam_step(
    dev: &CudaDevice,
    p: &Arg,
    g: &Arg,
    m: &Arg,
    v: &Arg,
    n: usize,
    h: &AdamHyper,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let d = p.dtype;
    let key = format!("adam_step:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || source(d), &["adam_step"])?;
    let (pp, pg, pm, pv) = (base_ptr(p), base_ptr(g), base_ptr(m), base_ptr(v));
    let vec = i32::from([pp, pg, pm, pv].iter().all(|a| a.is_multiple_of(16)));
    let per_thread = if vec == 1 { 16 / d.size() } else { 1 };
    let blocks = grid(dev, n.div_ceil(per_thread), BLOCK as usize);
    let (decay, step_size, c2_sqrt) = h.factors();
    let (one_b1, b2, one_b2, eps) = (1.0 - h.beta1, h.beta2, 1.0 - h.beta2, h.eps);
    let decays = i32::from(h.weight_decay != 0.0);
    let n = n as i64;
    let kargs = [
        KArg::of(&pp),
        KArg::of(&pg),
        KArg::of(&pm),
        KArg::of(&pv),
        KArg::of(&n),
        KArg::of(&decay),
        KArg::of(&one_b1),
        KArg::of(&b2),
        KArg::of(&one_b2),
        KArg::of(&c2_sqrt),
        KArg::of(&eps),
        KArg::of(&step_size),
        KArg::of(&decays),
        KArg::of(&vec),
    ];
    // SAFETY: the arguments match `adam_step(char*, const char*, char*, char*,
    // i64 n, double x7, int, int)`; the four operands are contiguous with `n`
    // elements of `d` from their base addresses, in distinct storages; `vec`
    // is set only when all four bases are 16-byte aligned.
    unsafe {
        launch(
            dev,
            &key,
            f[0],
            (blocks, 1, 1),
            (BLOCK, 1, 1),
            dev.stream(),
            kargs,
        )
    }
}
