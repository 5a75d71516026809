//! Functions whose fused multiply-adds must run as instructions.
//!
//! The crate is compiled for the target's baseline, where `f32::mul_add`
//! and `f64::mul_add` are calls into the C library's `fma` (one rounding,
//! as PyTorch's fused kernels, but 3-6 times slower over a whole row). A
//! function declared with [`fused!`] runs its body in a copy compiled with
//! the named target features where the CPU has them, and in the baseline
//! copy elsewhere: the same bits either way, since a fused multiply-add
//! rounds once in both.

/// Declares `fn name(args) -> ret` running `body(args)` (an
/// `#[inline(always)]` function, so that it is compiled into each copy) in
/// a copy compiled with the target features listed in brackets where the
/// CPU has them all (detected at run time; the check is cached by the
/// standard library), else in the baseline copy.
///
/// ```ignore
/// fused!(["fma"]
///     /// Docs of the function.
///     pub(crate) fn erf_vec_f32(x: f32) -> f32 = erf_vec_f32_body;
/// );
/// ```
macro_rules! fused {
    ([$($feature:tt),+]
     $(#[$attr:meta])*
     $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:expr;
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                /// The copy compiled with the features.
                ///
                /// # Safety
                /// The CPU must support them.
                #[target_feature($(enable = $feature),+)]
                unsafe fn with_features($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                if $(std::arch::is_x86_feature_detected!($feature))&&+ {
                    // SAFETY: the CPU has every feature this copy is
                    // compiled with (checked just above).
                    return unsafe { with_features($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

pub(crate) use fused;
