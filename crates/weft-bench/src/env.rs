//! Finding the S3 test server: the environment, else the env file that
//! `scripts/seaweedfs.sh start` writes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use object_store::ObjectStore;
use weft::connect::S3Settings;

/// Where the S3 server is and how to sign requests to it.
#[derive(Clone, Debug)]
pub struct S3Env {
    pub endpoint: String,
    pub bucket: String,
    access_key: String,
    secret_key: String,
    region: String,
    /// The SeaweedFS master's `host:port`, when the server is SeaweedFS
    /// started by `scripts/seaweedfs.sh`: deleted objects keep their disk
    /// space until a volume vacuum, which [`S3Env::reclaim_space`] asks for.
    master: Option<String>,
}

const HINT: &str = "start the server with scripts/seaweedfs.sh start (or run scripts/bench.sh)";

impl S3Env {
    /// Reads `WEFT_TEST_S3_*` / `AWS_*` from the environment, filling gaps
    /// from the env file. Fails (never skips) when the server is not set up.
    pub fn discover(explicit: Option<&Path>) -> Result<S3Env> {
        let file = match explicit {
            Some(p) => Some(p.to_path_buf()),
            None => std::env::var_os("WEFT_S3_ENV_FILE")
                .map(PathBuf::from)
                .or_else(find_env_file),
        };
        let mut vars = HashMap::new();
        if let Some(f) = &file {
            if f.exists() {
                vars = parse_env_file(f)?;
            } else if explicit.is_some() {
                bail!("S3 env file {} does not exist: {HINT}", f.display());
            }
        }
        let get = |k: &str| -> Option<String> {
            std::env::var(k)
                .ok()
                .filter(|v| !v.is_empty())
                .or_else(|| vars.get(k).cloned())
        };
        let need = |k: &str| -> Result<String> {
            get(k).with_context(|| format!("{k} is not set and no env file provides it: {HINT}"))
        };
        let env = S3Env {
            endpoint: need("WEFT_TEST_S3_ENDPOINT")?,
            bucket: need("WEFT_TEST_S3_BUCKET")?,
            access_key: need("AWS_ACCESS_KEY_ID")?,
            secret_key: need("AWS_SECRET_ACCESS_KEY")?,
            region: get("AWS_REGION").unwrap_or_else(|| "us-east-1".into()),
            master: get("WEFT_TEST_S3_MASTER"),
        };
        Ok(env)
    }

    /// A store rooted at `prefix` of the bucket, built by weft's own
    /// settings (object_store 0.12's `AmazonS3Builder`, path style, ETag
    /// conditional puts). object_store 0.12 is also the version slatedb
    /// 0.13 re-exports, so the same store serves opendata-buffer.
    pub fn store(&self, prefix: &str) -> Result<Arc<dyn ObjectStore>> {
        let mut s = S3Settings::new(self.bucket.clone(), prefix.to_string());
        s.endpoint = Some(self.endpoint.clone());
        s.allow_http = true;
        s.region = Some(self.region.clone());
        s.access_key_id = Some(self.access_key.clone());
        s.secret_access_key = Some(self.secret_key.clone());
        // WEFT_BENCH_UNSIGNED_PAYLOAD=1: every store of the run (raw
        // baselines, weft and the peer alike) signs without hashing bodies.
        s.unsigned_payload = std::env::var("WEFT_BENCH_UNSIGNED_PAYLOAD").is_ok_and(|v| v == "1");
        s.build()
            .map_err(|e| anyhow::anyhow!("build S3 store: {e}"))
    }
}

impl S3Env {
    /// Asks the SeaweedFS master to compact every volume whose deleted
    /// share is above 1% (`GET /vol/vacuum`), so a run that writes and
    /// deletes tens of GiB does not fill the disk: the server keeps a
    /// deleted object's bytes until then. Waits for the answer, so no case
    /// runs while a volume is read-only for compaction. Best effort: a
    /// server without a master address or an unanswered request costs only
    /// disk space.
    pub async fn reclaim_space(&self) {
        let Some(master) = self.master.clone() else {
            return;
        };
        let asked = tokio::task::spawn_blocking(move || vacuum(&master)).await;
        if let Ok(Err(e)) = asked {
            eprintln!("   (could not ask the S3 server to reclaim deleted space: {e})");
        }
    }
}

/// One plain HTTP/1.0 GET of the master's vacuum endpoint.
fn vacuum(master: &str) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(master)?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(600)))?;
    write!(
        conn,
        "GET /vol/vacuum?garbageThreshold=0.01 HTTP/1.0\r\nHost: {master}\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer)?;
    if answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200") {
        Ok(())
    } else {
        let head = String::from_utf8_lossy(&answer[..answer.len().min(120)]).into_owned();
        Err(std::io::Error::other(format!("vacuum answered: {head}")))
    }
}

fn find_env_file() -> Option<PathBuf> {
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let candidate = dir.join(".tmp/seaweedfs/env");
        if candidate.exists() {
            return Some(candidate);
        }
        if !dir.pop() {
            return None;
        }
    }
}

fn parse_env_file(path: &Path) -> Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut out = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            out.insert(k.trim().to_string(), v.trim().trim_matches('"').to_string());
        }
    }
    Ok(out)
}
