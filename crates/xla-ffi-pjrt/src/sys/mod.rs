//! Raw declarations of the PJRT C API, as the plugins lay them out.
pub mod client;
