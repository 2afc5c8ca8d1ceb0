//! Tearing down a workload's interface. Idempotent: whatever is already gone is success.

use std::path::Path;

use crate::error::{DataplaneError, Result};
use crate::link::{Link, delete_link, get_link};
use crate::netlink::Rtnl;
use crate::netns::{NamespaceThread, NetNs, NetNsLookup};
use crate::spec::validate_ifname;

/// What teardown found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Teardown {
    /// The interface was there and is deleted, with its host end and routes.
    Removed,
    /// No namespace at the path (or none given): the runtime already destroyed it, and the veth
    /// died with it.
    NamespaceGone,
    /// The namespace exists but has no such interface.
    LinkGone,
    /// The interface is not this attachment's (not the workload end of its veth): left alone.
    Foreign,
}

/// What is at a workload's interface name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// Nothing (or no namespace at the path).
    Absent,
    /// The workload end of a veth whose host end is `host_ifname`: an attachment set-up made.
    Attached,
    /// Some other link.
    Foreign,
}

/// What `ifname` inside the namespace at `netns` is: absent, the peer of the host link
/// `host_ifname`, or something else. Looks up the host end first, then moves the calling thread
/// into the namespace.
pub fn interface_presence(
    thread: &mut NamespaceThread,
    netns: &Path,
    ifname: &str,
    host_ifname: &str,
) -> Result<Presence> {
    validate_ifname("container interface name", ifname)?;
    validate_ifname("host interface name", host_ifname)?;
    let NetNsLookup::Found(netns) = NetNs::lookup(netns)? else {
        return Ok(Presence::Absent);
    };
    let op = || format!("look up \"{ifname}\" in {}", netns.path().display());
    refuse_host_namespace(&netns, op())?;
    let host_end = host_veth(host_ifname, op)?;
    thread.enter(&netns)?;
    let mut rtnl = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    Ok(match get_link(&mut rtnl, ifname).map_err(|e| e.into_dataplane(op()))? {
        None => Presence::Absent,
        Some(link) if peers(&link, host_end.as_ref()) => Presence::Attached,
        Some(_) => Presence::Foreign,
    })
}

/// The veth named `name` in the calling thread's (the host's) namespace, if there is one.
fn host_veth(name: &str, op: impl Fn() -> String) -> Result<Option<Link>> {
    let mut host = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    Ok(get_link(&mut host, name).map_err(|e| e.into_dataplane(op()))?.filter(Link::is_veth))
}

/// Whether `link` is the workload end of the veth whose host end is `host_end`.
pub(crate) fn peers(link: &Link, host_end: Option<&Link>) -> bool {
    host_end.is_some_and(|host| {
        link.is_veth() && link.peer_index == Some(host.index) && host.peer_index == Some(link.index)
    })
}

/// Deletes `ifname` inside the namespace at `netns` if it is this attachment's: the workload end of
/// the veth whose host end is `host_ifname`, or a veth without a peer. Anything else (another
/// attachment's interface, `lo`, a link netplug did not make) is left alone: [`Teardown::Foreign`].
/// Looks up the host end first, then moves the calling thread into the namespace.
pub fn teardown_attachment(
    thread: &mut NamespaceThread,
    netns: &Path,
    ifname: &str,
    host_ifname: &str,
) -> Result<Teardown> {
    validate_ifname("container interface name", ifname)?;
    validate_ifname("host interface name", host_ifname)?;
    let Some(netns) = namespace_to_tear_down(netns)? else {
        return Ok(Teardown::NamespaceGone);
    };
    let op = || format!("delete \"{ifname}\" in {}", netns.path().display());
    refuse_host_namespace(&netns, op())?;
    let host_end = host_veth(host_ifname, op)?;
    thread.enter(&netns)?;
    let mut rtnl = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    let Some(link) = get_link(&mut rtnl, ifname).map_err(|e| e.into_dataplane(op()))? else {
        return Ok(Teardown::LinkGone);
    };
    let peerless = link.is_veth() && link.peer_index.is_none_or(|index| index == 0);
    if !peerless && !peers(&link, host_end.as_ref()) {
        return Ok(Teardown::Foreign);
    }
    match delete_link(&mut rtnl, link.index).map_err(|e| e.into_dataplane(op()))? {
        true => Ok(Teardown::Removed),
        false => Ok(Teardown::LinkGone),
    }
}

/// Deletes `ifname` inside the namespace at `netns`, whatever it is. Moves the calling thread into it.
pub fn teardown_workload(thread: &mut NamespaceThread, netns: &Path, ifname: &str) -> Result<Teardown> {
    validate_ifname("container interface name", ifname)?;
    let Some(netns) = namespace_to_tear_down(netns)? else {
        return Ok(Teardown::NamespaceGone);
    };
    let op = || format!("delete \"{ifname}\" in {}", netns.path().display());
    // A runtime passing the host's own namespace must not cost the host its interface.
    refuse_host_namespace(&netns, op())?;
    thread.enter(&netns)?;
    let mut rtnl = Rtnl::open().map_err(|e| e.into_dataplane(op()))?;
    let Some(link) = get_link(&mut rtnl, ifname).map_err(|e| e.into_dataplane(op()))? else {
        return Ok(Teardown::LinkGone);
    };
    match delete_link(&mut rtnl, link.index).map_err(|e| e.into_dataplane(op()))? {
        true => Ok(Teardown::Removed),
        false => Ok(Teardown::LinkGone),
    }
}

pub(crate) fn refuse_host_namespace(netns: &NetNs, op: String) -> Result<()> {
    match netns.is_current()? {
        true => {
            Err(DataplaneError::invalid(op, format!("{} is the host's own network namespace", netns.path().display())))
        }
        false => Ok(()),
    }
}

/// The namespace a teardown works in, or None when there is none to work in: an empty path (the
/// runtime's way of saying it is gone), a missing one, or a file that is no namespace (what an
/// unmounted namespace leaves).
pub(crate) fn namespace_to_tear_down(netns: &Path) -> Result<Option<NetNs>> {
    if netns.as_os_str().is_empty() {
        return Ok(None);
    }
    Ok(match NetNs::lookup(netns)? {
        NetNsLookup::Found(netns) => Some(netns),
        NetNsLookup::Missing | NetNsLookup::NotANamespace => None,
    })
}
