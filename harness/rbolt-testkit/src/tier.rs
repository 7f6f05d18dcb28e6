//! The test tiers: one variable, `RBOLT_TIER`, sizes every suite of the workspace.
//!
//! - `fast` (unset): the inner loop. `cargo test --workspace` runs every test, the suites at
//!   sizes that keep the whole run to a few minutes on a two-core machine.
//! - `ci`: what `.ci/run` sets. The sizes CI has always run; a suite's CI size only grows.
//! - `soak`: what `cargo xtask soak` sets (in release), ten to a hundred times CI.
//!
//! Each size also has a variable of its own (`RBOLT_KILLS`, `RBOLT_POWER_SEEDS`, ...), which,
//! when it holds a number, wins over the tier; `docs/ARCHITECTURE.md` ("Testing") lists them
//! all with their value in each tier. A value of `RBOLT_TIER` that is not a tier is an error,
//! not the fast tier: a typo must not shrink CI silently.

use std::sync::OnceLock;

/// The variable that picks the tier.
pub const TIER_VAR: &str = "RBOLT_TIER";

/// How big the suites run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// The inner loop: `cargo test --workspace`.
    Fast,
    /// CI: `RBOLT_TIER=ci`, set by `.ci/run`.
    Ci,
    /// The soak: `RBOLT_TIER=soak`, set by `cargo xtask soak`.
    Soak,
}

impl Tier {
    /// The tier a value of `RBOLT_TIER` names (`""` is the fast tier).
    pub fn parse(text: &str) -> Option<Tier> {
        match text {
            "" | "fast" => Some(Tier::Fast),
            "ci" => Some(Tier::Ci),
            "soak" => Some(Tier::Soak),
            _ => None,
        }
    }

    /// The tier of this process, read from the environment once.
    ///
    /// # Panics
    /// If `RBOLT_TIER` holds anything but `fast`, `ci` or `soak`, or if the retired
    /// `RBOLT_SOAK` is set (it was the soak's switch before the tiers).
    pub fn current() -> Tier {
        static TIER: OnceLock<Tier> = OnceLock::new();
        *TIER.get_or_init(|| {
            assert!(
                std::env::var_os("RBOLT_SOAK").is_none(),
                "RBOLT_SOAK is retired: set {TIER_VAR}=soak instead"
            );
            let text = std::env::var(TIER_VAR).unwrap_or_default();
            Tier::parse(&text).unwrap_or_else(|| {
                panic!("{TIER_VAR}={text}: not a tier (fast, ci or soak; unset is fast)")
            })
        })
    }

    /// The value of this tier among the three.
    pub fn pick<T>(self, fast: T, ci: T, soak: T) -> T {
        match self {
            Tier::Fast => fast,
            Tier::Ci => ci,
            Tier::Soak => soak,
        }
    }

    /// The tier's name, as `RBOLT_TIER` spells it.
    pub fn name(self) -> &'static str {
        self.pick("fast", "ci", "soak")
    }
}

/// A suite's size: the number in the environment variable `var` if it holds one, else the
/// current tier's value among `fast`, `ci` and `soak`.
pub fn size(var: &str, fast: u64, ci: u64, soak: u64) -> u64 {
    number(var).unwrap_or_else(|| Tier::current().pick(fast, ci, soak))
}

/// Whether the environment variable `var` holds a number (a size set by hand, which the
/// suites' own floors, sized for the tiers, then leave alone).
pub fn is_set(var: &str) -> bool {
    number::<f64>(var).is_some()
}

/// The number in the environment variable `var`, if it is set.
///
/// # Panics
/// If it is set to something that is not a number of type `T`: a typo must not fall back
/// to a default.
pub fn number<T: std::str::FromStr>(var: &str) -> Option<T> {
    let text = std::env::var(var).ok()?;
    Some(
        text.parse()
            .unwrap_or_else(|_| panic!("{var}={text}: not a number")),
    )
}

#[cfg(test)]
mod tests {
    use super::Tier;

    #[test]
    fn tiers_parse_and_pick() {
        assert_eq!(Tier::parse(""), Some(Tier::Fast));
        assert_eq!(Tier::parse("fast"), Some(Tier::Fast));
        assert_eq!(Tier::parse("ci"), Some(Tier::Ci));
        assert_eq!(Tier::parse("soak"), Some(Tier::Soak));
        assert_eq!(Tier::parse("CI"), None);
        assert_eq!(Tier::parse("full"), None);
        assert_eq!(Tier::Ci.pick(1, 2, 3), 2);
        assert!(Tier::Fast < Tier::Ci && Tier::Ci < Tier::Soak);
        for tier in [Tier::Fast, Tier::Ci, Tier::Soak] {
            assert_eq!(Tier::parse(tier.name()), Some(tier));
        }
    }
}
