"""Suite-wide policy: 64-bit mode is ON for every test.

Float64 references and ``check_grads`` need it; float32 behaviour is tested
with explicitly float32 inputs. Helpers shared by the tests live in
``helpers.py``.
"""

from __future__ import annotations

import jax

jax.config.update("jax_enable_x64", True)
