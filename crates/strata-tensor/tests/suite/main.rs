//! strata-tensor's integration tests that share no process-wide state, in one
//! binary (one link instead of one per file: a CI disk holds the workspace's
//! test binaries). Each module is the file of its name;
//! `cargo test -p strata-tensor --release --test suite NAME` runs the tests
//! whose path contains NAME, e.g. `hostile_sweep_s37::`. Files that install an
//! allocator, read memory statistics, set environment variables, need a GPU
//! or NCCL, or replay the conformance programs stay binaries of their own in
//! `tests/`.

mod activations_s74;
mod common;
mod contract_args_s73;
mod cross_entropy_s54a;
mod div_and_cross_entropy;
mod errors;
mod fuzz_ops_fixes;
mod fuzz_s56;
mod gelu_half_s54a;
mod gelu_half_s54d;
mod half_bits;
mod hostile_calls;
mod hostile_inputs;
mod hostile_s57;
mod hostile_s58;
mod hostile_sweep_s27;
mod hostile_sweep_s29;
mod hostile_sweep_s30;
mod hostile_sweep_s31;
mod hostile_sweep_s32;
mod hostile_sweep_s33;
mod hostile_sweep_s35;
mod hostile_sweep_s36;
mod hostile_sweep_s37;
mod hostile_sweep_s38;
mod hostile_sweep_s40;
mod hostile_sweep_s41;
mod hostile_sweep_s42;
mod hostile_sweep_s43;
mod hostile_sweep_s44;
mod hostile_sweep_s45;
mod hostile_sweep_s48;
mod hostile_sweep_s49;
mod hostile_sweep_s50;
mod hostile_sweep_s51;
mod hostile_sweep_s52;
mod hostile_sweep_s53;
mod hostile_sweep_s53b;
mod hostile_sweep_s54c;
mod hostile_sweep_s77;
mod hostile_sweep_s78;
mod index_args_s73;
mod interop;
mod interop_hostile_s56;
mod layer_norm_s55;
mod losses_s74;
mod masked_select;
mod math;
mod math_s74;
mod matmul_precision;
mod missing_ops_s78;
mod nn_args_s73;
mod optim;
mod oracle_s44b;
mod oracle_s55;
mod oracle_s57;
mod oracle_s58;
mod oracle_s59;
mod oracle_s61;
mod properties;
mod pytorch_extremes_s53;
mod pytorch_fixture;
mod pytorch_order_s52;
mod reduce_args_s72;
mod scatter_ops;
mod search_unique_s77;
mod shape_ops;
mod softmax_erf_s53b;
mod softmax_pytorch;
mod sort;
mod spaced_one_hot_s75;
mod strides_s59;
mod unique_dim_s78;
mod view_args_s72;

// session 60: einsum, diagonals, scaled products, lerp, cross
mod contract;
mod conv_pool_props;
mod linalg_s79;
mod shape_stats_s79;
mod window_kernel_props;

// session 79 (helper 133): special functions and element-wise math
mod math_ops_s79;

// session 79 (helper 135): a hostile-input sweep of the element-wise math
mod hostile_sweep_s79;

// session 80: cuSOLVER factorizations on a GPU
mod cusolver_s80;
// session 80: random tensor programs in the conformance format
mod fuzz_conformance_s80;
// session 80: hostile inputs to session 79's linalg, shape, statistics and nn ops
mod hostile_sweep_s80;

// session 82: amax, amin and aminmax against PyTorch
mod extremes_s82;
// session 82: the bitwise ops against PyTorch
mod bitwise_s82;
// session 82: randperm, bernoulli, multinomial
mod sampling_s82;
// session 82: isin
mod isin_s82;
// session 82: dist, diagflat, the *_as and new_* forms
mod like_s82;
// session 82: take, put_, broadcast_tensors
mod take_s82;
