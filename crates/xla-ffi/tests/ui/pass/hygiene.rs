//! The crate's macros are hygienic: user items named `Result`, `Option`, `Some`,
//! `None`, `Ok`, `Err`, `String`, `Vec`, `Box`, `i64`, `f32`, `f64`, `str` and a
//! user `format!` in scope change nothing in their expansion.
#![allow(dead_code, non_camel_case_types, unused_imports, unused_macros)]

mod shadowing {
    pub use std::io::Result;
    pub enum Option {}
    pub struct Some;
    pub struct None;
    pub struct Ok;
    pub struct Err;
    pub enum String {}
    pub enum Vec {}
    pub enum Box {}
    pub enum i64 {}
    pub enum f32 {}
    pub enum f64 {}
    pub enum str {}
}

macro_rules! format {
    ($($t:tt)*) => {
        compile_error!("the user's format! was used")
    };
}
macro_rules! stringify {
    ($($t:tt)*) => {
        compile_error!("the user's stringify! was used")
    };
}

use shadowing::*;

xla_ffi::attributes! {
    /// Attributes with every kind of field.
    pub struct Opts {
        pub eps: ::core::primitive::f32,
        pub iters: ::core::primitive::i64 = 10,
        pub tag: ::core::option::Option<::std::string::String>,
    }
}

pub struct St(u8);
xla_ffi::state_type!(St);

#[xla_ffi::handler(target = "ui.hygiene", stage = instantiate)]
fn ui_hygiene_init(opts: xla_ffi::Attrs<Opts>) -> xla_ffi::Result<St> {
    let _ = opts.eps;
    ::core::result::Result::Ok(St(1))
}

#[xla_ffi::handler(target = "ui.hygiene")]
fn ui_hygiene(
    x: xla_ffi::Buffer<::core::primitive::f32>,
    k: xla_ffi::Attr<::core::option::Option<::core::primitive::i64>>,
    s: xla_ffi::State<St>,
) -> xla_ffi::Result<()> {
    let _ = (x, k, s.0);
    xla_ffi::ensure!(true, InvalidArgument, "never {}", 1);
    let w = xla_ffi::dispatch_float!(xla_ffi::DataType::F32, T => ::core::mem::size_of::<T>(), else _d => 0);
    if w != 4 {
        xla_ffi::bail!(Internal, "width {w}");
    }
    ::core::result::Result::Ok(())
}

fn main() {
    let _ = (UI_HYGIENE_INIT, UI_HYGIENE);
}
