//! strata-autograd's integration tests that share no process-wide state, in one
//! binary (one link instead of one per file: a CI disk holds the workspace's
//! test binaries). Each module is the file of its name;
//! `cargo test -p strata-autograd --release --test suite NAME` runs the tests
//! whose path contains NAME, e.g. `hostile_sweep_s35::`. Files that install an
//! allocator, read the device's memory statistics, draw from the default
//! generator or replace the global allocator stay binaries of their own in
//! `tests/`.

#[path = "../common/mod.rs"]
mod common;

mod class_weight_s73;
mod contract_grad_s60;
mod extrema;
mod grad_args_s73;
mod grad_forms_s78;
mod grad_layout_s54b;
mod grad_oracle;
mod grad_scaler;
mod grad_scaler_fused_s45;
mod grad_scaler_s53;
mod grad_scaler_s54b;
mod gradcheck_dimops;
mod gradcheck_math;
mod hooks_and_grad;
// strata-tensor's readings of the hostile-argument fixtures (grad_args_s73
// uses part of them).
mod activations_grad_s74;
mod batch_norm_s75;
mod conv_pool_s75;
mod cudnn_s78;
mod fold_s76;
mod half_conv_s77;
#[allow(dead_code)]
#[path = "../../../strata-tensor/tests/suite/hostile_calls.rs"]
mod hostile_calls;
mod hostile_inputs;
mod hostile_inputs_2;
mod hostile_inputs_3;
mod hostile_s57;
mod hostile_s58;
mod hostile_state_s48;
mod hostile_sweep_s27;
mod hostile_sweep_s29;
mod hostile_sweep_s31;
mod hostile_sweep_s32;
mod hostile_sweep_s33;
mod hostile_sweep_s34;
mod hostile_sweep_s35;
mod hostile_sweep_s37;
mod hostile_sweep_s38;
mod hostile_sweep_s39;
mod hostile_sweep_s40;
mod hostile_sweep_s41;
mod hostile_sweep_s42;
mod hostile_sweep_s43;
mod hostile_sweep_s44;
mod hostile_sweep_s45;
mod hostile_sweep_s48;
mod hostile_sweep_s49;
mod hostile_sweep_s51;
mod hostile_sweep_s52;
mod hostile_sweep_s52b;
mod hostile_sweep_s53b;
mod hostile_sweep_s54c;
mod hostile_sweep_s77;
mod inplace_views;
mod interpolate_s75;
mod kl_normalize_s74;
mod layer_norm_bw_s56;
mod linalg_s79;
mod losses_grad_s74;
mod math_grad_s74;
mod missing_ops_s78;
mod norm_edges_s53;
mod norms_s74;
mod optim_options_s44;
mod optim_state;
mod optim_tails_s53;
mod oracle_s44;
mod oracle_s55;
mod oracle_s55b;
mod oracle_s56;
mod oracle_s57;
mod pixel_shuffle_s76;
mod prod_s73;
mod pytorch_fixture;
mod recompute;
mod resume_s52;
mod scatter_ops_grad;
mod semantics;
mod sgd_fused_add_s45;
mod shape_ops;
mod shape_stats_s79;
mod similarity_s75;
mod sort;
mod strides_s59;
mod window_memory_s76;

// session 79 (helper 133): special functions and element-wise math
mod math_ops_s79;

// session 79 (helper 135): gradients at the edges of the element-wise math
mod hostile_sweep_s79;

// session 80: gradients at hostile inputs of session 79's linalg, shape, statistics and nn ops
mod hostile_sweep_s80;

// session 82: the gradients of amax, amin and aminmax against PyTorch
mod extremes_s82;
// session 82: the gradients of dist and diagflat
mod like_s82;
