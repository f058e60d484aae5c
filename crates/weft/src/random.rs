//! Randomness: every random choice the library makes (backoff jitter, run
//! and snapshot ids) comes from a ChaCha8 generator with a seed, so a
//! caller that passes a seed (`ProducerBuilder::with_seed`, the snapshot
//! writer's seed) gets the same choices on every run. Only where no seed is
//! given does the seed come from the operating system, through
//! [`os_seed`]: the one place library code reads OS entropy (clippy's
//! `disallowed-methods` list in `clippy.toml` bans it everywhere else).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A fresh seed from the operating system's entropy source.
pub(crate) fn os_seed() -> u64 {
    #[allow(clippy::disallowed_methods)]
    let mut os = ChaCha8Rng::from_os_rng();
    os.random()
}

/// A generator seeded with `seed`, or with [`os_seed`] when there is none.
pub(crate) fn rng(seed: Option<u64>) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.unwrap_or_else(os_seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_and_no_seed_differs() {
        let draw = |seed| -> [u64; 4] {
            let mut r = rng(seed);
            [r.random(), r.random(), r.random(), r.random()]
        };
        assert_eq!(draw(Some(7)), draw(Some(7)));
        assert_ne!(draw(Some(7)), draw(Some(8)));
        assert_ne!(draw(None), draw(None));
    }
}
