//! CUDA C++ sources and their compilation with NVRTC to a CUBIN, with the lowered
//! (mangled) name of every kernel the caller asks for.

use std::ffi::{CStr, CString};

use cudarc::nvrtc::sys as nv;

use super::kernel::Kernel;
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

    /// Compiles this source with NVRTC for `arch` (`"sm_80"`, `"sm_90a"`, ...) with
    /// the name expressions of `kernels`, exactly as
    /// [`Device::module`](super::Device::module) does, and returns each kernel's
    /// lowered name. Needs NVRTC only, no GPU and no driver: a plugin's test that its
    /// kernels compile and have the signatures its launches pass.
    ///
    /// ```ignore
    /// use xla_ffi::cuda::{Kernel, Param};
    /// let scale = Kernel::with_params("scale<float>", &[Param::In, Param::U64, Param::Out, Param::U64, Param::U64]);
    /// SCALE_CU.check(&[scale], "sm_80")?;
    /// ```
    ///
    /// The error is a message: NVRTC not found (and what to install), a kernel name
    /// that is not a plain C++ name, an `arch` that is not `sm_` and digits, or
    /// NVRTC's log, whose lines name the source and line (`scale.cu(9): error: ...`).
    pub fn check(&self, kernels: &[Kernel], arch: &str) -> Result<Vec<String>, String> {
        if let Some(k) = kernels.iter().find(|k| !k.is_plain_name()) {
            return Err(format!(
                "{}: kernel name {:?}: expected a C++ name with template arguments",
                self.name,
                k.name()
            ));
        }
        let digits = arch.strip_prefix("sm_").map(|a| a.strip_suffix('a').unwrap_or(a));
        if !digits.is_some_and(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit())) {
            return Err(format!(
                "{}: arch {arch:?}: expected sm_ and the compute capability, such as \"sm_90\"",
                self.name
            ));
        }
        let exprs: Vec<String> = kernels.iter().map(Kernel::name_expression).collect();
        compile(self, &options(arch), &exprs).map(|c| c.lowered)
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
                // Errors at `__nv_name_map(N)` are in a name expression (the
                // `#pragma nv_mangled_name` line the log shows), not in the source.
                let hint = if log.contains("__nv_name_map(") {
                    format!(
                        "\n(an error at `__nv_name_map` is in a launch's name expression, the `#pragma \
                         nv_mangled_name` line above: no kernel of that name in {}, or its C++ parameters are not \
                         that list)",
                        source.name
                    )
                } else {
                    String::new()
                };
                Err(format!(
                    "NVRTC {} failed to compile {} with {} for {}: {:?}\n{}{hint}",
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

/// [`Source::check`] with real NVRTC: run by `.ci/cuda_emu.sh`, which sets
/// `XLA_FFI_RS_NVRTC` (then a missing NVRTC fails); skipped where NVRTC is absent.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::kernel::Param;

    static SCALE_CU: Source = crate::trusted_cuda_source!("scale.cu", "../../cuda/scale.cu");
    const SCALE: [Param; 5] = [Param::In, Param::U64, Param::Out, Param::U64, Param::U64];

    fn nvrtc() -> bool {
        match super::nvrtc_ready() {
            Ok(()) => true,
            Err(e) if std::env::var_os(crate::cuda::NVRTC_ENV).is_some() => panic!("NVRTC_ENV is set: {e}"),
            Err(e) => {
                eprintln!("skipped, no NVRTC: {e}");
                false
            }
        }
    }

    #[test]
    fn check_gives_the_lowered_names_of_the_kernels() {
        if !nvrtc() {
            return;
        }
        let kernels = [Kernel::with_params("scale<float>", &SCALE), Kernel::with_params("scale<double>", &SCALE)];
        let lowered = SCALE_CU.check(&kernels, "sm_80").unwrap();
        assert_eq!(lowered, ["_Z5scaleIfEvPKvyPvyy", "_Z5scaleIdEvPKvyPvyy"]);
    }

    #[test]
    fn check_reports_a_misspelt_kernel_and_a_wrong_parameter_list_with_nvrtcs_log() {
        if !nvrtc() {
            return;
        }
        let typo = SCALE_CU.check(&[Kernel::with_params("scal<float>", &SCALE)], "sm_80").unwrap_err();
        assert!(typo.contains("scale.cu") && typo.contains("scal<float>") && typo.contains("error"), "{typo}");
        let mut params = SCALE.to_vec();
        params.push(Param::U32);
        let wrong = SCALE_CU.check(&[Kernel::with_params("scale<float>", &params)], "sm_80").unwrap_err();
        assert!(
            wrong.contains("unsigned long long, unsigned int)>(scale<float>)") && wrong.contains("error"),
            "{wrong}"
        );
        for e in [&typo, &wrong] {
            assert!(e.contains("no kernel of that name in scale.cu, or its C++ parameters are not that list"), "{e}");
        }
    }

    #[test]
    fn check_shows_the_file_and_line_of_a_compile_error() {
        if !nvrtc() {
            return;
        }
        // SAFETY: never launched.
        static BAD: Source =
            unsafe { Source::new("bad.cu", "template <class T>\n__global__ void k(void* y) {\n  T x = ;\n}\n") };
        let e = BAD.check(&[Kernel::with_params("k<float>", &[Param::Out])], "sm_90").unwrap_err();
        assert!(e.contains("bad.cu(3): error") && !e.contains("nv_mangled_name"), "{e}");
    }

    #[test]
    fn check_refuses_a_bad_name_or_architecture_before_nvrtc() {
        let k = Kernel::with_params("scale<float>", &SCALE);
        for arch in ["sm_", "90", "compute_90", "sm_90 -G", "sm_9x"] {
            let e = SCALE_CU.check(std::slice::from_ref(&k), arch).unwrap_err();
            assert!(e.contains("arch") && e.contains("sm_90"), "{arch}: {e}");
        }
        let e = SCALE_CU.check(&[Kernel::with_params("k)(", &[])], "sm_90").unwrap_err();
        assert!(e.contains("kernel name"), "{e}");
    }
}
