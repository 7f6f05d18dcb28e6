//! How a reopened file is judged: it must open, check clean, and hold the state of the last
//! acknowledged commit or of the one in flight. The kill-loop, power-loss, I/O-error and
//! failpoint suites judge their reopens here, and count the ways one can fail in [`Reopens`],
//! the same four fields in each suite's summary line.

use crate::model::{Tree, describe_difference, progress, read_db};
use crate::summary::{Failures, Summary};
use rbolt::Db;

/// What the workload had acknowledged when the file crashed (or failed), as steps.
#[derive(Clone, Copy, Debug)]
pub struct Acked {
    /// The last step whose commit returned `Ok`; `None` if the new file's initialisation
    /// itself did not finish.
    pub step: Option<u64>,
    /// The step whose commit was under way, if any.
    pub in_flight: Option<u64>,
    /// The last step known to be durable, when later acknowledged steps committed without
    /// syncs (`Durability::None`): a power loss may bring back any state from it up to
    /// `step`. `None`: every acknowledged step is durable (or the judge is of a crash of the
    /// process, which keeps them all).
    pub durable: Option<u64>,
}

impl Acked {
    /// Every acknowledged step durable: what a crash must find is the last or the one in flight.
    pub fn new(step: Option<u64>, in_flight: Option<u64>) -> Acked {
        Acked {
            step,
            in_flight,
            durable: None,
        }
    }

    /// Judges a reopened database against the models of the steps (`models[k]`: after step
    /// `k`).
    pub fn judge(self, models: &[Tree], db: Result<&Db, &rbolt::Error>) -> Verdict {
        let step = self.step.unwrap_or(0);
        let acked = &models[step as usize];
        let in_flight = self.in_flight.map(|step| &models[step as usize]);
        let from = self
            .durable
            .filter(|&durable| durable < step)
            .unwrap_or(step);
        let unsynced = Unsynced {
            from,
            models: &models[from as usize..step as usize],
        };
        judge_with(db, self.step.is_none(), acked, in_flight, unsynced)
    }

    /// The step a database judged `verdict` recovered to, if it recovered.
    pub fn recovered(self, verdict: &Verdict) -> Option<u64> {
        match verdict {
            Verdict::Acked => Some(self.step.unwrap_or(0)),
            Verdict::InFlight => self.in_flight,
            Verdict::Unsynced(step) => Some(*step),
            Verdict::InitGarbage | Verdict::Failed(_) => None,
        }
    }
}

/// The acknowledged states a power loss may fall back to: steps `from..` (the last durable
/// one and those committed without syncs after it, before the last acknowledged one).
#[derive(Clone, Copy, Default)]
pub struct Unsynced<'a> {
    /// The step of `models[0]`.
    pub from: u64,
    /// Their models.
    pub models: &'a [Tree],
}

/// How one reopened file turned out.
#[derive(Debug)]
pub enum Verdict {
    /// At the acknowledged state.
    Acked,
    /// At the state of the commit in flight.
    InFlight,
    /// At the state of this older acknowledged step: the last durable one or one after it
    /// committed without syncs, the later ones (also committed without syncs) lost to a power
    /// loss, as `Durability::None` allows.
    Unsynced(u64),
    /// A crash during the creation of the file left garbage where creation wrote, and the
    /// open refused it: allowed in the power-loss suite only, counted and explained there.
    InitGarbage,
    /// Anything else: a failure.
    Failed(Failure),
}

/// How a reopen failed, with a description.
#[derive(Debug)]
pub enum Failure {
    /// A crash during the creation of the file left a file that does not open.
    InitError(String),
    /// The file did not open.
    Open(String),
    /// Its check found problems, or its content could not be read.
    Check(String),
    /// It holds an older state than the acknowledged one.
    Lost(String),
    /// It holds a state that is neither acknowledged nor in flight.
    Wrong(String),
}

/// Judges a reopened database: `db` must have opened, check clean and hold `acked` or
/// `in_flight`. `creating`: the new file's creation had not finished, so a failed open is an
/// [`Failure::InitError`] (the caller may know an exception).
pub fn judge(
    db: Result<&Db, &rbolt::Error>,
    creating: bool,
    acked: &Tree,
    in_flight: Option<&Tree>,
) -> Verdict {
    judge_with(db, creating, acked, in_flight, Unsynced::default())
}

/// As [`judge`], and a state of `unsynced` is [`Verdict::Unsynced`].
pub fn judge_with(
    db: Result<&Db, &rbolt::Error>,
    creating: bool,
    acked: &Tree,
    in_flight: Option<&Tree>,
    unsynced: Unsynced<'_>,
) -> Verdict {
    let db = match db {
        Ok(db) => db,
        Err(error) if creating => return Verdict::Failed(Failure::InitError(error.to_string())),
        Err(error) => return Verdict::Failed(Failure::Open(error.to_string())),
    };
    let check = |text: String| Verdict::Failed(Failure::Check(text));
    match db.view(|tx| Ok::<_, rbolt::Error>(tx.check())) {
        Ok(errors) if errors.is_empty() => {}
        Ok(errors) => {
            return check(format!(
                "check found {} problem(s), first: {}",
                errors.len(),
                errors[0]
            ));
        }
        Err(error) => return check(format!("check: {error}")),
    }
    let state = match read_db(db) {
        Ok(state) => state,
        Err(error) => return check(format!("reading the content: {error}")),
    };
    if state == *acked {
        return Verdict::Acked;
    }
    if in_flight.is_some_and(|in_flight| state == *in_flight) {
        return Verdict::InFlight;
    }
    if let Some(index) = unsynced.models.iter().position(|model| state == *model) {
        return Verdict::Unsynced(unsynced.from + index as u64);
    }
    let (found, acked_step) = (progress(&state), progress(acked));
    let detail = format!(
        "content of step {found}, acknowledged {acked_step}, in flight {:?}; vs acknowledged: {}",
        in_flight.map(progress),
        describe_difference(acked, &state)
    );
    Verdict::Failed(if found < acked_step {
        Failure::Lost(detail)
    } else {
        Failure::Wrong(detail)
    })
}

crate::report! {
    /// The ways reopens failed, counted: fields of the kill-loop, power-loss, I/O-error and
    /// failpoint suites' reports, in that order in each summary line.
    #[derive(Copy)]
    pub struct Reopens {
        /// Reopens at an older state than the last acknowledged one.
        pub lost_acked: u64,
        /// Reopens whose check found problems (or whose content could not be read).
        pub check_failures: u64,
        /// Reopens that failed.
        pub open_failures: u64,
        /// Reopens at a state that is neither acknowledged nor in flight.
        pub wrong_state: u64,
    }
}

/// A report's `reopens` field: its four counts on the line, each under its own name.
impl crate::summary::Tally for Reopens {
    fn add(&mut self, other: Reopens) {
        crate::parallel::Report::merge(self, other);
    }
    fn fields(&self, _: &'static str, summary: Summary) -> Summary {
        Reopens::fields(self, summary)
    }
}

impl Reopens {
    /// Counts `failure` and describes it in `failures`, prefixed with `what`.
    pub fn record(&mut self, failure: Failure, what: &str, failures: &mut Failures) {
        let (counter, message) = match failure {
            Failure::InitError(e) => (
                &mut self.open_failures,
                format!("a creation cut short did not open: {e}"),
            ),
            Failure::Open(e) => (&mut self.open_failures, format!("open failed: {e}")),
            Failure::Check(e) => (&mut self.check_failures, e),
            Failure::Lost(e) => (&mut self.lost_acked, format!("lost: {e}")),
            Failure::Wrong(e) => (&mut self.wrong_state, format!("wrong state: {e}")),
        };
        *counter += 1;
        failures.push(format!("{what}: {message}"));
    }

    /// Whether no reopen failed.
    pub fn is_clean(&self) -> bool {
        self.lost_acked == 0
            && self.check_failures == 0
            && self.open_failures == 0
            && self.wrong_state == 0
    }
}

#[cfg(test)]
mod tests {
    use super::{Acked, Failure, Reopens, Verdict, judge};
    use crate::parallel::Report;
    use crate::summary::{Failures, Summary};
    use crate::workload::{Workload, all_ops, commit_step, models};
    use rbolt::storage::SimFile;
    use rbolt::{Db, Options};
    use std::sync::Arc;

    #[test]
    fn a_reopen_is_judged_by_the_steps_it_may_hold() {
        let workload = Workload::new(1, rbolt::PAGE_SIZE_DEFAULT);
        let models = models(&workload, 2);
        let ops = all_ops(&workload, 2);
        let db = Db::open_storage(Arc::new(SimFile::new().unwrap()), Options::default()).unwrap();
        commit_step(&db, &ops[0]).unwrap();
        // The file holds step 1.
        let judged = |step, in_flight| {
            let acked = Acked::new(step, in_flight);
            let verdict = acked.judge(&models, Ok(&db));
            let recovered = acked.recovered(&verdict);
            (verdict, recovered)
        };
        assert!(matches!(judged(Some(1), None), (Verdict::Acked, Some(1))));
        assert!(matches!(
            judged(Some(0), Some(1)),
            (Verdict::InFlight, Some(1))
        ));
        assert!(matches!(
            judged(Some(2), None),
            (Verdict::Failed(Failure::Lost(_)), None)
        ));
        assert!(matches!(
            judged(Some(0), Some(2)),
            (Verdict::Failed(Failure::Wrong(_)), None)
        ));

        let image = SimFile::from_image(vec![0xFF; 4096]).unwrap();
        let error = Db::open_storage(Arc::new(image), Options::default()).unwrap_err();
        assert!(matches!(
            judge(Err(&error), true, &models[0], None),
            Verdict::Failed(Failure::InitError(_))
        ));
        assert!(matches!(
            judge(Err(&error), false, &models[0], None),
            Verdict::Failed(Failure::Open(_))
        ));
    }

    #[test]
    fn reopens_count_each_failure_in_its_field() {
        let mut reopens = Reopens::default();
        let mut failures = Failures::default();
        for failure in [
            Failure::InitError("a".into()),
            Failure::Open("b".into()),
            Failure::Check("c".into()),
            Failure::Lost("d".into()),
            Failure::Wrong("e".into()),
        ] {
            reopens.record(failure, "case", &mut failures);
        }
        assert!(!reopens.is_clean());
        assert_eq!(failures.total(), 5);
        let mut all = Reopens::default();
        all.merge(reopens);
        all.merge(reopens);
        assert_eq!(
            all.fields(Summary::new("suite")).to_string(),
            "suite: lost_acked=2 check_failures=2 open_failures=4 wrong_state=2"
        );
        assert!(Reopens::default().is_clean());
    }
}
