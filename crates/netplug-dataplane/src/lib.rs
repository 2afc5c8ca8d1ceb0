//! netplug's Linux data plane.
//!
//! Wires a workload (pod) to the host: a veth pair whose host end stays in the host namespace
//! and whose other end is created straight inside the workload's namespace, /32 and /128
//! addresses, routes via a link-local next hop that the host end answers for (proxy ARP, and its
//! own IPv6 link-local address), a host route per address, and the sysctls that make it work.
//!
//! Every operation that enters a namespace takes a [`netns::NamespaceThread`]: run it through
//! [`netns::spawn`], [`netns::run`] or [`netns::submit`], never on a thread shared with other code.

pub mod address;
pub mod check;
pub mod device;
pub mod error;
pub mod host_routes;
pub mod hostlock;
pub mod link;
pub mod names;
pub mod neighbor;
pub mod netlink;
pub mod netns;
pub mod parse;
pub mod route;
pub mod route_sync;
mod route_table;
pub mod setup;
pub mod spec;
pub mod sysctl;
pub mod teardown;
pub mod tunnel;

pub use check::{Difference, check_workload};
pub use device::delete_link;
pub use error::{DataplaneError, Result};
pub use host_routes::{add_host_routes, remove_host_routes};
pub use neighbor::{EntrySyncCounts, FdbEntry, NeighborEntry, sync_fdb, sync_neighbors};
pub use route_sync::{RouteSyncCounts, WantedRoute, sync_routes};
pub use setup::{InterfaceInfo, ProgrammedRoute, WorkloadInterfaces, setup_workload};
pub use spec::WorkloadSpec;
pub use teardown::{Presence, Teardown, interface_presence, teardown_attachment, teardown_workload};
pub use tunnel::{EnsuredDevice, IpipDevice, VxlanDevice, ensure_ipip_device, ensure_vxlan_device};
