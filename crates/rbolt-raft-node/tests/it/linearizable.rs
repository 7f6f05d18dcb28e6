//! A history of client operations on a key/value store and a per-key linearizability checker
//! over a register model (Wing & Gong's search with Lowe's just-in-time linearization and
//! memoization of (linearized set, state), as Porcupine does it).
//!
//! Every key is a register of its own (linearizability is compositional, so each is checked
//! alone). Writes put a value unique to the write, or delete; reads return a value or none.
//! An operation's outcome is `Ok`, `Fail` (it certainly took no effect: dropped from the
//! history) or `Unknown` (it may take effect at any time after its invocation: its completion
//! is +infinity, Jepsen's `:info`). Only writes can be `Unknown`; a read without an answer
//! has no effect and is dropped.
//!
//! Two reductions keep the search small without changing its answer. A put of unknown outcome
//! whose value no read returned is dropped: it may always be linearized at the very end, where
//! nothing observes it. One whose value a read returned must have taken effect before that
//! read completed: its completion becomes the earliest completion of such a read.

use std::collections::{BTreeMap, HashSet};

/// What an operation does to its key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Sets the value (`None`: deletes the key).
    Write(Option<String>),
    /// Returned this value (`None`: the key was absent).
    Read(Option<String>),
}

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Outcome {
    Ok,
    /// Certainly took no effect.
    Fail,
    /// May or may not take effect, at any time after its invocation.
    Unknown,
}

/// One client operation: invoked and completed at these times (nanoseconds from any origin).
#[derive(Clone, Debug)]
pub struct Call {
    pub client: usize,
    pub key: String,
    pub op: Op,
    pub invoke: u64,
    pub complete: u64,
    pub outcome: Outcome,
}

/// The search's budget per key, in steps: past it the key counts as not checked (an error).
pub const STEPS_MAX: u64 = 50_000_000;

/// Checks every key of `history`; returns one description per key that has no
/// linearization (or that the search gave up on).
pub fn check(history: &[Call]) -> Vec<String> {
    let mut keys: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    for call in history {
        keys.entry(&call.key).or_default().push(call);
    }
    keys.into_iter()
        .filter_map(|(key, calls)| check_key(&calls).err().map(|e| format!("key {key}: {e}")))
        .collect()
}

/// An operation as the search sees it: its value interned (0 is "absent").
#[derive(Clone, Copy, Debug)]
struct Prepared {
    write: bool,
    value: u32,
    invoke: u64,
    complete: u64,
    /// Index into the key's calls, for reports.
    call: usize,
}

/// The operations of one key the search must linearize, after the reductions.
fn prepare(calls: &[&Call]) -> Vec<Prepared> {
    let mut ids: BTreeMap<String, u32> = BTreeMap::new();
    let mut intern = |value: &Option<String>| match value {
        None => 0,
        Some(v) => {
            let next = ids.len() as u32 + 1;
            *ids.entry(v.clone()).or_insert(next)
        }
    };
    // The earliest completion of an ok read of each value.
    let mut first_seen: BTreeMap<Option<&str>, u64> = BTreeMap::new();
    for call in calls {
        if let (Op::Read(v), Outcome::Ok) = (&call.op, call.outcome) {
            let seen = first_seen.entry(v.as_deref()).or_insert(u64::MAX);
            *seen = (*seen).min(call.complete);
        }
    }
    let mut ops = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let (write, complete) = match (&call.op, call.outcome) {
            (_, Outcome::Fail) | (Op::Read(_), Outcome::Unknown) => continue,
            (Op::Read(_), Outcome::Ok) => (false, call.complete),
            (Op::Write(_), Outcome::Ok) => (true, call.complete),
            (Op::Write(None), Outcome::Unknown) => (true, u64::MAX),
            (Op::Write(Some(v)), Outcome::Unknown) => match first_seen.get(&Some(v.as_str())) {
                None => continue,
                Some(&seen) => (true, seen.max(call.invoke)),
            },
        };
        ops.push(Prepared {
            write,
            value: intern(&call.op_value()),
            invoke: call.invoke,
            complete,
            call: index,
        });
    }
    ops
}

impl Call {
    fn op_value(&self) -> Option<String> {
        match &self.op {
            Op::Write(v) | Op::Read(v) => v.clone(),
        }
    }
}

/// A node of the search's doubly linked list of call and return events.
#[derive(Clone, Copy)]
struct Event {
    op: usize,
    is_call: bool,
    prev: usize,
    next: usize,
}

/// Searches a linearization of one key's calls (Lowe's just-in-time linearization): walks
/// the events in time order, linearizing a call whenever the register allows it and the
/// (linearized set, state) pair is new; a return event reached before its call was
/// linearized means the choices so far fail, and the last one is undone.
fn check_key(calls: &[&Call]) -> Result<(), String> {
    let ops = prepare(calls);
    let n = ops.len();
    // Events sorted by time, calls before returns at the same time (concurrent, the
    // permissive reading); the list has a head sentinel at index 0.
    let mut order: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, op) in ops.iter().enumerate() {
        order.push((op.invoke, false, i));
        order.push((op.complete, true, i));
    }
    order.sort_unstable();
    let mut events = vec![Event {
        op: usize::MAX,
        is_call: false,
        prev: usize::MAX,
        next: usize::MAX,
    }];
    let mut call_at = vec![0; n];
    let mut return_at = vec![0; n];
    for (_, is_return, op) in &order {
        let at = events.len();
        events.push(Event {
            op: *op,
            is_call: !is_return,
            prev: at - 1,
            next: usize::MAX,
        });
        events[at - 1].next = at;
        if *is_return {
            return_at[*op] = at;
        } else {
            call_at[*op] = at;
        }
    }
    let unlink = |events: &mut Vec<Event>, at: usize| {
        let (prev, next) = (events[at].prev, events[at].next);
        events[prev].next = next;
        if next != usize::MAX {
            events[next].prev = prev;
        }
    };
    let relink = |events: &mut Vec<Event>, at: usize| {
        let (prev, next) = (events[at].prev, events[at].next);
        events[prev].next = at;
        if next != usize::MAX {
            events[next].prev = at;
        }
    };
    let mut linearized = vec![0u64; n.div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, u32)> = HashSet::new();
    let mut stack: Vec<(usize, u32)> = Vec::new();
    let mut state = 0u32;
    let mut entry = events[0].next;
    let mut steps = 0u64;
    // The deepest point reached, for the report: ops linearized and the return that blocked.
    let mut deepest = (0usize, usize::MAX);
    while events[0].next != usize::MAX {
        steps += 1;
        if steps > STEPS_MAX {
            return Err(format!(
                "the search gave up after {STEPS_MAX} steps over {n} operations"
            ));
        }
        let event = events[entry];
        if event.is_call {
            let op = ops[event.op];
            let allowed = op.write || op.value == state;
            let next_state = if op.write { op.value } else { state };
            let mut next_set = linearized.clone();
            next_set[event.op / 64] |= 1 << (event.op % 64);
            if allowed && cache.insert((next_set.clone(), next_state)) {
                stack.push((event.op, state));
                state = next_state;
                linearized = next_set;
                unlink(&mut events, call_at[event.op]);
                unlink(&mut events, return_at[event.op]);
                entry = events[0].next;
            } else {
                entry = event.next;
            }
        } else {
            if stack.len() >= deepest.0 {
                deepest = (stack.len(), event.op);
            }
            let Some((op, previous)) = stack.pop() else {
                return Err(describe(calls, &ops, deepest));
            };
            state = previous;
            linearized[op / 64] &= !(1 << (op % 64));
            relink(&mut events, return_at[op]);
            relink(&mut events, call_at[op]);
            entry = events[call_at[op]].next;
        }
    }
    Ok(())
}

/// Why a key has no linearization: the operation whose completion no order could reach at
/// the deepest point of the search, and the operations that overlap the two seconds before
/// it (at most [`REPORT_CALLS`]).
fn describe(calls: &[&Call], ops: &[Prepared], (depth, blocked): (usize, usize)) -> String {
    let stuck = calls[ops[blocked].call];
    let mut text = format!(
        "not linearizable: at most {depth} of {} operations linearize before client {}'s \
         {stuck:?} must complete; the operations around it:",
        ops.len(),
        stuck.client
    );
    let (from, to) = (stuck.invoke.saturating_sub(2_000_000_000), stuck.complete);
    let around: Vec<&&Call> = calls
        .iter()
        .filter(|c| c.invoke <= to && c.complete >= from)
        .collect();
    for call in around.iter().rev().take(REPORT_CALLS).rev() {
        text.push_str(&format!("\n  {call:?}"));
    }
    text
}

/// The most operations a report lists.
const REPORT_CALLS: usize = 40;

#[cfg(test)]
mod tests {
    use super::{Call, Op, Outcome, check};

    fn call(client: usize, op: Op, invoke: u64, complete: u64, outcome: Outcome) -> Call {
        Call {
            client,
            key: "k".to_owned(),
            op,
            invoke,
            complete,
            outcome,
        }
    }

    fn put(v: &str) -> Op {
        Op::Write(Some(v.to_owned()))
    }

    fn read(v: Option<&str>) -> Op {
        Op::Read(v.map(str::to_owned))
    }

    use Outcome::{Fail, Ok, Unknown};

    #[test]
    fn a_linearizable_history_passes() {
        let history = [
            call(0, put("1"), 0, 10, Ok),
            call(1, read(Some("1")), 5, 15, Ok),
            call(2, read(None), 1, 4, Ok),
            call(0, put("2"), 12, 20, Ok),
            // Concurrent with the put of 2: either value.
            call(1, read(Some("1")), 16, 18, Ok),
            call(2, read(Some("2")), 13, 19, Ok),
            call(1, read(Some("2")), 21, 25, Ok),
            call(0, Op::Write(None), 30, 40, Ok),
            call(1, read(None), 41, 42, Ok),
        ];
        assert_eq!(check(&history), Vec::<String>::new());
    }

    #[test]
    fn a_stale_read_fails() {
        let history = [
            call(0, put("1"), 0, 10, Ok),
            call(0, put("2"), 11, 20, Ok),
            call(1, read(Some("1")), 21, 30, Ok),
        ];
        assert_eq!(check(&history).len(), 1);
    }

    #[test]
    fn reads_that_go_back_in_time_fail() {
        // Both reads are concurrent with the put, but the later one sees the older state.
        let history = [
            call(0, put("1"), 0, 100, Ok),
            call(1, read(Some("1")), 10, 20, Ok),
            call(2, read(None), 30, 40, Ok),
        ];
        assert_eq!(check(&history).len(), 1);
    }

    #[test]
    fn a_lost_acknowledged_write_fails() {
        // The final state, read after everything, lacks the acknowledged put.
        let history = [
            call(0, put("1"), 0, 10, Ok),
            call(1, put("2"), 20, 30, Ok),
            call(9, read(Some("1")), 100, 101, Ok),
        ];
        assert_eq!(check(&history).len(), 1);
        let history = [
            call(0, put("1"), 0, 10, Ok),
            call(9, read(None), 100, 101, Ok),
        ];
        assert_eq!(check(&history).len(), 1);
    }

    #[test]
    fn an_unknown_write_may_take_effect_late_or_never() {
        let late = [
            call(0, put("1"), 0, 5, Unknown),
            call(1, read(None), 10, 20, Ok),
            call(1, read(Some("1")), 50, 60, Ok),
            call(1, read(Some("1")), 70, 80, Ok),
        ];
        assert_eq!(check(&late), Vec::<String>::new());
        let never = [
            call(0, put("1"), 0, 5, Unknown),
            call(1, read(None), 10, 20, Ok),
            call(1, read(None), 50, 60, Ok),
        ];
        assert_eq!(check(&never), Vec::<String>::new());
        // But once seen, it stays (no later read of the state before it).
        let flicker = [
            call(0, put("1"), 0, 5, Unknown),
            call(1, read(Some("1")), 10, 20, Ok),
            call(1, read(None), 50, 60, Ok),
        ];
        assert_eq!(check(&flicker).len(), 1);
        // And it cannot take effect before it was sent.
        let early = [
            call(1, read(Some("1")), 0, 5, Ok),
            call(0, put("1"), 10, 20, Unknown),
        ];
        assert_eq!(check(&early).len(), 1);
    }

    #[test]
    fn an_unknown_delete_may_take_effect_late() {
        let late = [
            call(0, put("1"), 0, 10, Ok),
            call(0, Op::Write(None), 20, 25, Unknown),
            call(1, read(Some("1")), 30, 40, Ok),
            call(1, read(None), 50, 60, Ok),
        ];
        assert_eq!(check(&late), Vec::<String>::new());
        let back = [
            call(0, put("1"), 0, 10, Ok),
            call(0, Op::Write(None), 20, 25, Unknown),
            call(1, read(None), 30, 40, Ok),
            call(1, read(Some("1")), 50, 60, Ok),
        ];
        assert_eq!(check(&back).len(), 1);
    }

    #[test]
    fn a_failed_write_must_not_take_effect() {
        let history = [
            call(0, put("1"), 0, 10, Fail),
            call(1, read(Some("1")), 20, 30, Ok),
        ];
        assert_eq!(check(&history).len(), 1);
        // Reads that failed say nothing.
        let history = [
            call(0, put("1"), 0, 10, Ok),
            call(1, read(Some("2")), 20, 30, Fail),
            call(1, read(None), 20, 30, Unknown),
        ];
        assert_eq!(check(&history), Vec::<String>::new());
    }

    #[test]
    fn keys_are_checked_apart() {
        let mut other = call(1, read(Some("1")), 20, 30, Ok);
        other.key = "other".to_owned();
        let history = [call(0, put("1"), 0, 10, Ok), other];
        let anomalies = check(&history);
        assert_eq!(anomalies.len(), 1);
        assert!(anomalies[0].starts_with("key other:"), "{anomalies:?}");
    }

    #[test]
    fn a_long_concurrent_history_checks_quickly() {
        // Four clients, 2,000 operations on one key, each overlapping its neighbours.
        let mut history = Vec::new();
        let mut last = None;
        for i in 0..2_000u64 {
            let client = (i % 4) as usize;
            let (invoke, complete) = (i * 10, i * 10 + 25);
            if i % 3 == 0 {
                last = Some(i.to_string());
                history.push(call(client, put(&i.to_string()), invoke, complete, Ok));
            } else if i % 7 == 0 {
                history.push(call(
                    client,
                    put(&format!("u{i}")),
                    invoke,
                    complete,
                    Unknown,
                ));
            } else {
                // Reads start after the last put completed, so they see it.
                let seen = if i % 3 == 2 { last.clone() } else { None };
                if seen.is_some() {
                    history.push(call(
                        client,
                        read(seen.as_deref()),
                        invoke + 20,
                        complete + 20,
                        Ok,
                    ));
                }
            }
        }
        assert_eq!(check(&history), Vec::<String>::new());
    }
}
