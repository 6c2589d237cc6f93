// `#[derive(AttrEnum)]` under every integer `#[repr]`, with discriminants at the
// edges of what the declaration's `i64` holds: each compiles, and the declared
// values are the discriminants.
use xla_ffi::{AttrEnum, FromAttr};

macro_rules! edges {
    ($($name:ident: $repr:ident { $($v:ident = $e:expr),* } => [$($want:expr),*];)*) => {$(
        #[derive(AttrEnum)]
        #[repr($repr)]
        #[allow(dead_code)]
        enum $name { $($v = $e),* }
        let got: Vec<i128> = <$name as FromAttr<'static>>::enum_values().unwrap().variants.iter().map(|v| v.1).collect();
        assert_eq!(got, [$($want as i128),*], stringify!($name));
    )*};
}

#[derive(AttrEnum)]
#[allow(dead_code)]
enum NoRepr {
    A = -1,
    B = 9223372036854775807,
}

#[derive(AttrEnum)]
#[repr(C)]
#[allow(dead_code)]
enum ReprC {
    A = -1,
    B,
}

const TOP: u64 = (1 << 63) - 1;

fn main() {
    edges! {
        U8: u8 { A = 0, B = u8::MAX } => [0, 255];
        U16: u16 { A = 0, B = u16::MAX } => [0, 65535];
        U32: u32 { A = 0, B = u32::MAX } => [0, 4294967295u32];
        U64: u64 { A = 0, B = TOP } => [0, i64::MAX];
        U128: u128 { A = 0, B = i64::MAX as u128 } => [0, i64::MAX];
        Usize: usize { A = 0, B = i64::MAX as usize } => [0, i64::MAX];
        I8: i8 { A = i8::MIN, B = i8::MAX } => [i8::MIN, i8::MAX];
        I16: i16 { A = i16::MIN, B = i16::MAX } => [i16::MIN, i16::MAX];
        I32: i32 { A = i32::MIN, B = i32::MAX } => [i32::MIN, i32::MAX];
        I64: i64 { A = i64::MIN, B = i64::MAX } => [i64::MIN, i64::MAX];
        I128: i128 { A = i64::MIN as i128, B = -9223372036854775807 } => [i64::MIN, -i64::MAX];
        Isize: isize { A = isize::MIN, B = isize::MAX } => [i64::MIN, i64::MAX];
    }
    let got: Vec<i128> = NoRepr::enum_values().unwrap().variants.iter().map(|v| v.1).collect();
    assert_eq!(got, [-1, i64::MAX as i128]);
    let got: Vec<i128> = ReprC::enum_values().unwrap().variants.iter().map(|v| v.1).collect();
    assert_eq!(got, [-1, 0]);
    assert_eq!(<U8 as FromAttr<'static>>::type_name(), "i64");
}
