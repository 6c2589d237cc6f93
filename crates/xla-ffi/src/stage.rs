//! The stages whose state a handler can read, as types: [`Instantiate`],
//! [`Prepare`] and [`Initialize`], the second parameter of
//! [`State`](crate::State).
//!
//! XLA calls a handler bundle's stages in order: instantiate (once per call site,
//! when the executable is built), then prepare and initialize (before each run, on
//! GPU only: XLA:CPU never calls them), then execute or record. A stage's state is
//! readable only by the stages after it, which the [`handler`](crate::handler)
//! macro checks at compile time: an execute handler may take
//! `State<S, Initialize>`, a prepare handler may not.

use crate::frame::Stage;

mod sealed {
    pub trait Sealed {}
}

/// A stage that can create state: [`Instantiate`], [`Prepare`] or [`Initialize`].
///
/// Sealed: only this crate implements it (XLA keeps state for these three
/// stages only; asking it for another stage's state is undefined in XLA).
pub trait StateStage: sealed::Sealed + Send + Sync + 'static {
    /// The stage.
    const STAGE: Stage;
}

/// The instantiate stage, as a type: `State<S, Instantiate>` (the default,
/// `State<S>`) reads the state an instantiate handler created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instantiate;

/// The prepare stage, as a type: `State<S, Prepare>` (also written
/// [`Prepared<S>`](crate::Prepared)) reads the state a prepare handler created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepare;

/// The initialize stage, as a type: `State<S, Initialize>` (also written
/// [`Initialized<S>`](crate::Initialized)) reads the state an initialize handler
/// created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Initialize;

impl sealed::Sealed for Instantiate {}
impl sealed::Sealed for Prepare {}
impl sealed::Sealed for Initialize {}

impl StateStage for Instantiate {
    const STAGE: Stage = Stage::Instantiate;
}
impl StateStage for Prepare {
    const STAGE: Stage = Stage::Prepare;
}
impl StateStage for Initialize {
    const STAGE: Stage = Stage::Initialize;
}

impl Stage {
    /// Where the stage comes in a call site's life: instantiate 0, prepare 1,
    /// initialize 2, execute and record 3 (both run after initialize).
    const fn order(self) -> u8 {
        match self {
            Stage::Instantiate => 0,
            Stage::Prepare => 1,
            Stage::Initialize => 2,
            Stage::Execute | Stage::Record => 3,
        }
    }

    /// Whether a handler at stage `self` may read the state that stage `state`
    /// created: only a later stage's handler can (the state exists by then).
    ///
    /// ```
    /// use xla_ffi::Stage;
    /// assert!(Stage::Execute.reads_state_of(Stage::Initialize));
    /// assert!(Stage::Prepare.reads_state_of(Stage::Instantiate));
    /// assert!(!Stage::Prepare.reads_state_of(Stage::Initialize));
    /// assert!(!Stage::Instantiate.reads_state_of(Stage::Instantiate));
    /// assert!(!Stage::Execute.reads_state_of(Stage::Execute)); // execute creates none
    /// ```
    pub const fn reads_state_of(self, state: Stage) -> bool {
        state.creates_state() && state.order() < self.order()
    }

    /// Whether XLA keeps state for this stage: instantiate, prepare, initialize.
    pub const fn creates_state(self) -> bool {
        matches!(self, Stage::Instantiate | Stage::Prepare | Stage::Initialize)
    }
}

/// The compile-time check the [`handler`](crate::handler) macro emits for each
/// parameter: `state` is the stage whose state the parameter reads
/// ([`Decode::STATE_STAGE`](crate::Decode::STATE_STAGE)), `handler` the
/// handler's own stage.
#[doc(hidden)]
pub const fn state_readable(state: Option<Stage>, handler: Stage) -> bool {
    match state {
        None => true,
        Some(s) => handler.reads_state_of(s),
    }
}
