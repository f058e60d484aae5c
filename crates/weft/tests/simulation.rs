//! Deterministic simulation of the bucket WAL under injected faults: many
//! seeds, each a small run of failovers, zombie writers, appenders, readers
//! and a tailing replica on a paused clock, checked against the log's
//! guarantees (see `support/sim.rs`).
//!
//! * `WEFT_SIM_SEEDS=N` runs N seeds per test instead of the default.
//! * `WEFT_SIM_SEED=S` runs only seed S and prints its trace.
//!
//! A failing seed prints the command that replays it.

#[path = "support/sim.rs"]
#[allow(dead_code, unreachable_pub)]
mod sim;

use sim::{Profile, SimRun, simulate, summary};

fn seeds(default: u64) -> Vec<u64> {
    if let Ok(one) = std::env::var("WEFT_SIM_SEED") {
        return vec![one.trim().parse().expect("WEFT_SIM_SEED is a number")];
    }
    let n = std::env::var("WEFT_SIM_SEEDS")
        .map(|v| v.trim().parse().expect("WEFT_SIM_SEEDS is a number"))
        .unwrap_or(default);
    (0..n).collect()
}

fn replay_hint(test: &str, seed: u64) -> String {
    format!(
        "replay: WEFT_SIM_SEED={seed} cargo test -p weft --test simulation {test} -- --nocapture"
    )
}

/// Runs every seed of `profile`; fails with each failing seed's summary and
/// replay command.
fn run_seeds(test: &str, profile: Profile, default: u64) -> Vec<SimRun> {
    let verbose = std::env::var("WEFT_SIM_SEED").is_ok();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for seed in seeds(default) {
        let run = match std::panic::catch_unwind(|| simulate(seed, profile)) {
            Ok(run) => run,
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!(
                    "seed {seed} panicked: {msg}\n  {}",
                    replay_hint(test, seed)
                ));
                continue;
            }
        };
        if verbose {
            for line in &run.trace {
                println!("{line}");
            }
            println!("{}", summary(&run));
        }
        if !run.violations.is_empty() {
            failures.push(format!("{}  {}", summary(&run), replay_hint(test, seed)));
        }
        runs.push(run);
    }
    let sum = |f: fn(&SimRun) -> usize| runs.iter().map(f).sum::<usize>();
    println!(
        "{test}: {} seeds, {} writers, {} acked, {} fenced, {} indeterminate, {} halts",
        runs.len(),
        sum(|r| r.writers),
        sum(|r| r.acked),
        sum(|r| r.fenced),
        sum(|r| r.indeterminate),
        sum(|r| r.halts)
    );
    assert!(
        failures.is_empty(),
        "{} of the seeds failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    runs
}

#[test]
fn mixed_faults_failovers_and_zombies_keep_the_log_correct() {
    let runs = run_seeds("mixed", Profile::Mixed, 500);
    if runs.len() < 50 {
        return; // a replay of chosen seeds: coverage is not the point
    }
    let total = |f: fn(&SimRun) -> usize| runs.iter().map(f).sum::<usize>();
    // The runs must have exercised what they claim to test.
    assert!(total(|r| r.acked) > 1_000, "few appends were acknowledged");
    assert!(total(|r| r.fenced) > 0, "no zombie append was ever fenced");
    assert!(
        total(|r| r.writers) > runs.len() * 3 / 2,
        "few failovers happened"
    );
    assert!(total(|r| r.indeterminate) + total(|r| r.halts) > 0);
    let stats =
        |f: fn(&weft::store::FaultStats) -> u64| runs.iter().map(|r| f(&r.stats)).sum::<u64>();
    assert!(stats(|s| s.ambiguous) > 0 && stats(|s| s.hung) > 0 && stats(|s| s.lost) > 0);
    assert!(stats(|s| s.preconditions) > 0 && stats(|s| s.errors) > 0);
}

#[test]
fn upload_storms_lose_nothing_acknowledged_and_do_halt() {
    let runs = run_seeds("upload_storm", Profile::UploadStorm, 150);
    if runs.len() < 50 {
        return;
    }
    let halts: usize = runs.iter().map(|r| r.halts).sum();
    assert!(
        halts > 0,
        "no writer ever halted: the halt path was never exercised"
    );
    let acked: usize = runs.iter().map(|r| r.acked).sum();
    assert!(acked > 0, "nothing was ever acknowledged under the storm");
}

#[test]
fn the_same_seed_replays_the_same_run() {
    for seed in [3, 17, 123_456] {
        for profile in [Profile::Mixed, Profile::UploadStorm] {
            let a = simulate(seed, profile);
            let b = simulate(seed, profile);
            assert!(a.trace.len() > 20, "seed {seed}: the run did something");
            assert_eq!(
                a.trace, b.trace,
                "seed {seed} {profile:?}: same seed, same history"
            );
            assert_eq!(
                a.manifests, b.manifests,
                "seed {seed}: same manifest states"
            );
            assert_eq!(a.stats, b.stats);
        }
    }
    assert_ne!(
        simulate(1, Profile::Mixed).trace,
        simulate(2, Profile::Mixed).trace
    );
}
