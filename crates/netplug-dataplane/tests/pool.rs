//! The pool of namespace threads (`netns::submit`): work that entered a pod's namespace leaves its
//! thread back in the process's own, so the next work on that thread starts at home; work runs at
//! once even while other work blocks; a panic takes its thread out of the pool, not the work after.

mod common;

use std::os::unix::fs::MetadataExt;
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use netplug_dataplane::netns::{self, NetNs};

/// The calling thread's network namespace, as (device, inode).
fn current() -> (u64, u64) {
    let meta = std::fs::metadata("/proc/thread-self/ns/net").unwrap();
    (meta.dev(), meta.ino())
}

fn home() -> (u64, u64) {
    let meta = std::fs::metadata("/proc/self/ns/net").unwrap();
    (meta.dev(), meta.ino())
}

/// Runs `f` on the pool and waits for what it sends back.
fn on_pool<T: Send + 'static>(f: impl FnOnce(&mut netns::NamespaceThread) -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    netns::submit(move |thread| tx.send(f(thread)).unwrap()).unwrap();
    rx.recv_timeout(Duration::from_secs(10)).expect("the pool ran the work")
}

#[test]
fn work_after_work_that_entered_a_namespace_starts_in_the_process_namespace() {
    let ns = TestNs::new();
    let path = ns.path.clone();
    for _ in 0..20 {
        let path = path.clone();
        let (inside, thread) = on_pool(move |thread| {
            thread.enter(&NetNs::open(&path).unwrap()).unwrap();
            (current(), std::thread::current().id())
        });
        let pod = std::fs::metadata(&ns.path).unwrap();
        assert_eq!(inside, (pod.dev(), pod.ino()), "the work ran in the pod's namespace");
        // Whichever thread takes the next work (usually the same), it starts at home.
        let (after, next) = on_pool(|_| (current(), std::thread::current().id()));
        assert_eq!(after, home(), "the next work starts in the process's namespace (thread {thread:?}, then {next:?})");
    }
}

#[test]
fn work_runs_at_once_while_other_work_blocks() {
    let (release, blocked) = mpsc::channel::<()>();
    let (started, waiting) = mpsc::channel();
    netns::submit(move |_| {
        started.send(()).unwrap();
        let _ = blocked.recv();
    })
    .unwrap();
    waiting.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(on_pool(|_| 42), 42, "a second thread took the work");
    release.send(()).unwrap();
}

#[test]
fn a_panic_ends_its_thread_and_the_pool_still_serves() {
    let (tx, rx) = mpsc::channel::<()>();
    netns::submit(move |_| {
        let _keep = tx; // dropped as the panic unwinds: the caller learns the work ended
        panic!("a bug in the work");
    })
    .unwrap();
    assert!(rx.recv_timeout(Duration::from_secs(10)).is_err());
    assert_eq!(on_pool(|_| current()), home());
}
