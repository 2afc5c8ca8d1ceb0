//! The CNI socket between the `netplug` shim and netplug-node: the framing of the request and the
//! answer, and the pod's network namespace passed beside the request as a descriptor. Shared by
//! the shim (which sends) and netplug-node's addon (which reads: Node's sockets cannot receive a
//! descriptor, so the agent's requests are read here).

pub mod descriptor;
pub mod frame;
