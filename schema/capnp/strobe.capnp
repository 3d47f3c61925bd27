# strobe's wire and recording format: descriptors, scheduling decisions, the per-slice
# decision set, and the messages node managers exchange. The Rust code generated from this
# file is checked in (schema/src/generated/strobe_capnp.rs); regenerate it with
# scripts/regen-schema.sh after any change here. Only schema/src/convert.rs names the
# generated types.
#
# Compatibility rules (Cap'n Proto's): never renumber or retype a field, only append new
# fields and enumerants; bump formatVersion when the meaning of existing data changes.
# Vocabulary is the BCS papers': DEM, MSM, P2P, BBM, RM, Buffer Sender, strobe.

@0xba1a4fac0b6cd366;

# Version of this format. Recordings store it in job.wire_format_version; a reader refuses
# a blob whose version is newer than the one it was built with.
const formatVersion :UInt32 = 1;

# Names a descriptor across the job: (posting world rank, that rank's sequence number).
struct DescRef {
  rank @0 :UInt32;
  seq @1 :UInt64;
}

# Every kind of call a rank can post. `invalid` stands for a kind code the runtime does not
# know (the scheduler answers such a descriptor with an `arg` error).
enum DescKind {
  invalid @0;
  send @1;
  ssend @2;
  rsend @3;
  recv @4;
  probe @5;
  iprobe @6;
  cancel @7;
  barrier @8;
  bcast @9;
  reduce @10;
  allreduce @11;
  scatter @12;
  scatterv @13;
  gather @14;
  gatherv @15;
  allgather @16;
  allgatherv @17;
  alltoall @18;
  alltoallv @19;
  reduceScatter @20;
  reduceScatterBlock @21;
  scan @22;
  exscan @23;
  commDup @24;
  commSplit @25;
  commFree @26;
  finalize @27;
}

# One posted call (the runtime's 128-byte Descriptor). Addresses are the posting rank's:
# they travel between node managers (the DMA Helper needs them) but never enter a decision.
struct Descriptor {
  rank @0 :UInt32;
  seq @1 :UInt64;
  kind @2 :DescKind;
  # Bit 0: blocking call; bit 1: MPI_IN_PLACE.
  flags @3 :UInt8;
  # Element type of a reduction, the runtime's numbering: 0 byte, 1 i8, 2 i16, 3 i32, 4 i64,
  # 5 u8, 6 u16, 7 u32, 8 u64, 9 f32, 10 f64, 11 bool, 12 float_int, 13 double_int,
  # 14 long_int, 15 2int, 16 short_int. Kept raw: meaningless outside reductions.
  elem @4 :UInt8;
  # Reduction op: 0 sum, 1 prod, 2 min, 3 max, 4 land, 5 lor, 6 lxor, 7 band, 8 bor, 9 bxor,
  # 10 minloc, 11 maxloc, 12 replace, 13 no_op. Kept raw, like elem.
  op @5 :UInt8;
  # Rank-local request id the completion refers to (0: none).
  request @6 :UInt64;
  # Communicator context id: 0 world, 2.. derived, 0x80000000 + r MPI_COMM_SELF of rank r.
  comm @7 :UInt32;
  # Destination, source or root relative to comm; -1 MPI_ANY_SOURCE, -2 MPI_PROC_NULL.
  peer @8 :Int32;
  # Tag; -1 MPI_ANY_TAG.
  tag @9 :Int32;
  buf @10 :UInt64;
  bytes @11 :UInt64;
  rbuf @12 :UInt64;
  rbytes @13 :UInt64;
  # Kind-specific: a counts table address, a split colour, a request id to cancel.
  aux @14 :UInt64;
  # Kind-specific: a second table, a split key.
  aux2 @15 :UInt64;
}

# Error classes of a completion.
enum RtError {
  ok @0;
  truncate @1;
  rank @2;
  comm @3;
  collectiveMismatch @4;
  op @5;
  arg @6;
  aborted @7;
  count @8;
  buffer @9;
}

# MSM: a send matched a receive; `bytes` will move.
struct MatchDecision {
  send @0 :DescRef;
  recv @1 :DescRef;
  bytes @2 :UInt64;
  truncated @3 :Bool;
}

# P2P: the DMA Helper of the receiver's node moves `len` bytes at `offset` of a match.
struct ChunkDecision {
  send @0 :DescRef;
  recv @1 :DescRef;
  offset @2 :UInt64;
  len @3 :UInt64;
}

# BBM/RM: every member of `comm` posted its `collSeq`-th collective; it runs this slice.
struct CollectiveDecision {
  comm @0 :UInt32;
  collSeq @1 :UInt64;
  kind @2 :DescKind;
  root @3 :Int32;
  # The members' descriptors in communicator rank order.
  parts @4 :List(DescRef);
}

# A communicator created by dup or split.
struct NewCommDecision {
  parent @0 :UInt32;
  comm @1 :UInt32;
  # World ranks in communicator rank order.
  members @2 :List(UInt32);
}

# A descriptor completed; the rank's request `request` is done.
struct CompleteDecision {
  desc @0 :DescRef;
  request @1 :UInt64;
  source @2 :Int32;
  tag @3 :Int32;
  bytes @4 :UInt64;
  error @5 :RtError;
  # Bit 0: cancelled; bit 1: an MPI_Iprobe found a message.
  flags @6 :UInt32;
  # Dup/split: the new context id (all ones: none) and new rank << 32 | new size.
  value @7 :UInt64;
  value2 @8 :UInt64;
}

# One scheduling decision. The wake-up of a rank is not a decision of its own: a rank is
# woken when it has a completion, and the decision set lists those ranks in `wake`.
struct Decision {
  union {
    matched @0 :MatchDecision;
    chunk @1 :ChunkDecision;
    collective @2 :CollectiveDecision;
    newComm @3 :NewCommDecision;
    complete @4 :CompleteDecision;
  }
}

# Everything the scheduler decided for one slice, in order (the order the digest covers).
# The executors' catalog of descriptors (with addresses) is not part of it.
struct SliceDecisions {
  formatVersion @0 :UInt32;
  slice @1 :UInt64;
  decisions @2 :List(Decision);
  # Ranks with at least one completion: the processes to wake, ascending.
  wake @3 :List(UInt32);
  # FNV-1a 64 digest of the decisions (runtime sched/decision.rs), for verification.
  digest @4 :UInt64;
}

# Microphases a node reports done (the papers' microstrobes).
enum Phase {
  dem @0;
  msm @1;
  p2p @2;
  bbm @3;
  rmRead @4;
  rm @5;
}

# Why a slice started.
enum StartReason {
  first @0;
  timer @1;
  early @2;
  # Replay: every rank posted what the recording says it posted in the previous slice.
  logical @3;
}

# The global strobe: the Strobe Sender opens slice `slice` on every node.
struct Strobe {
  slice @0 :UInt64;
  reason @1 :StartReason;
}

# DEM: a node's Buffer Sender delivers what its ranks posted during the previous slice to
# every node's Buffer Receiver, in canonical order (rank, then sequence number).
struct DescriptorBatch {
  slice @0 :UInt64;
  node @1 :UInt32;
  descriptors @2 :List(Descriptor);
}

# A node finished a microphase of a slice (VAR_DONE); the Strobe Sender opens the next one
# once every node has.
struct PhaseDone {
  slice @0 :UInt64;
  node @1 :UInt32;
  phase @2 :Phase;
}

# Everything that crosses between node managers, one message per frame.
struct NodeMessage {
  formatVersion @0 :UInt32;
  union {
    strobe @1 :Strobe;
    batch @2 :DescriptorBatch;
    done @3 :PhaseDone;
    # A node's decision set, for cross-checking the scheduler replicas (and for a
    # partitioned scheduler that would send decisions instead of replicating them).
    decisions @4 :SliceDecisions;
    # The job is going down (a rank died, a deadlock, an interrupt).
    shutdown @5 :Void;
  }
}

# ---- Node links: the TCP transport (runtime/src/transport/tcp.rs, docs/multi-host.md) ----
# A frame on a node link is: header length (u32, little-endian), payload length (u32,
# little-endian), the header (one packed LinkMessage), then the payload (raw bytes: the
# data of an Xfer-And-Signal; empty for every other message).

# The comparisons of Compare-And-Write.
enum LinkCmp {
  ge @0;
  lt @1;
  eq @2;
  ne @3;
}

# Handshake, first frame of every connection (acceptor -> connector): who accepts, and a
# fresh random challenge.
struct LinkHello {
  node @0 :UInt32;
  nonce @1 :Data;
}

# Handshake, connector -> acceptor: who connects, the job's shape (refused if it differs),
# the connector's own challenge, and HMAC-SHA256(secret, transcript) proving it holds the
# job secret.
struct LinkAuth {
  node @0 :UInt32;
  nodes @1 :UInt32;
  globalSize @2 :UInt64;
  events @3 :UInt32;
  nonce @4 :Data;
  mac @5 :Data;
}

# Handshake, acceptor -> connector: the acceptor's proof over the connector's challenge
# (mutual authentication).
struct LinkAccept {
  mac @0 :Data;
}

# Xfer-And-Signal to one destination: write the frame's payload at `offset` of the
# receiver's global memory, then signal `remoteEvent` if `signal`. Answered by a reply.
struct LinkXfer {
  request @0 :UInt64;
  offset @1 :UInt64;
  signal @2 :Bool;
  remoteEvent @3 :UInt32;
}

# Compare-And-Write, requester -> coordinator (node 0), which serialises them all.
struct LinkCawRequest {
  request @0 :UInt64;
  var @1 :UInt64;
  op @2 :LinkCmp;
  value @3 :UInt64;
  dest @4 :List(UInt32);
  write @5 :Bool;
  writeVar @6 :UInt64;
  writeValue @7 :UInt64;
}

# Coordinator -> a destination: evaluate `global[var] op value`; if `write` is set and the
# comparison holds, also store writeValue at writeVar in the same step (used when the
# destination set is that one node). Answered by a reply carrying the comparison.
struct LinkCompare {
  request @0 :UInt64;
  var @1 :UInt64;
  op @2 :LinkCmp;
  value @3 :UInt64;
  write @4 :Bool;
  writeVar @5 :UInt64;
  writeValue @6 :UInt64;
}

# Coordinator -> a destination: store `value` at `var` (the second phase of a
# Compare-And-Write that held everywhere). Answered by a reply once stored.
struct LinkStore {
  request @0 :UInt64;
  var @1 :UInt64;
  value @2 :UInt64;
}

# The answer to a request: done (`ok` is the comparison's outcome for compares and
# Compare-And-Write requests, true otherwise), or refused with an explanation.
struct LinkReply {
  request @0 :UInt64;
  ok @1 :Bool;
  error @2 :Text;
}

# Everything on a node link, one message per frame.
struct LinkMessage {
  formatVersion @0 :UInt32;
  union {
    hello @1 :LinkHello;
    auth @2 :LinkAuth;
    accept @3 :LinkAccept;
    xfer @4 :LinkXfer;
    cawRequest @5 :LinkCawRequest;
    compare @6 :LinkCompare;
    store @7 :LinkStore;
    reply @8 :LinkReply;
    # Orderly close: the endpoint is being dropped (not a failure).
    goodbye @9 :Void;
  }
}

# ---- Control connections (docs/multi-host.md, "The control protocol") ----
# Every node daemon (`strobe node`) keeps one connection to the Machine Manager (the
# command the user runs). Framing as on node links: u32 LE header length, u32 LE payload
# length, one packed ControlMessage, raw payload (rank output bytes, sink frames). The
# connection opens with the node links' handshake (LinkHello/LinkAuth/LinkAccept), the
# Machine Manager acting as node `nodes` and `globalSize` = 0xFFFF_FFFF_FFFF_FFFF, so a
# control proof is never valid on the fabric and the other way round.

struct ControlEnvVar {
  key @0 :Data;
  value @1 :Data;
}

# Everything a daemon needs to run its share of the job (Machine Manager -> daemon).
struct ControlJobSpec {
  program @0 :Data;              # absolute path (the same path on every host)
  programSha256 @1 :Data;        # checked on every host before anything starts
  args @2 :List(Data);
  env @3 :List(ControlEnvVar);   # extra environment for the ranks
  cwd @4 :Data;
  ranks @5 :UInt32;
  nodes @6 :UInt32;
  placement @7 :List(UInt32);    # node of each rank
  sliceNs @8 :UInt64;
  adaptive @9 :Bool;             # strobe policy: adaptive (true) or fixed
  deadlockSlices @10 :UInt32;
  chunkBudget @11 :UInt64;
  directCopyMin @12 :UInt64;
  eagerMax @13 :UInt64;
  tagOutput @14 :Bool;
  timeoutMs @15 :UInt64;         # 0: none (the Machine Manager enforces it)
  mmdsResolution @16 :UInt32;
  shipSlices @17 :Bool;          # send slice records as sinkFrames (recording)
  captures @18 :List(UInt32);    # ranks whose payloads are recorded (--capture-payloads)
  replay @19 :Bool;              # a replay: a replayPackage message follows the job spec
  inlineMax @20 :UInt64;         # largest send carried in its descriptor (0: none, as
                                 # when replaying a scheduler version 1 or 2 recording)
  localNull @21 :Bool;           # ranks complete MPI_PROC_NULL sends and receives
                                 # themselves (scheduler version 4; false replaying older)
}

# The end of a daemon's share of a replay, as its slice source saw it (sent before its
# node report): the source reached the end of the recording, or a rank left its recorded
# path (node 0's gate). Zero slices: none.
struct ControlReplayEnd {
  endOfRecording @0 :UInt64;
  divergenceSlice @1 :UInt64;
  divergenceRank @2 :Int64;      # -1: no rank named
  recorded @3 :Text;
  replayed @4 :Text;
}

# The daemon's first message: who it is.
struct ControlDaemonHello {
  node @0 :UInt32;
  host @1 :Text;
  pid @2 :UInt32;
}

# Bytes a rank wrote (the frame's payload): whole lines when output is tagged.
struct ControlRankOutput {
  rank @0 :UInt32;
  stderr @1 :Bool;
}

enum ControlDeath {
  clean @0;         # finalized and exited 0
  signal @1;        # code = the signal
  exitCode @2;      # code = the status
  noFinalize @3;
  noInit @4;
  abort @5;         # code = MPI_Abort's error code
  notStarted @6;    # could not be spawned
}

struct ControlRankExit {
  rank @0 :UInt32;
  pid @1 :UInt32;
  status @2 :Int32;   # raw wait status
  how @3 :ControlDeath;
  code @4 :Int32;
  slice @5 :UInt64;
}

enum ControlOutcome {
  success @0;
  failed @1;        # the node's engine or setup failed; message says why
  deadlock @2;      # node 0: the job deadlocked (exitCode: 3, or the livelock code)
  stopped @3;       # stopped by the Machine Manager
  sourceStopped @4; # replay: the slice source ended the job
}

# A daemon's last word about its share of the job.
struct ControlNodeReport {
  outcome @0 :ControlOutcome;
  slice @1 :UInt64;
  exitCode @2 :Int32;
  message @3 :Text;
}

struct ControlMessage {
  formatVersion @0 :UInt32;
  union {
    jobSpec @1 :ControlJobSpec;           # MM -> daemon
    fabricAddr @2 :Text;                  # daemon -> MM: where its fabric endpoint listens
    fabricPeers @3 :List(Text);           # MM -> daemon: every node's address, in node order
    rankOutput @4 :ControlRankOutput;     # daemon -> MM, payload: the bytes
    rankExit @5 :ControlRankExit;         # daemon -> MM
    sinkFrame @6 :Void;                   # daemon -> MM, payload: opaque (daemon/wire_sink.rs)
    heartbeat @7 :UInt64;                 # both ways every 0.5 s; the sender's current slice
    stop @8 :Text;                        # MM -> daemon: stop the job (why)
    nodeReport @9 :ControlNodeReport;     # daemon -> MM
    goodbye @10 :Void;                    # either: orderly close
    daemonHello @11 :ControlDaemonHello;  # daemon -> MM, first message
    rankInput @12 :UInt32;                # MM -> daemon, payload: bytes for this rank's
                                          # stdin (rank 0's); an empty payload is the end
    replayPackage @13 :Void;              # MM -> daemon, payload: its replay package
                                          # (replayer/src/remote.rs), after a replay's spec
    replayEnd @14 :ControlReplayEnd;      # daemon -> MM, before its node report
  }
}
# ---- Sink frames: recording across hosts (runtime/src/daemon/wire_sink.rs, wireD) --------
# A node daemon's SliceSink calls, shipped to the Machine Manager's recorder on the control
# connection (docs/multi-host.md, "Recording across hosts"). One SinkFrame per call; the
# control connection's framing carries them as opaque bytes. Durations are nanoseconds.

# The papers' global per-slice metrics (runtime engine::GlobalMetrics).
struct SinkGlobalMetrics {
  gettsNs @0 :UInt64;
  gtdemNs @1 :UInt64;
  gtmsmNs @2 :UInt64;
  gttsNs @3 :UInt64;
  usrsts @4 :UInt32;
  usrdem @5 :UInt32;
  usrmsm @6 :UInt32;
}

# One node's local per-slice metrics (runtime engine::LocalMetrics).
struct SinkLocalMetrics {
  node @0 :UInt32;
  lettsNs @1 :UInt64;
  ltdemNs @2 :UInt64;
  ltmsmNs @3 :UInt64;
  lttsNs @4 :UInt64;
  np2pdem @5 :UInt32;
  np2pmsm @6 :UInt32;
  ncolldem @7 :UInt32;
  ncollmsm @8 :UInt32;
  bpts @9 :UInt32;
  tDrainNs @10 :UInt64;
  tScheduleNs @11 :UInt64;
  tP2pNs @12 :UInt64;
  tBbmNs @13 :UInt64;
  tRmNs @14 :UInt64;
  tDeliverNs @15 :UInt64;
}

# A rank blocked when a slice started; `call` is the job segment's slot encoding of the
# call (runtime segment::BlockedCall, layout version 4).
struct SinkBlocked {
  rank @0 :UInt32;
  call @1 :UInt32;
}

# Where a blocked rank made its call (runtime symbolize::CallSite); the has* flags say
# whether the optional fields are known.
struct SinkCallSite {
  rank @0 :UInt32;
  object @1 :Text;
  offset @2 :UInt64;
  hasFunction @3 :Bool;
  function @4 :Text;
  hasFile @5 :Bool;
  file @6 :Text;
  hasLine @7 :Bool;
  line @8 :UInt32;
}

# One slice as node 0 saw it (runtime engine::SliceRecord).
struct SinkSlice {
  slice @0 :UInt64;
  reason @1 :StartReason;
  startNs @2 :UInt64;
  global @3 :SinkGlobalMetrics;
  # Descriptors handled in the slice, canonical order.
  descriptors @4 :List(Descriptor);
  # The decisions and the ranks woken, packed (schema/src/sink.rs, "Packed decisions"):
  # varint(count), then per decision its DecisionKind byte and its fields in the digest's
  # order (core sched/visit.rs) as LEB128 varints (i32 zigzag, bool and collective kind one
  # byte, lists a count then items); then varint(count) and the woken ranks. Not the
  # recorder's SliceDecisions blob: its reflection-driven codec costs ~12,000 instructions
  # a decision to encode and ~20,000 to decode, on the slice's way out of node 0's daemon
  # (docs/multi-host.md). Checked on decode against decisionsDigest.
  decisions @5 :Data;
  # The descriptors the decisions refer to, sorted by (rank, seq): the correctness checks
  # at the Machine Manager look them up.
  catalog @6 :List(Descriptor);
  digest @7 :UInt64;
  blocked @8 :List(SinkBlocked);
  sites @9 :List(SinkCallSite);
  # The digest of the decisions (core SliceDecisions::digest), recomputed and compared
  # on decode.
  decisionsDigest @10 :UInt64;
}

struct SinkOutcome {
  kind @0 :UInt32;
  n @1 :UInt32;
  value @2 :UInt64;
}

# Timing-dependent outcomes of one rank (the replay log's stream 1), in the rank's order.
struct SinkOutcomes {
  rank @0 :UInt32;
  recs @1 :List(SinkOutcome);
}

struct SinkNodeMetrics {
  slice @0 :UInt64;
  metrics @1 :SinkLocalMetrics;
}

struct SinkBucket {
  lo @0 :UInt64;
  hi @1 :UInt64;
  count @2 :UInt64;
}

# One primitive's statistics for a rank; `slot` is its MMDS slot (runtime calls::Primitive).
struct SinkPrimitiveStats {
  slot @0 :UInt16;
  count @1 :UInt64;
  minNs @2 :UInt64;
  maxNs @3 :UInt64;
  totalNs @4 :UInt64;
  bytes @5 :UInt64;
  latency @6 :List(SinkBucket);
  size @7 :List(SinkBucket);
}

# A rank's MMDS at the end of the job (runtime mmds::RankMmds).
struct SinkRankMmds {
  rank @0 :UInt32;
  wallNs @1 :UInt64;
  computeNs @2 :UInt64;
  commNs @3 :UInt64;
  calls @4 :UInt64;
  finalized @5 :Bool;
  hasGranularity @6 :Bool;
  granularityMin @7 :UInt64;
  granularityMax @8 :UInt64;
  granularity @9 :List(SinkBucket);
  overhead @10 :List(SinkBucket);
  primitives @11 :List(SinkPrimitiveStats);
}

# A completion as the rank received it (runtime descriptor::Completion).
struct SinkCompletion {
  request @0 :UInt64;
  source @1 :Int32;
  tag @2 :Int32;
  bytes @3 :UInt64;
  error @4 :UInt32;
  flags @5 :UInt32;
  value @6 :UInt64;
  value2 @7 :UInt64;
}

# What a captured rank was handed for one descriptor (runtime engine::Payload).
struct SinkPayload {
  slice @0 :UInt64;
  desc @1 :Descriptor;
  completion @2 :SinkCompletion;
  hasMatchedSend @3 :Bool;
  matchedSend @4 :DescRef;
  data @5 :Data;
}

# One SliceSink call of a node daemon, for the Machine Manager's sinks.
struct SinkFrame {
  formatVersion @0 :UInt32;
  # The node whose daemon sent it.
  node @1 :UInt32;
  union {
    slice @2 :SinkSlice;
    nodeMetrics @3 :SinkNodeMetrics;
    mmds @4 :List(SinkRankMmds);
    outcomes @5 :SinkOutcomes;
    payload @6 :SinkPayload;
  }
}

# What a node daemon needs to replay its share of a recording (replayer remote.rs): the
# replay log reduced to the source's tables. Per rank, `posting` is the replay log's
# stream 0 and `blockedFlips` its stream 2 (varints, docs/recording.md), `outcomes` the
# rank's stream 1 decoded and re-encoded as SinkOutcome (empty for ranks of other nodes).
struct ReplayRankTables {
  posting @0 :Data;
  blockedFlips @1 :Data;
  outcomes @2 :List(SinkOutcome);
}

struct ReplayPackage {
  formatVersion @0 :UInt32;
  # The last slice of the recording.
  lastSlice @1 :UInt64;
  # The recorded job ended by itself (success, a failed rank, a deadlock), so the replay
  # must too.
  endsByItself @2 :Bool;
  # The node this package is for, and the recorded layout (informational).
  node @3 :UInt32;
  recordedNodes @4 :UInt32;
  ranks @5 :List(ReplayRankTables);
}
