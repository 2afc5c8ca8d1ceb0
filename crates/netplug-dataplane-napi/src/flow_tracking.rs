//! Binding of netplug-nftables' flow tracker: the allowed flows that flow logs count from
//! connection tracking (the marks the deciding rules set). Every call acts from a thread of its
//! own and settles a promise; failures arrive as `{ error }` outcomes.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;
use netplug_nftables::flow_counts::FlowCount;
use netplug_nftables::flow_tracking::FlowTracker;

use crate::nftables::nft_error;
use crate::{KernelError, on_thread};

/// What one (ends, protocol, destination port, deciding rule) did in an interval.
#[napi(object)]
pub struct TrackedFlowCount {
    /// 4 or 6.
    pub family: u32,
    pub protocol: u32,
    pub source: String,
    /// After destination NAT: the address the deciding rule saw.
    pub destination: String,
    pub destination_port: Option<u32>,
    /// Decided at the destination's end (ingress), else at the source's (egress).
    pub ingress: bool,
    /// The deciding rule's number, as its `ct mark set` wrote it.
    pub decision: u32,
    /// Connections first seen in the interval.
    pub flows: f64,
    /// Both ways, since last counted. Floating point (exact up to 2^53).
    pub packets: f64,
    pub bytes: f64,
}

#[napi(object)]
pub struct FlowTrackingTakeOutcome {
    pub counts: Option<Vec<TrackedFlowCount>>,
    /// Times the kernel dropped destroy events since the last take (a full socket).
    pub overruns: Option<f64>,
    /// Connections followed across intervals now.
    pub followed: Option<u32>,
    /// Events of ended connections read since the last take (only marked ones pass the kernel's filter).
    pub events: Option<f64>,
    pub error: Option<KernelError>,
}

/// A running flow tracker.
#[napi]
pub struct FlowTracking {
    tracker: Arc<Mutex<Option<FlowTracker>>>,
}

#[napi(object, object_from_js = false)]
pub struct FlowTrackingStartOutcome {
    pub tracking: Option<FlowTracking>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct FlowTrackingStopOutcome {
    pub error: Option<KernelError>,
}

/// Starts counting the allowed flows of the process's network namespace from connection tracking.
#[napi(ts_return_type = "Promise<FlowTrackingStartOutcome>")]
pub fn start_flow_tracking(env: &Env) -> Result<Object<'_>> {
    on_thread(env, || match FlowTracker::start() {
        Ok(tracker) => FlowTrackingStartOutcome {
            tracking: Some(FlowTracking { tracker: Arc::new(Mutex::new(Some(tracker))) }),
            error: None,
        },
        Err(err) => FlowTrackingStartOutcome { tracking: None, error: Some(nft_error(err)) },
    })
}

#[napi]
impl FlowTracking {
    /// The counts since the last take; the table is dumped for the connections still open.
    #[napi(ts_return_type = "Promise<FlowTrackingTakeOutcome>")]
    pub fn take<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let tracker = self.tracker.clone();
        on_thread(env, move || {
            let failed = |error| FlowTrackingTakeOutcome {
                counts: None,
                overruns: None,
                followed: None,
                events: None,
                error: Some(error),
            };
            let guard = tracker.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(running) = guard.as_ref() else {
                return failed(KernelError {
                    code: "EPIPE".into(),
                    errno: libc::EPIPE,
                    op: "count flows from connection tracking".into(),
                    message: "count flows from connection tracking: the tracker was stopped".into(),
                });
            };
            match running.take() {
                Ok(taken) => FlowTrackingTakeOutcome {
                    counts: Some(taken.counts.into_iter().map(count_object).collect()),
                    overruns: Some(taken.overruns as f64),
                    followed: Some(u32::try_from(taken.followed).unwrap_or(u32::MAX)),
                    events: Some(taken.events as f64),
                    error: None,
                },
                Err(err) => failed(nft_error(err)),
            }
        })
    }

    /// Stops counting; stopping twice is a no-op.
    #[napi(ts_return_type = "Promise<FlowTrackingStopOutcome>")]
    pub fn stop<'env>(&self, env: &'env Env) -> Result<Object<'env>> {
        let tracker = self.tracker.clone();
        on_thread(env, move || {
            let taken = tracker.lock().map(|mut t| t.take()).unwrap_or(None);
            match taken.map(FlowTracker::stop) {
                Some(Err(err)) => FlowTrackingStopOutcome { error: Some(nft_error(err)) },
                _ => FlowTrackingStopOutcome { error: None },
            }
        })
    }
}

fn count_object(count: FlowCount) -> TrackedFlowCount {
    TrackedFlowCount {
        family: count.family.into(),
        protocol: count.protocol.into(),
        source: count.source.to_string(),
        destination: count.destination.to_string(),
        destination_port: count.destination_port.map(u32::from),
        ingress: count.ingress,
        decision: count.decision.into(),
        flows: count.flows as f64,
        packets: count.packets as f64,
        bytes: count.bytes as f64,
    }
}
