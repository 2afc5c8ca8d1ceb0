//! The chain an older release left in iptables-nft's nat table (made here with iptables-restore,
//! as that release made it) is removed over netlink with the jump to it, and nothing else.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::TestNs;
use netplug_nftables::legacy::{Removal, remove_iptables_chain};

const PREVIOUS_RELEASE: &str = "*nat
:NETPLUG-NAT-OUTGOING - [0:0]
-A NETPLUG-NAT-OUTGOING -d 10.244.0.0/16 -j RETURN
-A NETPLUG-NAT-OUTGOING -s 10.244.0.0/16 -j MASQUERADE
-I POSTROUTING 1 -m comment --comment \"netplug: pods of natOutgoing pools\" -j NETPLUG-NAT-OUTGOING
COMMIT
";

fn iptables_restore(ns: &TestNs, rules: &str) {
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, "iptables-restore", "-w", "5", "--noflush"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(rules.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
}

fn nat_rules(ns: &TestNs) -> String {
    String::from_utf8(ns.exec("iptables", &["-w", "5", "-t", "nat", "-S"]).stdout).unwrap()
}

#[test]
fn the_old_chain_and_its_jump_go_and_nothing_else() {
    let ns = TestNs::new();
    // Someone else's rule in the same chain stays.
    iptables_restore(&ns, "*nat\n-A POSTROUTING -s 10.1.0.0/16 -o eth9 -j MASQUERADE\nCOMMIT\n");
    iptables_restore(&ns, PREVIOUS_RELEASE);
    let before = nat_rules(&ns);
    assert!(before.contains("-j NETPLUG-NAT-OUTGOING"), "{before}");

    let removal = ns.enter(|| remove_iptables_chain("nat", "NETPLUG-NAT-OUTGOING")).unwrap();
    assert_eq!(removal, Removal::Removed { jumps: vec!["POSTROUTING".into()] });
    let after = nat_rules(&ns);
    assert!(!after.contains("NETPLUG-NAT-OUTGOING"), "{after}");
    assert!(after.contains("-A POSTROUTING -s 10.1.0.0/16 -o eth9 -j MASQUERADE"), "{after}");
    // iptables-save still reads the table.
    assert!(ns.exec("iptables-save", &["-t", "nat"]).status.success());

    assert_eq!(ns.enter(|| remove_iptables_chain("nat", "NETPLUG-NAT-OUTGOING")).unwrap(), Removal::Absent);
}

#[test]
fn no_nat_table_is_nothing_to_remove() {
    let ns = TestNs::new();
    assert_eq!(ns.enter(|| remove_iptables_chain("nat", "NETPLUG-NAT-OUTGOING")).unwrap(), Removal::Absent);
}
