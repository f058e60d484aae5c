//! `weft serve` against the same workload in process, same run, same
//! backend (memory: the server's own overhead; dir: a durable log):
//!
//! * appends/s from 1, 16 and 256 concurrent clients, one entry per HTTP
//!   request, and the same through the pipelined WebSocket session (each
//!   client keeps up to `SESSION_WINDOW` appends in flight), each divided
//!   by N closed-loop appenders calling `Log::append` in process;
//! * append latency p50/p99 of one client over loopback ÷ in process;
//! * 64 server-sent-event subscribers while 10 k appends/s are appended:
//!   entries delivered per second (all subscribers together) and the p99
//!   delivery lag (append call to receipt).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::{SinkExt, StreamExt};
use tokio::sync::{Mutex, Semaphore};
use weft::{AppendRequest, Log, LogTag};
use weft_server::{Role, ServerOptions, Shared};

use super::Ctx;
use crate::load::{Outcome, closed_loop, payload};
use crate::report::{Report, Row};
use crate::stats::Samples;

const W: &str = "serve";
const RECORD: usize = 128;
const SESSION_WINDOW: usize = 64;
const SUBSCRIBERS: usize = 64;
const SUB_RATE: u64 = 10_000;

async fn open(ctx: &mut Ctx, backend: &str) -> Result<Log> {
    Ok(match backend {
        "memory" => Log::memory(),
        _ => {
            let dir = ctx.fresh_dir("serve-dir")?;
            Log::new(weft::DirStorage::open(&dir).await?)
        }
    })
}

async fn serve(log: Log, backend: &str) -> Result<weft_server::Running> {
    let mut options = ServerOptions {
        listen: "127.0.0.1:0".parse()?,
        ..ServerOptions::default()
    };
    options.limits.max_requests = 1 << 16;
    let shared = Shared::new(log, Role::Leader, backend, options);
    Ok(weft_server::serve(shared).await?)
}

fn tag() -> LogTag {
    LogTag::new("bench").expect("valid tag")
}

fn body(data: &[u8]) -> String {
    serde_json::json!({"entries": [{"tags": ["bench"], "data": weft_api::b64::encode(data)}]})
        .to_string()
}

async fn in_process(ctx: &mut Ctx, backend: &str, clients: usize, d: Duration) -> Result<Outcome> {
    let log = open(ctx, backend).await?;
    let data = payload(RECORD, 5);
    let l = log.clone();
    let o = closed_loop(clients, d, move |_, _| {
        let log = l.clone();
        let data = data.clone();
        async move {
            log.append(AppendRequest::new(tag(), data)).await?;
            Ok(RECORD as u64)
        }
    })
    .await?;
    log.close().await?;
    Ok(o)
}

async fn http_requests(
    ctx: &mut Ctx,
    backend: &str,
    clients: usize,
    d: Duration,
) -> Result<Outcome> {
    let server = serve(open(ctx, backend).await?, backend).await?;
    let url = format!("{}/v1/append", server.url());
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(clients)
        .tcp_nodelay(true)
        .build()?;
    let text = Arc::new(body(&payload(RECORD, 5)));
    let o = closed_loop(clients, d, move |_, _| {
        let (http, url, text) = (http.clone(), url.clone(), text.clone());
        async move {
            let r = http
                .post(&url)
                .header("content-type", "application/json")
                .body(text.as_str().to_owned())
                .send()
                .await?;
            if !r.status().is_success() {
                bail!("append answered {}", r.status());
            }
            r.bytes().await?;
            Ok(RECORD as u64)
        }
    })
    .await?;
    server.shutdown().await?;
    Ok(o)
}

/// One session per client, `SESSION_WINDOW` appends in flight each.
async fn sessions(ctx: &mut Ctx, backend: &str, clients: usize, d: Duration) -> Result<Outcome> {
    use tokio_tungstenite::tungstenite::Message;
    let server = serve(open(ctx, backend).await?, backend).await?;
    let url = format!("ws://{}/v1/session", server.local_addr);
    let text = body(&payload(RECORD, 5));
    let start = Instant::now();
    let deadline = start + d;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str()).await?;
        let (mut sink, mut source) = ws.split();
        let window = Arc::new(Semaphore::new(SESSION_WINDOW));
        let sent = Arc::new(Mutex::new(std::collections::VecDeque::<Instant>::new()));
        let text = text.clone();
        let (w2, s2) = (window.clone(), sent.clone());
        let writer = tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                w2.acquire().await?.forget();
                s2.lock().await.push_back(Instant::now());
                sink.send(Message::Text(text.clone().into())).await?;
                n += 1;
            }
            anyhow::Ok((n, sink))
        });
        let reader = tokio::spawn(async move {
            let mut out = Outcome::default();
            let mut last = start;
            loop {
                // Never wait for an answer that cannot come: once the writer
                // has passed the deadline, every answer is in when nothing
                // is outstanding. (Waiting on the socket alone hung when the
                // last answer arrived just before the deadline.)
                let until = tokio::time::Instant::from_std(
                    deadline.max(Instant::now()) + Duration::from_millis(200),
                );
                let msg = match tokio::time::timeout_at(until, source.next()).await {
                    Ok(Some(msg)) => msg?,
                    Ok(None) => break,
                    Err(_) if Instant::now() >= deadline && sent.lock().await.is_empty() => {
                        break;
                    }
                    Err(_) => continue,
                };
                if !msg.is_text() {
                    continue;
                }
                if !msg.to_text()?.starts_with("{\"ok\"") {
                    bail!("session answered {}", msg.to_text()?);
                }
                let t = sent
                    .lock()
                    .await
                    .pop_front()
                    .context("an answer too many")?;
                last = Instant::now();
                out.latency.push(last - t);
                out.ops += 1;
                out.bytes += RECORD as u64;
                window.add_permits(1);
                if last >= deadline && sent.lock().await.is_empty() {
                    break;
                }
            }
            out.elapsed = last - start;
            anyhow::Ok(out)
        });
        tasks.push((writer, reader));
    }
    let mut total = Outcome::default();
    for (writer, reader) in tasks {
        let (_, mut sink) = writer.await??;
        let o = reader.await??;
        let _ = sink.close().await;
        total.ops += o.ops;
        total.bytes += o.bytes;
        total.elapsed = total.elapsed.max(o.elapsed);
        total.latency.extend(&o.latency);
    }
    server.shutdown().await?;
    Ok(total)
}

pub async fn run(ctx: &mut Ctx, report: &mut Report) -> Result<()> {
    let d = ctx.duration(Duration::from_secs(3));
    for backend in ["memory", "dir"] {
        for clients in [1usize, 16, 256] {
            let case = format!("{backend}, {clients} clients, {RECORD} B");
            if !ctx.want(&case) {
                continue;
            }
            let (mut base, mut single, mut piped) = (Vec::new(), Vec::new(), Vec::new());
            let (mut base_lat, mut single_lat, mut piped_lat) =
                (Samples::new(), Samples::new(), Samples::new());
            // Interleaved, so slow phases of the shared box hit all alike.
            for _ in 0..ctx.runs {
                let o = in_process(ctx, backend, clients, d).await?;
                base.push(o.ops_per_s());
                base_lat.extend(&o.latency);
                let o = http_requests(ctx, backend, clients, d).await?;
                single.push(o.ops_per_s());
                single_lat.extend(&o.latency);
                let o = sessions(ctx, backend, clients, d).await?;
                piped.push(o.ops_per_s());
                piped_lat.extend(&o.latency);
            }
            let base = report.add(
                Row::new(W, &case, "in process (Log::append)")
                    .value(base, "appends/s")
                    .latency(base_lat.summary()),
            );
            let single = report.add(
                Row::new(W, &case, "server, one entry per HTTP request")
                    .value(single, "appends/s")
                    .latency(single_lat.summary())
                    .against(&base),
            );
            let piped_row = Row::new(W, &case, "server, pipelined session")
                .value(piped, "appends/s")
                .latency(piped_lat.summary())
                .against(&base);
            let vs_single = piped_row.value / single.value;
            let mut piped_row =
                piped_row.note(format!("{vs_single:.1}× the single-request figure"));
            if backend == "dir" && clients == 16 {
                let met = piped_row.ratio.unwrap_or(0.0) >= 0.5;
                piped_row = piped_row.target("≥ 0.5× in-process dir appends/s", met);
            }
            report.add(piped_row);
            if clients == 1 {
                latency_rows(report, &case, &base, &single);
            }
        }
    }
    subscribers(ctx, report, d).await
}

/// p50 and p99 of one client over loopback ÷ in process.
fn latency_rows(report: &mut Report, case: &str, base: &Row, single: &Row) {
    let (Some(b), Some(s)) = (&base.latency, &single.latency) else {
        return;
    };
    for (q, server, local) in [("p50", s.p50, b.p50), ("p99", s.p99, b.p99)] {
        report.add(
            Row::new(
                W,
                format!("{case}, append latency {q}"),
                "server over loopback",
            )
            .value(vec![server], "ms")
            .against_value(format!("in process {q}"), local),
        );
    }
}

/// The name of the server runtime's threads in the subscriber case.
const SERVER_THREADS: &str = "bench-server";

/// CPU seconds (user + system) of this process's threads whose name
/// starts with `prefix`, and of all its threads, from `/proc/self/task`
/// (`None` off Linux).
fn thread_cpu(prefix: &str) -> Option<(f64, f64)> {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let (mut named, mut all) = (0u64, 0u64);
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(stat) = std::fs::read_to_string(task.ok()?.path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        // `pid (comm) state ...`: comm may hold spaces, so split at the
        // last parenthesis; utime and stime are fields 14 and 15.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let cpu = rest
            .get(11)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            + rest
                .get(12)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        all += cpu;
        if comm.starts_with(prefix) {
            named += cpu;
        }
    }
    Some((named as f64 / ticks as f64, all as f64 / ticks as f64))
}

/// Seconds this process's threads spent runnable but waiting for a CPU
/// (`/proc/self/task/*/schedstat`, second field), summed.
fn runqueue_wait() -> Option<f64> {
    let mut ns = 0u64;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(stat) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue;
        };
        ns += stat
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns as f64 / 1e9)
}

/// 64 SSE subscribers while one appender adds `SUB_RATE` entries/s.
///
/// The server runs on a runtime of its own (2 threads named
/// [`SERVER_THREADS`]), so the same run tells the server's CPU from the
/// subscribers' clients' and the appender's (this process's other
/// threads): on a box of two shared cores, the clients' parsing of
/// 640 k events/s is a ceiling of its own.
async fn subscribers(ctx: &mut Ctx, report: &mut Report, d: Duration) -> Result<()> {
    let case = format!("{SUBSCRIBERS} subscribers, {SUB_RATE} appends/s, memory");
    if !ctx.want(&case) {
        return Ok(());
    }
    let mut delivered = Vec::new();
    let mut lag = Samples::new();
    let mut kept_up = true;
    let (mut server_cores, mut other_cores, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ctx.runs {
        let log = Log::memory();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(SERVER_THREADS)
            .enable_all()
            .build()?;
        let server = {
            let log = log.clone();
            rt.spawn(async move { serve(log, "memory").await })
                .await??
        };
        let cpu_before = thread_cpu(SERVER_THREADS);
        let wait_before = runqueue_wait();
        let origin = Instant::now();
        let url = format!("{}/v1/subscribe?from=0", server.url());
        let http = reqwest::Client::new();
        let mut subs = Vec::new();
        let total = (SUB_RATE as f64 * d.as_secs_f64()) as u64;
        for _ in 0..SUBSCRIBERS {
            let r = http.get(&url).send().await?;
            subs.push(tokio::spawn(async move {
                let mut lag = Samples::new();
                let mut got = 0u64;
                let mut text = String::new();
                let mut stream = r.bytes_stream();
                while got < total {
                    let Some(chunk) = stream.next().await else {
                        break;
                    };
                    text.push_str(&String::from_utf8_lossy(&chunk?));
                    // Every whole event in the buffer, then one drain: a
                    // drain per event moved the rest of the buffer each
                    // time, quadratic in the events a chunk carries.
                    let mut at = 0;
                    while let Some(end) = text[at..].find("\n\n") {
                        let event = &text[at..at + end];
                        at += end + 2;
                        let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: "))
                        else {
                            continue;
                        };
                        let entry: weft_api::body::Entry = serde_json::from_str(data)?;
                        let sent = u64::from_le_bytes(entry.data[..8].try_into()?);
                        let now = origin.elapsed().as_nanos() as u64;
                        lag.push(Duration::from_nanos(now.saturating_sub(sent)));
                        got += 1;
                    }
                    text.drain(..at);
                }
                anyhow::Ok((got, lag))
            }));
        }
        // Paced appends: every millisecond, the entries due by then.
        let started = Instant::now();
        let mut appended = 0u64;
        while appended < total {
            let due = ((started.elapsed().as_secs_f64() * SUB_RATE as f64) as u64).min(total);
            while appended < due {
                let mut data = (origin.elapsed().as_nanos() as u64).to_le_bytes().to_vec();
                data.extend_from_slice(&payload(RECORD - 8, appended));
                log.append(AppendRequest::new(tag(), data)).await?;
                appended += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let mut got_all = 0u64;
        for s in subs {
            let (got, l) = tokio::time::timeout(Duration::from_secs(60), s).await???;
            kept_up &= got == total;
            got_all += got;
            lag.extend(&l);
        }
        let wall = started.elapsed().as_secs_f64();
        delivered.push(got_all as f64 / wall);
        if let (Some((s0, a0)), Some((s1, a1))) = (cpu_before, thread_cpu(SERVER_THREADS)) {
            server_cores.push((s1 - s0) / wall);
            other_cores.push(((a1 - a0) - (s1 - s0)) / wall);
        }
        if let (Some(w0), Some(w1)) = (wait_before, runqueue_wait()) {
            waiting.push((w1 - w0) / wall);
        }
        server.shutdown().await?;
        rt.shutdown_background();
    }
    let p99 = lag.summary().map_or(f64::NAN, |l| l.p99);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
    };
    let (server_cpu, other_cpu) = (median(&mut server_cores), median(&mut other_cores));
    let waiting = median(&mut waiting);
    let mut load = [0f64; 3];
    // SAFETY: getloadavg writes at most 3 doubles into the array.
    let got = unsafe { libc::getloadavg(load.as_mut_ptr(), 3) };
    let load = if got >= 1 { load[0] } else { f64::NAN };
    report.add(
        Row::new(W, &case, "server-sent events, all subscribers")
            .value(delivered, "entries/s")
            .latency(lag.summary())
            .target(
                "every subscriber keeps up, p99 lag ≤ 100 ms",
                kept_up && p99 <= 100.0,
            )
            .note(format!(
                "p99 delivery lag {p99:.1} ms; CPU (cores, median of runs): server \
                 {server_cpu:.2}, subscribers' clients and appender {other_cpu:.2}, \
                 of {} on the box; threads runnable but waiting for a CPU {waiting:.2} \
                 (thread-seconds per second); load average {load:.1}",
                std::thread::available_parallelism().map_or(0, |n| n.get())
            )),
    );
    Ok(())
}
