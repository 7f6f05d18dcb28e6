//! What a [`SimFile`](super::SimFile) counts and what it is told to do: the kinds of calls and
//! their counts, and the fault plan (operations that fail, write short or crash the file).

use std::io;

use rustix::io::Errno;

/// The kinds of [`Storage`] calls a [`SimFile`] counts.
///
/// ```
/// use rbolt_storage::{OpKind, SimFile, Storage};
/// let sim = SimFile::new().unwrap();
/// sim.write_all_at(b"x", 0).unwrap();
/// sim.sync_data().unwrap();
/// sim.len().unwrap();
/// assert_eq!(sim.op_log(), [OpKind::Write, OpKind::SyncData, OpKind::Len]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// [`Storage::len`].
    Len,
    /// [`Storage::read_exact_at`].
    Read,
    /// [`Storage::write_all_at`].
    Write,
    /// [`Storage::write_vectored_at`].
    WriteVectored,
    /// [`Storage::sync_data`].
    SyncData,
    /// [`Storage::sync_all`].
    SyncAll,
    /// [`Storage::grow`].
    Grow,
    /// [`Storage::map`].
    Map,
    /// [`Storage::shrink`].
    Shrink,
}

impl OpKind {
    pub(super) fn is_write(self) -> bool {
        matches!(self, OpKind::Write | OpKind::WriteVectored)
    }
}

/// How many calls of each kind a [`SimFile`] has seen, failed ones included.
///
/// Take two snapshots and subtract with [`since`](OpCounts::since) to count what one step did,
/// e.g. that a durable commit makes exactly two `fdatasync`s.
///
/// ```
/// use rbolt_storage::{SimFile, Storage};
/// let sim = SimFile::new().unwrap();
/// sim.grow(8192).unwrap();
/// sim.sync_all().unwrap();
/// let before = sim.counts();
/// // What a durable commit does: its pages, a sync, its meta, a sync.
/// sim.write_vectored_at(&[&[1; 4096]], 4096).unwrap();
/// sim.sync_data().unwrap();
/// sim.write_all_at(&[2; 4096], 0).unwrap();
/// sim.sync_data().unwrap();
/// let commit = sim.counts().since(before);
/// assert_eq!((commit.sync_data, commit.sync_all), (2, 0));
/// assert_eq!(commit.writes(), 2);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpCounts {
    /// [`Storage::len`] calls.
    pub len: u64,
    /// [`Storage::read_exact_at`] calls.
    pub read: u64,
    /// [`Storage::write_all_at`] calls.
    pub write: u64,
    /// [`Storage::write_vectored_at`] calls.
    pub write_vectored: u64,
    /// [`Storage::sync_data`] calls.
    pub sync_data: u64,
    /// [`Storage::sync_all`] calls.
    pub sync_all: u64,
    /// [`Storage::grow`] calls.
    pub grow: u64,
    /// [`Storage::map`] calls.
    pub map: u64,
    /// [`Storage::shrink`] calls.
    pub shrink: u64,
}

impl OpCounts {
    /// The calls made since `earlier`, a snapshot of the same file.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// let earlier = sim.counts();
    /// sim.write_all_at(b"b", 1).unwrap();
    /// sim.sync_data().unwrap();
    /// let step = sim.counts().since(earlier);
    /// assert_eq!((step.write, step.sync_data, step.total()), (1, 1, 2));
    /// ```
    pub fn since(&self, earlier: OpCounts) -> OpCounts {
        OpCounts {
            len: self.len - earlier.len,
            read: self.read - earlier.read,
            write: self.write - earlier.write,
            write_vectored: self.write_vectored - earlier.write_vectored,
            sync_data: self.sync_data - earlier.sync_data,
            sync_all: self.sync_all - earlier.sync_all,
            grow: self.grow - earlier.grow,
            map: self.map - earlier.map,
            shrink: self.shrink - earlier.shrink,
        }
    }

    /// Write calls of either kind.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.write_vectored_at(&[b"b", b"c"], 1).unwrap();
    /// assert_eq!(sim.counts().writes(), 2);
    /// ```
    pub fn writes(&self) -> u64 {
        self.write + self.write_vectored
    }

    /// Sync calls of either kind.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.sync_data().unwrap();
    /// sim.sync_all().unwrap();
    /// assert_eq!(sim.counts().syncs(), 2);
    /// ```
    pub fn syncs(&self) -> u64 {
        self.sync_data + self.sync_all
    }

    /// All calls.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.len().unwrap();
    /// assert_eq!(sim.counts().total(), 2);
    /// assert_eq!(sim.counts().total(), sim.op_count());
    /// ```
    pub fn total(&self) -> u64 {
        self.len + self.read + self.writes() + self.syncs() + self.grow + self.map + self.shrink
    }

    pub(super) fn count(&mut self, kind: OpKind) {
        let counter = match kind {
            OpKind::Len => &mut self.len,
            OpKind::Read => &mut self.read,
            OpKind::Write => &mut self.write,
            OpKind::WriteVectored => &mut self.write_vectored,
            OpKind::SyncData => &mut self.sync_data,
            OpKind::SyncAll => &mut self.sync_all,
            OpKind::Grow => &mut self.grow,
            OpKind::Map => &mut self.map,
            OpKind::Shrink => &mut self.shrink,
        };
        *counter += 1;
    }
}

/// The error an injected fault returns; it converts into the [`io::Error`] the real system call
/// would give.
///
/// ```
/// use rbolt_storage::FaultError;
/// let io = std::io::Error::from(FaultError::Io);
/// assert_eq!(io.raw_os_error(), Some(5)); // EIO
/// let full = std::io::Error::from(FaultError::NoSpace);
/// assert_eq!(full.raw_os_error(), Some(28)); // ENOSPC
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultError {
    /// `ENOSPC`: the device is full.
    NoSpace,
    /// `EIO`: the device failed.
    Io,
}

impl From<FaultError> for io::Error {
    fn from(error: FaultError) -> io::Error {
        let errno = match error {
            FaultError::NoSpace => Errno::NOSPC,
            FaultError::Io => Errno::IO,
        };
        io::Error::from(errno)
    }
}

/// Which operations of a [`SimFile`] fail, and how.
///
/// Operations are numbered from 0 in call order across all kinds (see
/// [`SimFile::op_count`]): with `n = sim.op_count()`, operation `n` is the next call. When
/// several rules match one operation, a crash wins, then the rule added first.
///
/// ```
/// use rbolt_storage::{FaultError, FaultPlan, SimFile, Storage};
///
/// let sim = SimFile::new().unwrap();
/// sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count() + 1, FaultError::NoSpace));
/// sim.write_all_at(b"a", 0).unwrap();
/// let error = sim.write_all_at(b"b", 1).unwrap_err();
/// assert_eq!(error.raw_os_error(), Some(28)); // ENOSPC
/// sim.write_all_at(b"c", 2).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    rules: Vec<Rule>,
}

#[derive(Clone, Copy, Debug)]
struct Rule {
    /// The operations the rule applies to.
    ops: RuleOps,
    action: Action,
}

#[derive(Clone, Copy, Debug)]
enum RuleOps {
    At(u64),
    From(u64),
    Kind(OpKind),
}

impl RuleOps {
    fn contains(self, op: u64, kind: OpKind) -> bool {
        match self {
            RuleOps::At(at) => op == at,
            RuleOps::From(from) => op >= from,
            RuleOps::Kind(of) => kind == of,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Action {
    Fail(FaultError),
    ShortWrite { len: usize, error: FaultError },
    Crash,
}

impl FaultPlan {
    /// A plan with no faults.
    ///
    /// ```
    /// use rbolt_storage::{FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new()); // no faults: every call goes through
    /// sim.write_all_at(b"a", 0).unwrap();
    /// assert_eq!(sim.len().unwrap(), 1);
    /// ```
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Operation `op` fails with `error` without doing anything.
    ///
    /// ```
    /// use rbolt_storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count(), FaultError::Io));
    /// assert!(sim.write_all_at(b"lost", 0).is_err()); // the failed write does nothing
    /// sim.write_all_at(b"kept", 4).unwrap();
    /// assert_eq!(sim.live_image().unwrap(), b"\0\0\0\0kept");
    /// ```
    pub fn fail_at(mut self, op: u64, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::Fail(error),
        });
        self
    }

    /// Operation `op` and every later one fail with `error` without doing anything.
    ///
    /// ```
    /// use rbolt_storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"kept", 0).unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_from(sim.op_count(), FaultError::NoSpace));
    /// let error = sim.write_all_at(b"lost", 4).unwrap_err();
    /// assert_eq!(error.raw_os_error(), Some(28)); // ENOSPC
    /// assert!(sim.sync_data().is_err()); // and everything after
    /// assert_eq!(sim.live_image().unwrap(), b"kept"); // a failed write writes nothing
    /// ```
    pub fn fail_from(mut self, op: u64, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::From(op),
            action: Action::Fail(error),
        });
        self
    }

    /// Every operation of `kind` fails with `error` without doing anything: to fail, say, only
    /// the fsync that follows growth (the only [`OpKind::SyncAll`] a database makes).
    ///
    /// ```
    /// use rbolt_storage::{FaultError, FaultPlan, OpKind, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncAll, FaultError::Io));
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.sync_data().unwrap(); // another kind: fine
    /// assert!(sim.sync_all().is_err());
    /// ```
    pub fn fail_kind(mut self, kind: OpKind, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::Kind(kind),
            action: Action::Fail(error),
        });
        self
    }

    /// If operation `op` is a write, it writes only its first `len` bytes (at most all of
    /// them), which become pending like any write, and then fails with `error`. Any other
    /// operation fails as with [`fail_at`](FaultPlan::fail_at), and so does a
    /// [`write_whole_at`](crate::Storage::write_whole_at), which cannot stop part-way.
    ///
    /// ```
    /// use rbolt_storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().short_write_at(sim.op_count(), 3, FaultError::NoSpace));
    /// assert!(sim.write_all_at(b"abcdef", 0).is_err());
    /// assert_eq!(sim.live_image().unwrap(), b"abc"); // the first 3 bytes were written
    /// assert!(sim.has_pending());
    /// ```
    pub fn short_write_at(mut self, op: u64, len: usize, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::ShortWrite { len, error },
        });
        self
    }

    /// The file crashes at operation `op`: it and every later operation fail without doing
    /// anything, and [`SimFile::crash_image`] reflects exactly the operations before it.
    ///
    /// ```
    /// use rbolt_storage::{CrashProfile, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"one", 0).unwrap();
    /// sim.set_fault_plan(FaultPlan::new().crash_at(sim.op_count() + 1));
    /// sim.write_all_at(b"two", 3).unwrap();
    /// assert!(sim.write_all_at(b"three", 6).is_err()); // the crash
    /// assert!(sim.sync_data().is_err()); // and everything after it
    /// assert_eq!(sim.crashed_at(), Some(2));
    /// assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), b"onetwo");
    /// ```
    pub fn crash_at(mut self, op: u64) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::Crash,
        });
        self
    }

    pub(super) fn action_for(&self, op: u64, kind: OpKind) -> Option<Action> {
        let mut matching = self.rules.iter().filter(|rule| rule.ops.contains(op, kind));
        if matching
            .clone()
            .any(|rule| matches!(rule.action, Action::Crash))
        {
            return Some(Action::Crash);
        }
        matching.next().map(|rule| rule.action)
    }
}
