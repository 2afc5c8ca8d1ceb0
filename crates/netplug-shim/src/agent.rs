//! One call forwarded to netplug-node over its unix socket. The conversation (see frame.rs for
//! the framing):
//!   1. shim → agent: frame `{"version":1,"program":"netplug","pid":…,"env":{…}}`, frame stdin;
//!   2. agent → shim: one byte, 0x01 accept or 0x00 decline;
//!   3. shim → agent: one byte 0x01, go: the agent starts the command only once it reads this, so
//!      a shim that gave up waiting never leaves a command running behind it;
//!   4. agent → shim: frames `{"exitCode":n}`, stdout, stderr.
//!
//! Steps 1 and 2 together take at most the accept timeout; after go the command takes as long as
//! it takes (the runtime bounds the whole call).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use netplug_cni_socket::descriptor::send_with_descriptor;
use netplug_cni_socket::frame::{MAX_FRAME, push_frame, read_frame};

use crate::request::Settings;

const ACCEPT: u8 = 0x01;
const DECLINE: u8 = 0x00;
const GO: u8 = 0x01;

/// The agent's answer, to be passed on unchanged.
#[derive(Debug, PartialEq)]
pub struct Response {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Debug, PartialEq)]
pub enum Outcome {
    Served(Response),
    /// The agent did not take the call (absent, declined, too slow, gone before go): nothing ran
    /// there, and the one-shot plugin may run it.
    NotServed(String),
    /// The connection failed after go: the command may have run in part.
    Lost(String),
}

/// Offers the call (`request`: frame 1's JSON, `stdin`: frame 2, `netns`: the pod's network
/// namespace) to the agent at `settings.socket`.
pub fn forward(settings: &Settings, request: &[u8], stdin: &[u8], netns: Option<&File>) -> Outcome {
    let socket = settings.socket.display();
    let bound = settings.accept_timeout;
    if bound.is_zero() {
        return Outcome::NotServed("the accept timeout is 0 ms".to_string());
    }
    let deadline = Instant::now() + bound;
    let mut frames = Vec::with_capacity(8 + request.len() + stdin.len());
    if let Err(err) = push_frame(&mut frames, request).and_then(|()| push_frame(&mut frames, stdin)) {
        return Outcome::NotServed(format!("the request cannot be sent: {err}"));
    }
    let mut stream = match connect(&settings.socket, bound) {
        Ok(stream) => stream,
        Err(err) => return Outcome::NotServed(format!("cannot connect to {socket}: {err}")),
    };
    let too_slow = || format!("netplug-node did not accept within {} ms on {socket}", bound.as_millis());
    let sent = within(deadline, |left| stream.set_write_timeout(Some(left)))
        .and_then(|()| send_with_descriptor(stream.as_fd(), &frames, netns.map(AsFd::as_fd)));
    if let Err(err) = sent {
        return Outcome::NotServed(if timed_out(&err) { too_slow() } else { format!("sending to {socket}: {err}") });
    }
    let mut answer = [0u8; 1];
    let read = within(deadline, |left| stream.set_read_timeout(Some(left))).and_then(|()| stream.read(&mut answer));
    match read {
        Ok(1) if answer[0] == ACCEPT => {}
        Ok(1) if answer[0] == DECLINE => return Outcome::NotServed(format!("netplug-node declined on {socket}")),
        Ok(1) => return Outcome::NotServed(format!("netplug-node answered {:#04x} on {socket}", answer[0])),
        Ok(_) => return Outcome::NotServed(format!("netplug-node closed the connection on {socket}")),
        Err(err) if timed_out(&err) => return Outcome::NotServed(too_slow()),
        Err(err) => return Outcome::NotServed(format!("reading from {socket}: {err}")),
    }
    // A one-byte write to a connected socket does not block; if it fails the agent is gone and
    // never read go, so the command did not start.
    if let Err(err) = stream.set_write_timeout(None).and_then(|()| stream.write_all(&[GO])) {
        return Outcome::NotServed(format!("netplug-node went away before go on {socket}: {err}"));
    }
    match stream.set_read_timeout(None).and_then(|()| read_response(&mut stream)) {
        Ok(response) => Outcome::Served(response),
        Err(err) if err.kind() == io::ErrorKind::UnexpectedEof => {
            Outcome::Lost("netplug-node closed the connection before its whole answer".to_string())
        }
        Err(err) => Outcome::Lost(format!("reading netplug-node's answer: {err}")),
    }
}

fn read_response(stream: &mut impl Read) -> io::Result<Response> {
    let status = read_frame(stream, MAX_FRAME)?;
    let exit_code = serde_json::from_slice::<serde_json::Value>(&status)
        .ok()
        .and_then(|json| json.get("exitCode")?.as_i64())
        .filter(|code| (0..=255).contains(code))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "netplug-node's status frame is not {{\"exitCode\":0..255}}: {}",
                    String::from_utf8_lossy(&status)
                ),
            )
        })?;
    let stdout = read_frame(stream, MAX_FRAME)?;
    let stderr = read_frame(stream, MAX_FRAME)?;
    Ok(Response { exit_code: exit_code as i32, stdout, stderr })
}

/// Runs `step` with the time left before `deadline`, or fails as a timeout if none is.
fn within(deadline: Instant, step: impl FnOnce(Duration) -> io::Result<()>) -> io::Result<()> {
    match deadline.checked_duration_since(Instant::now()).filter(|left| !left.is_zero()) {
        Some(left) => step(left),
        None => Err(io::Error::from(io::ErrorKind::TimedOut)),
    }
}

fn timed_out(err: &io::Error) -> bool {
    matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// connect(2) to a unix stream socket, waiting at most `bound` when the listener's backlog is full
/// (a unix connect blocks for up to SO_SNDTIMEO then; std's UnixStream::connect has no bound).
fn connect(path: &Path, bound: Duration) -> io::Result<UnixStream> {
    let raw = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let timeout = libc::timeval {
        tv_sec: bound.as_secs() as libc::time_t,
        tv_usec: bound.subsec_micros().max(u32::from(bound.as_secs() == 0)) as libc::suseconds_t,
    };
    let set = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            (&raw const timeout).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if set != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the socket's path is too long"));
    }
    for (slot, byte) in addr.sun_path.iter_mut().zip(bytes) {
        *slot = *byte as libc::c_char;
    }
    let len = (std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1) as libc::socklen_t;
    loop {
        if unsafe { libc::connect(raw, (&raw const addr).cast(), len) } == 0 {
            return Ok(UnixStream::from(fd));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netplug_cni_socket::frame::write_frame;
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::thread;

    /// A socket path in a fresh directory, removed when dropped.
    struct TempSocket(PathBuf);

    impl TempSocket {
        fn new(name: &str) -> TempSocket {
            let dir = std::env::temp_dir().join(format!("netplug-shim-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempSocket(dir.join("cni.sock"))
        }
        fn settings(&self, ms: u64) -> Settings {
            Settings { socket: self.0.clone(), accept_timeout: Duration::from_millis(ms) }
        }
    }

    impl Drop for TempSocket {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(self.0.parent().unwrap());
        }
    }

    /// What a test agent saw: the two request frames and every byte after them until EOF.
    type Seen = (Vec<u8>, Vec<u8>, Vec<u8>);

    /// Accepts one connection, reads the request, then lets `reply` speak; returns what it saw.
    fn agent(listener: UnixListener, reply: impl FnOnce(&mut UnixStream) + Send + 'static) -> thread::JoinHandle<Seen> {
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let request = read_frame(&mut conn, MAX_FRAME).unwrap();
            let stdin = read_frame(&mut conn, MAX_FRAME).unwrap();
            reply(&mut conn);
            let mut rest = Vec::new();
            let _ = conn.read_to_end(&mut rest);
            (request, stdin, rest)
        })
    }

    fn go_then(conn: &mut UnixStream) {
        conn.write_all(&[ACCEPT]).unwrap();
        let mut go = [0u8; 1];
        conn.read_exact(&mut go).unwrap();
        assert_eq!(go, [GO]);
    }

    #[test]
    fn a_served_call_returns_the_agents_answer_byte_exact() {
        let socket = TempSocket::new("served");
        let server = agent(UnixListener::bind(&socket.0).unwrap(), |conn| {
            go_then(conn);
            write_frame(conn, br#"{"exitCode":3}"#).unwrap();
            write_frame(conn, &[0, 1, 2, 255]).unwrap();
            write_frame(conn, b"log\n").unwrap();
        });
        let outcome = forward(&socket.settings(5000), b"{\"version\":1}", &[9, 8, 7], None);
        assert_eq!(
            outcome,
            Outcome::Served(Response { exit_code: 3, stdout: vec![0, 1, 2, 255], stderr: b"log\n".to_vec() })
        );
        let (request, stdin, rest) = server.join().unwrap();
        assert_eq!(
            (request.as_slice(), stdin.as_slice(), rest.as_slice()),
            (&b"{\"version\":1}"[..], &[9u8, 8, 7][..], &[][..])
        );
    }

    #[test]
    fn the_namespace_goes_beside_the_request_as_a_descriptor() {
        use netplug_cni_socket::descriptor::read_request;
        use std::os::unix::fs::MetadataExt;
        let socket = TempSocket::new("netns");
        let listener = UnixListener::bind(&socket.0).unwrap();
        let server = thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let request = read_request(conn.as_fd(), Duration::from_secs(5)).unwrap();
            go_then(&mut conn);
            write_frame(&mut conn, br#"{"exitCode":0}"#).unwrap();
            write_frame(&mut conn, b"").unwrap();
            write_frame(&mut conn, b"").unwrap();
            request
        });
        let netns = File::open("/proc/self/ns/net").unwrap();
        let outcome = forward(&socket.settings(5000), b"{}", b"in", Some(&netns));
        assert!(matches!(outcome, Outcome::Served(Response { exit_code: 0, .. })), "{outcome:?}");
        let request = server.join().unwrap();
        assert_eq!(request.stdin, b"in");
        let received = File::from(request.descriptor.expect("the namespace's descriptor")).metadata().unwrap();
        let sent = netns.metadata().unwrap();
        assert_eq!((received.dev(), received.ino()), (sent.dev(), sent.ino()));
    }

    #[test]
    fn no_socket_is_not_served() {
        let socket = TempSocket::new("absent");
        match forward(&socket.settings(1000), b"{}", b"", None) {
            Outcome::NotServed(why) => {
                assert!(why.contains("cannot connect to") && why.contains("No such file"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_socket_nobody_listens_on_is_not_served() {
        let socket = TempSocket::new("refused");
        drop(UnixListener::bind(&socket.0).unwrap());
        match forward(&socket.settings(1000), b"{}", b"", None) {
            Outcome::NotServed(why) => assert!(why.contains("Connection refused"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_decline_is_not_served_and_no_go_follows() {
        let socket = TempSocket::new("decline");
        let server = agent(UnixListener::bind(&socket.0).unwrap(), |conn| conn.write_all(&[DECLINE]).unwrap());
        match forward(&socket.settings(5000), b"{}", b"x", None) {
            Outcome::NotServed(why) => assert!(why.starts_with("netplug-node declined on"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(server.join().unwrap().2, b"", "no go after a decline");
    }

    #[test]
    fn an_agent_silent_past_the_bound_is_not_served_and_gets_no_go() {
        let socket = TempSocket::new("silent");
        let server = agent(UnixListener::bind(&socket.0).unwrap(), |_| {});
        match forward(&socket.settings(100), b"{}", b"", None) {
            Outcome::NotServed(why) => assert!(why.starts_with("netplug-node did not accept within 100 ms"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(server.join().unwrap().2, b"", "the agent saw the end of the stream, never go");
    }

    #[test]
    fn a_zero_bound_does_not_try_the_agent() {
        let socket = TempSocket::new("zero");
        let _listener = UnixListener::bind(&socket.0).unwrap();
        assert_eq!(
            forward(&socket.settings(0), b"{}", b"", None),
            Outcome::NotServed("the accept timeout is 0 ms".to_string())
        );
    }

    #[test]
    fn a_connection_lost_after_go_is_lost() {
        let socket = TempSocket::new("lost");
        let server = agent(UnixListener::bind(&socket.0).unwrap(), |conn| {
            go_then(conn);
            conn.write_all(&[0, 0]).unwrap();
            conn.shutdown(std::net::Shutdown::Both).unwrap();
        });
        match forward(&socket.settings(5000), b"{}", b"", None) {
            Outcome::Lost(why) => assert_eq!(why, "netplug-node closed the connection before its whole answer"),
            other => panic!("{other:?}"),
        }
        server.join().unwrap();
    }

    #[test]
    fn a_status_frame_without_an_exit_code_is_lost() {
        for status in [&br#"{"exit":0}"#[..], br#"{"exitCode":256}"#, br#"{"exitCode":-1}"#, b"nope"] {
            let socket = TempSocket::new("status");
            let server = agent(UnixListener::bind(&socket.0).unwrap(), move |conn| {
                go_then(conn);
                write_frame(conn, status).unwrap();
                // The shim hangs up on the bad status frame; what follows may meet a closed socket.
                let _ = write_frame(conn, b"").and_then(|()| write_frame(conn, b""));
            });
            match forward(&socket.settings(5000), b"{}", b"", None) {
                Outcome::Lost(why) => {
                    assert!(
                        why.starts_with("reading netplug-node's answer: netplug-node's status frame is not"),
                        "{why}"
                    )
                }
                other => panic!("{other:?}"),
            }
            server.join().unwrap();
        }
    }

    #[test]
    fn an_unknown_answer_byte_is_not_served() {
        let socket = TempSocket::new("byte");
        let server = agent(UnixListener::bind(&socket.0).unwrap(), |conn| conn.write_all(b"H").unwrap());
        assert_eq!(
            forward(&socket.settings(5000), b"{}", b"", None),
            Outcome::NotServed(format!("netplug-node answered 0x48 on {}", socket.0.display()))
        );
        assert_eq!(server.join().unwrap().2, b"");
    }
}
