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
    let not_a_pool = || {
        format!("{pool:?} is neither a CIDR (172.18.255.0/28) nor a range (172.18.255.200-172.18.255.250)")
    };
    if let Some((address, prefix)) = pool.split_once('/') {
        let address: IpAddr = address.trim().parse().map_err(|_| not_a_pool())?;
        let bits = if address.is_ipv4() { 32 } else { 128 };
        return match prefix.trim().parse::<u8>() {
            Ok(p) if p <= bits => Ok(()),
            _ => Err(not_a_pool()),
        };
    }
    let (first, last) = pool.split_once('-').ok_or_else(not_a_pool)?;
    let first: IpAddr = first.trim().parse().map_err(|_| not_a_pool())?;
    let last: IpAddr = last.trim().parse().map_err(|_| not_a_pool())?;
    match (first, last) {
        (IpAddr::V4(a), IpAddr::V4(b)) if a <= b => Ok(()),
        (IpAddr::V6(a), IpAddr::V6(b)) if a <= b => Ok(()),
        (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => Err(format!(
            "{pool:?} ends before it starts: the first address must not be above the last"
        )),
        _ => Err(format!(
            "{pool:?} mixes IPv4 and IPv6: both ends of a range are of one family"
        )),
    }
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
