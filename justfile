# xla-ffi-rs tasks. `just --list` shows them. Each recipe makes the virtual
# environments it needs (see scripts/env.sh); nothing else must be installed.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Build the abi3 wheel into dist/ and install it into the Python 3.12 venv.
build:
    source scripts/env.sh && XFR_SKIP_PY311=1 setup_venvs && install_wheel "$XFR_PY312" "$(build_wheel)"

# The fast test loop: Rust tests, then the Python suite on jax 0.12 (no root, no nightly).
# `just check tests/ops/kepler/test_kepler.py` runs one Python file after the Rust tests.
check *pytest_args:
    bash scripts/test_fast.sh {{pytest_args}}

# Every test, exactly as CI runs them (.ci/run; how long: CONTRIBUTING.md).
test:
    bash .ci/run

# Rust tests only, all of them: the trybuild cases of the macro's diagnostics too
# (most of a fresh build's time; `just check` skips them).
test-rust:
    source scripts/env.sh && XFR_SKIP_PY311=1 setup_venvs && cargo test --workspace

# examples/plugin (a crate outside the workspace): Rust and Python tests, no libclang.
plugin:
    source scripts/env.sh && setup_venvs && bash .ci/plugin.sh

# The demo: fit an eccentric orbit's radial-velocity curve with kepler under jit.
demo:
    bash scripts/demo.sh

# The CPU benchmarks on jax 0.12 and jax 0.10 (medians of interleaved pairs; writes benchmarks/results/jax-<version>/*.json and a dated run-*.txt).
bench:
    bash benchmarks/run.sh

# The CUDA path on the CPU: kernel emulator + stand-in driver + NVRTC from pip (no GPU).
cuda-emu:
    bash .ci/cuda_emu.sh

# The GPU test suite (on a machine with an NVIDIA GPU and the wheel in dist/).
gpu-test:
    bash scripts/gpu_smoke.sh

# The GPU benchmarks.
gpu-bench:
    source scripts/env.sh && XFR_SKIP_PY311=1 setup_venvs && "$XFR_PY312" benchmarks/gpu_bench.py

# Everything a lent GPU is for, in one go: the suite, gpu_bench, the kernels alone (scripts/gpu_perf.sh)
gpu-perf:
    bash scripts/gpu_perf.sh

# Format Rust and Python.
fmt:
    cargo fmt --all
    source scripts/env.sh && XFR_SKIP_PY311=1 setup_venvs && "$XFR_PY312" -m pip install -q "$RUFF_PIN" && "$XFR_PY312" -m ruff format python tests examples benchmarks cuda

# rustfmt and clippy with warnings as errors; ruff and mypy over the Python code; the workflows.
lint:
    bash .ci/lint_rust.sh
    bash .ci/lint_python.sh
    bash .ci/workflows.sh

# Fuzz each target for 10 million executions (cargo-fuzz, libFuzzer, ASan; nightly).
# `just fuzz 1000000` runs fewer. CI runs 60 s per target (.ci/fuzz.sh).
fuzz runs="10000000":
    FUZZ_RUNS={{runs}} bash .ci/fuzz.sh

# The core tests under Miri (nightly; installs the component when a nightly is there).
miri:
    bash .ci/miri.sh

# The core tests under AddressSanitizer and valgrind, and the Python raw-target suite
# with the extension under ASan.
sanitizers:
    bash .ci/sanitizers.sh
