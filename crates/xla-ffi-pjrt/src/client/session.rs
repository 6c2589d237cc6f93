//! A client on a plugin's first device: compiling, buffers in and out, running.

use std::ffi::{c_char, c_void};
use std::ptr;

use super::array::byte_len;
use super::plugin::bytes;
use super::program_shape::{entry_parameters, ArrayType};
use super::{ClientError, ElementType, HostArray, Plugin};
use crate::sys::client as sys;

/// A serialized `CompileOptionsProto` for one replica and one partition:
/// `executable_build_options { num_replicas: 1, num_partitions: 1 }` (field 3,
/// length 4, holding fields 4 and 5 set to 1). Empty options make the CPU plugin
/// abort (`replica_count > 0`).
pub const COMPILE_OPTIONS_ONE_DEVICE: [u8; 6] = [0x1a, 0x04, 0x20, 0x01, 0x28, 0x01];

/// A PJRT client of one plugin; programs are compiled for, and run on, its first
/// addressable device.
pub struct Client {
    plugin: Plugin,
    raw: *mut sys::PJRT_Client,
    device: *mut sys::PJRT_Device,
    platform: String,
}

// SAFETY: PJRT clients are thread-safe (XLA's `PjRtClient` is used from many
// threads); the pointers are only passed back to the plugin.
unsafe impl Send for Client {}
// SAFETY: as above.
unsafe impl Sync for Client {}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({:?} on {})", self.plugin, self.platform)
    }
}

impl Client {
    /// Creates a client with the plugin's default options.
    pub fn new(plugin: &Plugin) -> Result<Client, ClientError> {
        let api = plugin.api();
        let create = plugin.slot(api.PJRT_Client_Create, "PJRT_Client_Create")?;
        let mut args: sys::PJRT_Client_Create_Args = sys::args();
        // SAFETY: a valid, zeroed argument struct (no options, no callbacks).
        let err = unsafe { create(&mut args) };
        plugin.check(err, "PJRT_Client_Create")?;
        let mut client = Client { plugin: *plugin, raw: args.client, device: ptr::null_mut(), platform: String::new() };

        let devices = plugin.slot(api.PJRT_Client_AddressableDevices, "PJRT_Client_AddressableDevices")?;
        let mut args: sys::PJRT_Client_AddressableDevices_Args = sys::args();
        args.client = client.raw;
        // SAFETY: a valid argument struct naming a live client.
        let err = unsafe { devices(&mut args) };
        plugin.check(err, "PJRT_Client_AddressableDevices")?;
        if args.num_addressable_devices == 0 || args.addressable_devices.is_null() {
            return Err(ClientError::Unsupported { message: "the client has no addressable device".into() });
        }
        // SAFETY: the plugin returned an array of `num_addressable_devices` (>= 1)
        // devices that live as long as the client.
        client.device = unsafe { *args.addressable_devices };

        let name = plugin.slot(api.PJRT_Client_PlatformName, "PJRT_Client_PlatformName")?;
        let mut args: sys::PJRT_Client_PlatformName_Args = sys::args();
        args.client = client.raw;
        // SAFETY: a valid argument struct naming a live client.
        let err = unsafe { name(&mut args) };
        plugin.check(err, "PJRT_Client_PlatformName")?;
        // SAFETY: the name has `platform_name_size` bytes and lives with the client.
        let name = unsafe { bytes(args.platform_name.cast(), args.platform_name_size) };
        client.platform = String::from_utf8_lossy(name).into_owned();
        Ok(client)
    }

    /// The plugin this client runs on.
    pub fn plugin(&self) -> &Plugin {
        &self.plugin
    }

    /// The platform's name as the plugin states it (`cpu`, `cuda`).
    pub fn platform_name(&self) -> &str {
        &self.platform
    }

    /// Compiles a program for the first device, with [`COMPILE_OPTIONS_ONE_DEVICE`].
    /// `format` is PJRT's: `"mlir"` for StableHLO bytecode or text, `"hlo"` for
    /// a serialized `HloModuleProto`. A `jax.export` file is neither: give
    /// [`Exported::module`](crate::Exported::module) (the file itself is a
    /// [`ClientError::Program`] saying so). A program that calls a
    /// target with no registered handler is [`ClientError::UnknownTarget`], naming
    /// it.
    pub fn compile(&self, code: &[u8], format: &str) -> Result<Executable<'_>, ClientError> {
        self.compile_with_options(code, format, &COMPILE_OPTIONS_ONE_DEVICE)
    }

    /// Compiles with a serialized `CompileOptionsProto` of the caller's.
    pub fn compile_with_options(
        &self,
        code: &[u8],
        format: &str,
        options: &[u8],
    ) -> Result<Executable<'_>, ClientError> {
        let api = self.plugin.api();
        let compile = self.plugin.slot(api.PJRT_Client_Compile, "PJRT_Client_Compile")?;
        let mut program: sys::PJRT_Program = sys::args();
        // PJRT reads the code only (`char*` for historical reasons).
        program.code = code.as_ptr() as *mut c_char;
        program.code_size = code.len();
        program.format = format.as_ptr().cast();
        program.format_size = format.len();
        let mut args: sys::PJRT_Client_Compile_Args = sys::args();
        args.client = self.raw;
        args.program = &program;
        args.compile_options = options.as_ptr().cast();
        args.compile_options_size = options.len();
        // SAFETY: valid argument structs; the code, format and options outlive the call.
        let err = unsafe { compile(&mut args) };
        self.plugin.check(err, "PJRT_Client_Compile").map_err(|e| explain_compile_error(e, code, format))?;
        // Destroyed on drop, also if counting its outputs fails below.
        let mut executable = Executable { client: self, raw: args.executable, num_outputs: 0, parameters: None };

        let get = self.plugin.slot(api.PJRT_LoadedExecutable_GetExecutable, "PJRT_LoadedExecutable_GetExecutable")?;
        let mut args: sys::PJRT_LoadedExecutable_GetExecutable_Args = sys::args();
        args.loaded_executable = executable.raw;
        // SAFETY: a valid argument struct naming a live executable.
        let err = unsafe { get(&mut args) };
        self.plugin.check(err, "PJRT_LoadedExecutable_GetExecutable")?;
        let inner = args.executable;
        let count = self.plugin.slot(api.PJRT_Executable_NumOutputs, "PJRT_Executable_NumOutputs")?;
        let mut args: sys::PJRT_Executable_NumOutputs_Args = sys::args();
        args.executable = inner;
        // SAFETY: a valid argument struct naming the executable just obtained.
        let err = unsafe { count(&mut args) };
        executable.num_outputs = args.num_outputs;
        if err.is_null() {
            executable.parameters = self.parameters_of(inner);
        }
        if let Some(destroy) = api.PJRT_Executable_Destroy {
            let mut args: sys::PJRT_Executable_Destroy_Args = sys::args();
            args.executable = inner;
            // SAFETY: `GetExecutable`'s result is the caller's to destroy, once.
            let destroy_err = unsafe { destroy(&mut args) };
            self.plugin.check(destroy_err, "PJRT_Executable_Destroy")?;
        }
        self.plugin.check(err, "PJRT_Executable_NumOutputs")?;
        Ok(executable)
    }

    /// The parameter types of a compiled program, from its optimized module
    /// (`PJRT_Executable_OptimizedProgram`), or `None` when the plugin cannot say
    /// (no such function, an error, a module this crate cannot read, a parameter
    /// that is not a static array of an [`ElementType`]).
    fn parameters_of(&self, executable: *mut sys::PJRT_Executable) -> Option<Vec<ArrayType>> {
        let optimized = self.plugin.api().PJRT_Executable_OptimizedProgram?;
        let mut program: sys::PJRT_Program = sys::args();
        let mut args: sys::PJRT_Executable_OptimizedProgram_Args = sys::args();
        args.executable = executable;
        args.program = &mut program;
        // SAFETY: valid argument structs naming a live executable; with
        // `program.code` null the plugin only sets `code_size` and `format`.
        let err = unsafe { optimized(&mut args) };
        self.plugin.check(err, "PJRT_Executable_OptimizedProgram").ok()?;
        // PJRT refuses modules of 2 GiB or more; a larger size is not one.
        if program.code_size >= 1 << 31 {
            return None;
        }
        let mut code = vec![0u8; program.code_size];
        program.code = code.as_mut_ptr().cast();
        args.program = &mut program;
        // SAFETY: as above, now with `code_size` writable bytes at `code`, which
        // the plugin fills (and refuses if the module no longer fits).
        let err = unsafe { optimized(&mut args) };
        self.plugin.check(err, "PJRT_Executable_OptimizedProgram").ok()?;
        code.truncate(program.code_size);
        let format = if program.format.is_null() {
            ""
        } else {
            // SAFETY: the plugin's format string, `format_size` bytes that live
            // with the plugin (a constant of it).
            std::str::from_utf8(unsafe { bytes(program.format.cast(), program.format_size) }).unwrap_or("")
        };
        entry_parameters(&code, format).ok()?.into_iter().collect()
    }

    /// Copies a host array to the device.
    fn buffer_from_host(&self, array: &HostArray) -> Result<Buffer<'_>, ClientError> {
        let api = self.plugin.api();
        let from_host = self.plugin.slot(api.PJRT_Client_BufferFromHostBuffer, "PJRT_Client_BufferFromHostBuffer")?;
        let mut args: sys::PJRT_Client_BufferFromHostBuffer_Args = sys::args();
        args.client = self.raw;
        args.data = array.data().as_ptr().cast();
        args.type_ = array.element_type().to_pjrt();
        args.dims = array.dims().as_ptr();
        args.num_dims = array.dims().len();
        args.host_buffer_semantics = sys::PJRT_HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL;
        args.device = self.device;
        // SAFETY: the data has the bytes of its type and dims (`HostArray::new`
        // checked), and the plugin copies it before returning
        // (`kImmutableOnlyDuringCall`).
        let err = unsafe { from_host(&mut args) };
        self.plugin.check(err, "PJRT_Client_BufferFromHostBuffer")?;
        let buffer = Buffer { client: self, raw: args.buffer };
        self.await_event(args.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer")?;
        Ok(buffer)
    }

    /// Waits for an event (when not null), frees it and returns its error.
    fn await_event(&self, event: *mut sys::PJRT_Event, call: &'static str) -> Result<(), ClientError> {
        if event.is_null() {
            return Ok(());
        }
        let api = self.plugin.api();
        let mut args: sys::PJRT_Event_Await_Args = sys::args();
        args.event = event;
        let result = match api.PJRT_Event_Await {
            // SAFETY: a valid argument struct naming a live event.
            Some(wait) => self.plugin.check(unsafe { wait(&mut args) }, call),
            None => Err(ClientError::Unsupported { message: "the plugin does not implement PJRT_Event_Await".into() }),
        };
        if let Some(destroy) = api.PJRT_Event_Destroy {
            let mut args: sys::PJRT_Event_Destroy_Args = sys::args();
            args.event = event;
            // SAFETY: the event is ours to free, once.
            let err = unsafe { destroy(&mut args) };
            self.plugin.check(err, "PJRT_Event_Destroy")?;
        }
        result
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(destroy) = self.plugin.api().PJRT_Client_Destroy {
            let mut args: sys::PJRT_Client_Destroy_Args = sys::args();
            args.client = self.raw;
            // SAFETY: every executable and buffer borrows the client, so none is
            // alive; the client is destroyed once.
            let err = unsafe { destroy(&mut args) };
            let _ = self.plugin.check(err, "PJRT_Client_Destroy");
        }
    }
}

/// A compile error, with what the plugin's message does not say: the target
/// with no handler ([`ClientError::UnknownTarget`]), or that the code is a
/// `jax.export` serialization, which the plugin cannot parse as StableHLO.
fn explain_compile_error(err: ClientError, code: &[u8], format: &str) -> ClientError {
    let err = err.name_unknown_target();
    if matches!(err, ClientError::Pjrt { .. }) && format == "mlir" && crate::Exported::parse(code).is_ok() {
        return ClientError::Program {
            message: format!(
                "the program is a jax.export serialization, not StableHLO: compile \
                 xla_ffi_pjrt::Exported::parse(..)?.module() and run it with Exported::execute \
                 ({err})"
            ),
        };
    }
    err
}

/// A device buffer, destroyed on drop.
struct Buffer<'c> {
    client: &'c Client,
    raw: *mut sys::PJRT_Buffer,
}

impl Buffer<'_> {
    /// Copies the buffer to a host array.
    fn to_host(&self) -> Result<HostArray, ClientError> {
        let plugin = &self.client.plugin;
        let api = plugin.api();
        let element_type = plugin.slot(api.PJRT_Buffer_ElementType, "PJRT_Buffer_ElementType")?;
        let mut args: sys::PJRT_Buffer_ElementType_Args = sys::args();
        args.buffer = self.raw;
        // SAFETY: a valid argument struct naming a live buffer.
        plugin.check(unsafe { element_type(&mut args) }, "PJRT_Buffer_ElementType")?;
        let ty = ElementType::from_pjrt(args.type_).ok_or_else(|| ClientError::Unsupported {
            message: format!("a result has PJRT element type {}, which this crate does not read", args.type_),
        })?;
        let dimensions = plugin.slot(api.PJRT_Buffer_Dimensions, "PJRT_Buffer_Dimensions")?;
        let mut args: sys::PJRT_Buffer_Dimensions_Args = sys::args();
        args.buffer = self.raw;
        // SAFETY: a valid argument struct naming a live buffer.
        plugin.check(unsafe { dimensions(&mut args) }, "PJRT_Buffer_Dimensions")?;
        let dims = if args.num_dims == 0 {
            Vec::new()
        } else {
            // SAFETY: `num_dims` dimensions that live with the buffer.
            unsafe { std::slice::from_raw_parts(args.dims, args.num_dims) }.to_vec()
        };
        let len = byte_len(ty, &dims)?;
        let mut data = vec![0u8; len];
        let to_host = plugin.slot(api.PJRT_Buffer_ToHostBuffer, "PJRT_Buffer_ToHostBuffer")?;
        let mut args: sys::PJRT_Buffer_ToHostBuffer_Args = sys::args();
        args.src = self.raw;
        args.dst = data.as_mut_ptr().cast::<c_void>();
        args.dst_size = data.len();
        // SAFETY: `dst` has `dst_size` writable bytes, the dense row-major size
        // of the buffer's type and dims (the default host layout); it is not read
        // until the event below is awaited.
        plugin.check(unsafe { to_host(&mut args) }, "PJRT_Buffer_ToHostBuffer")?;
        self.client.await_event(args.event, "PJRT_Buffer_ToHostBuffer")?;
        HostArray::new(ty, dims, data)
    }
}

impl Drop for Buffer<'_> {
    fn drop(&mut self) {
        let plugin = &self.client.plugin;
        if let (Some(destroy), false) = (plugin.api().PJRT_Buffer_Destroy, self.raw.is_null()) {
            let mut args: sys::PJRT_Buffer_Destroy_Args = sys::args();
            args.buffer = self.raw;
            // SAFETY: the buffer is ours and destroyed once.
            let err = unsafe { destroy(&mut args) };
            let _ = plugin.check(err, "PJRT_Buffer_Destroy");
        }
    }
}

/// A compiled program, loaded on the client's first device.
///
/// It borrows its [`Client`], so it cannot outlive it. It is `Send` and `Sync`: several
/// threads may [`execute`](Executable::execute) one executable at once, each with its
/// own inputs (as JAX runs one compiled program from many threads).
pub struct Executable<'c> {
    client: &'c Client,
    raw: *mut sys::PJRT_LoadedExecutable,
    num_outputs: usize,
    parameters: Option<Vec<ArrayType>>,
}

// SAFETY: `raw` is a PJRT loaded executable, which the PJRT C API lets any thread use
// and lets several threads execute at once (XLA's `PjRtLoadedExecutable::Execute` is
// thread-safe, and JAX calls it from many threads); it is destroyed once, by `Drop`,
// on whichever thread drops it. Each `execute` makes its own buffers, context and
// events; the rest (`num_outputs`, `parameters`) is only read after construction, and
// `client` is a `&Client`, which is `Send + Sync`.
unsafe impl Send for Executable<'_> {}
// SAFETY: as above.
unsafe impl Sync for Executable<'_> {}

impl std::fmt::Debug for Executable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Executable({} outputs on {:?})", self.num_outputs, self.client)
    }
}

impl Executable<'_> {
    /// The client it was compiled by (and runs on).
    pub fn client(&self) -> &Client {
        self.client
    }

    /// How many results a run returns.
    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The types of the arrays a run takes, in order, as the compiled program
    /// declares them (read from its optimized module); `None` when the plugin
    /// cannot say (it lacks `PJRT_Executable_OptimizedProgram`, or a parameter is
    /// not a static array of an [`ElementType`]). Then a run checks only what the
    /// plugin checks: each input's size in bytes.
    pub fn parameters(&self) -> Option<&[ArrayType]> {
        self.parameters.as_deref()
    }

    /// Refuses inputs that do not match [`Executable::parameters`] (count, then
    /// each one's element type and dimensions): the plugin compares byte sizes
    /// only, and would run an `int32[4]` as the `float32[4]` it has the bytes of.
    fn check_inputs(&self, inputs: &[HostArray]) -> Result<(), ClientError> {
        let Some(parameters) = &self.parameters else { return Ok(()) };
        let list = || parameters.iter().map(ArrayType::to_string).collect::<Vec<_>>().join(", ");
        if parameters.len() != inputs.len() {
            return Err(ClientError::Input {
                message: format!(
                    "the program takes {} ({}), got {}",
                    crate::error::counted(parameters.len(), "input"),
                    list(),
                    inputs.len()
                ),
            });
        }
        for (i, (expected, input)) in parameters.iter().zip(inputs).enumerate() {
            if expected.element_type != input.element_type() || expected.dims != input.dims() {
                let got = ArrayType { element_type: input.element_type(), dims: input.dims().to_vec() };
                return Err(ClientError::Input { message: format!("input {i}: expected {expected}, got {got}") });
            }
        }
        Ok(())
    }

    /// Runs the program on host arrays (copied to the device) and copies its
    /// results back. Inputs that do not match [`Executable::parameters`] (their
    /// count, an element type or dimensions) are refused first with
    /// [`ClientError::Input`], naming the input, what was expected and what was
    /// got. Errors of the handlers the program calls come back as
    /// [`ClientError::Pjrt`] with their code and message.
    pub fn execute(&self, inputs: &[HostArray]) -> Result<Vec<HostArray>, ClientError> {
        self.execute_with(inputs, None)
    }

    /// Runs the program with an execute context (which carries the user data
    /// that handlers read as `xla_ffi::UserData<T>`), of the same plugin: a
    /// context made from another plugin's table is refused
    /// ([`ClientError::Input`]) before anything runs, since this plugin would
    /// read the other's context as its own.
    pub fn execute_with(
        &self,
        inputs: &[HostArray],
        context: Option<&crate::ExecuteContext<'_>>,
    ) -> Result<Vec<HostArray>, ClientError> {
        let client = self.client;
        let plugin = &client.plugin;
        if let Some(context) = context {
            let theirs = context.api();
            if theirs.as_ptr() != plugin.as_raw() {
                return Err(ClientError::Input {
                    message: format!(
                        "the execute context was made from the PJRT table of {:?}, not of this executable's plugin ({plugin:?}); make it from this plugin's table (Plugin::pjrt_api)",
                        theirs.name()
                    ),
                });
            }
        }
        self.check_inputs(inputs)?;
        let execute = plugin.slot(plugin.api().PJRT_LoadedExecutable_Execute, "PJRT_LoadedExecutable_Execute")?;
        let buffers = inputs.iter().map(|a| client.buffer_from_host(a)).collect::<Result<Vec<_>, _>>()?;
        let arguments: Vec<*mut sys::PJRT_Buffer> = buffers.iter().map(|b| b.raw).collect();
        let mut outputs: Vec<*mut sys::PJRT_Buffer> = vec![ptr::null_mut(); self.num_outputs];
        let argument_lists = [arguments.as_ptr()];
        let output_lists = [outputs.as_mut_ptr()];
        let mut done: [*mut sys::PJRT_Event; 1] = [ptr::null_mut()];
        let mut options: sys::PJRT_ExecuteOptions = sys::args();
        // Without the caller's context, an empty one of our own: a handler that
        // reads user data then gets "not found" instead of XLA reading through a
        // null execution context (lammps-jax-pjrt-cpu 0.11.2 crashes on that).
        let _empty;
        options.context = match context {
            Some(context) => context.as_ptr().cast(),
            None => {
                _empty = EmptyContext::new(plugin)?;
                _empty.raw
            }
        };
        let mut args: sys::PJRT_LoadedExecutable_Execute_Args = sys::args();
        args.executable = self.raw;
        args.options = &mut options;
        args.argument_lists = argument_lists.as_ptr();
        args.num_devices = 1;
        args.num_args = arguments.len();
        args.output_lists = output_lists.as_ptr();
        args.device_complete_events = done.as_mut_ptr();
        // SAFETY: one device's argument list of `num_args` live buffers, an output
        // list of `num_outputs` slots (the executable's count), one event slot;
        // all outlive the call.
        let err = unsafe { execute(&mut args) };
        // Take ownership of whatever results were written, so they are freed on
        // every path.
        let results: Vec<Buffer<'_>> =
            outputs.iter().filter(|raw| !raw.is_null()).map(|&raw| Buffer { client, raw }).collect();
        plugin.check(err, "PJRT_LoadedExecutable_Execute")?;
        client.await_event(done[0], "PJRT_LoadedExecutable_Execute")?;
        if results.len() != self.num_outputs {
            return Err(ClientError::Unsupported {
                message: format!("the plugin returned {} of {} results", results.len(), self.num_outputs),
            });
        }
        drop(buffers);
        results.iter().map(Buffer::to_host).collect()
    }
}

impl Drop for Executable<'_> {
    fn drop(&mut self) {
        let plugin = &self.client.plugin;
        if let Some(destroy) = plugin.api().PJRT_LoadedExecutable_Destroy {
            let mut args: sys::PJRT_LoadedExecutable_Destroy_Args = sys::args();
            args.executable = self.raw;
            // SAFETY: the executable is ours and destroyed once.
            let err = unsafe { destroy(&mut args) };
            let _ = plugin.check(err, "PJRT_LoadedExecutable_Destroy");
        }
    }
}

/// An empty `PJRT_ExecuteContext`, destroyed on drop.
struct EmptyContext {
    plugin: Plugin,
    raw: *mut sys::PJRT_ExecuteContext,
}

impl EmptyContext {
    fn new(plugin: &Plugin) -> Result<Self, ClientError> {
        let create = plugin.slot(plugin.api().PJRT_ExecuteContext_Create, "PJRT_ExecuteContext_Create")?;
        let mut args: sys::PJRT_ExecuteContext_Create_Args = sys::args();
        // SAFETY: a valid, zeroed argument struct.
        plugin.check(unsafe { create(&mut args) }, "PJRT_ExecuteContext_Create")?;
        Ok(Self { plugin: *plugin, raw: args.context })
    }
}

impl Drop for EmptyContext {
    fn drop(&mut self) {
        if let (Some(destroy), false) = (self.plugin.api().PJRT_ExecuteContext_Destroy, self.raw.is_null()) {
            let mut args: sys::PJRT_ExecuteContext_Destroy_Args = sys::args();
            args.context = self.raw;
            // SAFETY: the context is ours, no run uses it any more, destroyed once.
            let err = unsafe { destroy(&mut args) };
            let _ = self.plugin.check(err, "PJRT_ExecuteContext_Destroy");
        }
    }
}
