//! A link in ureq's connector chain that notes, for the thread making the request, whether a new
//! connection was opened and whether any response byte arrived. That is what tells a pooled
//! connection the server had already closed (retry once, safely) from a request the server may
//! have acted on (never retried). Requests run on the calling thread, so thread-locals suffice.
//! It also sends each request in one write (see [`Observed`]).

use std::cell::Cell;

use ureq::Error;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

thread_local! {
    static OPENED: Cell<bool> = const { Cell::new(false) };
    static RECEIVED: Cell<bool> = const { Cell::new(false) };
}

/// Forgets what the previous request on this thread saw.
pub fn reset() {
    OPENED.set(false);
    RECEIVED.set(false);
}

/// Whether the request since `reset` ran on a pooled connection and got no byte back.
pub fn pooled_and_silent() -> bool {
    !OPENED.get() && !RECEIVED.get()
}

#[derive(Debug)]
pub struct Observe;

impl Connector<Box<dyn Transport>> for Observe {
    type Out = Observed;

    fn connect(&self, _: &ConnectionDetails, chained: Option<Box<dyn Transport>>) -> Result<Option<Observed>, Error> {
        Ok(chained.map(|inner| {
            OPENED.set(true);
            Observed { inner, pending: Vec::new() }
        }))
    }
}

/// A transport that also holds back what is written until the first read, so that a request's
/// head and body leave in one write. Written in two, a TLS 1.3 server that refuses the client
/// certificate (it says so in an alert after the handshake, then closes) resets the connection
/// between them, and the second write's "broken pipe" would hide its reason; written in one, the
/// next read finds the alert.
#[derive(Debug)]
pub struct Observed {
    inner: Box<dyn Transport>,
    pending: Vec<u8>,
}

/// Held back no further: a larger body is sent as it comes.
const HOLD_AT_MOST: usize = 64 * 1024;

impl Observed {
    fn flush(&mut self, timeout: NextTimeout) -> Result<(), Error> {
        let mut sent = 0;
        while sent < self.pending.len() {
            let output = self.inner.buffers().output();
            let amount = output.len().min(self.pending.len() - sent);
            output[..amount].copy_from_slice(&self.pending[sent..sent + amount]);
            self.inner.transmit_output(amount, timeout)?;
            sent += amount;
        }
        self.pending.clear();
        Ok(())
    }
}

impl Transport for Observed {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let output = self.inner.buffers().output();
        self.pending.extend_from_slice(&output[..amount]);
        if self.pending.len() >= HOLD_AT_MOST {
            return self.flush(timeout);
        }
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.flush(timeout)?;
        let result = self.inner.await_input(timeout);
        if !self.inner.buffers().input().is_empty() {
            RECEIVED.set(true);
        }
        result
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}
