//! Links: look up by name, create a veth pair across namespaces, bring up, delete.

use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth, LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use nix::errno::Errno;

use crate::netlink::{CREATE_EXCL, NetlinkResult, Rtnl};

/// What the kernel reports about a link, as far as netplug cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    /// `IFLA_INFO_KIND`: `veth`, `dummy`, ...; `None` for devices without one (`lo`, physical).
    pub kind: Option<String>,
    pub mac: Option<Vec<u8>>,
    pub mtu: u32,
    pub up: bool,
    pub num_tx_queues: u32,
    pub num_rx_queues: u32,
    /// For a veth: the peer's index, in the peer's namespace.
    pub peer_index: Option<u32>,
}

impl Link {
    fn from_message(message: LinkMessage) -> Self {
        let mut link = Link {
            index: message.header.index,
            name: String::new(),
            kind: None,
            mac: None,
            mtu: 0,
            up: message.header.flags.contains(LinkFlags::Up),
            num_tx_queues: 0,
            num_rx_queues: 0,
            peer_index: None,
        };
        for attribute in message.attributes {
            match attribute {
                LinkAttribute::IfName(name) => link.name = name,
                LinkAttribute::Address(mac) => link.mac = Some(mac),
                LinkAttribute::Mtu(mtu) => link.mtu = mtu,
                LinkAttribute::NumTxQueues(n) => link.num_tx_queues = n,
                LinkAttribute::NumRxQueues(n) => link.num_rx_queues = n,
                LinkAttribute::Link(index) => link.peer_index = Some(index),
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        if let LinkInfo::Kind(kind) = info {
                            link.kind = Some(kind_name(&kind));
                        }
                    }
                }
                _ => {}
            }
        }
        link
    }

    pub fn is_veth(&self) -> bool {
        self.kind.as_deref() == Some("veth")
    }
}

fn kind_name(kind: &InfoKind) -> String {
    match kind {
        InfoKind::Veth => "veth".into(),
        InfoKind::Other(name) => name.clone(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The link called `name`, or `None` if there is none.
pub fn get_link(rtnl: &mut Rtnl, name: &str) -> NetlinkResult<Option<Link>> {
    let mut request = LinkMessage::default();
    request.attributes.push(LinkAttribute::IfName(name.to_string()));
    lookup(rtnl, request)
}

/// The link with index `index`, or `None` if there is none.
pub fn get_link_by_index(rtnl: &mut Rtnl, index: u32) -> NetlinkResult<Option<Link>> {
    let mut request = LinkMessage::default();
    request.header.index = index;
    lookup(rtnl, request)
}

fn lookup(rtnl: &mut Rtnl, request: LinkMessage) -> NetlinkResult<Option<Link>> {
    match rtnl.get(RouteNetlinkMessage::GetLink(request)) {
        Ok(RouteNetlinkMessage::NewLink(message)) => Ok(Some(Link::from_message(message))),
        Ok(_) => Ok(None),
        Err(err) if err.errno == Errno::ENODEV => Ok(None),
        Err(err) => Err(err),
    }
}

/// A veth pair whose first end stays in the namespace of the socket and whose peer is created
/// straight inside another namespace (no move between namespaces, which serialises on the
/// kernel's rtnl lock and used to dominate the reference's set-up cost).
#[derive(Debug, Clone)]
pub struct VethPair<'a> {
    pub name: &'a str,
    pub mac: Option<[u8; 6]>,
    pub peer_name: &'a str,
    pub peer_mac: Option<[u8; 6]>,
    pub peer_netns_fd: std::os::fd::RawFd,
    pub mtu: Option<u32>,
    /// Both `IFLA_NUM_TX_QUEUES` and `IFLA_NUM_RX_QUEUES`, on both ends; settable only at creation.
    pub queues: u32,
}

pub fn create_veth(rtnl: &mut Rtnl, pair: &VethPair<'_>) -> NetlinkResult<()> {
    let mut peer = LinkMessage::default();
    peer.attributes.push(LinkAttribute::IfName(pair.peer_name.to_string()));
    push_common(&mut peer.attributes, pair);
    if let Some(mac) = pair.peer_mac {
        peer.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
    peer.attributes.push(LinkAttribute::NetNsFd(pair.peer_netns_fd));

    let mut host = LinkMessage::default();
    host.attributes.push(LinkAttribute::IfName(pair.name.to_string()));
    push_common(&mut host.attributes, pair);
    if let Some(mac) = pair.mac {
        host.attributes.push(LinkAttribute::Address(mac.to_vec()));
    }
    host.attributes.push(LinkAttribute::LinkInfo(vec![
        LinkInfo::Kind(InfoKind::Veth),
        LinkInfo::Data(InfoData::Veth(InfoVeth::Peer(peer))),
    ]));
    rtnl.execute(RouteNetlinkMessage::NewLink(host), CREATE_EXCL)
}

fn push_common(attributes: &mut Vec<LinkAttribute>, pair: &VethPair<'_>) {
    if let Some(mtu) = pair.mtu {
        attributes.push(LinkAttribute::Mtu(mtu));
    }
    attributes.push(LinkAttribute::NumTxQueues(pair.queues));
    attributes.push(LinkAttribute::NumRxQueues(pair.queues));
}

pub fn set_up(rtnl: &mut Rtnl, index: u32) -> NetlinkResult<()> {
    let mut request = LinkMessage::default();
    request.header.index = index;
    request.header.flags = LinkFlags::Up;
    request.header.change_mask = LinkFlags::Up;
    rtnl.execute(RouteNetlinkMessage::SetLink(request), 0)
}

/// Deletes a link; `false` if it was already gone. Deleting either end of a veth removes both,
/// and every route through it.
pub fn delete_link(rtnl: &mut Rtnl, index: u32) -> NetlinkResult<bool> {
    let mut request = LinkMessage::default();
    request.header.index = index;
    match rtnl.execute(RouteNetlinkMessage::DelLink(request), 0) {
        Ok(()) => Ok(true),
        Err(err) if err.errno == Errno::ENODEV => Ok(false),
        Err(err) => Err(err),
    }
}
