//! The streaming copy of the NumPy engine (`src/numpy_engine/bulk_copy.rs`), with
//! its unit tests, compiled alone: it needs no Python interpreter, so these tests
//! run natively, under Miri (.ci/miri.sh) and under AddressSanitizer and valgrind
//! (.ci/sanitizers.sh). The rest of the engine calls Python's C API and is tested
//! from Python (`tests/` at the repository root).

#[path = "../src/numpy_engine/bulk_copy.rs"]
mod bulk_copy;
