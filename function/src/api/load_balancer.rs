//! How a gateway's Service gets its address, in upstream Modelplane's shape (`loadBalancer: MetalLB` and
//! `metallb.addressPool`): from the cloud's load balancer controller, or, on clusters without one (kind, bare
//! metal, K3s), from MetalLB announcing an address of a pool the platform team sets aside.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::ComposeError;

/// The one implementation upstream names for `loadBalancer`. Absent, the cloud's controller assigns the address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum LoadBalancer {
    MetalLB,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetalLb {
    /// A CIDR (`172.18.255.0/28`) or a range (`172.18.255.200-172.18.255.250`), as MetalLB's `IPAddressPool`
    /// takes it.
    #[serde(default)]
    pub address_pool: String,
}

/// Where a gateway's address comes from: `loadBalancer` and, with MetalLB, its pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AddressSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metallb: Option<MetalLb>,
}

impl AddressSource {
    /// The pool MetalLB assigns from, when MetalLB is chosen.
    pub fn metallb_pool(&self) -> Option<&str> {
        match (self.load_balancer, &self.metallb) {
            (Some(LoadBalancer::MetalLB), Some(m)) => Some(&m.address_pool),
            _ => None,
        }
    }

    /// What the XRD cannot say: a range whose ends are of one family and in order. `at` is the path of this
    /// object (`spec.envoyGateway`). The XRD has already refused MetalLB without a pool and a pool that is
    /// neither a CIDR nor two addresses joined by `-`; this repeats those checks so `render` of an unvalidated
    /// manifest is refused the same way.
    pub fn check(&self, at: &str) -> Result<(), ComposeError> {
        if self.load_balancer == Some(LoadBalancer::MetalLB) && self.metallb.is_none() {
            return Err(ComposeError::new(
                format!("{at}.metallb"),
                "is required when loadBalancer is MetalLB: the address pool the gateway's address comes from",
            ));
        }
        match &self.metallb {
            Some(m) => check_pool(&m.address_pool)
                .map_err(|why| ComposeError::new(format!("{at}.metallb.addressPool"), why)),
            None => Ok(()),
        }
    }
}

/// A MetalLB pool: `<address>/<prefix>` or `<first>-<last>` of one family with `first <= last`.
fn check_pool(pool: &str) -> Result<(), String> {
    bounds(pool).map(|_| ())
}

/// Whether two pools share an address (MetalLB refuses pools that do). A pool that does not parse shares none;
/// it is refused on its own.
pub fn pools_overlap(a: &str, b: &str) -> bool {
    match (bounds(a), bounds(b)) {
        (Ok((v6_a, first_a, last_a)), Ok((v6_b, first_b, last_b))) => {
            v6_a == v6_b && first_a <= last_b && first_b <= last_a
        }
        _ => false,
    }
}

/// A pool's family (IPv6 or not) and its first and last address, or why it is not a pool.
fn bounds(pool: &str) -> Result<(bool, u128, u128), String> {
    let not_a_pool = || {
        format!("{pool:?} is neither a CIDR (172.18.255.0/28) nor a range (172.18.255.200-172.18.255.250)")
    };
    let number = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    };
    if let Some((address, prefix)) = pool.split_once('/') {
        let address: IpAddr = address.trim().parse().map_err(|_| not_a_pool())?;
        let bits: u32 = if address.is_ipv4() { 32 } else { 128 };
        let prefix = prefix
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|p| *p <= bits)
            .ok_or_else(not_a_pool)?;
        let host = u128::MAX.checked_shr(128 - (bits - prefix)).unwrap_or(0);
        let first = number(address) & !host;
        return Ok((address.is_ipv6(), first, first | host));
    }
    let (first, last) = pool.split_once('-').ok_or_else(not_a_pool)?;
    let first: IpAddr = first.trim().parse().map_err(|_| not_a_pool())?;
    let last: IpAddr = last.trim().parse().map_err(|_| not_a_pool())?;
    if first.is_ipv6() != last.is_ipv6() {
        return Err(format!(
            "{pool:?} mixes IPv4 and IPv6: both ends of a range are of one family"
        ));
    }
    if number(first) > number(last) {
        return Err(format!(
            "{pool:?} ends before it starts: the first address must not be above the last"
        ));
    }
    Ok((first.is_ipv6(), number(first), number(last)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_is_a_cidr_or_an_ordered_range_of_one_family() {
        for good in [
            "172.18.255.200-172.18.255.250",
            "172.18.255.0/28",
            "fc00::10-fc00::20",
            "fc00::/120",
            "10.0.0.7-10.0.0.7",
            " 10.0.0.1 - 10.0.0.9 ",
        ] {
            assert_eq!(check_pool(good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("172.18.255.200", "neither a CIDR"),
            ("172.18.255.0/33", "neither a CIDR"),
            ("pool-a", "neither a CIDR"),
            ("10.0.0.9-10.0.0.1", "ends before it starts"),
            ("10.0.0.1-fc00::1", "mixes IPv4 and IPv6"),
        ] {
            let why = check_pool(bad).unwrap_err();
            assert!(why.contains(says), "{bad}: {why}");
        }
    }

    #[test]
    fn pools_overlap_when_they_share_an_address_of_one_family() {
        assert!(pools_overlap(
            "172.18.255.200-172.18.255.210",
            "172.18.255.208/29"
        ));
        assert!(pools_overlap("10.0.0.0/8", "10.1.2.3-10.1.2.3"));
        assert!(!pools_overlap(
            "172.18.255.200-172.18.255.207",
            "172.18.255.208/29"
        ));
        assert!(!pools_overlap("0.0.0.0/0", "::/0"));
        assert!(pools_overlap("fc00::/120", "fc00::ff-fc00::1ff"));
    }

    #[test]
    fn metallb_without_a_pool_is_refused_naming_the_field() {
        let source = AddressSource {
            load_balancer: Some(LoadBalancer::MetalLB),
            metallb: None,
        };
        let err = source.check("spec.envoyGateway").unwrap_err();
        assert_eq!(err.path, "spec.envoyGateway.metallb");
        let bad = AddressSource {
            metallb: Some(MetalLb {
                address_pool: "10.0.0.9-10.0.0.1".into(),
            }),
            ..source
        };
        assert_eq!(
            bad.check("spec.traefik").unwrap_err().path,
            "spec.traefik.metallb.addressPool"
        );
    }
}
