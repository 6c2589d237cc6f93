// `#[derive(AttrEnum)]` takes only a fieldless, non-generic enum with variants.
use xla_ffi::AttrEnum;

#[derive(AttrEnum)]
enum WithFields {
    A,
    B(i32),
}

#[derive(AttrEnum)]
enum Named {
    A { x: i64 },
}

#[derive(AttrEnum)]
struct NotAnEnum {
    mode: i64,
}

#[derive(AttrEnum)]
enum Empty {}

#[derive(AttrEnum)]
enum Generic<T> {
    A,
    #[allow(dead_code)]
    B(core::marker::PhantomData<T>),
}

#[derive(AttrEnum)]
#[attr_enum(rename = "x")]
enum BadOption {
    A,
}

fn main() {}
