//! The fallback: the one-shot plugin, `netplug-oneshot` beside this executable, run in this
//! process's place (execve) with the same arguments (argv[0] unchanged, so it calls itself
//! `netplug`) and environment. Stdin the shim already read is handed over in a memfd.

use std::ffi::{CString, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::stdio::write_fd_all;

pub const ONESHOT_NAME: &str = "netplug-oneshot";

/// `netplug-oneshot` in the directory of /proc/self/exe.
pub fn oneshot_path() -> io::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().ok_or_else(|| io::Error::other("/proc/self/exe has no directory"))?;
    Ok(dir.join(ONESHOT_NAME))
}

/// Replaces this process with the one-shot plugin; returns only if that failed. `stdin`, when
/// given, becomes the plugin's stdin (the bytes this process already consumed from its own).
pub fn exec_oneshot(args: &[OsString], stdin: Option<&[u8]>) -> io::Error {
    let path = match oneshot_path() {
        Ok(path) => path,
        Err(err) => return err,
    };
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
        return io::Error::new(io::ErrorKind::InvalidInput, "the one-shot plugin's path holds a NUL byte");
    };
    // Arguments from the kernel hold no NUL byte.
    let c_args: Vec<CString> = args.iter().filter_map(|arg| CString::new(arg.as_bytes()).ok()).collect();
    let mut argv: Vec<*const libc::c_char> = c_args.iter().map(|arg| arg.as_ptr()).collect();
    argv.push(std::ptr::null());
    if let Err(err) = stdin.map_or(Ok(()), replace_stdin) {
        return io::Error::new(err.kind(), format!("handing stdin to {}: {err}", path.display()));
    }
    // Rust's runtime ignores SIGPIPE; the plugin starts with the default, as the runtime runs it.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    unsafe { libc::execv(c_path.as_ptr(), argv.as_ptr()) };
    let err = io::Error::last_os_error();
    io::Error::new(err.kind(), format!("cannot run {}: {err}", path.display()))
}

/// Makes descriptor 0 a memfd holding `bytes`, positioned at their start.
fn replace_stdin(bytes: &[u8]) -> io::Result<()> {
    let fd = unsafe { libc::memfd_create(c"netplug-stdin".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let result = write_fd_all(fd, bytes).and_then(|()| {
        if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // dup2 leaves descriptor 0 without close-on-exec.
        if unsafe { libc::dup2(fd, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    });
    unsafe { libc::close(fd) };
    result
}
