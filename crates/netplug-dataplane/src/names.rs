//! The names of host-side interfaces. The policy agent derives the same name from a workload's
//! identity, so the scheme is a contract: prefix + the first 11 hex digits of SHA-1(identity),
//! cut to the kernel's 15 bytes. The identity is `<namespace>.<pod>` for a Kubernetes pod and the
//! container ID otherwise.

use crate::spec::MAX_IFNAME_LEN;

pub fn host_interface_name(prefix: &str, identity: &str) -> String {
    let digest = sha1_smol::Sha1::from(identity).digest().to_string();
    let mut name = format!("{prefix}{}", &digest[..11]);
    while name.len() > MAX_IFNAME_LEN {
        name.pop();
    }
    name
}

#[cfg(test)]
mod tests {
    use super::host_interface_name;

    #[test]
    fn matches_the_reference_derivation() {
        // Vectors from the reference: libcalico-go conversion tests and a computed example.
        assert_eq!(host_interface_name("cali", "default.nginx"), "calic440f455693");
        assert_eq!(host_interface_name("eni", "namespace.podname"), "eni82111e10a96");
    }

    #[test]
    fn a_long_prefix_is_cut_to_fifteen_bytes() {
        assert_eq!(host_interface_name("averylongprefix", "x").len(), 15);
    }
}
