//! A user's element set is checked through the dtypes it lists
//! (`ElementSpec::DTYPES`): a rule's dtype outside them, or one variable on sets
//! with no dtype in common (here none in common to all three, though any two share
//! one), is an error on the rule.
use xla_ffi::{handler, DataType, ElementSpec, Buffer, Result, ResultBuffer};

macro_rules! set {
    ($name:ident: $($d:ident),*) => {
        pub struct $name;
        impl ElementSpec for $name {
            fn accepts(dtype: DataType) -> bool {
                [$(DataType::$d),*].contains(&dtype)
            }
            fn describe() -> String {
                stringify!($name).into()
            }
            const DTYPES: Option<&'static [DataType]> = Some(&[$(DataType::$d),*]);
        }
    };
}
set!(F32OrF64: F32, F64);
set!(F64OrF16: F64, F16);
set!(F16OrF32: F16, F32);

#[handler(target = "ui.set_dtype", dtypes = "float16 -> float16")]
fn set_dtype(x: Buffer<F32OrF64>, y: ResultBuffer<F64OrF16>) -> Result<()> { let _ = (x, y); Ok(()) }

#[handler(target = "ui.set_variable", dtypes = "T, T -> T")]
fn set_variable(a: Buffer<F32OrF64>, b: Buffer<F64OrF16>, y: ResultBuffer<F16OrF32>) -> Result<()> {
    let _ = (a, b, y);
    Ok(())
}

fn main() {}
