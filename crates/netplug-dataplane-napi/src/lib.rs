//! N-API binding of netplug's native crates: `netplug-dataplane` (kernel work; in [`routes`],
//! the routes between nodes), in [`nftables`], `netplug-nftables` (netplug's nftables table and
//! NFLOG), in [`conntrack`], its conntrack dump and the accounting sysctls, in [`http`],
//! `netplug-http` (HTTP for etcd, the Kubernetes API and readiness gates), and in
//! [`cni_socket`], `netplug-cni-socket` (netplug-node's CNI socket); in [`interfaces`], the
//! addresses of the process's interfaces.
//!
//! Each call runs on a thread of the binding's own pool (`netns::submit`; namespaces are per
//! thread), returns a promise at once, and settles it from that thread: neither the JS thread nor
//! libuv's pool ever blocks on or enters a namespace. Kernel failures resolve as `{ error }`
//! outcomes carrying the errno name and the operation, which the TypeScript facade turns into
//! typed errors; the promise rejects only if the binding itself breaks.

pub mod cni_socket;
pub mod conntrack;
pub mod flow_tracking;
mod http;
pub mod interfaces;
pub mod nftables;
pub mod routes;

use std::net::IpAddr;

use ipnet::IpNet;
use napi::JsDeferred;
use napi::bindgen_prelude::{Object, ToNapiValue};
use napi::{Env, Error, Result};
use napi_derive::napi;
use netplug_dataplane::netns::{self, NamespaceThread};
use netplug_dataplane::{self as dataplane, DataplaneError, Presence, Teardown};

/// The workload interface to set up or check.
#[napi(object)]
pub struct WorkloadSpec {
    /// Path of the workload's network namespace (`/run/netns/x`, `/proc/<pid>/ns/net`).
    pub netns: String,
    /// Interface name inside the namespace (CNI_IFNAME).
    pub container_ifname: String,
    /// Name of the veth end in the host namespace (at most 15 bytes).
    pub host_ifname: String,
    /// MTU of both ends; the kernel default when absent.
    pub mtu: Option<u32>,
    /// Receive and transmit queues of both ends; 1 when absent.
    pub num_queues: Option<u32>,
    /// Workload addresses, placed as /32 and /128.
    pub addresses: Vec<String>,
    /// CIDRs routed via the link-local next hop; the default route per family when absent.
    pub routes: Option<Vec<String>>,
    /// Sets the workload's IP forwarding sysctls to 1 instead of 0.
    pub allow_ip_forwarding: Option<bool>,
    /// The workload end's MAC (`0a:58:...`); the kernel picks one when absent.
    pub container_mac: Option<String>,
    /// Whether set-up adds the host routes; true when absent. False leaves them to addHostRoutes.
    pub host_routes: Option<bool>,
}

#[napi(object)]
pub struct InterfaceInfo {
    pub name: String,
    pub index: u32,
    pub mac: String,
}

/// A route given to the workload: `destination` (CIDR) via `gateway`.
#[napi(object)]
pub struct ProgrammedRoute {
    pub destination: String,
    pub gateway: String,
}

#[napi(object)]
pub struct WorkloadInterfaces {
    pub host: InterfaceInfo,
    pub container: InterfaceInfo,
    pub mtu: u32,
    pub routes: Vec<ProgrammedRoute>,
}

/// A failed operation: `code` is the errno name (`EEXIST`), `op` what was being done.
#[napi(object)]
pub struct KernelError {
    pub code: String,
    pub errno: i32,
    pub op: String,
    pub message: String,
}

#[napi(object)]
pub struct SetupOutcome {
    pub interfaces: Option<WorkloadInterfaces>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct TeardownOutcome {
    #[napi(ts_type = "'removed' | 'namespace-gone' | 'link-gone'")]
    pub result: Option<String>,
    pub error: Option<KernelError>,
}

#[napi(object)]
pub struct Difference {
    pub subject: String,
    pub expected: String,
    pub actual: String,
}

#[napi(object)]
pub struct CheckOutcome {
    pub differences: Option<Vec<Difference>>,
    pub error: Option<KernelError>,
}

/// The host-side interface name for a workload identity (`<namespace>.<pod>`, or a container
/// ID): `prefix` + 11 hex digits of its SHA-1, as the policy agent derives it. Pure computation.
#[napi]
pub fn host_interface_name(prefix: String, identity: String) -> String {
    dataplane::names::host_interface_name(&prefix, &identity)
}

/// Creates the workload's veth pair and configures both ends; all or nothing.
#[napi(ts_return_type = "Promise<SetupOutcome>")]
pub fn setup_workload(env: &Env, spec: WorkloadSpec) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        match to_core(spec).and_then(|spec| dataplane::setup_workload(thread, &spec)) {
            Ok(made) => SetupOutcome {
                interfaces: Some(WorkloadInterfaces {
                    host: interface(made.host),
                    container: interface(made.container),
                    mtu: made.mtu,
                    routes: made
                        .routes
                        .iter()
                        .map(|r| ProgrammedRoute {
                            destination: r.destination.to_string(),
                            gateway: r.gateway.to_string(),
                        })
                        .collect(),
                }),
                error: None,
            },
            Err(err) => SetupOutcome { interfaces: None, error: Some(kernel_error(err)) },
        }
    })
}

/// Deletes `ifname` in `netns`; a missing namespace or interface is success.
#[napi(ts_return_type = "Promise<TeardownOutcome>")]
pub fn teardown_workload(env: &Env, netns: String, ifname: String) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        teardown_outcome(dataplane::teardown_workload(thread, netns.as_ref(), &ifname))
    })
}

#[napi(object)]
pub struct AttachmentTeardownOutcome {
    #[napi(ts_type = "'removed' | 'namespace-gone' | 'link-gone' | 'foreign'")]
    pub result: Option<String>,
    pub error: Option<KernelError>,
}

/// Deletes `ifname` in `netns` only if it is the attachment's: the workload end of the veth whose
/// host end is `hostIfname`. Anything else is left alone and reported as `foreign`; a missing
/// namespace or interface is success.
#[napi(ts_return_type = "Promise<AttachmentTeardownOutcome>")]
pub fn teardown_attachment(env: &Env, netns: String, ifname: String, host_ifname: String) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        let outcome = teardown_outcome(dataplane::teardown_attachment(thread, netns.as_ref(), &ifname, &host_ifname));
        AttachmentTeardownOutcome { result: outcome.result, error: outcome.error }
    })
}

fn teardown_outcome(result: dataplane::Result<Teardown>) -> TeardownOutcome {
    match result {
        Ok(result) => TeardownOutcome {
            result: Some(
                match result {
                    Teardown::Removed => "removed",
                    Teardown::NamespaceGone => "namespace-gone",
                    Teardown::LinkGone => "link-gone",
                    Teardown::Foreign => "foreign",
                }
                .into(),
            ),
            error: None,
        },
        Err(err) => TeardownOutcome { result: None, error: Some(kernel_error(err)) },
    }
}

#[napi(object)]
pub struct PresenceOutcome {
    /// `absent`, `attached` (the peer of the given host veth) or `foreign`.
    pub presence: Option<String>,
    pub error: Option<KernelError>,
}

/// What `ifname` in `netns` is: absent (also if the namespace is), the workload end of the veth
/// whose host end is `hostIfname`, or a foreign link.
#[napi(ts_return_type = "Promise<PresenceOutcome>")]
pub fn interface_presence(env: &Env, netns: String, ifname: String, host_ifname: String) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        match dataplane::interface_presence(thread, netns.as_ref(), &ifname, &host_ifname) {
            Ok(presence) => PresenceOutcome {
                presence: Some(
                    match presence {
                        Presence::Absent => "absent",
                        Presence::Attached => "attached",
                        Presence::Foreign => "foreign",
                    }
                    .into(),
                ),
                error: None,
            },
            Err(err) => PresenceOutcome { presence: None, error: Some(kernel_error(err)) },
        }
    })
}

#[napi(object)]
pub struct HostRoutesOutcome {
    /// How many host routes were removed.
    pub removed: Option<u32>,
    pub error: Option<KernelError>,
}

/// Removes the host routes (/32, /128) that set-up made via the host veth `hostIfname`, at once
/// (the veth's own deletion flushes them only after RCU grace periods), if that veth is the
/// attachment's: its peer is `ifname` in `netns`. A namespace that is gone, or a veth whose peer
/// is elsewhere (a later sandbox's of the same pod, which has the same host veth name), has none
/// removed. Refuses a `netns` that is the host's own namespace, as teardown does.
#[napi(ts_return_type = "Promise<HostRoutesOutcome>")]
pub fn remove_host_routes(env: &Env, netns: String, ifname: String, host_ifname: String) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        match dataplane::remove_host_routes(thread, netns.as_ref(), &ifname, &host_ifname) {
            Ok(removed) => HostRoutesOutcome { removed: Some(u32::try_from(removed).unwrap_or(u32::MAX)), error: None },
            Err(err) => HostRoutesOutcome { removed: None, error: Some(kernel_error(err)) },
        }
    })
}

#[napi(object)]
pub struct AddHostRoutesOutcome {
    pub error: Option<KernelError>,
}

/// Adds the host routes (/32, /128) of `addresses` via the host veth `hostIfname`, for a set-up
/// made with `hostRoutes: false`; a route to one of them via another interface fails (EEXIST).
#[napi(ts_return_type = "Promise<AddHostRoutesOutcome>")]
pub fn add_host_routes(env: &Env, host_ifname: String, addresses: Vec<String>) -> Result<Object<'_>> {
    on_thread(env, move || {
        let parsed = addresses
            .iter()
            .map(|a| {
                a.parse::<IpAddr>()
                    .map_err(|_| DataplaneError::invalid("add host routes", format!("\"{a}\" is not an IP address")))
            })
            .collect::<dataplane::Result<Vec<_>>>();
        match parsed.and_then(|parsed| dataplane::add_host_routes(&host_ifname, &parsed)) {
            Ok(()) => AddHostRoutesOutcome { error: None },
            Err(err) => AddHostRoutesOutcome { error: Some(kernel_error(err)) },
        }
    })
}

/// Lists every difference between the kernel and what set-up of `spec` produces.
#[napi(ts_return_type = "Promise<CheckOutcome>")]
pub fn check_workload(env: &Env, spec: WorkloadSpec) -> Result<Object<'_>> {
    on_namespace_thread(env, move |thread| {
        match to_core(spec).and_then(|spec| dataplane::check_workload(thread, &spec)) {
            Ok(differences) => CheckOutcome {
                differences: Some(
                    differences
                        .into_iter()
                        .map(|d| Difference { subject: d.subject, expected: d.expected, actual: d.actual })
                        .collect(),
                ),
                error: None,
            },
            Err(err) => CheckOutcome { differences: None, error: Some(kernel_error(err)) },
        }
    })
}

#[napi(object)]
pub struct HostLockOutcome {
    /// The descriptor holding the lock: closing it releases the lock.
    pub fd: Option<i32>,
    /// Whether another process held the lock first.
    pub waited: Option<bool>,
    pub error: Option<String>,
}

/// Takes the host-wide lock on the file at `path` (flock), waiting on a thread of its own while
/// another process holds it, for at most `patienceMs`: then it resolves without `fd`, and neither
/// the promise nor the blocked wait holds up the process.
#[napi(ts_return_type = "Promise<HostLockOutcome>")]
pub fn lock_host_file(env: &Env, path: String, patience_ms: u32) -> Result<Object<'_>> {
    let patience = std::time::Duration::from_millis(patience_ms.into());
    on_thread(env, move || match dataplane::hostlock::lock_host_file_within(std::path::Path::new(&path), patience) {
        Ok(Some(lock)) => HostLockOutcome {
            fd: Some(std::os::fd::IntoRawFd::into_raw_fd(lock.fd)),
            waited: Some(lock.waited),
            error: None,
        },
        Ok(None) => HostLockOutcome { fd: None, waited: Some(true), error: None },
        Err(err) => HostLockOutcome { fd: None, waited: None, error: Some(format!("{path}: {err}")) },
    })
}

type Resolver<T> = Box<dyn FnOnce(Env) -> Result<T>>;

/// A promise to settle from another thread; rejects if dropped unsettled (the thread panicked or
/// could not start), so a caller never waits forever.
struct Pending<T: ToNapiValue + 'static>(Option<JsDeferred<T, Resolver<T>>>);

impl<T: ToNapiValue + 'static> Pending<T> {
    fn resolve(mut self, value: T) {
        if let Some(deferred) = self.0.take() {
            deferred.resolve(Box::new(move |_| Ok(value)));
        }
    }
}

impl<T: ToNapiValue + 'static> Drop for Pending<T> {
    fn drop(&mut self) {
        if let Some(deferred) = self.0.take() {
            deferred.reject(Error::from_reason("the operation's thread ended without settling it"));
        }
    }
}

fn on_namespace_thread<T, F>(env: &Env, work: F) -> Result<Object<'_>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce(&mut NamespaceThread) -> T + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<T, Resolver<T>>()?;
    let pending = Pending(Some(deferred));
    netns::submit(move |thread| pending.resolve(work(thread))).map_err(|err| Error::from_reason(err.to_string()))?;
    Ok(promise)
}

/// Runs `work` on a thread of the addon's pool (no namespace involved) and settles the promise
/// with its value.
pub(crate) fn on_thread<T, F>(env: &Env, work: F) -> Result<Object<'_>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<T, Resolver<T>>()?;
    let pending = Pending(Some(deferred));
    netns::submit(move |_| pending.resolve(work())).map_err(|err| Error::from_reason(err.to_string()))?;
    Ok(promise)
}

fn to_core(spec: WorkloadSpec) -> dataplane::Result<dataplane::WorkloadSpec> {
    let op = "read workload interface request";
    let addresses = spec
        .addresses
        .iter()
        .map(|a| a.parse::<IpAddr>().map_err(|_| DataplaneError::invalid(op, format!("\"{a}\" is not an IP address"))))
        .collect::<dataplane::Result<Vec<_>>>()?;
    let routes = spec
        .routes
        .map(|routes| {
            routes
                .iter()
                .map(|r| {
                    r.parse::<IpNet>().map_err(|_| DataplaneError::invalid(op, format!("route \"{r}\" is not a CIDR")))
                })
                .collect::<dataplane::Result<Vec<_>>>()
        })
        .transpose()?;
    Ok(dataplane::WorkloadSpec {
        netns: spec.netns.into(),
        container_ifname: spec.container_ifname,
        host_ifname: spec.host_ifname,
        mtu: spec.mtu,
        num_queues: spec.num_queues.unwrap_or(1),
        addresses,
        routes,
        allow_ip_forwarding: spec.allow_ip_forwarding.unwrap_or(false),
        container_mac: spec.container_mac.as_deref().map(|text| parse_mac(op, text)).transpose()?,
        host_routes: spec.host_routes.unwrap_or(true),
    })
}

fn parse_mac(op: &str, text: &str) -> dataplane::Result<[u8; 6]> {
    let bytes: Vec<u8> = text
        .split(':')
        .filter_map(|part| (part.len() == 2).then(|| u8::from_str_radix(part, 16).ok()).flatten())
        .collect();
    <[u8; 6]>::try_from(bytes)
        .map_err(|_| DataplaneError::invalid(op, format!("\"{text}\" is not a MAC address such as 0a:58:0a:f4:00:05")))
}

fn interface(info: dataplane::InterfaceInfo) -> InterfaceInfo {
    InterfaceInfo { name: info.name, index: info.index, mac: info.mac }
}

fn kernel_error(err: DataplaneError) -> KernelError {
    KernelError { code: err.code(), errno: err.errno as i32, message: err.to_string(), op: err.op }
}
