//! Gradients at hostile inputs of session 79's linalg, shape, statistics and nn ops (session 80); filled in by its work.
