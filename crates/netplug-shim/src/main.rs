//! `netplug`, the executable a container runtime runs from its CNI_PATH. It forwards the call
//! (environment and stdin) to netplug-node on its unix socket and returns the agent's stdout,
//! stderr and exit code unchanged. When the agent does not take the call (no socket, declined,
//! no answer within the bound) it runs the one-shot plugin, `netplug-oneshot` beside it, with the
//! same input instead: a node without a running agent still works. Nothing here parses the
//! netconf or decides anything about the network: both paths run the same TypeScript core. The
//! pod's network namespace (`CNI_NETNS`) goes to the agent as a descriptor opened here, on the
//! host, so that the agent needs no view of the host's namespace mounts.

mod agent;
mod cni_error;
mod oneshot;
mod request;
mod stdio;

use std::ffi::OsString;
use std::fs::File;

use agent::{Outcome, forward};
use cni_error::{CniError, ErrorCode, LATEST_VERSION, netconf_version};
use netplug_cni_socket::frame::MAX_FRAME;
use request::{Settings, Stdin, oversize_error, read_stdin, reads_stdin, request_json, utf8_env};
use stdio::write_fd_all;

fn main() {
    std::process::exit(run());
}

fn run() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    // A runtime passes no arguments; a person's (--version) the one-shot plugin answers.
    if args.len() > 1 {
        return fallback(&args, None, "arguments are the one-shot plugin's");
    }
    let settings = match Settings::from_env(|name| std::env::var_os(name)) {
        Ok(settings) => settings,
        Err(err) => return print_error(&err, LATEST_VERSION),
    };
    let Some(env) = utf8_env(std::env::vars_os()) else {
        return fallback(&args, None, "the environment is not all UTF-8");
    };
    let command = env.get("CNI_COMMAND").map(String::as_str);
    let stdin = if reads_stdin(command) {
        match read_stdin(0, MAX_FRAME) {
            Stdin::Complete(bytes) => Some(bytes),
            Stdin::Oversize(total) => return print_error(&oversize_error(total, MAX_FRAME), LATEST_VERSION),
            // The plugin meets the same failure reading on, after what arrived.
            Stdin::Failed(bytes, err) => {
                let why = format!("stdin cannot be read: {err}");
                return fallback(&args, (!bytes.is_empty()).then_some(&bytes), &why);
            }
        }
    } else {
        None
    };
    let input = stdin.as_deref().unwrap_or(&[]);
    // Opened as the one-shot plugin opens it; if it cannot be, none goes, and the agent looks at
    // the path itself (or declines, and the one-shot meets the same failure).
    let netns = env.get("CNI_NETNS").filter(|path| !path.is_empty()).and_then(|path| File::open(path).ok());
    match forward(&settings, &request_json(std::process::id(), &env), input, netns.as_ref()) {
        Outcome::Served(response) => {
            // The runtime may have closed either; the exit code still says what happened.
            let _ = write_fd_all(2, &response.stderr);
            let _ = write_fd_all(1, &response.stdout);
            response.exit_code
        }
        Outcome::NotServed(why) => fallback(&args, stdin.as_deref(), &why),
        // An ADD may have done part of its work: running it again here could wire the pod twice.
        // Error 11 makes the runtime call DEL, which undoes the part, and retry later.
        Outcome::Lost(why) if command == Some("ADD") => {
            let msg = format!(
                "netplug-node's connection on {} ended during ADD ({why}); try again later",
                settings.socket.display()
            );
            print_error(&CniError::new(ErrorCode::TryAgainLater, msg), netconf_version(input))
        }
        // The other commands are idempotent: the one-shot plugin runs them again, whole.
        Outcome::Lost(why) => fallback(&args, stdin.as_deref(), &why),
    }
}

/// Runs the one-shot plugin in this process's place; if it cannot, prints why and fails.
fn fallback(args: &[OsString], stdin: Option<&[u8]>, why: &str) -> i32 {
    let err = oneshot::exec_oneshot(args, stdin);
    let error = CniError::new(ErrorCode::Internal, format!("internal error: {err}"))
        .with_details(format!("netplug-node did not serve the call: {why}"));
    print_error(&error, netconf_version(stdin.unwrap_or(&[])))
}

fn print_error(error: &CniError, cni_version: &str) -> i32 {
    let _ = write_fd_all(1, error.to_stdout(cni_version).as_bytes());
    1
}
