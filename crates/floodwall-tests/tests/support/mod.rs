//! Shared by the end-to-end tests.

pub mod vectors;
