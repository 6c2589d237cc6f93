//! Typed values of any float dtype, on the host and on the stand-in's device.

use half::{bf16, f16};
use xla_ffi::testing::cuda::DeviceBuffer;
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::DataType;

use crate::gpu;

/// The values of one buffer in its dtype.
#[derive(Clone, Debug)]
pub enum V {
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Panics for a dtype the test has no values for (a new op's dtype: add it here).
fn unsupported(d: DataType) -> ! {
    panic!("the CUDA test has no values of dtype {d} (add it to tests/cuda_stub/values.rs)")
}

impl V {
    /// `v` rounded to dtype `d`.
    pub fn new(d: DataType, v: &[f64]) -> V {
        match d {
            DataType::F16 => V::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            DataType::BF16 => V::BF16(v.iter().map(|&x| bf16::from_f64(x)).collect()),
            DataType::F32 => V::F32(v.iter().map(|&x| x as f32).collect()),
            DataType::F64 => V::F64(v.to_vec()),
            _ => unsupported(d),
        }
    }
    /// `n` zeros.
    pub fn zeros(d: DataType, n: usize) -> V {
        V::new(d, &vec![0.0; n])
    }
    /// A host operand or result of shape `dims`.
    pub fn arg(&self, dims: &[i64]) -> Arg {
        match self {
            V::F16(v) => Arg::from_slice(v, dims),
            V::BF16(v) => Arg::from_slice(v, dims),
            V::F32(v) => Arg::from_slice(v, dims),
            V::F64(v) => Arg::from_slice(v, dims),
        }
    }
    /// A copy on the device.
    pub fn upload(&self) -> DeviceBuffer {
        match self {
            V::F16(v) => gpu().upload(v),
            V::BF16(v) => gpu().upload(v),
            V::F32(v) => gpu().upload(v),
            V::F64(v) => gpu().upload(v),
        }
        .unwrap()
    }
    /// The values as `f64`.
    pub fn f64s(&self) -> Vec<f64> {
        match self {
            V::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
            V::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
            V::F32(v) => v.iter().map(|&x| x as f64).collect(),
            V::F64(v) => v.clone(),
        }
    }
    /// The values' bits.
    pub fn bits(&self) -> Vec<u64> {
        match self {
            V::F16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::BF16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
            V::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        }
    }
}

/// `n` elements of dtype `d` on the device, uninitialized (NaN-like garbage).
pub fn garbage(d: DataType, n: usize) -> DeviceBuffer {
    match d {
        DataType::F16 => gpu().garbage::<f16>(n),
        DataType::BF16 => gpu().garbage::<bf16>(n),
        DataType::F32 => gpu().garbage::<f32>(n),
        DataType::F64 => gpu().garbage::<f64>(n),
        _ => unsupported(d),
    }
    .unwrap()
}

/// A device buffer's values.
pub fn download(d: DataType, b: &DeviceBuffer) -> V {
    match d {
        DataType::F16 => V::F16(b.download().unwrap()),
        DataType::BF16 => V::BF16(b.download().unwrap()),
        DataType::F32 => V::F32(b.download().unwrap()),
        DataType::F64 => V::F64(b.download().unwrap()),
        _ => unsupported(d),
    }
}

/// Result `i` of a host call.
pub fn host_ret(call: &CallBuilder, i: usize, d: DataType) -> V {
    match d {
        DataType::F16 => V::F16(call.ret_as(i)),
        DataType::BF16 => V::BF16(call.ret_as(i)),
        DataType::F32 => V::F32(call.ret_as(i)),
        DataType::F64 => V::F64(call.ret_as(i)),
        _ => unsupported(d),
    }
}
