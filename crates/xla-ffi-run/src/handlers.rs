//! Registering the handlers of `--handlers` libraries into the plugin.

use std::path::{Path, PathBuf};

use xla_ffi_pjrt::{HandlerLibrary, Plugin};

/// XLA's name of the CPU platform in a PJRT plugin.
const PLATFORM: &str = "Host";

/// What registration did: the registered target names (for the "no handler"
/// error), and the libraries, which must stay loaded while the plugin may call
/// their handlers (dropping a `HandlerLibrary` unloads it).
#[derive(Debug, Default)]
pub struct Registered {
    pub targets: Vec<String>,
    pub libraries: Vec<HandlerLibrary>,
}

/// Registers every handler and type of each library into the plugin.
pub fn register_all(plugin: &Plugin, plugin_path: &Path, libraries: &[PathBuf]) -> Result<Registered, String> {
    let mut out = Registered::default();
    if libraries.is_empty() {
        return Ok(out);
    }
    let api = plugin.pjrt_api().map_err(|e| e.to_string())?.named(plugin_path.display().to_string());
    for path in libraries {
        // SAFETY: a handler library the user named with --handlers: running the
        // libraries it is given is what the runner is for (`load`'s contract).
        #[allow(unsafe_code)]
        let library = unsafe { HandlerLibrary::load(path) }.map_err(|e| e.to_string())?;
        let done = xla_ffi_pjrt::register(&api, &library, PLATFORM).map_err(|e| e.to_string())?;
        out.targets.extend(done.targets);
        out.libraries.push(library);
    }
    Ok(out)
}
