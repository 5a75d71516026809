//! strata-alloc's integration tests in one binary (one link instead of one per
//! file: a CI disk holds the workspace's test binaries). Each module is the
//! file of its name; `cargo test -p strata-alloc --release --test suite NAME`
//! runs the tests whose path contains NAME, e.g. `hostile_sweep_s36::`.

mod common;

mod allocator;
mod devices;
mod diagnostics;
mod failed_calls_change_nothing;
mod history;
mod history_options;
mod hostile_inputs;
mod hostile_inputs_2;
mod hostile_s57;
mod hostile_s58;
mod hostile_s59;
mod hostile_sweep_s27;
mod hostile_sweep_s32;
mod hostile_sweep_s34;
mod hostile_sweep_s35;
mod hostile_sweep_s36;
mod hostile_sweep_s41;
mod hostile_sweep_s43;
mod hostile_sweep_s44;
mod hostile_sweep_s48;
mod hostile_sweep_s50;
mod hostile_sweep_s52;
mod hostile_sweep_s53;
mod hostile_sweep_s55;
mod hostile_sweep_s56;
mod mempool;
mod near_capacity;
mod pytorch_parity;
mod pytorch_parity_s29;
mod pytorch_parity_s31;
mod pytorch_pinned_parity;
mod pytorch_tests_s32;
mod pytorch_tests_s33;
mod pytorch_tests_s36;
mod pytorch_tests_s37;
mod pytorch_tests_s38;
mod pytorch_tests_s40;
mod pytorch_tests_s42;
mod pytorch_tests_s49;
mod pytorch_tests_s51;
mod pytorch_tests_s52;
mod pytorch_tests_s53;
mod pytorch_tests_s54;
mod pytorch_tests_s55;
mod pytorch_tests_s56;
mod pytorch_tests_s58;
mod recycling;
mod settings;
