//! Descriptors: what a rank posts for every MPI call, and what the node manager hands back.
//!
//! A descriptor is a fixed-size `repr(C)` record so it can sit in the shared-memory queue
//! between a rank and its node manager (the papers' "descriptor posted to the NIC"). It holds
//! the call's parameters, including the *addresses* of the rank's buffers: the DMA Helper
//! moves data directly from the sender's buffer to the receiver's. Addresses never enter a
//! scheduling decision or its digest (they differ between runs because of ASLR).

use crate::datatype::{ElemType, ReduceOp, TypeSig};

/// `MPI_ANY_SOURCE` at the runtime level.
pub const ANY_SOURCE: i32 = -1;
/// `MPI_ANY_TAG` at the runtime level.
pub const ANY_TAG: i32 = -1;
/// `MPI_PROC_NULL` at the runtime level.
pub const PROC_NULL: i32 = -2;
/// Largest tag a program may use (`MPI_TAG_UB`).
pub const TAG_UB: i32 = i32::MAX;
/// The split colour meaning `MPI_UNDEFINED`: the rank gets no new communicator.
pub const SPLIT_UNDEFINED: i64 = i64::MIN;

/// Communicator context id of `MPI_COMM_WORLD`.
pub const COMM_WORLD: u32 = 0;
/// Communicator context ids at or above this are `MPI_COMM_SELF` of rank `id - COMM_SELF_BASE`.
pub const COMM_SELF_BASE: u32 = 0x8000_0000;
/// First context id handed out by `dup`/`split`.
pub const COMM_FIRST_DERIVED: u32 = 2;

/// The `MPI_COMM_SELF` context id of world rank `rank`.
pub fn comm_self(rank: u32) -> u32 {
    COMM_SELF_BASE + rank
}

/// What kind of call a descriptor stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DescKind {
    Send = 1,
    Ssend = 2,
    Rsend = 3,
    Recv = 4,
    Probe = 5,
    Iprobe = 6,
    /// Cancel the send or receive whose request id is in `aux` (if still unmatched).
    Cancel = 7,
    Barrier = 10,
    Bcast = 11,
    Reduce = 12,
    Allreduce = 13,
    Scatter = 14,
    Scatterv = 15,
    Gather = 16,
    Gatherv = 17,
    Allgather = 18,
    Allgatherv = 19,
    Alltoall = 20,
    Alltoallv = 21,
    /// Reduce-scatter with per-rank counts (`aux` points at the counts).
    ReduceScatter = 22,
    ReduceScatterBlock = 23,
    Scan = 24,
    Exscan = 25,
    CommDup = 30,
    /// `aux` = colour (as i64), `aux2` = key (as i64).
    CommSplit = 31,
    CommFree = 32,
    Finalize = 40,
}

impl DescKind {
    pub fn from_u8(v: u8) -> Option<DescKind> {
        use DescKind::*;
        Some(match v {
            1 => Send,
            2 => Ssend,
            3 => Rsend,
            4 => Recv,
            5 => Probe,
            6 => Iprobe,
            7 => Cancel,
            10 => Barrier,
            11 => Bcast,
            12 => Reduce,
            13 => Allreduce,
            14 => Scatter,
            15 => Scatterv,
            16 => Gather,
            17 => Gatherv,
            18 => Allgather,
            19 => Allgatherv,
            20 => Alltoall,
            21 => Alltoallv,
            22 => ReduceScatter,
            23 => ReduceScatterBlock,
            24 => Scan,
            25 => Exscan,
            30 => CommDup,
            31 => CommSplit,
            32 => CommFree,
            40 => Finalize,
            _ => return None,
        })
    }

    pub fn is_send(self) -> bool {
        matches!(self, DescKind::Send | DescKind::Ssend | DescKind::Rsend)
    }

    /// Collectives: scheduled once every member of the communicator posted its descriptor.
    pub fn is_collective(self) -> bool {
        ((self as u8) >= 10 && (self as u8) < 40 && self != DescKind::CommFree)
            || self == DescKind::Finalize
    }

    /// Collectives whose data is combined by the Reduce Helper (the RM microphase).
    pub fn is_reduction(self) -> bool {
        matches!(
            self,
            DescKind::Reduce
                | DescKind::Allreduce
                | DescKind::ReduceScatter
                | DescKind::ReduceScatterBlock
                | DescKind::Scan
                | DescKind::Exscan
        )
    }

    /// The MPI function name, for reports.
    pub fn mpi_name(self) -> &'static str {
        use DescKind::*;
        match self {
            Send => "MPI_Send",
            Ssend => "MPI_Ssend",
            Rsend => "MPI_Rsend",
            Recv => "MPI_Recv",
            Probe => "MPI_Probe",
            Iprobe => "MPI_Iprobe",
            Cancel => "MPI_Cancel",
            Barrier => "MPI_Barrier",
            Bcast => "MPI_Bcast",
            Reduce => "MPI_Reduce",
            Allreduce => "MPI_Allreduce",
            Scatter => "MPI_Scatter",
            Scatterv => "MPI_Scatterv",
            Gather => "MPI_Gather",
            Gatherv => "MPI_Gatherv",
            Allgather => "MPI_Allgather",
            Allgatherv => "MPI_Allgatherv",
            Alltoall => "MPI_Alltoall",
            Alltoallv => "MPI_Alltoallv",
            ReduceScatter => "MPI_Reduce_scatter",
            ReduceScatterBlock => "MPI_Reduce_scatter_block",
            Scan => "MPI_Scan",
            Exscan => "MPI_Exscan",
            CommDup => "MPI_Comm_dup",
            CommSplit => "MPI_Comm_split",
            CommFree => "MPI_Comm_free",
            Finalize => "MPI_Finalize",
        }
    }
}

/// Descriptor flag: the posting call blocks until this descriptor completes.
pub const FLAG_BLOCKING: u8 = 1;
/// Descriptor flag: the send buffer is `MPI_IN_PLACE` (collectives).
pub const FLAG_IN_PLACE: u8 = 2;
/// Descriptor flag on `CommSplit`: create a communicator collectively over a *group* of
/// the parent's members only (`MPI_Comm_create_group`, intercommunicator creation):
/// `aux` = the group's key (the same on every member: a hash of its members and tag),
/// `aux2` = my rank in the new communicator, `bytes` = its size, `peer` = 0 for an
/// intracommunicator or the size of the first group of an intercommunicator context.
pub const FLAG_GROUP: u8 = 4;
/// Descriptor flag on `Send`/`Rsend` (scheduler version 3): the message's bytes travel in the
/// descriptor itself ([`Descriptor::inline_payload`], at most [`INLINE_MAX`]); the rank
/// wrote them when it posted and completed the send at once (standard mode: the buffer
/// is the program's again as soon as the call returns). The node manager never reads the
/// sender's memory for it.
pub const FLAG_INLINE: u8 = 8;
/// Descriptor flag on a send or receive whose peer is `MPI_PROC_NULL` (scheduler version
/// 4): the rank completed it when it posted (the standard's immediate no-op: source
/// `MPI_PROC_NULL`, tag `MPI_ANY_TAG`, count 0), so it never waits for a slice. The
/// scheduler records that completion flagged [`COMPLETION_INLINE`] and delivers nothing.
/// (A wavefront's edge ranks post two such calls per block; each used to wait for a slice
/// while their neighbours computed.)
pub const FLAG_LOCAL: u8 = 16;

/// Largest message carried inline in its descriptor: the 7 words a send does not use
/// (`rbuf`, `rbytes`, `aux`, `aux2`, `_pad`). Smaller than a cache line, so the rank's copy
/// costs nothing measurable; 1-, 8- and 32-byte messages (the latency and message-rate
/// benchmarks' sizes, small control messages) fit, 64 bytes does not.
pub const INLINE_MAX: u64 = 56;

/// Largest standard-mode send a rank copies out of the program's buffer when it posts it
/// and completes at once (scheduler version 5): up to [`INLINE_MAX`] bytes into the
/// descriptor, above that into its slot's send arena in the job segment, from which the
/// node manager moves them into node memory when it drains the descriptor. Both are
/// flagged [`FLAG_INLINE`]; [`Descriptor::in_arena`] tells them apart. 64 bytes: the
/// latency benchmarks' largest small size, one cache line per arena entry.
pub const RANK_COPY_MAX: u64 = 64;

/// One posted call. 128 bytes, `repr(C)`, plain data.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// Posting rank (world rank).
    pub rank: u32,
    /// `DescKind as u8`.
    pub kind: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// `ElemType as u8` (reductions).
    pub elem: u8,
    /// `ReduceOp as u8` (reductions).
    pub op: u8,
    /// Per-rank sequence number, from 0, without gaps.
    pub seq: u64,
    /// Rank-local request id the completion refers to (0: no completion wanted).
    pub request: u64,
    /// Communicator context id.
    pub comm: u32,
    /// Destination, source or root, relative to `comm`; `ANY_SOURCE`, `PROC_NULL`.
    pub peer: i32,
    /// Tag; `ANY_TAG` for receives.
    pub tag: i32,
    pub _reserved: u32,
    /// Send (or only) buffer address in the posting rank.
    pub buf: u64,
    /// Bytes to send, or receive capacity.
    pub bytes: u64,
    /// Receive buffer of a collective.
    pub rbuf: u64,
    /// Receive capacity of a collective.
    pub rbytes: u64,
    /// Kind-specific: address of a `[u64]` counts/displacements table, a colour, a request id.
    pub aux: u64,
    /// Kind-specific: a second table, a key.
    pub aux2: u64,
    /// Point-to-point: the hash of the type signature of one element of the call's
    /// datatype ([`TypeSig`]), for the type-matching check. Never scheduled on.
    pub sig_hash: u64,
    /// Basic elements in one element of the datatype, plus one; 0: no signature carried
    /// (`MPI_PACKED`, the Rust API, calls that do not say).
    pub sig_len: u32,
    /// Elements of the datatype in the call (its `count`).
    pub sig_count: u32,
    pub _pad: [u64; 3],
}

const _: () = assert!(std::mem::size_of::<Descriptor>() == 128);

impl Descriptor {
    pub fn kind(&self) -> Option<DescKind> {
        DescKind::from_u8(self.kind)
    }
    pub fn elem_type(&self) -> Option<ElemType> {
        ElemType::from_u8(self.elem)
    }
    pub fn reduce_op(&self) -> Option<ReduceOp> {
        ReduceOp::from_u8(self.op)
    }
    pub fn blocking(&self) -> bool {
        self.flags & FLAG_BLOCKING != 0
    }
    pub fn in_place(&self) -> bool {
        self.flags & FLAG_IN_PLACE != 0
    }
    pub fn id(&self) -> DescRef {
        DescRef {
            rank: self.rank,
            seq: self.seq,
        }
    }
    /// The type signature of one element and the element count, when the call carried one.
    pub fn type_sig(&self) -> Option<(TypeSig, u64)> {
        (self.sig_len != 0).then(|| {
            let sig = TypeSig {
                hash: self.sig_hash,
                len: u64::from(self.sig_len - 1),
            };
            (sig, u64::from(self.sig_count))
        })
    }
    /// Carry `count` elements of signature `sig` (left out when they do not fit).
    pub fn set_type_sig(&mut self, sig: TypeSig, count: u64) {
        match (u32::try_from(sig.len + 1), u32::try_from(count)) {
            (Ok(len), Ok(count)) => {
                self.sig_hash = sig.hash;
                self.sig_len = len;
                self.sig_count = count;
            }
            _ => self.sig_len = 0,
        }
    }

    /// Whether the rank completed this `MPI_PROC_NULL` send or receive itself
    /// ([`FLAG_LOCAL`]).
    pub fn is_local(&self) -> bool {
        self.flags & FLAG_LOCAL != 0
    }

    /// Whether a send carries its bytes inline ([`FLAG_INLINE`]).
    pub fn is_inline(&self) -> bool {
        self.flags & FLAG_INLINE != 0
    }

    /// Whether an inline send's bytes are in its rank's send arena rather than in the
    /// descriptor ([`RANK_COPY_MAX`]): more than [`INLINE_MAX`] of them.
    pub fn in_arena(&self) -> bool {
        self.is_inline() && self.bytes > INLINE_MAX
    }

    /// The words of an inline payload, in order: the fields a send does not use.
    fn payload_words(&mut self) -> [&mut u64; 7] {
        let [p0, p1, p2] = &mut self._pad;
        [
            &mut self.rbuf,
            &mut self.rbytes,
            &mut self.aux,
            &mut self.aux2,
            p0,
            p1,
            p2,
        ]
    }

    /// Carry `data` inline (a send of at most [`INLINE_MAX`] bytes; `false`, and nothing
    /// changed, when it does not fit). Sets [`FLAG_INLINE`]; `bytes` stays the caller's.
    pub fn set_inline_payload(&mut self, data: &[u8]) -> bool {
        if data.len() as u64 > INLINE_MAX {
            return false;
        }
        let mut raw = [0u8; INLINE_MAX as usize];
        raw[..data.len()].copy_from_slice(data);
        for (w, chunk) in self.payload_words().into_iter().zip(raw.chunks_exact(8)) {
            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        }
        self.flags |= FLAG_INLINE;
        true
    }

    /// The inline payload of a send (its first `bytes` bytes), or `None` when the
    /// descriptor carries none or claims more than fits.
    pub fn inline_payload(&self) -> Option<[u8; INLINE_MAX as usize]> {
        if !self.is_inline() || self.bytes > INLINE_MAX {
            return None;
        }
        let mut raw = [0u8; INLINE_MAX as usize];
        let mut copy = *self;
        for (w, chunk) in copy
            .payload_words()
            .into_iter()
            .zip(raw.chunks_exact_mut(8))
        {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Some(raw)
    }

    /// The descriptor without its inline payload (the words zeroed, the flag kept): what
    /// a recording stores, since a message's bytes never belong in the schedule.
    pub fn without_payload(&self) -> Descriptor {
        let mut d = *self;
        if d.is_inline() {
            for w in d.payload_words() {
                *w = 0;
            }
        }
        d
    }
}

/// Names a descriptor across the job: (posting rank, its sequence number). This is the
/// canonical order of descriptors within a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DescRef {
    pub rank: u32,
    pub seq: u64,
}

/// Error classes the runtime reports in a completion (the C ABI maps them to MPI codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum RtError {
    Ok = 0,
    /// The message was longer than the receive buffer (`MPI_ERR_TRUNCATE`).
    Truncate = 1,
    /// A rank outside the communicator (`MPI_ERR_RANK`).
    Rank = 2,
    /// An unknown or freed communicator (`MPI_ERR_COMM`).
    Comm = 3,
    /// Members of a communicator called different collectives, or with different roots
    /// or sizes (`MPI_ERR_OTHER` class in MPI terms; reported clearly).
    CollectiveMismatch = 4,
    /// An op that is not defined for the element type (`MPI_ERR_OP`).
    Op = 5,
    /// A malformed descriptor (`MPI_ERR_ARG`).
    Arg = 6,
    /// A rank died, the job is going down (`MPI_ERR_OTHER`).
    Aborted = 7,
    /// Buffer sizes inconsistent with the collective (`MPI_ERR_COUNT`).
    Count = 8,
    /// Reading or writing a rank's memory failed (`MPI_ERR_BUFFER`).
    Buffer = 9,
}

impl RtError {
    pub fn from_u32(v: u32) -> RtError {
        use RtError::*;
        match v {
            0 => Ok,
            1 => Truncate,
            2 => Rank,
            3 => Comm,
            4 => CollectiveMismatch,
            5 => Op,
            6 => Arg,
            7 => Aborted,
            8 => Count,
            _ => Buffer,
        }
    }
}

/// Completion flag: the request was cancelled.
pub const COMPLETION_CANCELLED: u32 = 1;
/// Completion flag: an `Iprobe` found a message (status fields are valid).
pub const COMPLETION_FOUND: u32 = 2;
/// Completion flag: a standard-mode send completed eagerly (scheduler version 2): no
/// receive had matched it, and its node manager copied its bytes into node memory in the
/// slice of this completion, before delivering it. The receive matched later takes its
/// data from there.
pub const COMPLETION_EAGER: u32 = 4;
/// Completion flag: a send that carried its bytes inline ([`FLAG_INLINE`], scheduler
/// version 3) completed on the rank when it was posted; the scheduler records that
/// completion in the slice the descriptor is exchanged in, and the node manager does not
/// deliver it (the rank has it already).
pub const COMPLETION_INLINE: u32 = 8;

/// Flag of a *delivered* completion only (never of a decision): the first bytes of the
/// receive ride in it ([`Completion::carry_payload`]), and the rank writes them into its
/// buffer itself when it takes the completion ([`Completion::take_payload`]): a tiny
/// inline message then reaches its receiver without a system call.
pub const COMPLETION_PAYLOAD: u32 = 16;
/// Most bytes a delivered completion carries (`value` and `value2`).
pub const COMPLETION_PAYLOAD_MAX: usize = 16;
/// Flag of a *delivered* completion only: the receive's bytes (at most
/// [`RANK_COPY_MAX`]) wait in the rank's receive arena entry for this completion's queue
/// position (segment layout 13), and the rank copies them into its buffer when it takes
/// the completion ([`Completion::take_arena`]).
pub const COMPLETION_ARENA: u32 = 32;

/// What the node manager tells a rank when one of its descriptors completes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Completion {
    pub request: u64,
    /// Status: source (comm-relative), tag, bytes received.
    pub source: i32,
    pub tag: i32,
    pub bytes: u64,
    /// `RtError as u32`.
    pub error: u32,
    /// `COMPLETION_*` bits.
    pub flags: u32,
    /// Kind-specific: the new communicator's context id (dup, split; `u64::MAX` for none).
    pub value: u64,
    /// Kind-specific: new rank in the high half, new size in the low half.
    pub value2: u64,
    pub _pad: u64,
}

const _: () = assert!(std::mem::size_of::<Completion>() == 56);

impl Completion {
    /// Carry `data` (at most [`COMPLETION_PAYLOAD_MAX`] bytes), to be written at `addr` in
    /// the receiving rank, in this delivered completion of a receive (whose `value` and
    /// `value2` are otherwise 0): the whole message, `bytes` long. `false`, nothing
    /// changed, when it does not fit.
    pub fn carry_payload(&mut self, addr: u64, data: &[u8]) -> bool {
        let fits = data.len() <= COMPLETION_PAYLOAD_MAX && data.len() as u64 == self.bytes;
        if !fits || self.value != 0 || self.value2 != 0 || self._pad != 0 {
            return false;
        }
        let mut raw = [0u8; COMPLETION_PAYLOAD_MAX];
        raw[..data.len()].copy_from_slice(data);
        self.value = u64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
        self.value2 = u64::from_le_bytes(raw[8..].try_into().expect("8 bytes"));
        self._pad = addr;
        self.flags |= COMPLETION_PAYLOAD;
        true
    }

    /// Mark this delivered completion of a receive as having its bytes (the whole
    /// message, `bytes` long, at most [`RANK_COPY_MAX`]) in the receiver's arena, to be
    /// written at `addr`. `false`, nothing changed, when they do not fit or the completion
    /// already carries something.
    pub fn carry_in_arena(&mut self, addr: u64, len: usize) -> bool {
        let fits = len as u64 <= RANK_COPY_MAX && len as u64 == self.bytes;
        if !fits || self._pad != 0 || self.flags & (COMPLETION_PAYLOAD | COMPLETION_ARENA) != 0 {
            return false;
        }
        self._pad = addr;
        self.flags |= COMPLETION_ARENA;
        true
    }

    /// Where and how many of a delivered completion's bytes to copy from the receive
    /// arena, as (address, length), and the completion as the scheduler decided it.
    pub fn take_arena(&mut self) -> Option<(u64, usize)> {
        if self.flags & COMPLETION_ARENA == 0 {
            return None;
        }
        let addr = self._pad;
        self.flags &= !COMPLETION_ARENA;
        self._pad = 0;
        Some((addr, (self.bytes as usize).min(RANK_COPY_MAX as usize)))
    }

    /// The payload a delivered completion carries, as (address, bytes, length), and the
    /// completion as the scheduler decided it (payload words cleared, flag removed).
    pub fn take_payload(&mut self) -> Option<(u64, [u8; COMPLETION_PAYLOAD_MAX], usize)> {
        if self.flags & COMPLETION_PAYLOAD == 0 {
            return None;
        }
        let mut raw = [0u8; COMPLETION_PAYLOAD_MAX];
        raw[..8].copy_from_slice(&self.value.to_le_bytes());
        raw[8..].copy_from_slice(&self.value2.to_le_bytes());
        let addr = self._pad;
        self.flags &= !COMPLETION_PAYLOAD;
        (self.value, self.value2, self._pad) = (0, 0, 0);
        let len = (self.bytes as usize).min(COMPLETION_PAYLOAD_MAX);
        Some((addr, raw, len))
    }
}

#[cfg(test)]
mod inline_tests {
    use super::*;

    #[test]
    fn inline_payload_round_trips_and_is_left_out_of_recordings() {
        let mut d = Descriptor {
            kind: DescKind::Send as u8,
            bytes: 56,
            sig_hash: 7,
            ..Default::default()
        };
        let data: Vec<u8> = (1..=56).collect();
        assert!(d.set_inline_payload(&data));
        assert!(d.is_inline());
        assert_eq!(d.inline_payload().unwrap().as_slice(), data.as_slice());
        assert_eq!((d.bytes, d.sig_hash), (56, 7), "other fields untouched");
        let bare = d.without_payload();
        assert!(bare.is_inline());
        assert_eq!(bare.inline_payload().unwrap(), [0; 56]);
        assert!(
            !d.set_inline_payload(&[0; 57]),
            "too long for the descriptor"
        );
        d.bytes = 57;
        assert!(
            d.inline_payload().is_none(),
            "a length past the payload is refused"
        );
    }

    #[test]
    fn a_delivered_completion_names_its_arena_bytes_once() {
        let mut c = Completion {
            bytes: 64,
            ..Completion::default()
        };
        assert!(!c.carry_in_arena(0x40, 63), "the whole message or nothing");
        assert!(c.carry_in_arena(0x40, 64));
        assert!(!c.carry_in_arena(0x80, 64), "already carries");
        assert_eq!(c.take_arena(), Some((0x40, 64)));
        assert_eq!(
            c,
            Completion {
                bytes: 64,
                ..Completion::default()
            }
        );
        assert_eq!(c.take_arena(), None);
        let mut big = Completion {
            bytes: RANK_COPY_MAX + 1,
            ..Completion::default()
        };
        assert!(!big.carry_in_arena(0x40, RANK_COPY_MAX as usize + 1));
        let mut tiny = Completion {
            bytes: 4,
            ..Completion::default()
        };
        assert!(tiny.carry_payload(0x40, &[1, 2, 3, 4]));
        assert!(
            !tiny.carry_in_arena(0x40, 4),
            "one way of carrying at a time"
        );
    }

    #[test]
    fn a_delivered_completion_carries_a_tiny_payload_and_gives_it_back() {
        let decided = Completion {
            request: 9,
            source: 1,
            tag: 4,
            bytes: 5,
            ..Default::default()
        };
        let mut c = decided;
        assert!(c.carry_payload(0x1000, b"hello"));
        assert_eq!(c.flags, COMPLETION_PAYLOAD);
        let (addr, raw, len) = c.take_payload().expect("payload");
        assert_eq!((addr, &raw[..len]), (0x1000, &b"hello"[..]));
        assert_eq!(c, decided, "the completion is the scheduler's again");
        assert!(c.take_payload().is_none());
        assert!(!c.carry_payload(0x1000, &[0; 17]));
        assert!(
            !c.carry_payload(0x1000, b"hell"),
            "the whole message or nothing"
        );
        let mut split = Completion {
            value: 3,
            ..decided
        };
        assert!(!split.carry_payload(0x1000, b"hello"), "value in use");
    }
}
