// An enum attribute is an `i64` in the op's declaration (Python passes the
// variant's integer as an int64), so `#[derive(AttrEnum)]` refuses a discriminant
// that no i64 holds: a literal one at expansion, any other (an expression, a
// `const`, an implicit one) by a `const` assertion on the variant.
use xla_ffi::AttrEnum;

#[derive(AttrEnum)]
#[repr(u64)]
enum Max {
    A = 0,
    Huge = u64::MAX,
}

#[derive(AttrEnum)]
#[repr(u64)]
enum Shifted {
    A = 0,
    Top = 1 << 63,
}

const BIG: u64 = 1 << 63;

#[derive(AttrEnum)]
#[repr(u64)]
enum FromConst {
    A = BIG,
}

#[derive(AttrEnum)]
#[repr(u64)]
enum Implicit {
    Last = 0x7fff_ffff_ffff_ffff,
    Next,
}

#[derive(AttrEnum)]
#[repr(usize)]
enum Word {
    A = usize::MAX,
}

#[derive(AttrEnum)]
#[repr(u64)]
enum Literal {
    A = 18446744073709551615,
}

#[derive(AttrEnum)]
#[repr(i128)]
enum NegativeLiteral {
    A = -9223372036854775809,
}

#[derive(AttrEnum)]
#[repr(i128)]
enum BelowMin {
    A = i64::MIN as i128 - 1,
}

#[derive(AttrEnum)]
#[repr(u128)]
enum Wide {
    A = u128::MAX,
}

fn main() {}
