//! The shim's own cost as a container runtime meets it, for `npm run bench:agent`. A runtime starts
//! a plugin with a vfork-style spawn (Go's os/exec, as containerd and CRI-O do; Rust's std uses
//! posix_spawn, the same clone), not with Node's much dearer spawn, which would add ~3 ms of the
//! benchmark's own to every figure. This program plays both the runtime and an agent that answers
//! at once: it spawns the shim for VERSION, times spawn → the shim's request fully arrived and
//! spawn → exit, and spawns /bin/true the same way as the floor of any process.
//!
//! Usage: launch-timer SHIM SOCKET RUNS. Prints one JSON line:
//! `{"forwarded_ns":[...],"total_ns":[...],"floor_ns":[...]}`, after 10 unrecorded warm-up runs.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::Instant;

const WARMUP: usize = 10;
/// A shim that does not connect (it fell back to the one-shot) fails the run rather than hang it.
const ACCEPT_TIMEOUT_MS: i32 = 10_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [shim, socket, runs] = args.as_slice() else {
        eprintln!("usage: launch-timer SHIM SOCKET RUNS");
        std::process::exit(2);
    };
    let runs: usize = runs.parse().expect("RUNS is a number");
    if let Err(err) = measure(shim, socket, runs) {
        eprintln!("launch-timer: {err}");
        std::process::exit(1);
    }
}

fn measure(shim: &str, socket: &str, runs: usize) -> std::io::Result<()> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    let reply =
        [frame(br#"{"exitCode":0}"#), frame(br#"{"cniVersion":"1.1.0","supportedVersions":["1.1.0"]}"#), frame(b"")]
            .concat();
    let (mut forwarded, mut total, mut floor) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs + WARMUP {
        let start = Instant::now();
        let mut child = Command::new(shim)
            .env_clear()
            .env("CNI_COMMAND", "VERSION")
            .env("NETPLUG_AGENT_SOCKET", socket)
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut conn = accept_within(&listener, ACCEPT_TIMEOUT_MS)?;
        // The request: the environment's frame, then stdin's.
        read_frame(&mut conn)?;
        read_frame(&mut conn)?;
        let arrived = start.elapsed();
        conn.write_all(&[1])?;
        let mut go = [0u8; 1];
        conn.read_exact(&mut go)?;
        conn.write_all(&reply)?;
        drop(conn);
        let status = child.wait()?;
        let exited = start.elapsed();
        if !status.success() {
            return Err(std::io::Error::other(format!("the shim exited {status}")));
        }
        let floor_start = Instant::now();
        Command::new("/bin/true").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status()?;
        let floor_ns = floor_start.elapsed().as_nanos();
        if run >= WARMUP {
            forwarded.push(arrived.as_nanos());
            total.push(exited.as_nanos());
            floor.push(floor_ns);
        }
    }
    let _ = std::fs::remove_file(socket);
    let list = |values: &[u128]| values.iter().map(u128::to_string).collect::<Vec<_>>().join(",");
    println!(
        r#"{{"forwarded_ns":[{}],"total_ns":[{}],"floor_ns":[{}]}}"#,
        list(&forwarded),
        list(&total),
        list(&floor)
    );
    Ok(())
}

fn accept_within(listener: &UnixListener, timeout_ms: i32) -> std::io::Result<UnixStream> {
    let mut poll = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    let ready = unsafe { libc::poll(&mut poll, 1, timeout_ms) };
    if ready < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if ready == 0 {
        return Err(std::io::Error::other("the shim did not connect within 10 s (did it fall back to the one-shot?)"));
    }
    Ok(listener.accept()?.0)
}

fn read_frame(conn: &mut UnixStream) -> std::io::Result<Vec<u8>> {
    let mut length = [0u8; 4];
    conn.read_exact(&mut length)?;
    let mut bytes = vec![0u8; u32::from_be_bytes(length) as usize];
    conn.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn frame(bytes: &[u8]) -> Vec<u8> {
    [&(bytes.len() as u32).to_be_bytes()[..], bytes].concat()
}
