//! A log in a local directory: what was appended survives closing and
//! reopening, numbering carries on where it stopped, the KV and the trim
//! point persist, and an executor restarted over the reopened log lands on
//! the same state without repeating its outputs.
//!
//! One process at a time may open a directory: a second open is refused
//! with `Locked` until the first handle is closed.
//!
//! Run with `cargo run -p weft --example file_persisted`.

use std::path::Path;
use std::time::Duration;

use weft::exec::{Checkpoint, Executor, ExecutorContext, ExecutorEngine, StateWatch};
use weft::storage::dir::DirStorage;
use weft::{AppendRequest, Error, ErrorKind, Log, LogEntry, LogTag, Position, Result};

/// Acknowledges every `placed:<id>` with one `packed:<id>` on the same tag.
struct Packer {
    orders: LogTag,
}

/// How many orders were placed and packed.
#[derive(Clone, Debug, Default, PartialEq)]
struct Packing {
    placed: Vec<String>,
    packed: Vec<String>,
}

impl Executor for Packer {
    type State = Packing;

    fn name(&self) -> &str {
        "packer"
    }

    fn input_tag(&self) -> LogTag {
        self.orders.clone()
    }

    fn initial_state(&self) -> Packing {
        Packing::default()
    }

    fn apply(&self, state: &mut Packing, entry: &LogEntry) -> Result<()> {
        let text = String::from_utf8_lossy(&entry.data);
        if let Some(id) = text.strip_prefix("placed:") {
            state.placed.push(id.to_owned());
        } else if let Some(id) = text.strip_prefix("packed:") {
            state.packed.push(id.to_owned());
        }
        Ok(())
    }

    async fn execute(
        &self,
        state: &Packing,
        _: &mut ExecutorContext,
    ) -> Result<Vec<AppendRequest>> {
        // Packed orders are folded back, so only the unpacked ones remain.
        Ok(state
            .placed
            .iter()
            .filter(|id| !state.packed.contains(id))
            .map(|id| AppendRequest::new(self.orders.clone(), format!("packed:{id}")))
            .collect())
    }
}

/// Runs the packer until every placed order is packed; returns its state
/// and how many entries it appended in this run.
async fn run_packer(log: &Log, orders: &LogTag) -> Result<(Packing, u64)> {
    let mut engine = ExecutorEngine::new(log.clone());
    let mut watch: StateWatch<Packing> = engine.register(Packer {
        orders: orders.clone(),
    })?;
    let handle = engine.start()?;
    let wait =
        watch.wait_for(|s| s.executions >= 1 && s.state.packed.len() == s.state.placed.len());
    let snap = tokio::time::timeout(Duration::from_secs(10), wait)
        .await
        .map_err(|_| Error::new(ErrorKind::Unavailable, "packer did not settle in 10 s"))??;
    handle.shutdown().await;
    Ok((snap.state, snap.appended))
}

async fn open(path: &Path) -> Result<Log> {
    Ok(Log::new(DirStorage::open(path).await?))
}

/// Writes, closes, reopens and checks everything came back.
#[tokio::main]
pub async fn main() -> Result<()> {
    let tmp = tempfile::tempdir().map_err(|e| Error::io("create a temporary directory", e))?;
    let path = tmp.path().join("shop-log");
    let orders = LogTag::new("orders")?;
    let audit = LogTag::new("audit")?;

    // First life: write, run the packer, checkpoint, close.
    let (written, first_packing) = {
        let log = open(&path).await?;
        let second = DirStorage::open(&path).await;
        assert_eq!(
            second.map(|_| ()).unwrap_err().kind(),
            ErrorKind::Locked,
            "one handle per directory"
        );
        for i in 1..=3 {
            log.append(AppendRequest::new(orders.clone(), format!("placed:o-{i}")))
                .await?;
            log.append(AppendRequest::new(audit.clone(), format!("saw o-{i}")))
                .await?;
        }
        let (packing, appended) = run_packer(&log, &orders).await?;
        assert_eq!(appended, 3);
        let report = Checkpoint::for_view(&log.view(audit.clone()), "report")?;
        report
            .advance(log.latest_seqnum().await?.unwrap_or(0))
            .await?;
        let written = log.read_log(Position::Beginning, 100).await?;
        log.close().await?;
        (written, packing)
    };
    println!("first life wrote {} entries", written.len());
    assert_eq!(written.len(), 9);

    // Second life: everything is back, exactly as it was.
    {
        let log = open(&path).await?;
        let recovered = log.read_log(Position::Beginning, 100).await?;
        assert_eq!(recovered, written, "same entries, seqnums, versions, tags");
        assert_eq!(log.latest_seqnum().await?, Some(8));
        assert_eq!(log.next_version(&orders).await?, 6);

        // Numbering carries on rather than restarting at zero.
        let next = log
            .append_if(
                AppendRequest::new(orders.clone(), "placed:o-4"),
                log.next_version(&orders).await?,
            )
            .await?;
        assert_eq!((next.seqnum, next.stream_version), (9, 6));

        // The KV survived.
        let report = Checkpoint::for_view(&log.view(audit.clone()), "report")?;
        assert_eq!(report.load().await?, Some(8));

        // The packer replays from disk: the old orders stay packed once,
        // only the new one gets packed.
        let (packing, appended) = run_packer(&log, &orders).await?;
        assert_eq!(appended, 1);
        assert_eq!(packing.placed[..3], first_packing.placed[..]);
        assert_eq!(packing.packed.len(), 4);

        // Trim the first day away; the trim point is durable too.
        log.trim(5).await?;
        log.close().await?;
    }

    // Third life: the trim held.
    let log = open(&path).await?;
    let err = log
        .read_from(&orders, Position::At(0), 10)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Trimmed);
    let left = log.read_all(&orders).await?;
    assert!(left.iter().all(|e| e.seqnum > 5));
    assert_eq!(left.last().map(|e| e.seqnum), Some(10));
    println!("after trim: {} orders entries left", left.len());
    log.close().await?;
    Ok(())
}
