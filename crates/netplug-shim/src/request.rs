//! What the shim forwards: its settings, the runtime's environment and stdin, and the request's
//! first frame.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::cni_error::{CniError, ErrorCode};
use crate::stdio::read_fd;

pub const SOCKET_VAR: &str = "NETPLUG_AGENT_SOCKET";
pub const DEFAULT_SOCKET: &str = "/var/run/netplug/cni.sock";
pub const TIMEOUT_VAR: &str = "NETPLUG_AGENT_ACCEPT_TIMEOUT_MS";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);
/// sockaddr_un's sun_path holds 108 bytes, the last a NUL.
const MAX_SOCKET_PATH: usize = 107;

/// Where the agent listens and how long the shim waits for it to take a request.
#[derive(Debug, PartialEq)]
pub struct Settings {
    pub socket: PathBuf,
    pub accept_timeout: Duration,
}

impl Settings {
    /// From the shim's environment (`lookup` is `std::env::var_os` outside tests). A value that
    /// cannot work is an error naming it, the same on every call, rather than a silent fallback.
    pub fn from_env(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Settings, CniError> {
        let socket = match lookup(SOCKET_VAR) {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => PathBuf::from(DEFAULT_SOCKET),
        };
        let length = socket.as_os_str().len();
        if length > MAX_SOCKET_PATH {
            return Err(CniError::new(
                ErrorCode::InvalidEnvironment,
                format!(
                    "{SOCKET_VAR} is \"{}\", {length} bytes; a unix socket's path has at most {MAX_SOCKET_PATH}",
                    socket.display()
                ),
            ));
        }
        let accept_timeout = match lookup(TIMEOUT_VAR) {
            None => DEFAULT_TIMEOUT,
            Some(value) => match value.to_str().and_then(|text| text.parse::<u32>().ok()) {
                Some(ms) => Duration::from_millis(u64::from(ms)),
                None => {
                    return Err(CniError::new(
                        ErrorCode::InvalidEnvironment,
                        format!(
                            "{TIMEOUT_VAR} is \"{}\"; it must be a whole number of milliseconds",
                            value.to_string_lossy()
                        ),
                    ));
                }
            },
        };
        Ok(Settings { socket, accept_timeout })
    }
}

/// The environment as UTF-8 strings, or `None` if any name or value is not UTF-8: the request's
/// JSON could not carry it byte-exact, so such a call goes to the one-shot plugin as it is.
pub fn utf8_env(vars: impl Iterator<Item = (OsString, OsString)>) -> Option<BTreeMap<String, String>> {
    vars.map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?))).collect()
}

/// The commands that take a netconf on stdin; the others (VERSION, none, an unknown one) leave
/// stdin unread, as the one-shot plugin does.
pub fn reads_stdin(command: Option<&str>) -> bool {
    matches!(command, Some("ADD" | "DEL" | "CHECK" | "GC" | "STATUS"))
}

/// Frame 1: `{"version":1,"program":"netplug","pid":…,"env":{…}}`.
pub fn request_json(pid: u32, env: &BTreeMap<String, String>) -> Vec<u8> {
    let env = serde_json::to_string(env).expect("a map of strings serializes");
    format!("{{\"version\":1,\"program\":\"netplug\",\"pid\":{pid},\"env\":{env}}}").into_bytes()
}

/// What reading stdin gave.
#[derive(Debug)]
pub enum Stdin {
    /// All of it, at most `limit` bytes.
    Complete(Vec<u8>),
    /// More than `limit` bytes: their total (read to the end, so the error can name it).
    Oversize(u64),
    /// A read failed after these bytes (possibly none) arrived.
    Failed(Vec<u8>, io::Error),
}

/// Reads descriptor `fd` to its end, keeping at most `limit` bytes.
pub fn read_stdin(fd: i32, limit: usize) -> Stdin {
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match read_fd(fd, &mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                if kept.len() + n <= limit {
                    kept.extend_from_slice(&chunk[..n]);
                } else if kept.capacity() > 0 {
                    kept = Vec::new();
                }
            }
            Err(err) => return Stdin::Failed(kept, err),
        }
    }
    if total > limit as u64 { Stdin::Oversize(total) } else { Stdin::Complete(kept) }
}

/// The error for a netconf above the frame limit (never forwarded, never run).
pub fn oversize_error(total: u64, limit: usize) -> CniError {
    CniError::new(
        ErrorCode::InvalidConfig,
        format!(
            "the network configuration on stdin is {total} bytes, more than the {limit} ({} MiB) netplug accepts",
            limit >> 20
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let owned: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| owned.iter().find(|(k, _)| k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn settings_default_to_the_standard_socket_and_one_second() {
        let settings = Settings::from_env(env_of(&[])).unwrap();
        assert_eq!(settings, Settings { socket: PathBuf::from(DEFAULT_SOCKET), accept_timeout: DEFAULT_TIMEOUT });
        let empty = Settings::from_env(env_of(&[(SOCKET_VAR, "")])).unwrap();
        assert_eq!(empty.socket, PathBuf::from(DEFAULT_SOCKET));
    }

    #[test]
    fn settings_follow_the_environment() {
        let settings = Settings::from_env(env_of(&[(SOCKET_VAR, "/tmp/x/cni.sock"), (TIMEOUT_VAR, "250")])).unwrap();
        assert_eq!(
            settings,
            Settings { socket: PathBuf::from("/tmp/x/cni.sock"), accept_timeout: Duration::from_millis(250) }
        );
        assert_eq!(Settings::from_env(env_of(&[(TIMEOUT_VAR, "0")])).unwrap().accept_timeout, Duration::ZERO);
    }

    #[test]
    fn a_timeout_that_is_not_a_number_is_an_error_naming_it() {
        for bad in ["", "1s", "-5", "1.5", "99999999999"] {
            let err = Settings::from_env(env_of(&[(TIMEOUT_VAR, bad)])).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidEnvironment as u32);
            assert_eq!(
                err.msg,
                format!("NETPLUG_AGENT_ACCEPT_TIMEOUT_MS is \"{bad}\"; it must be a whole number of milliseconds")
            );
        }
    }

    #[test]
    fn a_socket_path_too_long_for_sockaddr_un_is_an_error_naming_it() {
        let long = format!("/{}", "s".repeat(107));
        let err = Settings::from_env(env_of(&[(SOCKET_VAR, &long)])).unwrap_err();
        assert_eq!(err.code, 4);
        assert!(err.msg.starts_with("NETPLUG_AGENT_SOCKET is \"/sss"), "{}", err.msg);
        assert!(err.msg.ends_with("108 bytes; a unix socket's path has at most 107"), "{}", err.msg);
        assert!(Settings::from_env(env_of(&[(SOCKET_VAR, &long[..107])])).is_ok());
    }

    #[test]
    fn the_environment_goes_as_utf8_or_not_at_all() {
        let fine =
            vec![(OsString::from("CNI_COMMAND"), OsString::from("ADD")), (OsString::from("É"), OsString::from("ü \n"))];
        let env = utf8_env(fine.into_iter()).unwrap();
        assert_eq!(env.get("É").map(String::as_str), Some("ü \n"));
        let bad = vec![(OsString::from("A"), OsString::from_vec(vec![0xff]))];
        assert_eq!(utf8_env(bad.into_iter()), None);
    }

    #[test]
    fn only_netconf_commands_read_stdin() {
        for command in ["ADD", "DEL", "CHECK", "GC", "STATUS"] {
            assert!(reads_stdin(Some(command)));
        }
        for command in [None, Some("VERSION"), Some("add"), Some(""), Some("FOO")] {
            assert!(!reads_stdin(command));
        }
    }

    #[test]
    fn the_request_names_its_version_program_pid_and_environment() {
        let env = BTreeMap::from([
            ("CNI_COMMAND".to_string(), "ADD".to_string()),
            ("Q".to_string(), "\"\\\u{1}".to_string()),
        ]);
        let json: serde_json::Value = serde_json::from_slice(&request_json(42, &env)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"version": 1, "program": "netplug", "pid": 42, "env": {"CNI_COMMAND": "ADD", "Q": "\"\\\u{1}"}})
        );
    }

    fn pipe_with(bytes: &[u8]) -> i32 {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let data = bytes.to_vec();
        let writer = fds[1];
        std::thread::spawn(move || {
            let mut at = 0;
            while at < data.len() {
                let n = unsafe { libc::write(writer, data[at..].as_ptr().cast(), data.len() - at) };
                assert!(n > 0);
                at += n as usize;
            }
            unsafe { libc::close(writer) };
        });
        fds[0]
    }

    #[test]
    fn stdin_is_read_whole_up_to_the_limit() {
        let fd = pipe_with(&[7u8; 200_000]);
        assert!(matches!(read_stdin(fd, 200_000), Stdin::Complete(bytes) if bytes == [7u8; 200_000]));
        unsafe { libc::close(fd) };
        let empty = pipe_with(b"");
        assert!(matches!(read_stdin(empty, 10), Stdin::Complete(bytes) if bytes.is_empty()));
        unsafe { libc::close(empty) };
    }

    #[test]
    fn stdin_above_the_limit_is_counted_to_its_end_and_named() {
        let fd = pipe_with(&[1u8; 300_001]);
        assert!(matches!(read_stdin(fd, 300_000), Stdin::Oversize(300_001)));
        unsafe { libc::close(fd) };
        let err = oversize_error(17_000_000, 16 << 20);
        assert_eq!(err.code, 7);
        assert_eq!(
            err.msg,
            "the network configuration on stdin is 17000000 bytes, more than the 16777216 (16 MiB) netplug accepts"
        );
    }

    #[test]
    fn a_stdin_that_cannot_be_read_is_reported_with_what_arrived() {
        match read_stdin(-1, 10) {
            Stdin::Failed(bytes, err) => {
                assert!(bytes.is_empty());
                assert_eq!(err.raw_os_error(), Some(libc::EBADF));
            }
            other => panic!("{other:?}"),
        }
    }
}
