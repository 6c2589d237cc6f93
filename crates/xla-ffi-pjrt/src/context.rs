//! [`ExecuteContext`]: a `PJRT_ExecuteContext` holding user data for one or more
//! runs, read by handlers as `xla_ffi::UserData<T>`.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicI64, Ordering};

use xla_ffi::StateType;

use crate::api::PjrtApi;
use crate::error::{Error, ErrorKind};
use crate::library::HandlerLibrary;
use crate::sys;

/// The type info sent with a user data type: no deleter (the context's values are
/// owned by the [`ExecuteContext`]), no serialization.
static USER_DATA_TYPE_INFO: SyncTypeInfo = SyncTypeInfo(sys::PJRT_FFI_Type_Info {
    deleter: None,
    serialize: core::ptr::null(),
    deserialize: core::ptr::null(),
});
struct SyncTypeInfo(sys::PJRT_FFI_Type_Info);
// SAFETY: immutable, and holds only null pointers.
unsafe impl Sync for SyncTypeInfo {}

/// A plugin's execute context (`PJRT_ExecuteContext_Create`) and the user data
/// values added to it, which it owns.
///
/// Pass [`as_ptr`](Self::as_ptr) as `PJRT_ExecuteOptions.context`; a handler
/// taking `UserData<T>` then reads the `T` added here. Dropping it destroys the
/// context, then the values: keep it alive until every run given it has finished
/// (its outputs are ready).
pub struct ExecuteContext<'a> {
    api: &'a PjrtApi,
    raw: NonNull<c_void>,
    /// The values added, as `Box::into_raw` pointers (the plugin holds copies of
    /// them; no `Box` is kept, whose moves would invalidate those) and the function
    /// that frees each.
    values: Vec<Value>,
}

/// One user data value: a leaked `Box<T>` of a `Send + Sync` type and its dropper.
struct Value {
    data: *mut c_void,
    drop: unsafe fn(*mut c_void),
}

// SAFETY: the values are `Send + Sync` (`StateType`), only read by handlers
// through `&T`, and freed once, by `Drop`.
unsafe impl Send for ExecuteContext<'_> {}

/// Frees a value leaked by `add_user_data::<T>`.
///
/// # Safety
/// `p` comes from `Box::<T>::into_raw` and is freed once.
unsafe fn drop_box<T>(p: *mut c_void) {
    // SAFETY: the caller's promise.
    drop(unsafe { Box::from_raw(p.cast::<T>()) });
}

impl core::fmt::Debug for ExecuteContext<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ExecuteContext").field("raw", &self.raw).field("values", &self.values.len()).finish()
    }
}

impl<'a> ExecuteContext<'a> {
    /// A new, empty execute context of the plugin.
    ///
    /// Errors: the plugin's table has no `PJRT_ExecuteContext_Create` (a PJRT API
    /// before 0.5x), or the plugin refused.
    pub fn new(api: &'a PjrtApi) -> Result<ExecuteContext<'a>, Error> {
        let plugin = api.name();
        let (Some(create), Some(_)) =
            (api.slot(sys::PJRT_ExecuteContext_Create_OFFSET), api.slot(sys::PJRT_ExecuteContext_Destroy_OFFSET))
        else {
            return Err(Error::new(
                ErrorKind::TooOld,
                format!(
                    "{plugin}: its PJRT API table has no PJRT_ExecuteContext_Create/Destroy (it cannot pass user data)"
                ),
            ));
        };
        // SAFETY: slot 98 of the table holds `PJRT_ExecuteContext_Create`.
        let create: sys::PJRT_ExecuteContext_Create = unsafe { core::mem::transmute(create) };
        let mut args = sys::PJRT_ExecuteContext_Create_Args {
            struct_size: sys::PJRT_ExecuteContext_Create_Args_STRUCT_SIZE,
            extension_start: core::ptr::null(),
            context: core::ptr::null_mut(),
        };
        // SAFETY: the plugin's function with initialised args.
        let err = unsafe { create(&mut args) };
        if let Some(msg) = api.take_error(err) {
            return Err(Error::new(ErrorKind::Refused, format!("{plugin}: PJRT_ExecuteContext_Create failed: {msg}")));
        }
        let Some(raw) = NonNull::new(args.context) else {
            return Err(Error::new(
                ErrorKind::Refused,
                format!("{plugin}: PJRT_ExecuteContext_Create returned no context"),
            ));
        };
        Ok(ExecuteContext { api, raw, values: Vec::new() })
    }

    /// The plugin table this context was created with.
    pub(crate) fn api(&self) -> &PjrtApi {
        self.api
    }

    /// The raw `PJRT_ExecuteContext*`, for `PJRT_ExecuteOptions.context`. Valid while
    /// `self` lives.
    pub fn as_ptr(&self) -> *mut c_void {
        self.raw.as_ptr()
    }

    /// Adds `value` as the user data of type `T` (moved into the context, dropped
    /// with it); handlers read it as `UserData<T>`.
    ///
    /// `T`'s id is the one its handlers read: `T`'s own registration record, set
    /// when a library listing `T` was [`register`](crate::register)ed (this works
    /// for a library [`linked`](crate::HandlerLibrary::linked) into this program,
    /// where `T` is the handlers' own type). If `T` is not registered into this
    /// plugin yet (through this [`PjrtApi`]), it is registered here through the FFI
    /// extension under its Rust type name, keeping the id it has from another
    /// plugin (which this plugin refuses if it gave that id to another type). A
    /// library loaded from a file has its own copy of every type, so its handlers
    /// cannot read a `T` added here: see [`add_user_data_for`](Self::add_user_data_for).
    ///
    /// Errors name the plugin and the type: no FFI extension or no `user_data_add`,
    /// the type's registration refused, or a `T` already in the context.
    pub fn add_user_data<T: StateType>(&mut self, value: T) -> Result<(), Error> {
        let api = self.api;
        let plugin = api.name();
        let type_name = core::any::type_name::<T>();
        let ext = api.ffi_extension()?;
        if ext.user_data_add.is_none() {
            return Err(Error::new(
                ErrorKind::NoFfiExtension,
                format!("{plugin}: its FFI extension has no user_data_add (user data of type `{type_name}`)"),
            ));
        }
        let reg = T::registration();
        let slot = reg.type_id_ptr();
        let mut id = reg.type_id();
        if !api.is_typed(slot) {
            // Not registered into this plugin (through `api`): register it now, under
            // the id it already has from another plugin if any (the plugin refuses
            // an id it gave another type), else under a new one.
            let got = register_type_id(api, ext.type_register, type_name, id)?;
            if id == 0 {
                // SAFETY: `type_id_ptr` is the address of the record's `AtomicI64`
                // id (a `'static` record), written atomically as XLA would write it.
                unsafe { (*slot.cast::<AtomicI64>()).store(got, Ordering::Release) };
                id = got;
            }
            api.note_typed(slot);
        }
        self.add_with_id(id, type_name, value)
    }

    /// Adds `value` as the user data that the handlers of `lib` read under its type
    /// named `type_name` (one of [`HandlerLibrary::type_names`]). For a library
    /// loaded from a file, whose handlers read their own copy of each type (so
    /// [`add_user_data`](Self::add_user_data) cannot reach them); the library must
    /// have been [`register`](crate::register)ed into this plugin first.
    ///
    /// Errors: no such type in `lib`, the library not registered into this plugin
    /// (through the same [`PjrtApi`]), or as [`add_user_data`](Self::add_user_data).
    ///
    /// # Safety
    /// `T` is the type the library's handlers read under that name (`UserData<T>`
    /// there): the same Rust type of the same crate version, built with the same
    /// compiler, so that its layout is the same; the handlers read the value as
    /// their own type.
    pub unsafe fn add_user_data_for<T: Send + Sync + 'static>(
        &mut self,
        lib: &HandlerLibrary,
        type_name: &str,
        value: T,
    ) -> Result<(), Error> {
        let plugin = self.api.name();
        let Some(t) = lib.types.iter().find(|t| t.name == type_name) else {
            let names: Vec<&str> = lib.type_names().collect();
            return Err(Error::new(
                ErrorKind::Library,
                format!("handler library {}: no type {type_name:?} (its types: {names:?})", lib.shown()),
            ));
        };
        if !self.api.is_typed(t.type_id.cast_const().cast()) {
            return Err(Error::new(
                ErrorKind::Library,
                format!(
                    "{plugin}: type {type_name:?} of handler library {} is not registered into this plugin \
                     (register the library into it first)",
                    lib.shown()
                ),
            ));
        }
        // SAFETY: the library's `XLA_FFI_TypeId` slot is the `AtomicI64` of a
        // `'static` registration record (read from its registry; the library is
        // never unloaded).
        let id = unsafe { (*t.type_id.cast::<AtomicI64>()).load(Ordering::Acquire) };
        self.add_with_id(id, type_name, value)
    }

    /// Hands `value` to the context under type id `id` (the caller checked that
    /// the handlers reading that id read a `T`).
    fn add_with_id<T: Send + Sync + 'static>(&mut self, id: i64, type_name: &str, value: T) -> Result<(), Error> {
        let api = self.api;
        let plugin = api.name();
        let Some(add) = api.ffi_extension()?.user_data_add else {
            return Err(Error::new(
                ErrorKind::NoFfiExtension,
                format!("{plugin}: its FFI extension has no user_data_add (user data of type `{type_name}`)"),
            ));
        };
        let data: *mut T = Box::into_raw(Box::new(value));
        let mut args = sys::PJRT_FFI_UserData_Add_Args {
            struct_size: sys::PJRT_FFI_UserData_Add_Args_STRUCT_SIZE,
            extension_start: core::ptr::null(),
            context: self.raw.as_ptr(),
            user_data: sys::PJRT_FFI_UserData { type_id: id, data: data.cast(), deleter: None },
        };
        // SAFETY: the plugin's `user_data_add` with initialised args; the data is a
        // `T` (stored under `T`'s id) owned by `self.values` until after the
        // context is destroyed (`Drop`), and only read through `&T`.
        let err = unsafe { add(&mut args) };
        if let Some(msg) = api.take_error(err) {
            // SAFETY: the plugin refused it, so holds no copy; freed once, here.
            unsafe { drop_box::<T>(data.cast()) };
            return Err(Error::new(
                ErrorKind::Refused,
                format!("{plugin}: adding user data of type `{type_name}` to the execute context failed: {msg}"),
            ));
        }
        self.values.push(Value { data: data.cast(), drop: drop_box::<T> });
        Ok(())
    }
}

/// Registers a type by name through the FFI extension's `type_register`, under
/// `id` (0: a new one), and returns the id the plugin assigned or accepted; a
/// plugin that answers another id than the one asked for is refused. The args are always the 48-byte form with
/// `type_info`: the plugins of PJRT 0.106 and 0.115 refuse the 40-byte one
/// ("expected 48, got 40"), and a plugin whose args end at `type_id` reads only
/// those (sizes are checked with `>=`).
pub(crate) fn register_type_id(
    api: &PjrtApi,
    type_register: Option<sys::PJRT_FFI_Type_Register>,
    type_name: &str,
    id: i64,
) -> Result<i64, Error> {
    let plugin = api.name();
    crate::register::check_pjrt_version(api, &format!("cannot register type `{type_name}`"))?;
    let Some(f) = type_register else {
        return Err(Error::new(
            ErrorKind::NoFfiExtension,
            format!("{plugin}: its FFI extension has no type_register (type `{type_name}`)"),
        ));
    };
    let mut args = sys::PJRT_FFI_Type_Register_Args {
        struct_size: sys::PJRT_FFI_Type_Register_Args_STRUCT_SIZE,
        extension_start: core::ptr::null(),
        type_name: type_name.as_ptr().cast(),
        type_name_size: type_name.len(),
        type_id: id,
        type_info: &USER_DATA_TYPE_INFO.0,
    };
    // SAFETY: the plugin's `type_register` with initialised args (48 bytes, at
    // least what any version reads); the type info is a `'static` value.
    let err = unsafe { f(&mut args) };
    if let Some(msg) = api.take_error(err) {
        return Err(Error::new(ErrorKind::Refused, format!("{plugin}: registering type `{type_name}` failed: {msg}")));
    }
    if args.type_id == 0 || (id != 0 && args.type_id != id) {
        return Err(Error::new(
            ErrorKind::Refused,
            format!("{plugin}: registering type `{type_name}` under id {id} gave id {}", args.type_id),
        ));
    }
    Ok(args.type_id)
}

impl Drop for ExecuteContext<'_> {
    fn drop(&mut self) {
        if let Some(destroy) = self.api.slot(sys::PJRT_ExecuteContext_Destroy_OFFSET) {
            // SAFETY: slot 99 holds `PJRT_ExecuteContext_Destroy` (checked present in
            // `new`); the context is the plugin's, destroyed once, before the values
            // it points to are dropped (after this block).
            unsafe {
                let destroy: sys::PJRT_ExecuteContext_Destroy = core::mem::transmute(destroy);
                let mut args = sys::PJRT_ExecuteContext_Destroy_Args {
                    struct_size: sys::PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE,
                    extension_start: core::ptr::null(),
                    context: self.raw.as_ptr(),
                };
                let err = destroy(&mut args);
                let _ = self.api.take_error(err);
            }
        }
        for v in self.values.drain(..) {
            // SAFETY: each value was leaked by `add_user_data` with its own dropper,
            // and is freed once, after the context that pointed to it is gone.
            unsafe { (v.drop)(v.data) };
        }
    }
}
