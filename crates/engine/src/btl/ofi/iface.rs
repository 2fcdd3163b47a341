//! Which of a provider's offers the `ofi` transport opens, where a provider offers one per
//! network interface (the software `tcp` and `udp` providers: `fi_getinfo` returns a node
//! per interface and address family, its domain named after the interface and its fabric
//! after the subnet, `eth1` / `10.99.0.0/24`). The endpoint listens on that interface's
//! address, which every peer is told, so an interface that reaches no other node makes
//! every link to another node hang. libfabric lists the interfaces in an order of its own
//! (not the system's: an interface added last may come first), so we choose as the `tcp`
//! transport publishes: the interfaces `btl_tcp_if_include` names, in its order, else
//! every one that is up and not excluded by `btl_tcp_if_exclude` (never loopback), in the
//! system's order; the first of them the provider offers over IPv4 wins. Where none
//! matches (hardware providers name their domains after devices, `mlx5_0`; or
//! `FI_TCP_IFACE` left one offer), the provider's first offer is taken, as before.

use oxmpi_base::net::{self, Iface};

/// One offer of the provider: its domain's and its fabric's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Offer {
    /// The domain name (`eth0` for the socket providers, a device for hardware ones).
    pub domain: String,
    /// The fabric name (`10.0.0.0/24` for the socket providers).
    pub fabric: String,
}

/// Whether `offer` is the IPv4 offer of interface `i`: its domain is the interface and its
/// fabric a subnet (`a.b.c.d/n`) that holds the interface's address.
fn serves(offer: &Offer, i: &Iface) -> bool {
    offer.domain == i.name
        && offer
            .fabric
            .split_once('/')
            .and_then(|(a, b)| Some((a.parse::<std::net::Ipv4Addr>().ok()?, b.parse::<u8>().ok()?)))
            .is_some_and(|(a, bits)| bits <= 32 && net::same_subnet(a, i.addr, bits))
}

/// The index in `offers` to open: the first offer of the first interface of `usable` (in
/// preference order) the provider offers, with that interface; else 0 and `None`.
pub(crate) fn choose(offers: &[Offer], usable: &[Iface]) -> (usize, Option<Iface>) {
    for i in usable {
        if let Some(k) = offers.iter().position(|o| serves(o, i)) {
            return (k, Some(i.clone()));
        }
    }
    (0, None)
}

/// The interfaces to prefer, from the `tcp` transport's parameters
/// (`btl_tcp_if_include` / `btl_tcp_if_exclude`) and the host's interfaces.
pub(crate) fn usable() -> Vec<Iface> {
    use crate::btl::tcp::params::{IF_EXCLUDE, IF_INCLUDE};
    use oxmpi_base::params::list;
    net::select(&net::interfaces(), &list(&IF_INCLUDE), &list(&IF_EXCLUDE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn offer(domain: &str, fabric: &str) -> Offer {
        Offer {
            domain: domain.into(),
            fabric: fabric.into(),
        }
    }

    /// As `fi_getinfo` lists them on a fake node with a dummy interface added last.
    fn fake_node() -> Vec<Offer> {
        vec![
            offer("eth1", "10.99.0.0/24"),
            offer("eth0", "10.77.0.0/24"),
            offer("eth1", "fe80::/64"),
            offer("eth0", "fe80::/64"),
            offer("lo", "127.0.0.1/32"),
        ]
    }

    #[test]
    fn the_system_order_of_usable_interfaces_wins_over_libfabrics() {
        let eth0 = Iface::new("eth0", Ipv4Addr::new(10, 77, 0, 11), 24);
        let eth1 = Iface::new("eth1", Ipv4Addr::new(10, 99, 0, 11), 24);
        let (k, i) = choose(&fake_node(), &[eth0.clone(), eth1.clone()]);
        assert_eq!((k, i), (1, Some(eth0.clone())));
        // btl_tcp_if_include=10.99.0.0/24 (its order): the dummy network, as asked.
        assert_eq!(
            choose(&fake_node(), std::slice::from_ref(&eth1)),
            (0, Some(eth1))
        );
        // Loopback only where it is asked for (select leaves it out otherwise).
        let lo = Iface::new("lo", Ipv4Addr::LOCALHOST, 8);
        assert_eq!(
            choose(&fake_node(), std::slice::from_ref(&lo)),
            (4, Some(lo))
        );
    }

    #[test]
    fn offers_that_are_not_interfaces_keep_the_providers_first() {
        let eth0 = Iface::new("eth0", Ipv4Addr::new(10, 77, 0, 11), 24);
        let verbs = vec![
            offer("mlx5_0", "IB-0xfe80000000000000"),
            offer("mlx5_1", "x"),
        ];
        assert_eq!(choose(&verbs, std::slice::from_ref(&eth0)), (0, None));
        // An interface of the same name on another subnet (or IPv6 only) is not it.
        let other = vec![offer("eth0", "10.1.0.0/16"), offer("eth0", "fe80::/64")];
        assert_eq!(choose(&other, &[eth0]), (0, None));
        assert_eq!(choose(&fake_node(), &[]), (0, None));
    }
}
