//! A link in ureq's connector chain that notes, for the thread making the request, whether a new
//! connection was opened and whether any response byte arrived. That is what tells a pooled
//! connection the server had already closed (retry once, safely) from a request the server may
//! have acted on (never retried). Requests run on the calling thread, so thread-locals suffice.

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
            Observed(inner)
        }))
    }
}

#[derive(Debug)]
pub struct Observed(Box<dyn Transport>);

impl Transport for Observed {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        let result = self.0.transmit_output(amount, timeout);
        // A TLS 1.3 server refusing the client certificate says so in an alert after the
        // handshake and closes: writing the request then fails with a broken pipe. The alert is
        // likely waiting unread; reading it turns "broken pipe" into the reason.
        if matches!(result, Err(Error::Io(_))) && self.0.is_tls() && !RECEIVED.get() {
            if let Err(Error::Io(io)) = self.0.await_input(timeout) {
                if io.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
                    return Err(Error::Io(io));
                }
            }
        }
        result
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        let result = self.0.await_input(timeout);
        if !self.0.buffers().input().is_empty() {
            RECEIVED.set(true);
        }
        result
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}
