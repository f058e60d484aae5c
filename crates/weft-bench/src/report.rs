//! The results table: printed as each case finishes, written as JSON and
//! Markdown at the end.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use crate::stats::{Latency, median};

/// One measured case of one subject (weft, a baseline or the peer).
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub workload: String,
    pub case: String,
    pub subject: String,
    /// The median over the runs of the headline number.
    pub value: f64,
    pub unit: String,
    /// Each run's headline number.
    pub runs: Vec<f64>,
    /// Latency over all runs' samples, when the case measures latency.
    pub latency: Option<Latency>,
    /// The subject this row is compared with, and `value / baseline`.
    pub baseline: Option<String>,
    pub ratio: Option<f64>,
    /// A target this row is checked against, and whether it was met.
    pub target: Option<String>,
    pub met: Option<bool>,
    pub note: Option<String>,
}

impl Row {
    pub fn new(workload: &str, case: impl Into<String>, subject: impl Into<String>) -> Row {
        Row {
            workload: workload.to_string(),
            case: case.into(),
            subject: subject.into(),
            value: f64::NAN,
            unit: String::new(),
            runs: Vec::new(),
            latency: None,
            baseline: None,
            ratio: None,
            target: None,
            met: None,
            note: None,
        }
    }

    pub fn value(mut self, runs: Vec<f64>, unit: &str) -> Row {
        self.value = median(&runs);
        self.runs = runs;
        self.unit = unit.to_string();
        self
    }

    pub fn latency(mut self, l: Option<Latency>) -> Row {
        self.latency = l;
        self
    }

    /// Compares with `base`: ratio = this value / base value.
    pub fn against(mut self, base: &Row) -> Row {
        self.baseline = Some(base.subject.clone());
        self.ratio = Some(self.value / base.value);
        self
    }

    /// Compares with a number that is not a row (for example a model).
    pub fn against_value(mut self, label: impl Into<String>, base: f64) -> Row {
        self.baseline = Some(label.into());
        self.ratio = Some(self.value / base);
        self
    }

    pub fn target(mut self, text: impl Into<String>, met: bool) -> Row {
        self.target = Some(text.into());
        self.met = Some(met);
        self
    }

    pub fn note(mut self, text: impl Into<String>) -> Row {
        self.note = Some(text.into());
        self
    }
}

/// All rows of a run plus what the run was.
#[derive(Debug, Serialize)]
pub struct Report {
    pub quick: bool,
    pub runs_per_case: usize,
    pub started_utc: String,
    pub machine: Machine,
    pub rows: Vec<Row>,
}

#[derive(Debug, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub kernel: String,
    pub cpu_model: String,
    pub filesystem_tmp: String,
}

fn sh(cmd: &str) -> String {
    std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

impl Report {
    pub fn new(quick: bool, runs: usize) -> Report {
        Report {
            quick,
            runs_per_case: runs,
            started_utc: sh("date -u +%Y-%m-%dT%H:%M:%SZ"),
            machine: Machine {
                cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
                kernel: sh("uname -sr"),
                cpu_model: sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
                filesystem_tmp: sh("df -T \"${TMPDIR:-/tmp}\" | awk 'NR==2{print $2}'"),
            },
            rows: Vec::new(),
        }
    }

    /// Records a row and prints it.
    pub fn add(&mut self, row: Row) -> Row {
        println!("   {}", format_row(&row));
        self.rows.push(row.clone());
        row
    }

    pub fn write(&self, out: &Path) -> Result<()> {
        std::fs::write(
            out.join("results.json"),
            serde_json::to_string_pretty(self)?,
        )?;
        std::fs::write(out.join("results.md"), self.markdown())?;
        Ok(())
    }

    /// The results as Markdown tables, one per workload.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "Run {} ({} mode, median of {} run(s) per case); {} CPUs, {}, {}; temp fs {}.\n",
            self.started_utc,
            if self.quick { "quick" } else { "full" },
            self.runs_per_case,
            self.machine.cpus,
            self.machine.cpu_model,
            self.machine.kernel,
            self.machine.filesystem_tmp,
        );
        let mut workloads: Vec<&str> = Vec::new();
        for r in &self.rows {
            if !workloads.contains(&r.workload.as_str()) {
                workloads.push(&r.workload);
            }
        }
        for w in workloads {
            let _ = writeln!(s, "#### {w}\n");
            let _ = writeln!(
                s,
                "| case | subject | median | p50 ms | p99 ms | vs | ratio | target |"
            );
            let _ = writeln!(s, "|---|---|---:|---:|---:|---|---:|---|");
            for r in self.rows.iter().filter(|r| r.workload == w) {
                let (p50, p99) = r
                    .latency
                    .map_or(("".into(), "".into()), |l| (fmt_ms(l.p50), fmt_ms(l.p99)));
                let target = match (&r.target, r.met) {
                    (Some(t), Some(true)) => format!("{t}: met"),
                    (Some(t), Some(false)) => format!("{t}: **missed**"),
                    _ => String::new(),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {} {} | {} | {} | {} | {} | {} |",
                    r.case,
                    r.subject,
                    fmt_num(r.value),
                    r.unit,
                    p50,
                    p99,
                    r.baseline.clone().unwrap_or_default(),
                    r.ratio.map_or(String::new(), |x| format!("{x:.2}×")),
                    target,
                );
            }
            let _ = writeln!(s);
        }
        s
    }
}

fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x >= 1000.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn fmt_ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.3}")
    }
}

fn format_row(r: &Row) -> String {
    let mut s = format!(
        "{:<34} {:<30} {:>10} {:<9}",
        r.case,
        r.subject,
        fmt_num(r.value),
        r.unit
    );
    if let Some(l) = r.latency {
        let _ = write!(
            s,
            " p50 {:>8} ms  p99 {:>8} ms",
            fmt_ms(l.p50),
            fmt_ms(l.p99)
        );
    }
    if let (Some(b), Some(x)) = (&r.baseline, r.ratio) {
        let _ = write!(s, "  {x:.2}× vs {b}");
    }
    if let (Some(t), Some(m)) = (&r.target, r.met) {
        let _ = write!(s, "  [target {t}: {}]", if m { "met" } else { "MISSED" });
    }
    if let Some(n) = &r.note {
        let _ = write!(s, "  ({n})");
    }
    s
}
