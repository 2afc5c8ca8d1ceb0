//! Removing an attachment's host routes (`<ip>/32` and `<ip>/128` via its host veth) on their own,
//! ahead of the veth's deletion. Deleting a veth flushes its routes only after the kernel has
//! waited out RCU grace periods, milliseconds later; a route removed first is gone at once. Once it
//! is, nothing on the host leads to the attachment's addresses any more, and they can be handed to
//! another workload while the old veth is still being deleted.
//!
//! Only the attachment's own routes: a pod's host veth is named after the pod, so every sandbox of
//! it gets the same name, and a DEL of an earlier sandbox (the kubelet's garbage collection of a
//! failed or replaced one, a minute later, with its namespace gone) finds the current sandbox's
//! veth under that name. Its routes are removed only when the veth's peer is the interface of the
//! DEL's own namespace, as teardown checks before it deletes.
//!
//! And adding them on their own, after a set-up that left them out (`WorkloadSpec::host_routes`):
//! the interface is made while the addresses' commit is in flight, and the host leads to them only
//! once they are surely the workload's.

use std::net::IpAddr;
use std::path::Path;

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::route::RouteProtocol;
use nix::errno::Errno;

use crate::error::{DataplaneError, Result};
use crate::link::get_link;
use crate::netlink::Rtnl;
use crate::netns::NamespaceThread;
use crate::route_table::{delete_message, dump};
use crate::setup::add_host_route;
use crate::spec::validate_ifname;
use crate::teardown::{namespace_to_tear_down, peers, refuse_host_namespace};

/// Removes every host route of one address (/32, /128) that set-up made through the host veth
/// `host_ifname` (protocol `boot`, main table), if that veth is this attachment's: its peer is
/// `ifname` inside the namespace at `netns`. Returns how many it removed. No such veth, routes
/// already gone, no namespace at `netns` (an empty path, as runtimes give for a namespace they
/// destroyed: its veth died with it), or a veth whose peer is elsewhere (a later sandbox's of the
/// same pod) is success with none removed. Refuses, as teardown does, a `netns` that is the host's
/// own namespace. Looks up the host end first, then moves the calling thread into the namespace.
pub fn remove_host_routes(
    thread: &mut NamespaceThread,
    netns: &Path,
    ifname: &str,
    host_ifname: &str,
) -> Result<usize> {
    validate_ifname("container interface name", ifname)?;
    validate_ifname("host interface name", host_ifname)?;
    let op = || format!("remove the host routes via \"{host_ifname}\"");
    let Some(netns) = namespace_to_tear_down(netns)? else {
        return Ok(0);
    };
    refuse_host_namespace(&netns, op())?;
    // Opened in the host's namespace, the socket stays there once the thread has entered the workload's.
    let mut rtnl = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    let Some(host_end) = get_link(&mut rtnl, host_ifname).map_err(|e| e.into_dataplane(op()))?.filter(|l| l.is_veth())
    else {
        return Ok(0);
    };
    thread.enter(&netns)?;
    let mut inside = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    let workload_end = get_link(&mut inside, ifname).map_err(|e| e.into_dataplane(op()))?;
    if !workload_end.is_some_and(|link| peers(&link, Some(&host_end))) {
        return Ok(0);
    }
    let protocol = u8::from(RouteProtocol::Boot);
    let mut removed = 0;
    for route in dump(&mut rtnl, &op(), protocol)? {
        let host_route = route.output_index == Some(host_end.index)
            && route.gateway.is_none()
            && route.destination.prefix_len() == route.destination.max_prefix_len();
        if !host_route {
            continue;
        }
        match rtnl.execute(RouteNetlinkMessage::DelRoute(delete_message(protocol, &route)), 0) {
            Ok(()) => removed += 1,
            Err(err) if err.errno == Errno::ESRCH => {} // gone meanwhile
            Err(err) => {
                return Err(
                    err.into_dataplane(format!("remove host route {} via \"{host_ifname}\"", route.destination))
                );
            }
        }
    }
    Ok(removed)
}

/// Adds the host routes of `addresses` (`<ip>/32`, `<ip>/128`) through the host veth
/// `host_ifname`, as set-up does: a route already leading to this veth is accepted, one leading
/// elsewhere is another workload's and fails (EEXIST, naming it). The veth must exist. Runs in the
/// calling thread's namespace: call it on a thread that never entered another.
pub fn add_host_routes(host_ifname: &str, addresses: &[IpAddr]) -> Result<()> {
    validate_ifname("host interface name", host_ifname)?;
    let op = || format!("add the host routes via \"{host_ifname}\"");
    let mut rtnl = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    let host_end =
        get_link(&mut rtnl, host_ifname).map_err(|e| e.into_dataplane(op()))?.filter(|l| l.is_veth()).ok_or_else(
            || DataplaneError::new(op(), Errno::ENODEV, format!("no veth \"{host_ifname}\" in the host namespace")),
        )?;
    for ip in addresses {
        add_host_route(&mut rtnl, &host_end, *ip)?;
    }
    Ok(())
}
