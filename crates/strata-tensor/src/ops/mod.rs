//! Tensor operations: argument checks, type promotion and broadcasting here
//! (device-independent), kernels in the backends.

mod checks;
mod elementwise;
// ---- session 74: activations, value classes, logical ops ----
mod activations;
pub use activations::{SELU_ALPHA, SELU_SCALE};
mod float_classes;
// ---- session 75: convolution and pooling ----
pub(crate) mod conv;
mod fold;
mod interpolate;
mod pixel_shuffle;
mod pool;
mod similarity;
pub use interpolate::{interpolate_plan, InterpolateMode, InterpolateOptions, InterpolatePlan};
pub use similarity::cosine_similarity_plan;
pub(crate) mod composite;
mod spaced;
pub(crate) mod windows;
pub use composite::Composite;
pub use conv::{
    conv_allow_tf32, conv_chunk_bytes, cudnn_enabled, set_conv_allow_tf32, set_conv_chunk_bytes,
    set_cudnn_enabled, DEFAULT_CONV_CHUNK_BYTES,
};
pub use conv::{
    conv_plan, conv_transpose_plan, convolution, ConvKind, ConvOptions, ConvPadding, ConvPlan,
    ConvTransposePlan, Convolution,
};
pub use fold::{col2im_plan, im2col_plan, FoldOptions};
pub use pixel_shuffle::pixel_shuffle_of;
pub use pool::{
    adaptive_average, adaptive_pool, adaptive_pool_plan, adaptive_windows, global_mean_dims,
    pool_plan, AdaptiveDim, PoolKind, PoolOptions, PoolPlan,
};
pub use windows::{with_batch, without_batch, AvgMode, Windows};
pub(crate) mod math;
mod matmul;
pub(crate) mod norms;
mod optim;
mod overloads;
mod pointwise_losses;
pub use norms::{
    batch_norm, batch_norm_plan, group_norm, group_norm_plan, rms_norm, rms_norm_plan,
    BatchNormPlan, GroupNormPlan, RmsNormPlan,
};
mod reduce;
pub(crate) mod scatter_ops;
mod shape_ops;
mod softmax;
pub use scatter_ops::ScatterReduce;
pub(crate) use shape_ops::DimMap;
pub use shape_ops::{PadMode, Repeats};
mod sort;
pub(crate) mod table;

pub use elementwise::{GeluApprox, Operand, RoundingMode};
pub(crate) use matmul::{effective_f32_precision, with_f32_precision};
pub use matmul::{float32_matmul_precision, set_float32_matmul_precision, Precision};
pub use optim::AdamHyper;
pub(crate) use optim::{AdamItem, AdamStep};

// ---- issue 12: nn, indexing, joining (branch nn) ----
mod index;
mod join;
mod nn;

pub(crate) use join::check_pieces;
pub use join::{SplitSize, MAX_PIECES};
pub use nn::{
    acc_dtype, channel_dropout_batched, class_weight, feature_dropout_shape, nll_weights,
    CrossEntropyArgs, CrossEntropySaved, Reduction,
};

// ---- session 60: contractions, diagonals, lerp, cross ----
pub mod contract;

// ---- session 77: searchsorted, bincount, histc, unique, grids, diff, cdist ----
mod diff;
mod grids;
mod search;
mod unique;
pub use unique::Unique;

// ---- session 78: losses, activations, reductions and math PyTorch users reach for ----
mod addcdiv;
mod glu;
pub mod likelihood_losses;
mod log_add_exp;
mod loss_reduction;
pub mod margin_losses;
mod moments;
mod movedim;
mod nan_reduce;
mod prelu;
mod shrink;
mod softmin;
mod xlogy;
pub use addcdiv::addcdiv_plan;
pub use glu::glu_halves;
pub use likelihood_losses::GaussianVar;
pub use movedim::movedim_order;
pub use prelu::prelu_weight;
// ---- session 79 (helper 134): shape, join, statistics and nn ops ----
pub mod nn_more;
pub mod shape_join;
pub mod statistics;

// ---- session 79 (helper 132): torch.linalg ----
pub mod linalg;

// ---- session 79: special functions and the rest of PyTorch's element-wise math ----
mod special;
mod special_erfcx;
pub(crate) mod special_math;
pub use special::ldexp_dtype;

// ---- session 82: randperm, bernoulli, multinomial; take, put_, broadcast_tensors ----
mod sampling;
mod take_put;
