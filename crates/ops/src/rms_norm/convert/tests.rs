//! Bit-exactness of the chunk conversions against `half`'s scalar conversions.

use super::*;
use half::bf16;
