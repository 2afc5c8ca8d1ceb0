//! A connection against a small server on loopback: keep-alive, and each way of failing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use netplug_http::{Connection, ErrorKind, Target, TlsFiles, client_config};

const SECOND: Duration = Duration::from_secs(1);

fn target(port: u16) -> Target {
    Target { host: "127.0.0.1".into(), port, tls: None }
}

/// Serves one connection: for each request read, the next of `answers`; then closes.
fn serve(answers: Vec<&'static [u8]>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap();
        for answer in answers {
            let mut request = [0u8; 4096];
            if socket.read(&mut request).unwrap_or(0) == 0 {
                return;
            }
            socket.write_all(answer).unwrap();
        }
    });
    port
}

const REQUEST: &[u8] = b"POST /v3/kv/range HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";

#[test]
fn two_exchanges_share_one_connection() {
    let first: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    let second: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    let mut connection = Connection::open(&target(serve(vec![first, second])), SECOND).unwrap();
    assert_eq!(connection.exchange(REQUEST, SECOND).unwrap(), first);
    assert_eq!(connection.exchange(REQUEST, SECOND).unwrap(), second);
}

#[test]
fn a_server_closing_mid_response_is_an_io_error() {
    let mut connection = Connection::open(&target(serve(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}"])), SECOND).unwrap();
    assert_eq!(connection.exchange(REQUEST, SECOND).unwrap_err().kind, ErrorKind::Io);
}

#[test]
fn a_silent_server_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut connection = Connection::open(&target(port), SECOND).unwrap();
    let err = connection.exchange(REQUEST, Duration::from_millis(100)).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    drop(listener);
}

#[test]
fn nobody_listening_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = Connection::open(&target(port), SECOND).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Connect);
    assert!(err.message.starts_with("Connection refused"), "{err}");
}

#[test]
fn unusable_tls_files_name_their_part() {
    let files = |ca: &[u8], cert: Option<&[u8]>, key: Option<&[u8]>| TlsFiles {
        ca: Some(ca.to_vec()),
        cert: cert.map(<[u8]>::to_vec),
        key: key.map(<[u8]>::to_vec),
    };
    assert_eq!(client_config(&files(b"not pem", None, None)).err().unwrap().part, "ca");
    assert_eq!(client_config(&files(b"", None, None)).err().unwrap().part, "ca");
}
