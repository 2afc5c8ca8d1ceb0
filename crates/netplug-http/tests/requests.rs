//! Requests against small servers on loopback that answer as real servers do: HTTP/1.0 bodies
//! ending at close, bodiless 204, `Connection: close`, chunked, idle connections closed by the
//! server, silence, and nobody listening.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use netplug_http::{Client, ClientOptions, ErrorKind, Request, TlsFiles, tls_config};

fn client(request_timeout: Duration) -> Client {
    Client::new(ClientOptions {
        tls: TlsFiles::default(),
        proxy: None,
        connect_timeout: Duration::from_secs(1),
        request_timeout,
    })
    .unwrap()
}

fn get(client: &Client, port: u16, path: &str) -> netplug_http::Result<netplug_http::Response> {
    let url = format!("http://127.0.0.1:{port}{path}");
    client.request(&Request { method: "GET", url: &url, headers: &[], body: None })
}

/// Reads one request head (requests here carry no body).
fn read_request(socket: &mut TcpStream) -> bool {
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") {
        match socket.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => return false,
        }
    }
    true
}

/// For each connection accepted, `answer(connection number, socket)`; counts connections.
fn serve(answer: impl Fn(usize, TcpStream) + Send + 'static) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    thread::spawn(move || {
        for socket in listener.incoming().flatten() {
            answer(counter.fetch_add(1, Ordering::SeqCst), socket);
        }
    });
    (port, accepted)
}

#[test]
fn an_http_1_0_body_ends_when_the_server_closes() {
    let (port, _) = serve(|_, mut socket| {
        read_request(&mut socket);
        socket.write_all(b"HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6\r\n\r\nready\n").unwrap();
    });
    let response = get(&client(Duration::from_secs(5)), port, "/ready").unwrap();
    assert_eq!((response.status, response.body.as_slice()), (200, b"ready\n".as_slice()));
    assert!(response.headers.contains(&("server".into(), "SimpleHTTP/0.6".into())));
}

#[test]
fn a_204_without_length_a_chunked_answer_and_a_304_share_one_connection() {
    let (port, accepted) = serve(|_, mut socket| {
        read_request(&mut socket);
        socket.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
        read_request(&mut socket);
        socket
            .write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n3\r\nabc\r\n0\r\n\r\n")
            .unwrap();
        read_request(&mut socket);
        // A 304's Content-Length is the unsent body's: nothing follows the head.
        socket.write_all(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n").unwrap();
        read_request(&mut socket);
    });
    let client = client(Duration::from_secs(5));
    let first = get(&client, port, "/a").unwrap();
    assert_eq!((first.status, first.body.len()), (204, 0));
    let second = get(&client, port, "/b").unwrap();
    assert_eq!((second.status, second.body.as_slice()), (200, b"{}abc".as_slice()));
    let third = get(&client, port, "/c").unwrap();
    assert_eq!((third.status, third.body.len()), (304, 0));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn connection_close_is_honoured_and_the_next_request_reconnects() {
    let (port, accepted) = serve(|_, mut socket| {
        read_request(&mut socket);
        socket.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbye").unwrap();
    });
    let client = client(Duration::from_secs(5));
    for _ in 0..2 {
        assert_eq!(get(&client, port, "/").unwrap().body, b"bye");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn a_pooled_connection_the_server_closed_is_retried_once_on_a_new_one() {
    // The first connection answers once and then, like a keep-alive timeout racing the next
    // request, reads that request and closes without a byte of answer.
    let (port, accepted) = serve(|n, mut socket| {
        read_request(&mut socket);
        socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1").unwrap();
        if n == 0 {
            read_request(&mut socket);
        }
    });
    let client = client(Duration::from_secs(5));
    assert_eq!(get(&client, port, "/").unwrap().body, b"1");
    assert_eq!(get(&client, port, "/").unwrap().body, b"1");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn a_response_cut_short_is_not_retried() {
    let (port, accepted) = serve(|_, mut socket| {
        read_request(&mut socket);
        socket.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}").unwrap();
    });
    let err = get(&client(Duration::from_secs(5)), port, "/").unwrap_err();
    assert!(matches!(err.kind, ErrorKind::Io | ErrorKind::Protocol), "{err:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[test]
fn a_silent_server_runs_into_the_deadline() {
    let (port, _) = serve(|_, mut socket| {
        read_request(&mut socket);
        thread::sleep(Duration::from_secs(3));
    });
    let err = get(&client(Duration::from_millis(300)), port, "/").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err:?}");
}

#[test]
fn nobody_listening_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = get(&client(Duration::from_secs(1)), port, "/").unwrap_err();
    assert_eq!(err.kind, ErrorKind::Connect, "{err:?}");
}

#[test]
fn unusable_tls_files_name_their_part() {
    let files = |ca: Option<&[u8]>, cert: Option<&[u8]>, key: Option<&[u8]>| TlsFiles {
        ca: ca.map(<[u8]>::to_vec),
        cert: cert.map(<[u8]>::to_vec),
        key: key.map(<[u8]>::to_vec),
    };
    assert_eq!(tls_config(&files(Some(b"not pem"), None, None)).err().unwrap().part, "ca");
    assert_eq!(tls_config(&files(Some(b""), None, None)).err().unwrap().part, "ca");
    assert_eq!(tls_config(&files(None, Some(b"x"), None)).err().unwrap().part, "key");
    assert_eq!(tls_config(&files(None, None, Some(b"x"))).err().unwrap().part, "cert");
    assert_eq!(tls_config(&files(None, Some(b""), Some(b""))).err().unwrap().part, "cert");
    assert!(tls_config(&files(None, None, None)).is_ok(), "the platform's roots need no material");
}
