//! cuSOLVER factorizations on a GPU against the host path (session 80); filled in by its work.
