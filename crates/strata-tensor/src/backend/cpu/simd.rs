//! Which vector instructions the CPU kernels use, decided once at run time.
//!
//! The crate is compiled for the target's baseline (SSE2 on x86_64), so every
//! loop vectorises everywhere. On x86_64 CPUs with AVX2 and FMA the
//! element-wise kernels and the tile transposes also run as copies compiled
//! with AVX2 enabled (twice the vector width; the element-wise ones with FMA
//! too, so a fused multiply-add such as `addcmul`'s or `lerp`'s is one
//! instruction, not a call into the C library), chosen here once per process, as
//! PyTorch's CPU kernels dispatch on the CPU's capability.
//!
//! `STRATA_CPU_SIMD=baseline` keeps to the baseline instructions (to compare
//! the two, or to rule the wider kernels out when chasing a problem); any
//! other value, or none, means "the best this CPU has".

use std::sync::atomic::{AtomicU8, Ordering};

/// The instruction sets the kernels may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// The compilation target's baseline.
    Baseline,
    /// x86_64 with AVX2 (and AVX) and FMA: the element-wise kernels' copies
    /// compiled with them run `mul_add` as one instruction (the same bits as
    /// the C library's `fma` it calls in the baseline copies).
    Avx2,
}

const UNKNOWN: u8 = 0;
const BASELINE: u8 = 1;
const AVX2: u8 = 2;

static LEVEL: AtomicU8 = AtomicU8::new(UNKNOWN);

/// The level in use: detected on first call, then cached.
#[inline]
pub(crate) fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        BASELINE => Level::Baseline,
        AVX2 => Level::Avx2,
        _ => {
            let l = detect();
            LEVEL.store(encode(l), Ordering::Relaxed);
            l
        }
    }
}

fn encode(l: Level) -> u8 {
    match l {
        Level::Baseline => BASELINE,
        Level::Avx2 => AVX2,
    }
}

fn detect() -> Level {
    if std::env::var("STRATA_CPU_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("baseline")) {
        return Level::Baseline;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        return Level::Avx2;
    }
    Level::Baseline
}

/// Whether the AVX2 kernels may run.
#[inline]
pub(crate) fn avx2() -> bool {
    level() == Level::Avx2
}

/// Runs `f` with the level forced to `l` where the CPU supports it (tests
/// compare the two sets of kernels). Other threads see the forced level too,
/// which is harmless: both levels compute the same results.
#[cfg(test)]
pub(crate) fn with_level<R>(l: Level, f: impl FnOnce() -> R) -> R {
    static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());
    let _one_at_a_time = SERIAL.lock();
    let _ = level();
    let supported = l == Level::Baseline || detect() == Level::Avx2;
    let saved = LEVEL.load(Ordering::Relaxed);
    if supported {
        LEVEL.store(encode(l), Ordering::Relaxed);
    }
    let r = f();
    LEVEL.store(saved, Ordering::Relaxed);
    r
}
