//! Runs CNI plugins as a container runtime does, for the benchmarks (`npm run bench:*`): each a
//! fresh process started with a vfork-style spawn (Go's os/exec in containerd and CRI-O; Rust's
//! std uses posix_spawn, the same clone), its stdin written and closed, timed from spawn until it has
//! exited and closed its output. Node's own spawn costs ~3 ms more per process on a small VM,
//! which would be the benchmark's, not the plugin's.
//!
//! Reads requests, one JSON object per line on stdin:
//! `{"id":1,"exe":"/path","args":["-e","0"],"env":{...},"stdin":"..."}` (`args` optional);
//! each runs on a thread of its own (a burst's commands run at once) and is answered, one JSON
//! line on stdout: `{"id":1,"status":0,"stdout":"...","stderr":"...","ns":12345,"start_ns":…}`
//! (`status` null when killed by a signal; `error` instead when the spawn itself failed;
//! `start_ns`: the spawn on the monotonic clock, which an agent's own timings share).

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Map, Value, json};

fn main() {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let mut threads = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let out = Arc::clone(&out);
        threads.push(std::thread::spawn(move || {
            let reply = match serde_json::from_str::<Value>(&line) {
                Ok(request) => run(&request),
                Err(err) => json!({ "id": null, "error": format!("bad request: {err}") }),
            };
            let mut out = out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = writeln!(out, "{reply}");
            let _ = out.flush();
        }));
    }
    for thread in threads {
        let _ = thread.join();
    }
}

fn run(request: &Value) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let Some(exe) = request.get("exe").and_then(Value::as_str) else {
        return json!({ "id": id, "error": "request without \"exe\"" });
    };
    let empty = Map::new();
    let env = request.get("env").and_then(Value::as_object).unwrap_or(&empty);
    let stdin = request.get("stdin").and_then(Value::as_str).unwrap_or("");
    let args = request.get("args").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut command = Command::new(exe);
    command.args(args.iter().map(|arg| arg.as_str().unwrap_or_default()));
    command.env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value.as_str().unwrap_or_default());
    }
    let start = Instant::now();
    let start_ns = monotonic_ns();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(err) => return json!({ "id": id, "error": format!("spawning {exe}: {err}") }),
    };
    if let Some(mut input) = child.stdin.take() {
        // A plugin that exits without reading (VERSION) closes the pipe: not a failure of the run.
        let _ = input.write_all(stdin.as_bytes());
    }
    let output = match child.wait_with_output() {
        Ok(output) => output,
        Err(err) => return json!({ "id": id, "error": format!("waiting for {exe}: {err}") }),
    };
    let ns = start.elapsed().as_nanos() as u64;
    json!({
        "id": id,
        "status": output.status.code(),
        "stdout": String::from_utf8_lossy(&output.stdout),
        "stderr": String::from_utf8_lossy(&output.stderr),
        "ns": ns,
        "start_ns": start_ns,
    })
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process on the host.
fn monotonic_ns() -> u64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
