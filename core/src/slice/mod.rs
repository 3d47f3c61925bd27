//! The slice vocabulary shared by the runtime, the wire format and the recorder: the
//! microphases of a slice (DEM, MSM, P2P, BBM, RM), why a slice started, when the Strobe
//! Sender starts one ([`StrobePolicy`]), and the slice state machine of a Node Manager
//! ([`machine`]), which the runtime drives with its transport and its clock.

pub mod machine;

pub use machine::{
    Command, CrossNode, Event, MachineConfig, ReplicaDigest, SliceError, SliceMachine, Stopped, Usr,
};

/// The microphases of a slice, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum Phase {
    Dem = 1,
    Msm = 2,
    P2p = 3,
    Bbm = 4,
    /// Within RM: every node has read its reduction inputs (results are written after it).
    RmRead = 5,
    Rm = 6,
}

/// The value a node stores in `VAR_DONE` when it finished `phase` of `slice` (and the
/// Strobe Sender in `VAR_GO` to open the next one): ordered by slice, then phase.
pub fn code(slice: u64, phase: Phase) -> u64 {
    slice * 8 + phase as u64
}

/// Why a slice started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StartReason {
    /// The first slice of the job.
    First = 0,
    /// The slice timer expired (the papers' only reason).
    Timer = 1,
    /// Adaptive strobe: no rank was computing, so waiting longer could not change anything.
    Early = 2,
    /// Replay (logical slices): every rank had posted the descriptors recorded for the
    /// previous slice.
    Logical = 3,
}

impl StartReason {
    pub fn name(self) -> &'static str {
        match self {
            StartReason::First => "first",
            StartReason::Timer => "timer",
            StartReason::Early => "early",
            StartReason::Logical => "logical",
        }
    }
}

/// When the Strobe Sender starts the next slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrobePolicy {
    /// Every `slice` exactly, as in the papers.
    Fixed,
    /// Every `slice`, or as soon as no rank is computing (every rank blocked or done).
    Adaptive,
}

impl std::str::FromStr for StrobePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fixed" => Ok(StrobePolicy::Fixed),
            "adaptive" => Ok(StrobePolicy::Adaptive),
            _ => Err(format!(
                "unknown strobe policy {s:?} (expected adaptive or fixed)"
            )),
        }
    }
}

impl StrobePolicy {
    pub fn name(self) -> &'static str {
        match self {
            StrobePolicy::Fixed => "fixed",
            StrobePolicy::Adaptive => "adaptive",
        }
    }
}
