#!/usr/bin/env bash
# The GitHub workflows (.github/workflows/*.yml) against the workflow schema that
# check-jsonschema ships (--builtin-schema: no network at run time), and a check
# that every .ci/ script .ci/run calls is called by a job of ci.yml.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
need_py312
"$XFR_PY312" -m pip install -q --disable-pip-version-check "$CHECK_JSONSCHEMA_PIN"

log "check-jsonschema: .github/workflows/*.yml"
"$(dirname "$XFR_PY312")/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml

log "ci.yml calls every stage of .ci/run"
missing=0
for s in $(grep -oE '^ *(stage [a-z_0-9.]+ )?bash \.ci/[a-z_]+\.sh' .ci/run | grep -oE 'bash \.ci/[a-z_]+\.sh' | awk '{print $2}' | sort -u); do
    if ! grep -q "bash $s" .github/workflows/ci.yml; then
        echo "error: .ci/run calls $s, but no job of .github/workflows/ci.yml does" >&2
        missing=1
    fi
done
exit "$missing"
