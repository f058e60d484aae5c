//! Per-view KV on a bucket: one small object per key, changed only by
//! conditional PUT, so claims and counters hold across processes and
//! machines.
//!
//! Object: `<kv prefix>/<hex scope>/<hex key>`, laid out as
//! `crate::format::bucket_kv` describes: the value (or a tombstone) and
//! the tokens of the writes that made it. A delete writes a tombstone with
//! a conditional update instead of deleting the object, because a
//! conditional delete is not portable across object stores; a tombstone
//! reads as absent.
//!
//! `compare_and_set` reads the object with its version (ETag), compares, and
//! writes with `If-Match` (or `If-None-Match: *` when the object does not
//! exist), carrying a token drawn for this call. Whenever the answer is
//! unclear — a timeout after sending (the write may have landed), or a 412
//! (which object_store also reports when it resent a request whose first
//! copy had landed) — it re-reads the object and judges by the tokens:
//!
//! * its token is in the object's list: **it won** (`Ok(true)`), also when
//!   later writers have replaced its value since;
//! * the write it was conditioned on is followed by another writer's token:
//!   **it lost**, and compares again against what is there now;
//! * the object is still the one it was conditioned on: nothing landed
//!   yet, so the same request (same condition, same token) is sent again —
//!   if an earlier copy lands late, the resend loses and the next re-read
//!   finds the token;
//! * the list cannot tell (more writes since than it keeps — 128, far
//!   more than one key takes during one request unless the request
//!   stalled — or an unconditional write in between): `Indeterminate`,
//!   never a guess.
//!
//! Transient failures (nothing written) are retried within the
//! [`RetryPolicy`].

use std::fmt::Write;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, UpdateVersion};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::{Error, ErrorKind, Result};
use crate::format::{KvObject, MAX_WRITERS, WriterToken, decode_kv_object, encode_kv_object};
use crate::kv::KvStore;
use crate::model::LogTag;
use crate::objects::outcome::{self, Outcome, StoreOp};
use crate::objects::{Backoff, RetryPolicy};

/// Rounds of a compare-and-set that lost to another writer and compared
/// again (each round is a genuine race lost, not a retry).
const MAX_CAS_ROUNDS: usize = 64;

/// The bucket KV of one log.
#[derive(Debug, Clone)]
pub struct BucketKv {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    retry: RetryPolicy,
    rng: Arc<Mutex<ChaCha8Rng>>,
}

fn hex(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The current state of a key: the object (if any) and its version.
#[derive(Debug)]
struct Current {
    object: Option<KvObject>,
    version: Option<UpdateVersion>,
}

impl Current {
    fn value(&self) -> Option<&[u8]> {
        self.object.as_ref().and_then(|o| o.value.as_deref())
    }

    /// What a write conditioned on this state replaces.
    fn prior(&self) -> Prior {
        match (&self.object, &self.version) {
            (Some(o), _) if !o.writers.is_empty() => Prior::Token(o.writers[0]),
            (Some(_), Some(v)) => Prior::Legacy(v.clone()),
            _ => Prior::Absent,
        }
    }

    /// The object a write of `value` with `token` on top of this state
    /// stores: its token first, then as much of the history as fits.
    fn next(&self, token: WriterToken, value: Option<Bytes>) -> KvObject {
        match &self.object {
            // A creation: the list starts here, complete.
            None => KvObject {
                value,
                writers: vec![token],
                complete: true,
            },
            Some(o) => {
                let mut writers = Vec::with_capacity(MAX_WRITERS);
                writers.push(token);
                writers.extend(o.writers.iter().take(MAX_WRITERS - 1));
                KvObject {
                    value,
                    complete: o.complete && o.writers.len() < MAX_WRITERS,
                    writers,
                }
            }
        }
    }
}

/// The state a conditional write was conditioned on.
#[derive(Debug, Clone)]
enum Prior {
    /// No object.
    Absent,
    /// A v1 object, which carries no token: known by its version only.
    Legacy(UpdateVersion),
    /// A v2 object, known by its newest token.
    Token(WriterToken),
}

/// What a re-read says about a conditional write.
#[derive(Debug)]
enum Verdict {
    /// The write landed.
    Won,
    /// Another write replaced the state this one was conditioned on.
    Lost,
    /// The state it was conditioned on is still there: nothing landed yet.
    Pending,
    /// The object's history is too short to tell.
    Unknown,
}

fn judge(now: &Current, mine: &WriterToken, prior: &Prior) -> Verdict {
    let Some(object) = &now.object else {
        return match prior {
            Prior::Absent => Verdict::Pending,
            // Objects are never deleted (deletes write tombstones): someone
            // removed it by hand.
            _ => Verdict::Unknown,
        };
    };
    if object.writers.contains(mine) {
        return Verdict::Won;
    }
    match prior {
        Prior::Token(p) => match object.writers.iter().position(|w| w == p) {
            Some(0) => Verdict::Pending,
            // The write after `p` is someone else's: only one write can
            // replace a given state.
            Some(_) => Verdict::Lost,
            None => Verdict::Unknown,
        },
        // The list goes back to the object's creation and it is not ours.
        Prior::Absent if object.complete => Verdict::Lost,
        Prior::Absent => Verdict::Unknown,
        Prior::Legacy(v) => match &now.version {
            Some(now_v) if object.writers.is_empty() && same_version(now_v, v) => Verdict::Pending,
            _ => Verdict::Unknown,
        },
    }
}

fn same_version(a: &UpdateVersion, b: &UpdateVersion) -> bool {
    match (&a.e_tag, &b.e_tag) {
        (Some(x), Some(y)) => outcome::etags_match(x, y),
        _ => a.version.is_some() && a.version == b.version,
    }
}

impl BucketKv {
    /// The KV whose objects live under `prefix` in `store`, retrying
    /// transient failures within the default [`RetryPolicy`].
    pub fn new(store: Arc<dyn ObjectStore>, prefix: impl Into<String>) -> Self {
        BucketKv {
            store,
            prefix: prefix.into(),
            retry: RetryPolicy::default(),
            rng: Arc::new(Mutex::new(crate::random::rng(None))),
        }
    }

    /// Retries (and their deadline) of every request.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Seeds writer tokens and backoff jitter (for reproducible tests;
    /// tokens must differ between processes, so leave it unset otherwise).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed)));
        self
    }

    fn path(&self, scope: &LogTag, key: &str) -> Path {
        Path::from(format!(
            "{}/{}/{}",
            self.prefix,
            hex(&scope.to_string()),
            hex(key)
        ))
    }

    fn draw(&self) -> (WriterToken, u64) {
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        (rng.random(), rng.random())
    }

    /// Reads the key, retrying transient failures.
    async fn current(&self, path: &Path, backoff: &mut Backoff) -> Result<Current> {
        loop {
            let err = match backoff.attempt(self.store.get(path)).await {
                Ok(got) => {
                    let version = UpdateVersion {
                        e_tag: got.meta.e_tag.clone(),
                        version: got.meta.version.clone(),
                    };
                    match backoff.attempt(got.bytes()).await {
                        Ok(bytes) => {
                            let object = decode_kv_object(bytes)
                                .map_err(|e| e.context(format!("KV object {path}")))?;
                            return Ok(Current {
                                object: Some(object),
                                version: Some(version),
                            });
                        }
                        Err(e) => e,
                    }
                }
                Err(e) => e,
            };
            match outcome::classify(StoreOp::Read, &err) {
                Outcome::NotFound => {
                    return Ok(Current {
                        object: None,
                        version: None,
                    });
                }
                Outcome::Transient if backoff.wait().await => continue,
                _ => return Err(outcome::to_error(StoreOp::Read, path.as_ref(), err)),
            }
        }
    }

    async fn put_object(
        &self,
        path: &Path,
        object: &KvObject,
        mode: PutMode,
        backoff: &Backoff,
    ) -> PutAttempt {
        let bytes = match encode_kv_object(object) {
            Ok(b) => b,
            Err(e) => return PutAttempt::Failed(e),
        };
        let op = match mode {
            PutMode::Create => StoreOp::CreateIfAbsent,
            PutMode::Update(_) => StoreOp::UpdateIfMatch,
            PutMode::Overwrite => StoreOp::Put,
        };
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match backoff
            .attempt(self.store.put_opts(path, bytes.into(), opts))
            .await
        {
            Ok(_) => PutAttempt::Done,
            Err(e) => match outcome::classify(op, &e) {
                Outcome::Transient => PutAttempt::NotWritten(e),
                Outcome::Conflict | Outcome::Ambiguous => PutAttempt::Unclear(e),
                _ => PutAttempt::Failed(outcome::to_error(op, path.as_ref(), e)),
            },
        }
    }
}

/// How one put went.
enum PutAttempt {
    Done,
    /// Nothing was written (a transient failure).
    NotWritten(object_store::Error),
    /// A 412 or no answer: re-read to learn what happened.
    Unclear(object_store::Error),
    /// Retrying cannot help.
    Failed(Error),
}

fn unknown(path: &Path, why: &str, source: Option<object_store::Error>) -> Error {
    let err = Error::new(
        ErrorKind::Indeterminate,
        format!("compare-and-set on {path}: {why}; re-read the key"),
    );
    match source {
        Some(s) => err.with_source(s),
        None => err,
    }
}

#[async_trait]
impl KvStore for BucketKv {
    async fn get(&self, scope: &LogTag, key: &str) -> Result<Option<Bytes>> {
        let (_, seed) = self.draw();
        let mut backoff = self.retry.backoff(seed);
        let current = self.current(&self.path(scope, key), &mut backoff).await?;
        Ok(current.object.and_then(|o| o.value))
    }

    /// Writes unconditionally; the object's history starts over (it was not
    /// conditioned on anything). A write whose answer was lost is
    /// re-read: found, it is done; otherwise `Indeterminate` (it may still
    /// land later, over a newer value).
    async fn put(&self, scope: &LogTag, key: &str, value: Option<Bytes>) -> Result<()> {
        let path = self.path(scope, key);
        let (mine, seed) = self.draw();
        let mut backoff = self.retry.backoff(seed);
        let object = KvObject {
            value,
            writers: vec![mine],
            complete: false,
        };
        loop {
            match self
                .put_object(&path, &object, PutMode::Overwrite, &backoff)
                .await
            {
                PutAttempt::Done => return Ok(()),
                PutAttempt::Failed(e) => return Err(e),
                PutAttempt::NotWritten(e) => {
                    if !backoff.wait().await {
                        return Err(outcome::to_error(StoreOp::Put, path.as_ref(), e));
                    }
                }
                PutAttempt::Unclear(e) => {
                    let now = self
                        .current(&path, &mut backoff)
                        .await
                        .map_err(|_| unknown(&path, "a write went unanswered", None))?;
                    if now.object.is_some_and(|o| o.writers.contains(&mine)) {
                        return Ok(());
                    }
                    return Err(Error::new(
                        ErrorKind::Indeterminate,
                        format!(
                            "KV write of {path} went unanswered and is not there (yet); it may \
                             still land"
                        ),
                    )
                    .with_source(e));
                }
            }
        }
    }

    async fn compare_and_set(
        &self,
        scope: &LogTag,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<Bytes>,
    ) -> Result<bool> {
        let path = self.path(scope, key);
        let (mine, seed) = self.draw();
        let mut backoff = self.retry.backoff(seed);
        let mut current = self.current(&path, &mut backoff).await?;
        'rounds: for _ in 0..MAX_CAS_ROUNDS {
            if current.value() != expected {
                return Ok(false);
            }
            let prior = current.prior();
            let object = current.next(mine, new.clone());
            let mode = match &current.version {
                Some(v) => PutMode::Update(v.clone()),
                None => PutMode::Create,
            };
            // An attempt of this round went unanswered and may still land.
            let mut unclear = false;
            backoff.reset();
            loop {
                let attempt = self
                    .put_object(&path, &object, mode.clone(), &backoff)
                    .await;
                let (err, wait_first) = match attempt {
                    PutAttempt::Done => return Ok(true),
                    PutAttempt::Failed(e) if unclear => {
                        return Err(unknown(&path, "an earlier attempt went unanswered", None)
                            .with_source(e));
                    }
                    PutAttempt::Failed(e) => return Err(e),
                    PutAttempt::NotWritten(e) if !unclear => {
                        // Nothing of this round can land: wait, then compare
                        // again on a fresh read (the state this attempt was
                        // conditioned on is likely stale by then).
                        if !backoff.wait().await {
                            return Err(outcome::to_error(
                                StoreOp::UpdateIfMatch,
                                path.as_ref(),
                                e,
                            ));
                        }
                        current = self.current(&path, &mut backoff).await?;
                        continue 'rounds;
                    }
                    PutAttempt::NotWritten(e) => (e, true),
                    PutAttempt::Unclear(e) => {
                        let ambiguous =
                            outcome::classify(StoreOp::UpdateIfMatch, &e) == Outcome::Ambiguous;
                        unclear |= ambiguous;
                        (e, false)
                    }
                };
                // Learn what happened; re-read again after each wait, so
                // that a resend goes out only while nothing has landed.
                let mut wait = wait_first;
                loop {
                    if wait && !backoff.wait().await {
                        return Err(if unclear {
                            unknown(&path, "the store kept failing", Some(err))
                        } else {
                            outcome::to_error(StoreOp::UpdateIfMatch, path.as_ref(), err)
                        });
                    }
                    let now = match self.current(&path, &mut backoff).await {
                        Ok(now) => now,
                        Err(_) if unclear => {
                            return Err(unknown(
                                &path,
                                "the store did not answer, and re-reading the key failed",
                                Some(err),
                            ));
                        }
                        Err(e) => return Err(e),
                    };
                    match judge(&now, &mine, &prior) {
                        Verdict::Won => return Ok(true),
                        Verdict::Lost => {
                            current = now;
                            continue 'rounds;
                        }
                        Verdict::Unknown => {
                            return Err(unknown(
                                &path,
                                "the answer was lost and the key changed more often since \
                                 than its object records",
                                Some(err),
                            ));
                        }
                        // Still as it was after a wait: resend.
                        Verdict::Pending if wait => break,
                        Verdict::Pending => wait = true,
                    }
                }
            }
        }
        Err(Error::new(
            ErrorKind::Unavailable,
            format!("compare-and-set on {path} kept losing races; try again"),
        ))
    }
}
