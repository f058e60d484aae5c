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
