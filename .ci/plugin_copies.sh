#!/usr/bin/env bash
# Two packages made from examples/plugin as its README's "Making it yours" says
# (steps 1 to 4, keeping the handlers), installed side by side into one fresh venv
# next to this repository's wheel: each copy's tests pass, and one process imports
# both and runs an op of each (their module names, target names and native modules
# must not clash). Called by .ci/plugin.sh with the venv and the cargo target folder.
#
#   .ci/plugin_copies.sh PYTHON CARGO_TARGET_DIR
#
# PYTHON: a venv's python with xla_ffi_rs and jax installed.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
root="$PWD"
py="$1"
export CARGO_TARGET_DIR="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# make_copy PACKAGE: the template's "Making it yours", steps 1 to 4, as a user does
# them, with PACKAGE (a Python name, e.g. ops_a) as the package and the targets' prefix.
make_copy() {
    local pkg="$1" dest="$work/$1" dist="${1//_/-}"
    # 1. Copy the folder (not its build output).
    mkdir -p "$dest"
    (cd examples/plugin && tar cf - --exclude=target --exclude=Cargo.lock .) | (cd "$dest" && tar xf -)
    cd "$dest"
    # 2. Rename: the crate, the Python package and its folder, the targets' prefix
    # (in src/ and in what the tests match), and the package where it is imported.
    sed -i "s/^name = \"xla-ffi-plugin-example\"/name = \"$dist\"/; s/^name = \"xla_ffi_plugin_example\"/name = \"$pkg\"/" Cargo.toml
    sed -i "s/^name = \"xla-ffi-plugin-example\"/name = \"$dist\"/; s/\"plugin_example\.plugin_native\"/\"$pkg.plugin_native\"/" pyproject.toml
    mv python/plugin_example "python/$pkg"
    sed -i "s/\"plugin\./\"$pkg./g" src/*.rs
    sed -i "s/\"plugin\./\"$pkg./g; s/@plugin\./@$pkg./g; s/r\"plugin\\\\\./r\"$pkg\\\\./g" tests/*.py
    sed -i "s/plugin_example/$pkg/g" tests/*.py "python/$pkg/__init__.py"
    # 3. The dependency lines: a local checkout (this one).
    sed -i "s#path = \"../../crates/xla-ffi\"#path = \"$root/crates/xla-ffi\"#" Cargo.toml
    # 4. Delete what serves this repository's CI, and the lines that name it.
    rm src/features.rs test_plugin.py test_features.py
    sed -i '/^mod features;/d; /^pub use features::FEATURE_HANDLERS;/d; /super::features::python::add(m)?;/d' src/lib.rs
    sed -i 's/\[HANDLERS, FEATURE_HANDLERS\]\.concat()/HANDLERS.to_vec()/; /types: { "features.Missing" => features::Missing },/d' src/lib.rs
    sed -i 's/ (besides \[`FEATURE_HANDLERS`\])//; s/HANDLERS\.iter()\.chain(FEATURE_HANDLERS)/HANDLERS.iter()/; s/\["features\.Missing"\]/Vec::<\&str>::new()/' src/lib.rs
    sed -i '/^def feature_/d' "python/$pkg/plugin_native.pyi"
    # What the renaming left behind, comments aside: nothing of the template's names.
    if grep -rnE 'plugin_example|xla_ffi_plugin_example|xla-ffi-plugin-example|"plugin\.|@plugin\.|FEATURE|features::' \
        --include='*.rs' --include='*.py' --include='*.pyi' --include='*.toml' . | grep -vE '^[^:]+:[0-9]+:\s*(#|//)'; then
        echo "error: the copy $pkg still names the template (above) after the README's renaming" >&2
        exit 1
    fi
    cd "$root"
}

make_copy ops_a
make_copy ops_b
for pkg in ops_a ops_b; do
    log "pip install the template's copy $pkg, and its tests"
    "$py" -m pip install -q --disable-pip-version-check "$work/$pkg"
    (cd "$work/$pkg" && "$py" -m pytest -q -p no:cacheprovider tests)
done
log "both copies in one process"
"$py" - <<'EOF'
import jax.numpy as jnp
import numpy as np

import ops_a
import ops_b

x = np.linspace(-2.0, 2.0, 5)
for ops, prefix in ((ops_a, "ops_a."), (ops_b, "ops_b.")):
    np.testing.assert_allclose(np.asarray(ops.softplus(jnp.asarray(x, jnp.float32))), np.log1p(np.exp(x)), rtol=1e-6)
    assert all(t.startswith(prefix) for t in ops.plugin_native.targets()), list(ops.plugin_native.targets())
print("ops_a and ops_b side by side: ok")
EOF
