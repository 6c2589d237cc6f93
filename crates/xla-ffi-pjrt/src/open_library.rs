//! Opening a shared library by its canonical path, the same way on every platform.
//!
//! On Windows two things differ from `dlopen`: `Path::canonicalize` returns a
//! verbatim path (`\\?\C:\...`), and `LoadLibraryExW` without flags looks for the
//! library's own dependencies in the program's folder and on `%PATH%`, not in the
//! folder of the library being loaded (where a plugin ships them; on Linux the
//! library's `$ORIGIN` run path finds them). So there the path is given in its
//! ordinary form and loaded with `LOAD_WITH_ALTERED_SEARCH_PATH`: the standard
//! search order (`%PATH%` included) with the library's folder in place of the
//! program's.

use std::path::{Path, PathBuf};

/// Opens the library at `file` (a canonical path).
///
/// # Safety
///
/// As `libloading::Library::new`: loading runs the library's initialisers, which
/// must be sound to run in this process.
pub(crate) unsafe fn open(file: &Path) -> Result<libloading::Library, libloading::Error> {
    let file = without_verbatim_prefix(file);
    #[cfg(windows)]
    {
        use libloading::os::windows::{Library, LOAD_WITH_ALTERED_SEARCH_PATH};
        // SAFETY: as this function's contract; the path is absolute, as
        // LOAD_WITH_ALTERED_SEARCH_PATH requires.
        unsafe { Library::load_with_flags(&file, LOAD_WITH_ALTERED_SEARCH_PATH) }.map(Into::into)
    }
    #[cfg(not(windows))]
    {
        // SAFETY: as this function's contract.
        unsafe { libloading::Library::new(&file) }
    }
}

/// `\\?\C:\dir\x.dll` as `C:\dir\x.dll` and `\\?\UNC\server\share\x.dll` as
/// `\\server\share\x.dll` (what `canonicalize` returns on Windows, in the form
/// every Windows API reads); any other path (every path elsewhere) unchanged.
pub(crate) fn without_verbatim_prefix(path: &Path) -> PathBuf {
    let Some(s) = path.to_str() else { return path.to_path_buf() };
    if let Some(rest) = s.strip_prefix(r"\\?\UNC\") {
        return PathBuf::from(format!(r"\\{rest}"));
    }
    match s.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') && rest.as_bytes()[0].is_ascii_alphabetic() => {
            PathBuf::from(rest)
        }
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbatim_windows_paths_lose_their_prefix_and_others_are_kept() {
        let f = |s: &str| without_verbatim_prefix(Path::new(s)).to_str().unwrap().to_string();
        assert_eq!(f(r"\\?\C:\Program Files\jax\pjrt plugin.dll"), r"C:\Program Files\jax\pjrt plugin.dll");
        assert_eq!(f(r"\\?\UNC\server\share\ops.dll"), r"\\server\share\ops.dll");
        // A verbatim device or volume path has no ordinary form: kept.
        assert_eq!(f(r"\\?\Volume{0b1c}\ops.dll"), r"\\?\Volume{0b1c}\ops.dll");
        assert_eq!(f(r"C:\ops.dll"), r"C:\ops.dll");
        assert_eq!(f("/usr/lib/libops.so"), "/usr/lib/libops.so");
    }
}
