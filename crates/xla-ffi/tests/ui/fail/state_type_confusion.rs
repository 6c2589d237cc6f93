//! A safe `StateType` implementation cannot return another type's registration
//! record: the execute stage would read the state as the wrong type, and XLA would
//! free it with the other type's deleter.
#![forbid(unsafe_code)]

use xla_ffi::{state_type, StateType, TypeRegistration};

pub struct Big([u64; 64]);
state_type!(Big);

pub struct Small(u8);

impl StateType for Small {
    fn registration() -> &'static TypeRegistration<Self> {
        Big::registration()
    }
}

/// Nor can it make a record for another type itself.
pub struct Tiny(u8);

impl StateType for Tiny {
    fn registration() -> &'static TypeRegistration<Self> {
        static REG: TypeRegistration<Big> = TypeRegistration::new();
        &REG
    }
}

fn main() {}
