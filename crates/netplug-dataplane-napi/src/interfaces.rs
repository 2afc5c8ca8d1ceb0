//! The addresses of the process's interfaces (`netplug-dataplane`'s `address`), listed on the
//! binding's pool: netplug-node reads its node address from them without blocking its event loop
//! on the kernel's dump of every link and address (a veth per pod).

use napi::bindgen_prelude::Object;
use napi::{Env, Result};
use napi_derive::napi;
use netplug_dataplane::address::list_interface_addresses;
use netplug_dataplane::netlink::Rtnl;

use crate::{KernelError, kernel_error, on_thread};

#[napi(object)]
pub struct InterfaceAddressInfo {
    /// The interface's name.
    pub interface: String,
    pub address: String,
    /// 4 or 6.
    pub family: u32,
    pub prefix_length: u32,
    /// A loopback interface's.
    pub internal: bool,
}

#[napi(object)]
pub struct InterfaceAddressesOutcome {
    pub addresses: Option<Vec<InterfaceAddressInfo>>,
    pub error: Option<KernelError>,
}

/// Every address of the interfaces that are up and running in the process's namespace, as
/// node:os's `networkInterfaces()` lists them.
#[napi(ts_return_type = "Promise<InterfaceAddressesOutcome>")]
pub fn list_interfaces(env: &Env) -> Result<Object<'_>> {
    on_thread(env, move || {
        let op = "list the interfaces' addresses";
        let listed =
            Rtnl::open().and_then(|mut rtnl| list_interface_addresses(&mut rtnl)).map_err(|err| err.into_dataplane(op));
        match listed {
            Ok(addresses) => InterfaceAddressesOutcome {
                addresses: Some(
                    addresses
                        .into_iter()
                        .map(|a| InterfaceAddressInfo {
                            interface: a.interface,
                            address: a.ip.to_string(),
                            family: if a.ip.is_ipv4() { 4 } else { 6 },
                            prefix_length: u32::from(a.prefix_len),
                            internal: a.loopback,
                        })
                        .collect(),
                ),
                error: None,
            },
            Err(err) => InterfaceAddressesOutcome { addresses: None, error: Some(kernel_error(err)) },
        }
    })
}
