//! Without the `bindgen` feature there is nothing to build: the ABI is declared in
//! `src/abi.rs`. With it, the bindings are generated from jaxlib's
//! `xla/ffi/api/c_api.h`, found in this order:
//! 1. `XLA_FFI_INCLUDE_DIR`: a directory that contains `xla/ffi/api/c_api.h`;
//! 2. the build's Python (`PYO3_PYTHON`, `PYTHON_SYS_EXECUTABLE`, then `python3`
//!    and `python`), asked for `jax.ffi.include_dir()`, or for jaxlib's `include/`
//!    folder when jax itself is not importable.
//!
//! If neither works, or libclang is missing, the build stops with a message that
//! says how to fix it.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(xla_ffi_header_legacy)");
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "bindgen")]
    generate::run();
}

#[cfg(feature = "bindgen")]
mod generate {
    use std::env;
    use std::path::PathBuf;
    use std::process::Command;

    const HEADER: &str = "xla/ffi/api/c_api.h";

    const PY_PROBE: &str = r#"
import os, importlib.util
try:
    import jax.ffi
    print(jax.ffi.include_dir())
except Exception:
    spec = importlib.util.find_spec("jaxlib")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("jaxlib is not installed")
    print(os.path.join(list(spec.submodule_search_locations)[0], "include"))
"#;

    pub fn run() {
        println!("cargo:rerun-if-env-changed=XLA_FFI_INCLUDE_DIR");
        println!("cargo:rerun-if-env-changed=PYO3_PYTHON");
        println!("cargo:rerun-if-env-changed=PYTHON_SYS_EXECUTABLE");
        println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");

        let include = find_include_dir().unwrap_or_else(|tried| {
            panic!(
                "\n\nxla-ffi-sys (feature `bindgen`): cannot find XLA's FFI header `{HEADER}`.\n\
                 Tried:\n{tried}\n\
                 Fix it in one of three ways:\n  \
                 * build without the `bindgen` feature: the ABI is declared in Rust and needs no header;\n  \
                 * install jax into the Python that builds this crate:   pip install \"jax[cpu]>=0.10\"\n    \
                 (and point PYO3_PYTHON at that Python if it is not `python3` on PATH), or\n  \
                 * set XLA_FFI_INCLUDE_DIR to a folder holding {HEADER}, for example\n    \
                 export XLA_FFI_INCLUDE_DIR=$(python -c 'import jax.ffi; print(jax.ffi.include_dir())')\n    \
                 (PowerShell: $env:XLA_FFI_INCLUDE_DIR = python -c \"import jax.ffi; print(jax.ffi.include_dir())\")\n\n"
            )
        });
        let header = include.join(HEADER);
        println!("cargo:rerun-if-changed={}", header.display());

        let text = std::fs::read_to_string(&header).expect("read c_api.h");
        let minor = header_minor(&text);
        if minor < 4 {
            println!("cargo:rustc-cfg=xla_ffi_header_legacy");
        }

        // bindgen panics with its own message (and a backtrace) when libclang is
        // missing: load it first, quietly, and say how to fix it.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let loaded = std::panic::catch_unwind(bindgen::clang_version);
        std::panic::set_hook(hook);
        if let Err(payload) = loaded {
            let why = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            eprintln!(
                "\n\nxla-ffi-sys (feature `bindgen`): libclang could not be loaded ({why}).\n\
                 Install it (Debian/Ubuntu: `apt-get install libclang-dev`; macOS: `brew install llvm`; \
                 Windows: LLVM's installer) or set LIBCLANG_PATH to the folder holding libclang.so \
                 (libclang.dylib, libclang.dll); or build without the `bindgen` feature, which \
                 needs no libclang.\n"
            );
            std::process::exit(1);
        }

        let bindings = bindgen::Builder::default()
            .header(header.to_string_lossy())
            .clang_arg(format!("-I{}", include.display()))
            .clang_arg("-xc")
            .clang_arg("-std=c11")
            .allowlist_type("XLA_FFI_.*")
            .allowlist_var("XLA_FFI_.*")
            .allowlist_function("XLA_FFI_.*")
            // Integers, never Rust enums: an unknown value from the runtime is not UB.
            .default_enum_style(bindgen::EnumVariation::Consts)
            .prepend_enum_name(false)
            .derive_debug(true)
            .layout_tests(true)
            .use_core()
            .generate_comments(true)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
            .generate()
            .unwrap_or_else(|e| panic!("xla-ffi-sys: bindgen failed on {}: {e}", header.display()));
        let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("bindings.rs");
        bindings.write_to_file(out).expect("write bindings.rs");
    }

    fn header_minor(text: &str) -> i32 {
        text.lines()
            .find_map(|l| l.trim().strip_prefix("#define XLA_FFI_API_MINOR"))
            .and_then(|v| v.trim().parse().ok())
            .expect("c_api.h has no XLA_FFI_API_MINOR")
    }

    fn find_include_dir() -> Result<PathBuf, String> {
        let mut tried = String::new();
        if let Some(dir) = env::var_os("XLA_FFI_INCLUDE_DIR") {
            let dir = PathBuf::from(dir);
            if dir.join(HEADER).is_file() {
                return Ok(dir);
            }
            tried += &format!("  XLA_FFI_INCLUDE_DIR={} (no {HEADER} there)\n", dir.display());
        } else {
            tried += "  XLA_FFI_INCLUDE_DIR (not set)\n";
        }
        let mut pythons: Vec<String> =
            ["PYO3_PYTHON", "PYTHON_SYS_EXECUTABLE"].iter().filter_map(|k| env::var(k).ok()).collect();
        pythons.extend(["python3".to_string(), "python".to_string()]);
        for py in pythons {
            match Command::new(&py).arg("-c").arg(PY_PROBE).output() {
                Ok(o) if o.status.success() => {
                    let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
                    if dir.join(HEADER).is_file() {
                        return Ok(dir);
                    }
                    tried += &format!("  {py}: include dir {} has no {HEADER}\n", dir.display());
                }
                Ok(o) => {
                    let err = String::from_utf8_lossy(&o.stderr);
                    let last = err.lines().last().unwrap_or("").to_string();
                    tried += &format!("  {py}: no jax/jaxlib ({last})\n");
                }
                Err(e) => tried += &format!("  {py}: cannot run ({e})\n"),
            }
        }
        Err(tried)
    }
}
