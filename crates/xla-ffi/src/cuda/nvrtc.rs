//! CUDA C++ sources and their compilation with NVRTC to a CUBIN, with the lowered
//! (mangled) name of every kernel the caller asks for.

use std::ffi::{CStr, CString};

use cudarc::nvrtc::sys as nv;

use super::loader::nvrtc_ready;

/// CUDA C++ source shipped with a crate, compiled at run time with NVRTC.
///
/// Kernels launched from it run with this crate's safe
/// [`Device::launch`](super::Device::launch), so the source is trusted code: see the
/// [module docs](super) for what its kernels must respect. Make one with the
/// [`trusted_cuda_source!`](crate::trusted_cuda_source) macro (a file inside your
/// crate, reviewed like your Rust code), or with the `unsafe` [`Source::new`].
#[derive(Debug)]
pub struct Source {
    name: &'static str,
    code: &'static str,
}

impl Source {
    /// A source named `name` (used in messages and as NVRTC's file name).
    ///
    /// # Safety
    ///
    /// Every `__global__` function of `code` that is launched through this crate must
    /// touch only the bytes `[ptr, ptr + size)` of each buffer parameter (each comes
    /// with its size), write only through `void*` (result) parameters, stay correct
    /// when an input parameter is the same memory as a result (an in-place call), and
    /// must not synchronise with the host or allocate. Launching such a kernel is then as safe
    /// as the Rust code around it; launching any other is undefined behaviour.
    pub const unsafe fn new(name: &'static str, code: &'static str) -> Self {
        Source { name, code }
    }

    /// What [`trusted_cuda_source!`](crate::trusted_cuda_source) expands to: the
    /// macro is the trust declaration (a file shipped in the calling crate, embedded
    /// at compile time). Not for direct use.
    #[doc(hidden)]
    pub const fn __embedded_in_crate(name: &'static str, code: &'static str) -> Self {
        Source { name, code }
    }

    /// The name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The source text.
    pub fn code(&self) -> &'static str {
        self.code
    }
}

/// Embeds a CUDA C++ file of the calling crate as a [`cuda::Source`](crate::cuda::Source)
/// (`include_str!` relative to the calling file), declaring it trusted: its kernels
/// must respect the rules of [`Source::new`]. Usable in `#![forbid(unsafe_code)]`
/// crates, because the trusted code is a file of that same crate, reviewed with it.
///
/// ```ignore
/// static SCALE_CU: xla_ffi::cuda::Source = xla_ffi::trusted_cuda_source!("scale.cu", "../cuda/scale.cu");
/// ```
#[macro_export]
macro_rules! trusted_cuda_source {
    ($name:literal, $path:literal) => {
        $crate::cuda::Source::__embedded_in_crate($name, ::core::include_str!($path))
    };
}

/// A compiled source: the CUBIN, and each requested name expression's lowered name.
pub(crate) struct Compiled {
    pub cubin: Vec<u8>,
    pub lowered: Vec<String>,
}

/// NVRTC's version, `major.minor`.
pub(crate) fn nvrtc_version() -> String {
    let (mut a, mut b) = (0, 0);
    // SAFETY: NVRTC is loaded (callers ran nvrtc_ready); writes two ints.
    let rc = unsafe { nv::nvrtcVersion(&mut a, &mut b) };
    if rc == nv::nvrtcResult::NVRTC_SUCCESS {
        format!("{a}.{b}")
    } else {
        "?".into()
    }
}

/// The NVRTC options for a source: C++17 and the architecture.
pub(crate) fn options(arch: &str) -> Vec<String> {
    vec!["--std=c++17".to_string(), format!("--gpu-architecture={arch}")]
}

/// Compiles `source` to a CUBIN with NVRTC, instantiating every name expression in
/// `exprs` and returning their lowered names. Errors carry the compiler log.
pub(crate) fn compile(source: &Source, opts: &[String], exprs: &[String]) -> Result<Compiled, String> {
    nvrtc_ready()?;
    let code = CString::new(source.code).map_err(|_| format!("{}: source contains a NUL byte", source.name))?;
    let name = CString::new(source.name).map_err(|_| "bad source name".to_string())?;
    let cexprs: Vec<CString> = exprs
        .iter()
        .map(|e| CString::new(e.as_str()).map_err(|_| format!("name expression {e:?} contains a NUL byte")))
        .collect::<Result<_, _>>()?;
    let prog = cudarc::nvrtc::result::create_program(&code, Some(&name))
        .map_err(|e| format!("nvrtcCreateProgram failed: {e:?}"))?;
    // SAFETY: `prog` was just created and is destroyed once below; `code`, `name` and
    // the expressions outlive it. The log and CUBIN buffers are sized by NVRTC's own
    // size queries; lowered names are copied out before the program is destroyed.
    unsafe {
        let mut result = Ok(());
        for e in &cexprs {
            let rc = nv::nvrtcAddNameExpression(prog, e.as_ptr());
            if rc != nv::nvrtcResult::NVRTC_SUCCESS {
                result = Err(format!("nvrtcAddNameExpression({e:?}) failed: {rc:?}"));
            }
        }
        let result = result.and_then(|()| match cudarc::nvrtc::result::compile_program(prog, opts) {
            Ok(()) => {
                let mut lowered = Vec::with_capacity(cexprs.len());
                for e in &cexprs {
                    let mut p: *const core::ffi::c_char = core::ptr::null();
                    let rc = nv::nvrtcGetLoweredName(prog, e.as_ptr(), &mut p);
                    if rc != nv::nvrtcResult::NVRTC_SUCCESS || p.is_null() {
                        return Err(format!("nvrtcGetLoweredName({e:?}) failed: {rc:?}"));
                    }
                    lowered.push(CStr::from_ptr(p).to_string_lossy().into_owned());
                }
                let mut size = 0usize;
                let rc = nv::nvrtcGetCUBINSize(prog, &mut size);
                if rc != nv::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                    return Err(format!("nvrtcGetCUBINSize failed: {rc:?}"));
                }
                let mut cubin = vec![0u8; size];
                let rc = nv::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut core::ffi::c_char);
                if rc != nv::nvrtcResult::NVRTC_SUCCESS {
                    return Err(format!("nvrtcGetCUBIN failed: {rc:?}"));
                }
                Ok(Compiled { cubin, lowered })
            }
            Err(e) => {
                let log = cudarc::nvrtc::result::get_program_log(prog)
                    .map(|l| {
                        let bytes: Vec<u8> = l.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
                        String::from_utf8_lossy(&bytes).into_owned()
                    })
                    .unwrap_or_default();
                Err(format!(
                    "NVRTC {} failed to compile {} with {} for {}: {:?}\n{}",
                    nvrtc_version(),
                    source.name,
                    opts.join(" "),
                    exprs.join(", "),
                    e.0,
                    log.trim()
                ))
            }
        });
        let _ = cudarc::nvrtc::result::destroy_program(prog);
        result
    }
}
